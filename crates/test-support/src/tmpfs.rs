//! A small filesystem of its own (tmpfs), for tests of what happens when the disk fills up.
//! Mounting needs root (or CAP_SYS_ADMIN): elsewhere the test is skipped with a line saying
//! so, except under CI (`CI=true`), where it must run.

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

/// A tmpfs mounted on a temporary directory; unmounted when dropped, also when a test
/// panics, even if a process still has files open on it.
pub struct Tmpfs {
    dir: TempDir,
}

impl Tmpfs {
    /// A tmpfs of `mib` MiB, or `None` where mounting is not permitted.
    pub fn mount(mib: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { dir }),
            failed => {
                let why = match failed {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                    Err(e) => e.to_string(),
                };
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    panic!(
                        "cannot mount a tmpfs ({why}): under CI the disk-full tests must run as root"
                    );
                }
                eprintln!("skipped: this test mounts a tmpfs, which needs root ({why})");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file `name` of zeros until the filesystem is full; its size.
    pub fn fill(&self, name: &str) -> u64 {
        use std::io::Write;
        let mut file = std::fs::File::create(self.path().join(name)).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut size = 0;
        loop {
            match file.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => size += n as u64,
            }
        }
        size
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("could not unmount {}", self.dir.path().display());
        }
    }
}
