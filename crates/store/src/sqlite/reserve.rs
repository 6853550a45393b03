//! Space set aside on the database's disk for when it fills up. A full disk would otherwise
//! refuse every commit, deciding a hold as much as raising one. So the store keeps a file of
//! zeros beside the database (`<database>-reserve`); when a commit finds the disk full, the
//! file is deleted, and the store is then *short of space* (`Store::short_of_space`): the
//! writer takes only the transactions that serve the holds already raised (decisions,
//! withdrawals, timeouts; and leases and cursors, which replace themselves:
//! `Transaction::allowed_short_of_space`) and refuses every other with
//! `StoreError::space_short`, so that the space freed serves deciding, expiring and waiting on
//! the holds there are, and nothing else uses it up. Once [`NEEDED`] bytes are free again
//! (twice the reserve, so that setting it aside leaves as much again for the commits that
//! follow), the reserve is set aside again and every write is taken.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use holdpoint_core::store::SpaceShort;

/// The space set aside: a few hundred decisions' worth of WAL.
const SIZE: u64 = 8 * 1024 * 1024;
/// Free bytes on the disk before a store short of space takes every write again.
pub(super) const NEEDED: u64 = 2 * SIZE;
/// How often a store short of space looks for room to set the reserve aside again.
pub(super) const RETRY: Duration = Duration::from_secs(1);

pub(super) struct Reserve {
    space: Arc<Space>,
    /// When to look for room again.
    retry_at: Instant,
}

/// Whether the reserve is given up, and how much room there is: shared by the writer and the
/// store's handle.
pub(super) struct Space {
    /// The reserve's file; the free space measured is that of its filesystem.
    path: PathBuf,
    /// Set while the reserve is given up.
    short: AtomicBool,
}

impl Space {
    /// `Some` while the reserve is given up: how much is free now, and how much is needed.
    pub(super) fn shortfall(&self) -> Option<SpaceShort> {
        self.short.load(Ordering::SeqCst).then(|| SpaceShort {
            free: self.free().unwrap_or(0),
            needed: NEEDED,
        })
    }

    /// Bytes free on the reserve's filesystem for an unprivileged writer; `None` when the
    /// filesystem does not say.
    fn free(&self) -> Option<u64> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let stat = rustix::fs::statvfs(dir).ok()?;
        Some(stat.f_bavail.saturating_mul(stat.f_frsize))
    }
}

/// Deletes the reserve a previous run set aside beside the database at `db`, if any, before
/// the database is opened: on a full disk, that space is what opening it (its WAL, its shared
/// memory) needs. [`Reserve::open`] sets it aside again afterwards if there is room.
pub(super) fn give_up_before_open(db: &Path) {
    let path = reserve_path(db);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(error = %e, path = %path.display(),
            "could not delete the space set aside by the previous run"),
    }
}

fn reserve_path(db: &Path) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push("-reserve");
    PathBuf::from(path)
}

impl Reserve {
    /// Sets the reserve aside beside the database at `db`; on a disk without room for it the
    /// store starts short of space.
    pub(super) fn open(db: &Path) -> Reserve {
        let reserve = Reserve {
            space: Arc::new(Space {
                path: reserve_path(db),
                short: AtomicBool::new(false),
            }),
            retry_at: Instant::now(),
        };
        if let Err(e) = reserve.set_aside() {
            tracing::warn!(error = %e, path = %reserve.space.path.display(),
                free = reserve.space.free().unwrap_or(0), needed = NEEDED,
                "no room to set space aside for a full disk: only decisions, withdrawals and timeouts are written until there is");
            reserve.space.short.store(true, Ordering::SeqCst);
        }
        reserve
    }

    /// Whether the reserve is given up, and how much room there is; shared with the store's
    /// handle.
    pub(super) fn space(&self) -> Arc<Space> {
        self.space.clone()
    }

    pub(super) fn is_short(&self) -> bool {
        self.space.short.load(Ordering::SeqCst)
    }

    /// `Some` while the reserve is given up: how much is free, and how much is needed.
    pub(super) fn shortfall(&self) -> Option<SpaceShort> {
        self.space.shortfall()
    }

    /// The disk is full: frees the reserve for the commits that follow. `false` when it was
    /// freed already (nothing is left to free).
    pub(super) fn release(&mut self) -> bool {
        if self.is_short() {
            return false;
        }
        if let Err(e) = std::fs::remove_file(&self.space.path) {
            tracing::warn!(error = %e, "could not delete the space set aside");
        }
        self.space.short.store(true, Ordering::SeqCst);
        self.retry_at = Instant::now() + RETRY;
        tracing::error!(
            needed = NEEDED,
            "the disk holding the database is full: only decisions, withdrawals and timeouts of holds already raised are written until {} MiB are free again",
            NEEDED / (1024 * 1024)
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
        // Room for the reserve and as much again (`set_aside` allocates twice its size, too).
        // Where the filesystem does not say how much is free, allocating is the test.
        if self.space.free().is_none_or(|free| free >= NEEDED) && self.set_aside().is_ok() {
            self.space.short.store(false, Ordering::SeqCst);
            tracing::warn!("space was freed on the database's disk: every write is taken again");
        }
    }

    /// Allocates the reserve (twice its size first, to be sure of room beyond it, then cut
    /// to it) and syncs it; on failure nothing is left behind. The blocks are allocated, not
    /// written (`fallocate`), so setting the reserve aside costs no time; on a filesystem
    /// without `fallocate`, zeros are written.
    fn set_aside(&self) -> std::io::Result<()> {
        let allocate = || -> std::io::Result<()> {
            let mut file = File::create(&self.space.path)?;
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
            let _ = std::fs::remove_file(&self.space.path);
        })
    }
}
