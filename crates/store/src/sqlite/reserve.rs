//! Space set aside on the database's disk for when it fills up. A full disk would otherwise
//! refuse every commit, deciding a hold as much as raising one. So the store keeps a file of
//! zeros beside the database (`<database>-reserve`); when a commit finds the disk full, the
//! file is deleted and the commit made again in the space it freed, and the store is then
//! *short of space*: the engine raises no new holds (`Store::short_of_space`), and what is
//! left serves deciding, expiring and waiting on the holds there are. Once there is room
//! again for the reserve (and as much again, so that the next commit does not fill the disk
//! at once), it is set aside again and new holds are taken.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The space set aside: a few hundred decisions' worth of WAL.
const SIZE: u64 = 8 * 1024 * 1024;
/// How often a store short of space looks for room to set the reserve aside again.
pub(super) const RETRY: Duration = Duration::from_secs(1);

pub(super) struct Reserve {
    path: PathBuf,
    /// Set while the reserve is given up.
    short: Arc<AtomicBool>,
    /// When to look for room again.
    retry_at: Instant,
}

impl Reserve {
    /// Sets the reserve aside beside the database at `db`; on a disk without room for it the
    /// store starts short of space.
    pub(super) fn open(db: &Path) -> Reserve {
        let mut path = db.as_os_str().to_owned();
        path.push("-reserve");
        let reserve = Reserve {
            path: PathBuf::from(path),
            short: Arc::new(AtomicBool::new(false)),
            retry_at: Instant::now(),
        };
        if let Err(e) = reserve.set_aside() {
            tracing::warn!(error = %e, path = %reserve.path.display(),
                "no room to set space aside for a full disk: new holds are refused until there is");
            reserve.short.store(true, Ordering::SeqCst);
        }
        reserve
    }

    /// Whether the reserve is given up; shared with the store's handle.
    pub(super) fn short(&self) -> Arc<AtomicBool> {
        self.short.clone()
    }

    pub(super) fn is_short(&self) -> bool {
        self.short.load(Ordering::SeqCst)
    }

    /// The disk is full: frees the reserve for the commits that follow. `false` when it was
    /// freed already (nothing is left to free).
    pub(super) fn release(&mut self) -> bool {
        if self.is_short() {
            return false;
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(error = %e, "could not delete the space set aside");
        }
        self.short.store(true, Ordering::SeqCst);
        self.retry_at = Instant::now() + RETRY;
        tracing::error!(
            "the disk holding the database is full: new holds are refused until space is freed; holds already raised can still be decided"
        );
        true
    }

    /// While short of space, at most every [`RETRY`]: sets the reserve aside again if there
    /// is room for it.
    pub(super) fn restore_if_due(&mut self) {
        if !self.is_short() || Instant::now() < self.retry_at {
            return;
        }
        self.retry_at = Instant::now() + RETRY;
        if self.set_aside().is_ok() {
            self.short.store(false, Ordering::SeqCst);
            tracing::warn!("space was freed on the database's disk: new holds are taken again");
        }
    }

    /// Allocates the reserve (twice its size first, to be sure of room beyond it, then cut
    /// to it) and syncs it; on failure nothing is left behind. The blocks are allocated, not
    /// written (`fallocate`), so setting the reserve aside costs no time; on a filesystem
    /// without `fallocate`, zeros are written.
    fn set_aside(&self) -> std::io::Result<()> {
        let allocate = || -> std::io::Result<()> {
            let mut file = File::create(&self.path)?;
            let flags = rustix::fs::FallocateFlags::empty();
            match rustix::fs::fallocate(&file, flags, 0, 2 * SIZE) {
                Ok(()) => {}
                Err(rustix::io::Errno::OPNOTSUPP) => {
                    let chunk = vec![0u8; 64 * 1024];
                    let mut written = 0;
                    while written < 2 * SIZE {
                        file.write_all(&chunk)?;
                        written += chunk.len() as u64;
                    }
                }
                Err(e) => return Err(e.into()),
            }
            file.set_len(SIZE)?;
            file.sync_all()
        };
        allocate().inspect_err(|_| {
            let _ = std::fs::remove_file(&self.path);
        })
    }
}
