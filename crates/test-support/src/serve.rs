//! `holdpoint serve` as a child process on port 0: the one way the suite's process tests,
//! the crash loop and the benchmarks start a server of its own, wait for its banner, signal
//! it, kill it and start it again on the same data directory.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

pub use rustix::process::Signal;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;

use crate::PATIENCE;

/// Where a server's standard error goes.
#[derive(Clone, Debug)]
pub enum Stderr {
    /// To the test, which reads it line by line ([`Serve::stderr_line`]).
    Piped,
    /// To this process's own.
    Inherit,
    /// Appended to a file: every start's, for whoever reads a failing run.
    AppendTo(PathBuf),
}

/// How to start the server: the binary, its data directory, further arguments
/// (`--config FILE`, `--database-url URL`, …) and where its standard error goes.
#[derive(Clone, Debug)]
pub struct ServeCommand {
    pub holdpoint: PathBuf,
    pub data: PathBuf,
    /// The address to listen on: `127.0.0.1:0` (a free port) unless set, so that a server
    /// started again is reached where clients already look.
    pub bind: String,
    pub args: Vec<OsString>,
    pub stderr: Stderr,
}

/// A running `holdpoint serve`.
pub struct Serve {
    child: Child,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    /// Standard output's lines after the banner, read off the pipe as they come.
    later: Option<mpsc::UnboundedReceiver<String>>,
    /// Standard error's lines (when piped), read off the pipe as they come.
    stderr: Option<mpsc::UnboundedReceiver<String>>,
}

impl ServeCommand {
    /// `holdpoint serve` on `data`, its standard error piped to the test.
    pub fn new(holdpoint: impl Into<PathBuf>, data: impl Into<PathBuf>) -> ServeCommand {
        ServeCommand {
            holdpoint: holdpoint.into(),
            data: data.into(),
            bind: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
            stderr: Stderr::Piped,
        }
    }

    /// With one more argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> ServeCommand {
        self.args.push(arg.into());
        self
    }

    /// Listening on `addr` (`127.0.0.1:7717`), not on a free port.
    pub fn bind(mut self, addr: impl Into<String>) -> ServeCommand {
        self.bind = addr.into();
        self
    }

    /// With its standard error going to `stderr`.
    pub fn stderr(mut self, stderr: Stderr) -> ServeCommand {
        self.stderr = stderr;
        self
    }

    /// Starts the server; it may not be listening yet.
    pub fn spawn(&self) -> Serve {
        let stderr = match &self.stderr {
            Stderr::Piped => Stdio::piped(),
            Stderr::Inherit => Stdio::inherit(),
            Stderr::AppendTo(path) => Stdio::from(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display())),
            ),
        };
        let mut child = Command::new(&self.holdpoint)
            .args(["serve", "--bind", &self.bind, "--data"])
            .arg(&self.data)
            .args(&self.args)
            .env_remove("HOLDPOINT_DATA")
            .env_remove("HOLDPOINT_CONFIG")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.holdpoint.display()));
        let stdout = child.stdout.take().map(|o| BufReader::new(o).lines());
        let stderr = child
            .stderr
            .take()
            .map(|e| forward(BufReader::new(e).lines()));
        Serve {
            child,
            stdout,
            later: None,
            stderr,
        }
    }
}

impl Serve {
    /// Waits for the banner; the server's URL, or `None` if the process ended before it
    /// listened (its standard error says why). Its later output is read off the pipe as it
    /// comes, so the server never blocks on it, and kept for [`Serve::stdout_line`].
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
        self.later = Some(forward(lines));
        Some(url)
    }

    /// The next line of standard output after the banner that contains `needle`.
    pub async fn stdout_line(&mut self, needle: &str) -> String {
        line_with(self.later.as_mut().expect("the server listens"), needle).await
    }

    /// The server's URL, once it listens.
    pub async fn url(&mut self) -> String {
        self.listening()
            .await
            .expect("holdpoint serve ended before it listened")
    }

    /// The next line of standard error (piped) that contains `needle`.
    pub async fn stderr_line(&mut self, needle: &str) -> String {
        line_with(
            self.stderr.as_mut().expect("standard error is piped"),
            needle,
        )
        .await
    }

    /// The process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: Signal) {
        signal_process(self.child.id().expect("the server is running"), signal);
    }

    /// SIGKILL: the process dies at once, whatever it was doing.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    /// SIGTERM, then the exit status.
    pub async fn terminate(mut self) -> ExitStatus {
        self.signal(Signal::TERM);
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the server did not stop in time")
            .unwrap()
    }
}

/// Sends `signal` to the process `id` (a child of the test's, still running).
pub fn signal_process(id: u32, signal: Signal) {
    let pid = rustix::process::Pid::from_raw(id as i32).expect("a process id is positive");
    rustix::process::kill_process(pid, signal).unwrap();
}

/// Reads `lines` off their pipe as they come, so the server never blocks writing them.
fn forward<R: AsyncBufRead + Unpin + Send + 'static>(
    mut lines: Lines<R>,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The next of `lines` that contains `needle`.
async fn line_with(lines: &mut mpsc::UnboundedReceiver<String>, needle: &str) -> String {
    let find = async {
        loop {
            match lines.recv().await {
                Some(line) if line.contains(needle) => return line,
                Some(_) => {}
                None => panic!("the output ended before a line with {needle:?}"),
            }
        }
    };
    tokio::time::timeout(PATIENCE, find)
        .await
        .unwrap_or_else(|_| panic!("no line with {needle:?} in time"))
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
