//! One connection to an upstream server: a child process on stdio or a streamable HTTP
//! endpoint, and the signal that says it has ended and why.
//!
//! A child's standard output is read through [`Capped`], which counts the bytes of the line
//! being read: a line longer than the server's `max_message_size` ends the connection at that
//! byte, so memory stays bounded whatever the child writes, and the calls in flight fail at
//! once with the reason. A watcher task owns the child: when it exits the connection ends with
//! its exit status; when the connection ends otherwise, the child is given a moment to exit on
//! the end of its input, then killed.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ProgressNotificationParam, ProgressToken, Tool};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::tap::{self, Tap, Tapped};
use super::task_call::TaskCalls;
use crate::config::{Transport, UpstreamConfig};

/// How long a child whose connection ended may take to exit on its own before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// How long a call whose child's output closed waits for the child's exit status, to say
/// why it failed.
pub(super) const EXIT_REPORT: Duration = Duration::from_secs(1);

/// How long a connection that closes waits for its task calls to cancel their tasks at the
/// server (see `task_call::TaskCalls`): within the 2 s an MCP client commonly gives
/// `holdpoint mcp` to exit after closing its input, before it is killed.
const CLOSE_PATIENCE: Duration = Duration::from_millis(1500);

/// That a connection has ended, and why (the first reason given wins).
#[derive(Clone, Default)]
pub(super) struct Ended {
    token: CancellationToken,
    why: Arc<OnceLock<String>>,
}

impl Ended {
    /// Ends the connection for `why`, unless it had ended already.
    pub(super) fn end(&self, why: String) {
        let _ = self.why.set(why);
        self.token.cancel();
    }

    pub(super) fn is_ended(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Why it ended ("" while it has not).
    pub(super) fn why(&self) -> &str {
        self.why.get().map_or("", String::as_str)
    }

    /// Waits until it ends; why.
    pub(super) async fn wait(&self) -> &str {
        self.token.cancelled().await;
        self.why()
    }
}

/// Where the server's progress notifications for one call go while it runs.
pub(crate) type ProgressSink = mpsc::UnboundedSender<ProgressNotificationParam>;

/// Holdpoint as the server's client: what it does with the server's notifications.
#[derive(Clone, Default)]
pub(super) struct Listener {
    /// The calls in flight that gave the server a progress token, by that token.
    progress: Arc<parking_lot::Mutex<HashMap<ProgressToken, ProgressSink>>>,
    /// Told when the server says that its tools changed (`notifications/tools/list_changed`).
    pub(super) tools_changed: Arc<Notify>,
}

impl Listener {
    /// Passes the server's progress notifications for `token` to `sink` until the guard
    /// returned is dropped.
    pub(super) fn follow(&self, token: ProgressToken, sink: ProgressSink) -> Following {
        self.progress.lock().insert(token.clone(), sink);
        Following {
            listener: self.clone(),
            token,
        }
    }
}

/// A call's progress being passed on: it stops when this is dropped.
pub(super) struct Following {
    listener: Listener,
    token: ProgressToken,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.listener.progress.lock().remove(&self.token);
    }
}

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = self.progress.lock().get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            let _ = sink.send(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// A live connection and the tools the server listed on it.
pub(super) struct Link {
    /// Calls go through the peer, so they run concurrently.
    pub(super) peer: Peer<RoleClient>,
    pub(super) ended: Ended,
    /// A child process, whose watcher says why the connection ended.
    pub(super) child: bool,
    /// What the server's notifications do.
    pub(super) listener: Listener,
    /// What the server says of its tools' tasks.
    pub(super) tap: Arc<Tap>,
    /// The calls of tools that must be called as tasks, in flight.
    pub(super) task_calls: TaskCalls,
    /// A streamable HTTP server's address, headers and largest message: its tools' tasks are
    /// learned in a listing of Holdpoint's own (see `tap`).
    http: Option<(String, BTreeMap<String, String>, usize)>,
    /// Kept to close the connection.
    service: Mutex<RunningService<RoleClient, Listener>>,
}

impl Link {
    /// Lists the server's tools, learning what each says of tasks.
    pub(super) async fn list_tools(&self) -> Result<Vec<Tool>, String> {
        let tools = self
            .peer
            .list_all_tools()
            .await
            .map_err(|e| format!("listing its tools failed: {e}"))?;
        if let Some((url, headers, max)) = &self.http
            && let Err(e) = tap::probe(url, headers, *max, &self.tap).await
        {
            tracing::warn!(
                "MCP server at {url} listed its tools, but what they say of tasks could not be \
                 learned ({e}): a tool that must be called as a task will fail"
            );
        }
        Ok(tools)
    }

    /// Ends the connection (a child is asked to exit by the end of its input, then stopped),
    /// once the task calls in flight have canceled their tasks at the server (for at most
    /// [`CLOSE_PATIENCE`]).
    pub(super) async fn close(&self) {
        self.task_calls.close(CLOSE_PATIENCE).await;
        let _ = self.service.lock().await.close().await;
        self.ended.end("it was closed".into());
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The watcher then stops the child: no process outlives its connection.
        self.ended.end("it was closed".into());
    }
}

/// Starts (stdio) or connects to (HTTP) one server and lists its tools.
pub(super) async fn open(config: &UpstreamConfig) -> Result<(Link, Vec<Tool>), String> {
    let max = holdpoint_core::mcp::max_message_size(config);
    let ended = Ended::default();
    // Until the link is made, ending this open (its caller's timeout drops it mid-handshake,
    // say) ends the connection too, so the watcher stops the child it started.
    let unfinished = EndOnDrop(Some(ended.clone()));
    let listener = Listener::default();
    let tap = Arc::new(Tap::default());
    let mut http = None;
    let child = matches!(config.transport(), Some(Transport::Stdio { .. }));
    let service = match config.transport() {
        Some(Transport::Stdio { command, args, env }) => {
            let mut child = Command::new(command)
                .args(args)
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                // The server's own messages go where Holdpoint's go.
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot run {command:?}: {e}"))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err("its standard input and output could not be opened".into());
            };
            tokio::spawn(watch(child, ended.clone()));
            let stdout = Tapped::new(Capped::new(stdout, max, ended.clone()), tap.clone());
            // rmcp's own cap (it drops a long line and reads on) stays above ours, which
            // ends the connection instead, so that the call waiting for it learns at once.
            let transport =
                AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(max + 2);
            match listener.clone().serve(transport).await {
                Ok(service) => service,
                Err(e) => {
                    ended.end("it could not be started".into());
                    return Err(e.to_string());
                }
            }
        }
        Some(Transport::Http { url, headers }) => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let header = HeaderName::try_from(k.as_str())
                    .map_err(|_| format!("{k:?} is not a header name"))?;
                let value = HeaderValue::try_from(v.as_str())
                    .map_err(|_| format!("the value of header {k} is not valid"))?;
                custom.insert(header, value);
            }
            http = Some((url.to_owned(), headers.clone(), max));
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url)
                    .custom_headers(custom)
                    .max_sse_event_size(max)
                    .max_json_response_size(max),
            );
            listener
                .clone()
                .serve(transport)
                .await
                .map_err(|e| e.to_string())?
        }
        None => return Err("it has neither command nor url".into()),
    };
    // From here the link ends it when dropped.
    unfinished.defuse();
    let link = Link {
        peer: service.peer().clone(),
        ended,
        child,
        listener,
        tap,
        task_calls: TaskCalls::default(),
        http,
        service: Mutex::new(service),
    };
    let tools = link.list_tools().await?;
    Ok((link, tools))
}

/// Ends the connection when dropped: an open that did not finish leaves no child behind.
struct EndOnDrop(Option<Ended>);

impl EndOnDrop {
    fn defuse(mut self) {
        self.0 = None;
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(ended) = &self.0 {
            ended.end("it did not finish starting".into());
        }
    }
}

/// Owns the child: ends the connection when it exits, stops it when the connection ends.
async fn watch(mut child: Child, ended: Ended) {
    let status = tokio::select! {
        status = child.wait() => status,
        () = ended.token.cancelled() => match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                let _ = child.kill().await;
                child.wait().await
            }
        },
    };
    let how = match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("its exit status is unknown: {e}"),
    };
    ended.end(format!("it exited ({how})"));
}

/// A child's standard output, read line by line (one JSON-RPC message a line) by rmcp, with
/// no line longer than `max` bytes: the first byte past it ends the connection with an error.
pub(super) struct Capped<R> {
    inner: R,
    max: usize,
    /// Bytes of the line being read so far.
    line: usize,
    ended: Ended,
}

impl<R> Capped<R> {
    pub(super) fn new(inner: R, max: usize, ended: Ended) -> Capped<R> {
        Capped {
            inner,
            max,
            line: 0,
            ended,
        }
    }

    /// Counts `read`; whether a line in it went past `max`.
    fn too_long(&mut self, read: &[u8]) -> bool {
        let mut rest = read;
        loop {
            match rest.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if self.line + i > self.max {
                        return true;
                    }
                    self.line = 0;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.line += rest.len();
                    return self.line > self.max;
                }
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && this.too_long(&buf.filled()[before..])
        {
            let why = format!(
                "it sent a message larger than {} (its max_message_size), which was refused",
                size(this.max)
            );
            this.ended.end(why.clone());
            // What else came with it is dropped too: the connection ends here.
            buf.set_filled(before);
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                why,
            )));
        }
        polled
    }
}

/// A size as people read it: `1 MiB`, `512 KiB`, `1000 bytes`.
pub(super) fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    match bytes {
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_server_that_never_answers_initialize_is_stopped_when_its_start_is_given_up() {
        let dir = std::env::temp_dir().join(format!("hp-link-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("pid");
        // Says its process id, then never answers anything.
        let config = UpstreamConfig {
            command: Some("sh".into()),
            args: vec![
                "-c".into(),
                format!("echo $$ > {}; exec sleep 600", pid_file.display()),
            ],
            ..Default::default()
        };
        let given_up = tokio::time::timeout(Duration::from_millis(500), open(&config)).await;
        assert!(given_up.is_err(), "the start was not given up");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let alive = std::path::Path::new("/proc").join(pid.trim());
        let deadline = tokio::time::Instant::now() + EXIT_GRACE + Duration::from_secs(10);
        while alive.exists() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            !alive.exists(),
            "the server's process {} outlived its start",
            pid.trim()
        );
    }

    #[test]
    fn lines_are_counted_across_reads_and_reset_at_each_newline() {
        let mut c = Capped::new(tokio::io::empty(), 4, Ended::default());
        assert!(!c.too_long(b"abcd\nab"));
        assert!(!c.too_long(b"cd"));
        assert!(!c.too_long(b"\n1234\n"));
        assert!(!c.too_long(b"x\n123"));
        assert!(c.too_long(b"45"));
        let mut c = Capped::new(tokio::io::empty(), 4, Ended::default());
        assert!(c.too_long(b"abc\nabcde\n"), "a long line inside one read");
    }

    #[tokio::test]
    async fn a_line_past_the_cap_ends_the_connection_with_the_reason() {
        let ended = Ended::default();
        let data: &[u8] = b"{\"ok\":1}\n0123456789012345678901234567890123456789";
        let mut c = Capped::new(data, 16, ended.clone());
        let e = c.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(ended.is_ended());
        assert!(
            ended.why().contains("larger than 16 bytes"),
            "{}",
            ended.why()
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(1024 * 1024), "1 MiB");
        assert_eq!(size(512 * 1024), "512 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
