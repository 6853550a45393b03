//! The upstream MCP servers: started (stdio) or connected to (streamable HTTP), their tools
//! listed at each start, and calls forwarded to them.
//!
//! Upstreams fail, and a failure is one call's clear error, never a hang and never the
//! gateway's end: a server that exits (or breaks its connection, or sends a message larger
//! than its `max_message_size`) fails the calls in flight at once, naming it and why, and is
//! started again at the next call; starting it again that fails is retried after a delay that
//! doubles, at most [`restart::MAX_ATTEMPTS`] times in a row; a call that gets no answer
//! within the server's `call_timeout` fails and is canceled at the server. A server that
//! cannot be started at first is tried again in the background, with the same delays, until
//! it starts; its tools are offered from then on, and whoever follows [`Upstreams::changes`]
//! is told. `Upstreams` is shared by every session and agent that calls (behind an `Arc`):
//! calls run concurrently, and a restart is made once, by the first call that needs it.

mod link;
mod restart;
mod tap;
mod task_call;

use std::sync::{Arc, Weak};
use std::time::Duration;

use holdpoint_core::mcp::split_tool_name;
use parking_lot::RwLock;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, JsonObject, RequestId, ServerResult, Tool,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use tokio::sync::{Mutex, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{McpSettings, UpstreamConfig, tool_name};
pub(crate) use link::ProgressSink;
use link::{Following, Link};
use restart::{Attempt, Down};
pub(crate) use tap::TaskSupport;
use task_call::Failure;

/// How long an upstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a first listing of tools waits for servers still making their first start
/// (see [`Upstreams::first_starts_within`]).
pub const FIRST_LIST_PATIENCE: Duration = Duration::from_secs(10);

/// A failure to reach or use an upstream, in words for the person or the LLM that reads it.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("MCP server {server:?} could not be started: {message}")]
    Start { server: String, message: String },
    #[error("MCP server {server:?} failed the call: {message}")]
    Call { server: String, message: String },
    #[error(
        "MCP server {server:?} did not answer within {} (its call_timeout); the call was canceled",
        humantime::format_duration(*after)
    )]
    Timeout { server: String, after: Duration },
    #[error("MCP server {server:?} is not running: {message}")]
    Down { server: String, message: String },
}

/// One configured upstream server and its connection, when it has one.
struct Upstream {
    name: String,
    config: UpstreamConfig,
    call_timeout: Duration,
    /// Locked briefly by each call to take the live link, and across a restart, so that
    /// calls arriving meanwhile wait for it rather than start the server again.
    state: Mutex<State>,
    /// The tools it offers, under the names clients see: as it listed them at its last
    /// start; none before its first.
    tools: RwLock<Arc<Vec<OfferedTool>>>,
    /// Told when its tools change (shared by every server of an `Upstreams`).
    changed: Arc<watch::Sender<u64>>,
    /// What was wrong with the tools it listed at its last start (see [`Upstream::offer`]).
    problems: RwLock<Vec<String>>,
    /// How its first start went, once it has: `None` when it started, else why not.
    first_start: watch::Sender<Option<Option<String>>>,
}

enum State {
    Up(Arc<Link>),
    Down(Down),
    /// After [`Upstreams::close`]: never started again.
    Closed,
}

/// A tool offered through Holdpoint: its upstream, and its definition under the name clients
/// see (`server__tool`).
#[derive(Clone, Debug)]
pub struct OfferedTool {
    pub server: String,
    /// The upstream's own name of the tool.
    pub upstream_name: String,
    pub tool: Tool,
    pub requires_approval: bool,
    /// How the server lets it be called: a tool that must be called as a task is (see
    /// `task_call`).
    pub task_support: TaskSupport,
}

/// The configured upstream servers and the tools they offer.
pub struct Upstreams {
    servers: Vec<Arc<Upstream>>,
    /// Counts the changes of the tools offered.
    changed: Arc<watch::Sender<u64>>,
    /// Canceled by [`Upstreams::close`]: the background starts stop.
    closing: CancellationToken,
}

impl Default for Upstreams {
    fn default() -> Upstreams {
        Upstreams {
            servers: Vec::new(),
            changed: Arc::new(watch::Sender::new(0)),
            closing: CancellationToken::new(),
        }
    }
}

impl Upstreams {
    /// Starts or connects to every configured server, all at once and in the background, and
    /// returns at once: each server's tools are offered as soon as it has listed them, and
    /// whoever follows [`Upstreams::changes`] is told. A server that cannot be reached is
    /// tried again in the background until it starts; the others are served meanwhile.
    /// [`Upstreams::first_starts`] says how the first attempts went.
    pub fn start(settings: &McpSettings) -> Upstreams {
        let mut upstreams = Upstreams::default();
        for (name, config) in &settings.servers {
            let upstream = Arc::new(Upstream {
                name: name.to_owned(),
                call_timeout: holdpoint_core::mcp::call_timeout(config),
                config: config.clone(),
                state: Mutex::new(State::Down(Down::first(Instant::now()))),
                tools: RwLock::default(),
                changed: upstreams.changed.clone(),
                problems: RwLock::default(),
                first_start: watch::Sender::new(None),
            });
            tokio::spawn(upstream.clone().keep_trying(upstreams.closing.clone()));
            upstreams.servers.push(upstream);
        }
        upstreams
    }

    /// Starts every configured server at once, as [`Upstreams::start`] does, and waits until
    /// each has started or failed its first start: the errors of those that failed (they
    /// are tried again in the background).
    pub async fn connect(settings: &McpSettings) -> (Upstreams, Vec<UpstreamError>) {
        let upstreams = Upstreams::start(settings);
        let failed = upstreams.first_starts().await;
        (upstreams, failed)
    }

    /// Waits until every server has started or failed its first start (each within
    /// [`START_TIMEOUT`]); the errors of those that failed.
    pub async fn first_starts(&self) -> Vec<UpstreamError> {
        let mut failed = Vec::new();
        for upstream in &self.servers {
            if let Some(message) = upstream.first_started().await {
                failed.push(UpstreamError::Start {
                    server: upstream.name.clone(),
                    message,
                });
            }
        }
        failed
    }

    /// Waits, at most `patience`, until every server has started or failed its first start:
    /// so that a client that lists tools just after connecting hears of the servers that
    /// start quickly, while one that is slow delays nobody for long (its tools are announced
    /// when it is up).
    pub async fn first_starts_within(&self, patience: Duration) {
        let _ = tokio::time::timeout(patience, self.first_starts()).await;
    }

    /// Every tool offered, in configuration order.
    pub fn tools(&self) -> Vec<OfferedTool> {
        self.servers
            .iter()
            .flat_map(|s| s.offered().iter().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// The tool clients call `name` (`server__tool`).
    pub fn tool(&self, name: &str) -> Option<OfferedTool> {
        let (server, _) = split_tool_name(name)?;
        let upstream = self.servers.iter().find(|s| s.name == server)?;
        let offered = upstream.offered();
        offered.iter().find(|t| t.tool.name == name).cloned()
    }

    /// The tool clients call `name`, waiting for its server's first start when that is still
    /// under way (a client may know the tool from an earlier session).
    pub async fn tool_once_started(&self, name: &str) -> Option<OfferedTool> {
        if let Some(tool) = self.tool(name) {
            return Some(tool);
        }
        let (server, _) = split_tool_name(name)?;
        let upstream = self.servers.iter().find(|s| s.name == server)?;
        if upstream.first_start.borrow().is_none() {
            upstream.first_started().await;
        }
        self.tool(name)
    }

    /// Why `name` (`server__tool`) cannot be called, when it names a configured server that
    /// has not listed its tools yet: it is down since Holdpoint started (its tools are not
    /// known, so not offered, but a client may know them from elsewhere).
    pub fn unavailable(&self, name: &str) -> Option<UpstreamError> {
        let (server, _) = split_tool_name(name)?;
        let upstream = self.servers.iter().find(|s| s.name == server)?;
        if !upstream.offered().is_empty() {
            return None;
        }
        // Locked while a start is under way: not waited for, since a start can take long.
        let Ok(state) = upstream.state.try_lock() else {
            return Some(upstream.down("it is being started".into()));
        };
        match &*state {
            State::Down(down) if down.is_first() => {
                Some(upstream.down("it is being started".into()))
            }
            State::Down(down) => Some(upstream.down(match down.attempt(Instant::now()) {
                Attempt::Later(wait) => format!(
                    "{}; it is tried again in {}",
                    down.why,
                    humantime::format_duration(Duration::from_secs(wait.as_secs().max(1)))
                ),
                _ => format!("{}; it is being started", down.why),
            })),
            State::Closed => {
                Some(upstream.down("Holdpoint closed its connection as it shut down".into()))
            }
            State::Up(_) => None,
        }
    }

    /// What was wrong with the tools the servers listed at their last start, each naming the
    /// server and the tool: tools listed twice, names Holdpoint cannot carry, and
    /// `require_approval` entries that name none of a server's tools (whose calls are then all
    /// asked). Each was logged as a warning when found.
    pub fn problems(&self) -> Vec<String> {
        self.servers
            .iter()
            .flat_map(|s| s.problems.read().clone())
            .collect()
    }

    /// Follows the changes of the tools offered: the value changes each time they do (a
    /// server started for the first time, or listed other tools when started again).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Calls `tool` on its server with exactly `arguments`; the result as the server gave it
    /// (content and `isError` kept). Fails, naming the server, when it is down, stops while
    /// the call runs, or does not answer within its `call_timeout` (the call is then canceled
    /// at the server). The server's progress notifications for the call go to `progress`,
    /// when given, while it runs. Canceling `canceled` gives the call up, canceling it at the
    /// server. A tool that must be called as a task is: its task is followed to its end, each
    /// request within the `call_timeout`.
    pub async fn call(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
        progress: Option<ProgressSink>,
        canceled: &CancellationToken,
    ) -> Result<CallToolResult, UpstreamError> {
        let Some(upstream) = self.servers.iter().find(|s| s.name == tool.server) else {
            return Err(UpstreamError::Call {
                server: tool.server.clone(),
                message: "it is not connected".into(),
            });
        };
        if tool.task_support == TaskSupport::Required {
            return upstream
                .call_as_task(tool, arguments, progress, canceled)
                .await;
        }
        tokio::select! {
            called = upstream.call(tool, arguments, progress) => called,
            () = canceled.cancelled() => Err(UpstreamError::Call {
                server: tool.server.clone(),
                message: "the call was canceled".into(),
            }),
        }
    }

    /// Ends every connection (stdio servers are asked to exit, then stopped), and stops
    /// trying to start those that are down.
    pub async fn close(&self) {
        self.closing.cancel();
        // Every server's task calls give up at once, so that their tasks are canceled while
        // each connection in turn waits for its own.
        for upstream in &self.servers {
            if let State::Up(link) = &*upstream.state.lock().await {
                link.task_calls.give_up();
            }
        }
        for upstream in &self.servers {
            let mut state = upstream.state.lock().await;
            if let State::Up(link) = &*state {
                link.close().await;
            }
            *state = State::Closed;
        }
    }
}

impl Upstream {
    /// The tools it offers now.
    fn offered(&self) -> Arc<Vec<OfferedTool>> {
        self.tools.read().clone()
    }

    /// Offers `tools`, as the server just listed them (those its configuration offers, named
    /// as [`tool_name`] has it); tells whoever follows the changes when they differ from
    /// before. What is wrong with them is logged and kept (see [`Upstreams::problems`]).
    fn offer(&self, tools: Vec<Tool>, tap: &tap::Tap) {
        let (mut offered, problems) = self.checked(tools);
        for tool in &mut offered {
            tool.task_support = tap.support(&tool.upstream_name);
        }
        for problem in &problems {
            tracing::warn!(server = %self.name, "{problem}");
        }
        *self.problems.write() = problems;
        let names = |t: &[OfferedTool]| {
            t.iter()
                .map(|t| (t.tool.clone(), t.task_support))
                .collect::<Vec<_>>()
        };
        let same = names(&self.offered()) == names(&offered);
        *self.tools.write() = Arc::new(offered);
        if !same {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The tools of `listed` that are offered, named as clients see them, and what is wrong
    /// with the list: a name listed twice is offered once; a name that a hold cannot carry
    /// (empty, control characters, longer than Holdpoint's limit) is not offered; and when
    /// `require_approval` names a tool the server does not list (a typo would let the real
    /// tool run unasked), every tool of the server needs a person until it is fixed.
    fn checked(&self, listed: Vec<Tool>) -> (Vec<OfferedTool>, Vec<String>) {
        let server = &self.name;
        let mut problems = Vec::new();
        let unknown: Vec<&String> = self
            .config
            .require_approval
            .iter()
            .filter(|r| !listed.iter().any(|t| t.name == r.as_str()))
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
            problems.push(format!(
                "require_approval of MCP server {server:?} names {unknown:?}, which it does not \
                 list among its tools ({names:?}): every call of its tools is asked until \
                 require_approval names only tools it has"
            ));
        }
        let longest = holdpoint_core::limits::Limits::default().tool;
        let mut offered: Vec<OfferedTool> = Vec::new();
        for mut tool in listed {
            let upstream_name = tool.name.to_string();
            if !self.config.offers(&upstream_name) {
                continue;
            }
            let shown: String = upstream_name.chars().take(80).collect();
            if upstream_name.trim().is_empty()
                || upstream_name.len() > longest
                || upstream_name.chars().any(char::is_control)
            {
                problems.push(format!(
                    "MCP server {server:?} lists a tool named {shown:?}, which is not offered: \
                     a tool's name must be 1 to {longest} bytes without control characters"
                ));
                continue;
            }
            let name = tool_name(server, &upstream_name);
            if let Some(first) = offered
                .iter()
                .find(|t| t.upstream_name == upstream_name || t.tool.name == name.as_str())
            {
                problems.push(if first.upstream_name == upstream_name {
                    format!(
                        "MCP server {server:?} lists the tool {shown:?} twice: only the first \
                         is offered"
                    )
                } else {
                    format!(
                        "MCP server {server:?} lists the tools {:?} and {shown:?}, which would \
                         both be offered as {name:?}: only the first is offered",
                        first.upstream_name
                    )
                });
                continue;
            }
            tool.name = name.into();
            offered.push(OfferedTool {
                server: server.clone(),
                requires_approval: !unknown.is_empty()
                    || self.config.requires_approval(&upstream_name),
                upstream_name,
                tool,
                task_support: TaskSupport::default(),
            });
        }
        (offered, problems)
    }

    /// Lists the server's tools again each time it says they changed, for as long as `link`
    /// is its connection: what it offers, and who follows the changes, are up to date.
    fn follow_tool_changes(self: &Arc<Self>, link: &Arc<Link>) {
        let upstream: Weak<Upstream> = Arc::downgrade(self);
        let changed = link.listener.tools_changed.clone();
        let ended = link.ended.clone();
        let link = Arc::downgrade(link);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = changed.notified() => {}
                    _ = ended.wait() => return,
                }
                let (Some(upstream), Some(link)) = (upstream.upgrade(), link.upgrade()) else {
                    return;
                };
                let server = &upstream.name;
                match tokio::time::timeout(START_TIMEOUT, link.list_tools()).await {
                    Ok(Ok(tools)) => {
                        tracing::info!(%server, "MCP server {server:?} changed its tools");
                        upstream.offer(tools, &link.tap);
                    }
                    Ok(Err(e)) => tracing::warn!(
                        %server,
                        "MCP server {server:?} said its tools changed, but listing them failed: {e}"
                    ),
                    Err(_) => tracing::warn!(
                        %server,
                        "MCP server {server:?} said its tools changed, but did not list them within {}s",
                        START_TIMEOUT.as_secs()
                    ),
                }
            }
        });
    }

    /// Tries to start a server that has never started, each time an attempt is due, until it
    /// starts or `closing` is canceled.
    async fn keep_trying(self: Arc<Upstream>, closing: CancellationToken) {
        loop {
            let wait = match &*self.state.lock().await {
                State::Down(down) => match down.attempt(Instant::now()) {
                    Attempt::Now => Duration::ZERO,
                    Attempt::Later(wait) => wait,
                    Attempt::GaveUp => return,
                },
                State::Up(_) | State::Closed => return,
            };
            tokio::select! {
                () = closing.cancelled() => {
                    self.first_start_ended(Some("Holdpoint shut down before it started".into()));
                    return;
                }
                () = tokio::time::sleep(wait) => {}
            }
            let started = self.link().await;
            self.first_start_ended(started.as_ref().err().map(|e| match e {
                UpstreamError::Start { message, .. } | UpstreamError::Down { message, .. } => {
                    message.clone()
                }
                other => other.to_string(),
            }));
            if started.is_ok() {
                return;
            }
        }
    }

    /// Records how the first start went, the first time it is called.
    fn first_start_ended(&self, failure: Option<String>) {
        self.first_start.send_if_modified(|first| {
            let unset = first.is_none();
            if unset {
                *first = Some(failure);
            }
            unset
        });
    }

    /// Waits for its first start to end: `None` when it started, else why not.
    async fn first_started(&self) -> Option<String> {
        let mut first = self.first_start.subscribe();
        match first.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().flatten(),
            Err(_) => Some("Holdpoint shut down before it started".into()),
        }
    }

    async fn call(
        self: &Arc<Self>,
        tool: &OfferedTool,
        arguments: JsonObject,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, UpstreamError> {
        let link = self.link().await?;
        let failed = |why: &str| UpstreamError::Call {
            server: self.name.clone(),
            message: format!("{why}; it is started again at the next call"),
        };
        let params =
            CallToolRequestParams::new(tool.upstream_name.clone()).with_arguments(arguments);
        // Dropping the call (when the connection ends or the time is up) tells the server
        // that it is canceled.
        let call = async {
            match progress {
                None => link.peer.call_tool(params).await,
                Some(sink) => call_following(&link, params, sink).await,
            }
        };
        tokio::select! {
            result = call => match result {
                Ok(result) => Ok(result),
                Err(ServiceError::TransportClosed) => {
                    // Closed under the call. A child's output closes a moment before its exit
                    // status is known: that says more. Whatever happened, the next call
                    // starts the server again.
                    if link.child {
                        let _ = tokio::time::timeout(link::EXIT_REPORT, link.ended.wait()).await;
                    }
                    link.ended.end("its connection closed".into());
                    Err(failed(link.ended.why()))
                }
                Err(e) => Err(UpstreamError::Call {
                    server: self.name.clone(),
                    message: e.to_string(),
                }),
            },
            why = link.ended.wait() => Err(failed(why)),
            () = tokio::time::sleep(self.call_timeout) => Err(UpstreamError::Timeout {
                server: self.name.clone(),
                after: self.call_timeout,
            }),
        }
    }

    /// A call of a tool that must be called as a task (see `task_call`).
    async fn call_as_task(
        self: &Arc<Self>,
        tool: &OfferedTool,
        arguments: JsonObject,
        progress: Option<ProgressSink>,
        canceled: &CancellationToken,
    ) -> Result<CallToolResult, UpstreamError> {
        let link = self.link().await?;
        let failed = |message: String| UpstreamError::Call {
            server: self.name.clone(),
            message,
        };
        let call = task_call::call(
            &link,
            &tool.upstream_name,
            arguments,
            progress,
            canceled,
            self.call_timeout,
        );
        tokio::select! {
            result = call => match result {
                Ok(result) => Ok(result),
                Err(Failure::Service(ServiceError::TransportClosed)) => {
                    Err(failed(self.closed(&link).await))
                }
                Err(Failure::Service(ServiceError::McpError(e))) => Err(failed(format!(
                    "it refused the call as a task: {} ({})",
                    e.message, e.code.0
                ))),
                Err(Failure::Service(e)) => Err(failed(e.to_string())),
                Err(Failure::Task(why)) => Err(failed(why)),
                Err(Failure::Canceled) => Err(failed("the call was canceled".into())),
                Err(Failure::Timeout) => Err(UpstreamError::Timeout {
                    server: self.name.clone(),
                    after: self.call_timeout,
                }),
            },
            why = link.ended.wait() => Err(failed(format!(
                "{why}; it is started again at the next call"
            ))),
        }
    }

    /// Why the connection closed under a call; it is started again at the next.
    async fn closed(&self, link: &Link) -> String {
        // A child's output closes a moment before its exit status is known: that says more.
        if link.child {
            let _ = tokio::time::timeout(link::EXIT_REPORT, link.ended.wait()).await;
        }
        link.ended.end("its connection closed".into());
        format!("{}; it is started again at the next call", link.ended.why())
    }

    /// The live connection: the one there is, else a new one if the server may be started
    /// now.
    async fn link(self: &Arc<Self>) -> Result<Arc<Link>, UpstreamError> {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        if let State::Up(link) = &*state {
            if !link.ended.is_ended() {
                return Ok(link.clone());
            }
            let why = link.ended.why().to_owned();
            tracing::warn!(server = %self.name, "MCP server {:?} stopped: {why}; starting it again", self.name);
            *state = State::Down(Down::stopped(why, now));
        }
        let State::Down(down) = &mut *state else {
            return Err(self.down("Holdpoint closed its connection as it shut down".into()));
        };
        match down.attempt(now) {
            Attempt::Now => {}
            Attempt::Later(wait) => {
                return Err(self.down(format!(
                    "{}; it is started again in {}",
                    down.why,
                    humantime::format_duration(Duration::from_secs(wait.as_secs().max(1)))
                )));
            }
            Attempt::GaveUp => {
                return Err(self.down(format!(
                    "{}; starting it failed {} times in a row, and Holdpoint stopped trying \
                     (restart Holdpoint to try again)",
                    down.why, down.failures
                )));
            }
        }
        match start(&self.config).await {
            Ok((link, tools)) => {
                let names = |t: &[Tool]| t.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
                if down.is_first() {
                    tracing::info!(server = %self.name, "MCP server {:?} started, offering {:?}", self.name, names(&tools));
                } else {
                    let again = if down.bound().is_some() {
                        "again"
                    } else {
                        "at last"
                    };
                    tracing::warn!(server = %self.name, "MCP server {:?} started {again}, offering {:?}", self.name, names(&tools));
                }
                self.offer(tools, &link.tap);
                let link = Arc::new(link);
                self.follow_tool_changes(&link);
                *state = State::Up(link.clone());
                Ok(link)
            }
            Err(why) => {
                let first = down.is_first();
                down.failed(why, Instant::now());
                let message = match down.attempt(Instant::now()) {
                    _ if first => down.why.clone(),
                    Attempt::GaveUp => format!(
                        "{}; starting it failed {} times in a row, and Holdpoint stopped trying",
                        down.why, down.failures
                    ),
                    _ => match down.bound() {
                        Some(bound) => {
                            format!("{} (attempt {} of {bound})", down.why, down.failures)
                        }
                        None => format!("{} (attempt {})", down.why, down.failures),
                    },
                };
                let again = if first { "" } else { " again" };
                tracing::warn!(server = %self.name, "MCP server {:?} could not be started{again}: {message}", self.name);
                Err(UpstreamError::Start {
                    server: self.name.clone(),
                    message,
                })
            }
        }
    }

    fn down(&self, message: String) -> UpstreamError {
        UpstreamError::Down {
            server: self.name.clone(),
            message,
        }
    }
}

/// Calls a tool as rmcp's `call_tool` does, passing the server's progress notifications for
/// the call to `sink` while it runs: rmcp gives each request a progress token of its own,
/// which is followed once the request is sent. A call dropped before its answer is canceled
/// at the server, as `call_tool`'s is.
async fn call_following(
    link: &Link,
    params: CallToolRequestParams,
    sink: ProgressSink,
) -> Result<CallToolResult, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = link
        .peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    let _following: Following = link.listener.follow(handle.progress_token.clone(), sink);
    let mut abandoned = Abandoned {
        peer: link.peer.clone(),
        id: Some(handle.id.clone()),
    };
    let answered = handle.await_response().await;
    abandoned.id = None;
    match answered? {
        ServerResult::CallToolResult(result) => Ok(result),
        ServerResult::EmptyResult(_) => Ok(CallToolResult::success(Vec::new())),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// A request sent and not answered yet: canceled at the server when dropped so.
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        tokio::spawn(async move {
            let cancel = CancelledNotificationParam::new(
                Some(id),
                Some("request abandoned by the caller".into()),
            );
            let _ = peer.notify_cancelled(cancel).await;
        });
    }
}

/// Starts one server and lists its tools, within [`START_TIMEOUT`].
async fn start(config: &UpstreamConfig) -> Result<(Link, Vec<Tool>), String> {
    match tokio::time::timeout(START_TIMEOUT, link::open(config)).await {
        Ok(started) => started,
        Err(_) => Err(format!(
            "it did not answer within {}s",
            START_TIMEOUT.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rmcp::model::JsonObject;

    use super::*;

    fn upstream(config: UpstreamConfig) -> Upstream {
        Upstream {
            name: "up".into(),
            call_timeout: Duration::from_secs(1),
            config,
            state: Mutex::new(State::Closed),
            tools: RwLock::default(),
            changed: Arc::new(watch::Sender::new(0)),
            problems: RwLock::default(),
            first_start: watch::Sender::new(None),
        }
    }

    fn tools(names: &[&str]) -> Vec<Tool> {
        names
            .iter()
            .map(|n| Tool::new(n.to_string(), "a tool", JsonObject::new()))
            .collect()
    }

    fn names(offered: &[OfferedTool]) -> Vec<(&str, &str)> {
        offered
            .iter()
            .map(|t| (t.tool.name.as_ref(), t.upstream_name.as_str()))
            .collect()
    }

    #[test]
    fn a_tool_listed_twice_is_offered_once_and_said_so_naming_server_and_tool() {
        let up = upstream(UpstreamConfig::default());
        let (offered, problems) = up.checked(tools(&["echo", "write", "echo"]));
        assert_eq!(
            names(&offered),
            [("up__echo", "echo"), ("up__write", "write")]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("MCP server \"up\" lists the tool \"echo\" twice"),
            "{problems:?}"
        );
    }

    #[test]
    fn names_an_llm_cannot_take_are_offered_under_safe_names_that_map_back() {
        let long = "x".repeat(150);
        let listed = [
            "read.file",
            "read file",
            "grüßen",
            long.as_str(),
            "plain-one",
        ];
        let up = upstream(UpstreamConfig::default());
        let (offered, problems) = up.checked(tools(&listed));
        assert_eq!(problems, Vec::<String>::new());
        let pattern = |n: &str| {
            (1..=64).contains(&n.len())
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        for (tool, own) in offered.iter().zip(listed) {
            let name = tool.tool.name.as_ref();
            assert!(pattern(name), "{name:?} for {own:?}");
            assert!(name.starts_with("up__"), "{name}");
            assert_eq!(tool.upstream_name, own);
            assert_eq!(split_tool_name(name).unwrap().0, "up");
        }
        assert_eq!(
            offered[4].tool.name, "up__plain-one",
            "a fitting name is kept"
        );
        // Names that differ only where they were made to fit stay apart.
        assert_ne!(offered[0].tool.name, offered[1].tool.name);
        assert!(offered[0].tool.name.starts_with("up__read_file_"));
        // The same name, the same mapping, in every process.
        assert_eq!(tool_name("up", "read.file"), offered[0].tool.name);
    }

    #[test]
    fn names_a_hold_cannot_carry_are_not_offered() {
        let long = "y".repeat(201);
        let up = upstream(UpstreamConfig::default());
        let (offered, problems) = up.checked(tools(&["", "bell\u{7}", &long, "ok"]));
        assert_eq!(names(&offered), [("up__ok", "ok")]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .all(|p| p.contains("MCP server \"up\" lists a tool named"))
        );
    }

    #[test]
    fn require_approval_naming_no_tool_of_the_server_asks_for_every_tool() {
        let config = UpstreamConfig {
            command: Some("x".into()),
            require_approval: vec!["wirte_note".into()],
            ..Default::default()
        };
        let (offered, problems) = upstream(config).checked(tools(&["echo", "write_note"]));
        assert!(offered.iter().all(|t| t.requires_approval), "fails closed");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("require_approval of MCP server \"up\" names [\"wirte_note\"]")
                && problems[0].contains("\"write_note\""),
            "{problems:?}"
        );
        // Spelled right: only that tool asks, and nothing is wrong.
        let config = UpstreamConfig {
            command: Some("x".into()),
            require_approval: vec!["write_note".into()],
            ..Default::default()
        };
        let (offered, problems) = upstream(config).checked(tools(&["echo", "write_note"]));
        assert_eq!(problems, Vec::<String>::new());
        let asks: Vec<bool> = offered.iter().map(|t| t.requires_approval).collect();
        assert_eq!(asks, [false, true]);
    }
}
