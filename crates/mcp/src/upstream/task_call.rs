//! A call of an upstream tool that must be called as a task (revision 2025-11-25's
//! `taskSupport: "required"`): a task-augmented `tools/call`, then `tasks/get` every
//! `pollInterval` the server asks for until the task is over (or needs input), then
//! `tasks/result` for its result. A call given up before the task is over (canceled, its
//! future dropped) cancels the task at the server with `tasks/cancel`.
//!
//! A connection that closes gives up its task calls too, and waits a little ([`TaskCalls`])
//! until each has canceled its task: `holdpoint mcp` closes its upstreams as soon as its
//! client goes away, which can be just after the client canceled its task and before the
//! upstream's answer creating it came (the only way to learn the id to cancel it by).
//!
//! rmcp 3.11 knows only the later tasks extension (SEP-2663), whose messages differ, so the
//! requests go as custom ones; their answers are read as JSON, whichever of rmcp's results
//! they were read as.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, ClientRequest, CustomRequest, CustomResult, JsonObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Abandoned;
use super::link::{Following, Link, ProgressSink};

/// How often the task is polled when the server does not say.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// The bounds of a server's `pollInterval`: it cannot make Holdpoint spin, or wait for hours.
const FASTEST_POLL: Duration = Duration::from_millis(20);
const SLOWEST_POLL: Duration = Duration::from_secs(60);

/// Why a call as a task did not give a result.
pub(super) enum Failure {
    /// A request failed (the connection closed, the server answered with an error…).
    Service(ServiceError),
    /// A request got no answer within the server's `call_timeout`.
    Timeout,
    /// The task ended without a result, or the server answered what is not MCP's.
    Task(String),
    /// The call was canceled (its task at the server too).
    Canceled,
}

impl From<ServiceError> for Failure {
    fn from(e: ServiceError) -> Failure {
        Failure::Service(e)
    }
}

/// The task calls in flight on one connection: closing it gives them up, then waits until
/// each has canceled its task at the server (or for [`TaskCalls::close`]'s patience).
#[derive(Default)]
pub(super) struct TaskCalls {
    /// Canceled as the connection closes: every task call gives up.
    closing: CancellationToken,
    /// How many calls, and cancellations they left running, are not over.
    count: Arc<watch::Sender<usize>>,
}

impl TaskCalls {
    /// A call (or its cancellation) under way until the guard is dropped.
    fn enter(&self) -> InFlight {
        self.count.send_modify(|n| *n += 1);
        InFlight(self.count.clone())
    }

    /// Gives up every task call in flight, and every one made from now on.
    pub(super) fn give_up(&self) {
        self.closing.cancel();
    }

    /// Gives them up and waits, at most `patience`, until each is over: a task whose creating
    /// answer is awaited, or whose `tasks/cancel` is being sent, is canceled at the server
    /// before the connection closes under it.
    pub(super) async fn close(&self, patience: Duration) {
        self.give_up();
        let mut count = self.count.subscribe();
        let over = tokio::time::timeout(patience, count.wait_for(|n| *n == 0))
            .await
            .is_ok();
        if !over {
            tracing::warn!(
                "{} task calls did not end within {patience:?} of the connection's close; \
                 their tasks may run on at the server",
                *count.borrow()
            );
        }
    }

    /// Resolves when the call is given up: by its caller (`canceled`), or as the connection
    /// closes.
    async fn given_up(&self, canceled: &CancellationToken) {
        tokio::select! {
            () = canceled.cancelled() => {}
            () = self.closing.cancelled() => {}
        }
    }

    fn is_given_up(&self, canceled: &CancellationToken) -> bool {
        canceled.is_cancelled() || self.closing.is_cancelled()
    }
}

/// One task call, or the cancellation of its task, not over yet (see [`TaskCalls`]).
struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A task created at the server and not over: canceled there when dropped so.
struct Running {
    peer: Peer<RoleClient>,
    id: Option<String>,
    /// Kept until the task is over or its cancellation was answered, so that a connection
    /// that closes meanwhile waits for it.
    in_flight: Option<InFlight>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let in_flight = self.in_flight.take();
        tokio::spawn(async move {
            let cancel = custom("tasks/cancel", json!({"taskId": id}));
            match peer
                .send_request_with_option(cancel, PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => {
                    let answered =
                        tokio::time::timeout(Duration::from_secs(10), handle.await_response())
                            .await;
                    if !matches!(answered, Ok(Ok(_))) {
                        tracing::warn!(
                            "the upstream's task {id} was given up and canceled there \
                             (tasks/cancel), which it did not answer: {}",
                            match answered {
                                Ok(Err(e)) => e.to_string(),
                                _ => "no answer within 10s".into(),
                            }
                        );
                    }
                }
                // The connection is gone, and with a child the task with it.
                Err(e) => tracing::warn!(
                    "the upstream's task {id} was given up but could not be canceled there \
                     (tasks/cancel): {e}"
                ),
            }
            drop(in_flight);
        });
    }
}

/// Calls the tool the server calls `name` as a task, with exactly `arguments`; each request
/// gets `timeout` for its answer. The server's progress notifications for the call go to
/// `progress` while the task runs.
pub(super) async fn call(
    link: &Link,
    name: &str,
    arguments: JsonObject,
    progress: Option<ProgressSink>,
    canceled: &CancellationToken,
    timeout: Duration,
) -> Result<CallToolResult, Failure> {
    let calls = &link.task_calls;
    let in_flight = calls.enter();
    if calls.is_given_up(canceled) {
        return Err(Failure::Canceled);
    }
    let params = json!({"name": name, "arguments": arguments, "task": {}});
    // The answer that creates the task is awaited even when the call is given up meanwhile:
    // a task the server made is cancelled by its id, which only that answer gives (canceling
    // the request itself would leave the task running).
    let (created, _following) = ask(
        link,
        "tools/call",
        params,
        progress,
        std::future::pending(),
        timeout,
    )
    .await?;
    let created = match created {
        // A server that does not run it as a task after all answers as to a plain call.
        ServerResult::CallToolResult(result) => return Ok(result),
        other => json_of(other),
    };
    let task = &created["task"];
    let Some(id) = task["taskId"].as_str() else {
        return Err(Failure::Task(format!(
            "it did not answer the call with a task: {}",
            shown(&created)
        )));
    };
    let mut running = Running {
        peer: link.peer.clone(),
        id: Some(id.to_owned()),
        in_flight: Some(in_flight),
    };
    if calls.is_given_up(canceled) {
        // Dropping `running` cancels the task at the server.
        return Err(Failure::Canceled);
    }
    let mut poll = poll_interval(task).unwrap_or(DEFAULT_POLL);
    let mut status = status_of(task)?;
    while status == "working" {
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            () = calls.given_up(canceled) => return Err(Failure::Canceled),
        }
        let (got, _) = ask(
            link,
            "tasks/get",
            json!({"taskId": id}),
            None,
            calls.given_up(canceled),
            timeout,
        )
        .await?;
        let got = json_of(got);
        status = status_of(&got)?;
        poll = poll_interval(&got).unwrap_or(poll);
    }
    if status == "cancelled" {
        running.id = None;
        return Err(Failure::Task(format!(
            "its task {id} was cancelled at the server"
        )));
    }
    // Over, or in need of input, which the server then asks for as it answers this (and
    // which Holdpoint, its client, declines): the answer waits for the task's end.
    let patience = if status == "input_required" {
        Duration::MAX
    } else {
        timeout
    };
    let result = ask(
        link,
        "tasks/result",
        json!({"taskId": id}),
        None,
        calls.given_up(canceled),
        patience,
    )
    .await;
    running.id = None;
    match result?.0 {
        ServerResult::CallToolResult(result) => Ok(result),
        ServerResult::EmptyResult(_) => Ok(CallToolResult::success(Vec::new())),
        other => Err(Failure::Task(format!(
            "tasks/result did not give a tool's result: {}",
            shown(&json_of(other))
        ))),
    }
}

/// Sends `method` with `params` and waits at most `timeout` for its answer, or until
/// `given_up` resolves (a request given up is canceled at the server); the answer, and the
/// following of its progress when `progress` is given.
async fn ask(
    link: &Link,
    method: &str,
    params: Value,
    progress: Option<ProgressSink>,
    given_up: impl Future<Output = ()>,
    timeout: Duration,
) -> Result<(ServerResult, Option<Following>), Failure> {
    let handle = link
        .peer
        .send_request_with_option(custom(method, params), PeerRequestOptions::no_options())
        .await?;
    let following = progress.map(|sink| link.listener.follow(handle.progress_token.clone(), sink));
    let mut abandoned = Abandoned {
        peer: link.peer.clone(),
        id: Some(handle.id.clone()),
    };
    let deadline = async {
        match tokio::time::Instant::now().checked_add(timeout) {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        answered = handle.await_response() => {
            abandoned.id = None;
            Ok((answered?, following))
        }
        () = deadline => Err(Failure::Timeout),
        () = given_up => Err(Failure::Canceled),
    }
}

fn custom(method: &str, params: Value) -> ClientRequest {
    ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)))
}

/// An answer as JSON: rmcp reads a task's answers as the later extension's results when their
/// fields fit, else keeps them as they came.
fn json_of(result: ServerResult) -> Value {
    match result {
        ServerResult::CustomResult(CustomResult(value)) => value,
        other => serde_json::to_value(other).unwrap_or_default(),
    }
}

fn status_of(task: &Value) -> Result<&'static str, Failure> {
    const KNOWN: [&str; 5] = [
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    ];
    let status = task["status"].as_str().unwrap_or_default();
    KNOWN.into_iter().find(|k| *k == status).ok_or_else(|| {
        Failure::Task(format!(
            "it answered with a task of no known status: {}",
            shown(task)
        ))
    })
}

fn poll_interval(task: &Value) -> Option<Duration> {
    let ms = task["pollInterval"].as_u64()?;
    Some(Duration::from_millis(ms).clamp(FASTEST_POLL, SLOWEST_POLL))
}

/// JSON to put in a message: at most 300 characters of it.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[tokio::test]
    async fn closing_gives_up_the_task_calls_and_waits_for_those_in_flight_within_its_patience() {
        let calls = Arc::new(TaskCalls::default());
        let canceled = CancellationToken::new();
        let in_flight = calls.enter();
        assert!(!calls.is_given_up(&canceled));
        let closing = tokio::spawn({
            let calls = calls.clone();
            async move { calls.close(Duration::from_secs(60)).await }
        });
        // Given up as the close begins; the close waits while the call is in flight.
        calls.given_up(&canceled).await;
        assert!(calls.is_given_up(&canceled));
        assert!(!closing.is_finished());
        drop(in_flight);
        tokio::time::timeout(Duration::from_secs(30), closing)
            .await
            .expect("the close ended once no call was in flight")
            .unwrap();
        // One that never ends holds the close for its patience only.
        let _stuck = calls.enter();
        tokio::time::timeout(
            Duration::from_secs(30),
            calls.close(Duration::from_millis(50)),
        )
        .await
        .expect("the close gave up waiting after its patience");
    }

    #[test]
    fn a_servers_poll_interval_is_kept_within_bounds() {
        assert_eq!(
            poll_interval(&json!({"pollInterval": 250})),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            poll_interval(&json!({"pollInterval": 0})),
            Some(FASTEST_POLL)
        );
        assert_eq!(
            poll_interval(&json!({"pollInterval": 86_400_000})),
            Some(SLOWEST_POLL)
        );
        assert_eq!(poll_interval(&json!({})), None);
    }

    #[test]
    fn a_task_read_as_the_later_extensions_keeps_its_status() {
        let got: ServerResult = serde_json::from_value(json!({"taskId": "t", "status": "working",
            "createdAt": "2025-11-25T00:00:00Z", "lastUpdatedAt": "2025-11-25T00:00:00Z",
            "ttl": 60000, "pollInterval": 100}))
        .unwrap();
        assert_eq!(status_of(&json_of(got)).ok(), Some("working"));
        let created: ServerResult = serde_json::from_value(json!({"task": {"taskId": "t",
            "status": "working", "createdAt": "2025-11-25T00:00:00Z",
            "lastUpdatedAt": "2025-11-25T00:00:00Z", "ttl": 60000, "pollInterval": 100}}))
        .unwrap();
        let created = json_of(created);
        assert_eq!(created["task"]["taskId"], "t");
        assert_eq!(
            poll_interval(&created["task"]),
            Some(Duration::from_millis(100))
        );
    }
}
