//! A real SMTP server for email tests: aiosmtpd (in `.venv-smtp`, which scripts/test installs)
//! running `crates/server/tests/channels/smtp_sink.py`, which writes each message it receives
//! as JSON (envelope recipients, headers, the text and HTML parts decoded).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::{PATIENCE, eventually};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with aiosmtpd, or `None` with a line saying the test is skipped; under CI, where
/// scripts/test installs it, a failure.
pub fn python() -> Option<PathBuf> {
    let path = root().join(".venv-smtp/bin/python");
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: scripts/test installs aiosmtpd there",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}, and under CI every email test must run");
    }
    eprintln!("skipped: {why}");
    None
}

/// A port nothing listens on (for now): where a mail server is started late.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// A running SMTP sink, stopped when dropped.
pub struct Sink {
    pub port: u16,
    dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

impl Sink {
    /// Starts on 127.0.0.1:`port` (0: any free port) with `python` (see [`python`]).
    pub async fn start(python: &Path, port: u16) -> Sink {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temporary directory: {e}"));
        let mut child = tokio::process::Command::new(python)
            .arg(root().join("crates/server/tests/channels/smtp_sink.py"))
            .arg(dir.path())
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the SMTP sink: {e}"));
        let Some(stdout) = child.stdout.take() else {
            panic!("the SMTP sink has no output");
        };
        let mut line = String::new();
        let read = tokio::time::timeout(
            PATIENCE,
            tokio::io::BufReader::new(stdout).read_line(&mut line),
        )
        .await;
        assert!(
            matches!(read, Ok(Ok(n)) if n > 0),
            "the SMTP sink did not start"
        );
        Sink {
            port: line
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("the SMTP sink said {line:?}, not its port")),
            dir,
            _child: child,
        }
    }

    /// Every message received so far, in order.
    pub fn messages(&self) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return Vec::new();
        };
        let mut files: Vec<(u64, PathBuf)> = entries
            .filter_map(|e| {
                let path = e.ok()?.path();
                let n = path.file_stem()?.to_str()?.parse().ok()?;
                (path.extension()? == "json").then_some((n, path))
            })
            .collect();
        files.sort();
        files
            .into_iter()
            .filter_map(|(_, p)| serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok())
            .collect()
    }

    /// Waits for the `n`th message (from 1).
    pub async fn nth(&self, n: usize) -> Value {
        eventually(|| async {
            self.messages()
                .get(n - 1)
                .cloned()
                .ok_or_else(|| format!("message {n} has not arrived"))
        })
        .await
    }
}
