//! `holdpoint serve` as the crash loop runs it: a child process on port 0 over one data
//! directory, killed with SIGKILL and started again on the same directory.

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::PATIENCE;

/// How to start the server: the binary, its data directory, its configuration file, and
/// the file its standard error is appended to (every start's, for a failing run's reader).
#[derive(Clone, Debug)]
pub struct ServeCommand {
    pub holdpoint: PathBuf,
    pub data: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
}

/// A running `holdpoint serve`.
pub struct Serve {
    child: Child,
    stdout: Option<tokio::io::Lines<BufReader<tokio::process::ChildStdout>>>,
}

impl ServeCommand {
    /// Starts the server; it may not be listening yet.
    pub fn spawn(&self) -> Serve {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = Command::new(&self.holdpoint)
            .args(["serve", "--bind", "127.0.0.1:0", "--data"])
            .arg(&self.data)
            .arg("--config")
            .arg(&self.config)
            .env_remove("HOLDPOINT_DATA")
            .env_remove("HOLDPOINT_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.holdpoint.display()));
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Serve {
            child,
            stdout: Some(stdout),
        }
    }
}

impl Serve {
    /// Waits for the banner; the server's URL, or `None` if the process ended before it
    /// listened (its log says why). Its later output is drained.
    pub async fn listening(&mut self) -> Option<String> {
        let mut lines = self.stdout.take().expect("listening is asked once");
        let banner = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some((_, url)) = line.split_once("is listening on ") {
                    return Some(url.trim().to_owned());
                }
            }
            None
        };
        let url = tokio::time::timeout(PATIENCE, banner)
            .await
            .expect("holdpoint serve did not listen in time")?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Some(url)
    }

    /// SIGKILL: the process dies at once, whatever it was doing.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    /// SIGTERM, then the exit status.
    pub async fn terminate(mut self) -> ExitStatus {
        let id = self.child.id().expect("the server is running") as i32;
        let pid = rustix::process::Pid::from_raw(id).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the server did not stop in time")
            .unwrap()
    }
}

/// The processes that have `path` open, each as its id and command line: who holds a
/// database's lock when a server cannot start.
pub fn holders(path: &std::path::Path) -> Vec<String> {
    let Ok(target) = std::fs::canonicalize(path) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let fds = std::fs::read_dir(entry.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten();
        if fds
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|l| l == target)
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push(format!("{pid} {}", cmdline.trim()));
        }
    }
    found
}
