//! The upstream MCP servers: started (stdio) or connected to (streamable HTTP), their tools
//! listed once, and calls forwarded to them.
//!
//! Upstreams fail, and a failure is one call's clear error, never a hang and never the
//! gateway's end: a server that exits (or breaks its connection, or sends a message larger
//! than its `max_message_size`) fails the calls in flight at once, naming it and why, and is
//! started again at the next call; starting it again that fails is retried after a delay that
//! doubles, at most [`restart::MAX_ATTEMPTS`] times in a row; a call that gets no answer
//! within the server's `call_timeout` fails and is canceled at the server. `Upstreams` is
//! shared by every session and agent that calls (behind an `Arc`): calls run concurrently,
//! and a restart is made once, by the first call that needs it.

mod link;
mod restart;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::ServiceError;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::config::{McpSettings, UpstreamConfig, tool_name};
use link::Link;
use restart::{Attempt, Down};

/// How long an upstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);

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
}

/// The connected upstream servers and the tools they offer.
#[derive(Default)]
pub struct Upstreams {
    servers: Vec<Upstream>,
    tools: Vec<OfferedTool>,
    by_name: HashMap<String, usize>,
}

impl Upstreams {
    /// Starts or connects to every configured server and lists its tools. A server that cannot
    /// be reached is left out, with its error among the returned ones: the others are served.
    pub async fn connect(settings: &McpSettings) -> (Upstreams, Vec<UpstreamError>) {
        let mut upstreams = Upstreams::default();
        let mut errors = Vec::new();
        for (name, config) in &settings.servers {
            match start(config).await {
                Ok((link, tools)) => upstreams.add(name, config, link, tools),
                Err(message) => errors.push(UpstreamError::Start {
                    server: name.clone(),
                    message,
                }),
            }
        }
        (upstreams, errors)
    }

    fn add(&mut self, name: &str, config: &UpstreamConfig, link: Link, tools: Vec<Tool>) {
        for mut tool in tools.into_iter().filter(|t| config.offers(&t.name)) {
            let upstream_name = tool.name.to_string();
            let offered = tool_name(name, &upstream_name);
            tool.name = offered.clone().into();
            self.by_name.insert(offered, self.tools.len());
            self.tools.push(OfferedTool {
                server: name.to_owned(),
                requires_approval: config.requires_approval(&upstream_name),
                upstream_name,
                tool,
            });
        }
        self.servers.push(Upstream {
            name: name.to_owned(),
            call_timeout: holdpoint_core::mcp::call_timeout(config),
            config: config.clone(),
            state: Mutex::new(State::Up(Arc::new(link))),
        });
    }

    /// Every tool offered, in configuration order.
    pub fn tools(&self) -> &[OfferedTool] {
        &self.tools
    }

    /// The tool clients call `name` (`server__tool`).
    pub fn tool(&self, name: &str) -> Option<&OfferedTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Calls `tool` on its server with exactly `arguments`; the result as the server gave it
    /// (content and `isError` kept). Fails, naming the server, when it is down, stops while
    /// the call runs, or does not answer within its `call_timeout` (the call is then canceled
    /// at the server).
    pub async fn call(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
    ) -> Result<CallToolResult, UpstreamError> {
        let Some(upstream) = self.servers.iter().find(|s| s.name == tool.server) else {
            return Err(UpstreamError::Call {
                server: tool.server.clone(),
                message: "it is not connected".into(),
            });
        };
        upstream.call(tool, arguments).await
    }

    /// Ends every connection (stdio servers are asked to exit, then stopped).
    pub async fn close(&self) {
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
    async fn call(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
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
        let call = link.peer.call_tool(params);
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

    /// The live connection: the one there is, else a new one if the server may be started
    /// now.
    async fn link(&self) -> Result<Arc<Link>, UpstreamError> {
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
                tracing::warn!(server = %self.name, "MCP server {:?} started again, offering {:?}", self.name, names(&tools));
                let link = Arc::new(link);
                *state = State::Up(link.clone());
                Ok(link)
            }
            Err(why) => {
                down.failed(why, Instant::now());
                let message = match down.attempt(Instant::now()) {
                    Attempt::GaveUp => format!(
                        "{}; starting it failed {} times in a row, and Holdpoint stopped trying",
                        down.why, down.failures
                    ),
                    _ => format!(
                        "{} (attempt {} of {})",
                        down.why,
                        down.failures,
                        restart::MAX_ATTEMPTS
                    ),
                };
                tracing::warn!(server = %self.name, "MCP server {:?} could not be started again: {message}", self.name);
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
