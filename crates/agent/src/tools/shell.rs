//! `shell_cmd`: a command line run by `sh` in the world's directory.
//!
//! The command runs in its own process group with a cleared environment (the server's
//! secrets, such as LLM API keys, must not be readable by a command an LLM wrote), a timeout,
//! and bounded output. On timeout or cancellation the whole group is killed, and so it is when
//! the server dies (see [`SUPERVISOR`]): a restarted server reports the call as interrupted,
//! and nothing of it may go on having effects after that.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::fs::confine;

/// Bounds on `shell_cmd`.
#[derive(Clone, Debug)]
pub struct ShellLimits {
    /// When the agent names no timeout.
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    /// Bytes of stdout and of stderr kept (the rest is cut, and the result says so).
    pub max_output: usize,
}

impl Default for ShellLimits {
    fn default() -> Self {
        ShellLimits {
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            max_output: 64 * 1024,
        }
    }
}

/// Reads a stream to its end, keeping the first `max` bytes.
async fn capped(mut r: impl AsyncRead + Unpin, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut cut = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return (kept, cut),
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
}

/// The group's leader: it runs the command line (`$1`) in the background, in the group it
/// leads, beside a watcher that reads its stdin, a pipe from the server that is never written. The pipe
/// ends only when the server's process is gone — whatever killed it, `SIGKILL` included — and
/// then the watcher kills the whole group. (An asynchronous list's stdin is `/dev/null` unless
/// redirected, hence fd 3.) The leader's status is the command's.
const SUPERVISOR: &str = r#"exec 3<&0 </dev/null
sh -c "$1" 3<&- &
command=$!
{ cat >/dev/null; kill -s KILL 0; } <&3 >/dev/null 2>&1 &
exec 3<&-
wait "$command""#;

fn kill_group(pid: Option<u32>) {
    let pid = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

pub(crate) async fn run(
    root: &Path,
    args: &Value,
    limits: &ShellLimits,
    cancel: &CancellationToken,
) -> Result<Value, String> {
    let command = args["command"]
        .as_str()
        .filter(|c| !c.trim().is_empty())
        .ok_or("`command` is required")?;
    let cwd = match args["cwd"].as_str() {
        Some(rel) => confine(root, rel)?,
        None => root.to_path_buf(),
    };
    if !cwd.is_dir() {
        return Err(format!(
            "the working directory {} does not exist",
            cwd.display()
        ));
    }
    let timeout = match args["timeout_secs"].as_u64() {
        Some(s) => Duration::from_secs(s).min(limits.max_timeout),
        None => limits.default_timeout,
    };
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(SUPERVISOR)
        .arg("holdpoint-shell")
        .arg(command)
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", root)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let pid = child.id();
    // Held open while the command runs: the supervisor's watcher waits for its end.
    let _alive = child.stdin.take();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let max = limits.max_output;
    let out = tokio::spawn(async move {
        match stdout {
            Some(s) => capped(s, max).await,
            None => (Vec::new(), false),
        }
    });
    let err = tokio::spawn(async move {
        match stderr {
            Some(s) => capped(s, max).await,
            None => (Vec::new(), false),
        }
    });
    let (status, timed_out) = tokio::select! {
        s = child.wait() => (s.ok(), false),
        () = tokio::time::sleep(timeout) => {
            kill_group(pid);
            (child.wait().await.ok(), true)
        }
        () = cancel.cancelled() => {
            kill_group(pid);
            let _ = child.wait().await;
            return Err("the turn was canceled while the command ran; it was stopped".into());
        }
    };
    // Anything the command left running in its group goes too.
    kill_group(pid);
    let (stdout, out_cut) = out.await.unwrap_or_default();
    let (stderr, err_cut) = err.await.unwrap_or_default();
    Ok(json!({
        "exit_code": status.and_then(|s| s.code()),
        "stdout": String::from_utf8_lossy(&stdout),
        "stderr": String::from_utf8_lossy(&stderr),
        "truncated": out_cut || err_cut,
        "timed_out": timed_out,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ShellLimits {
        ShellLimits {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_secs(10),
            max_output: 16,
        }
    }

    #[tokio::test]
    async fn runs_in_the_world_with_a_clean_environment() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let out = run(
            &root,
            &json!({"command": "pwd; echo ${HOLDPOINT_SECRET:-none} >&2; exit 3"}),
            &ShellLimits::default(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            out["stdout"].as_str().unwrap().trim(),
            root.display().to_string()
        );
        assert_eq!(out["stderr"].as_str().unwrap().trim(), "none");
        assert_eq!(
            (out["exit_code"].as_i64(), out["timed_out"].as_bool()),
            (Some(3), Some(false))
        );
    }

    #[tokio::test]
    async fn output_is_capped_and_time_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            dir.path(),
            &json!({"command": "yes | head -c 100000"}),
            &limits(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            (
                out["stdout"].as_str().unwrap().len(),
                out["truncated"].as_bool()
            ),
            (16, Some(true))
        );
        let out = run(
            dir.path(),
            &json!({"command": "sleep 30 & sleep 30", "timeout_secs": 1}),
            &limits(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            (out["timed_out"].as_bool(), out["exit_code"].as_i64()),
            (Some(true), None)
        );
    }

    #[tokio::test]
    async fn the_working_directory_stays_inside_the_world() {
        let dir = tempfile::tempdir().unwrap();
        let err = run(
            dir.path(),
            &json!({"command": "ls", "cwd": "../"}),
            &limits(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(err.contains("leaves the world"), "{err}");
    }

    #[tokio::test]
    async fn cancellation_stops_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let task = tokio::spawn(async move {
            let dir = dir;
            run(
                dir.path(),
                &json!({"command": "sleep 30"}),
                &ShellLimits::default(),
                &c,
            )
            .await
        });
        cancel.cancel();
        let err = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(err.contains("canceled"), "{err}");
    }
}
