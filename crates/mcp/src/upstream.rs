//! The upstream MCP servers: started (stdio) or connected to (streamable HTTP), their tools
//! listed once, and calls forwarded to them.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tokio::process::Command;
use tokio::sync::Mutex;

use crate::config::{McpSettings, Transport, UpstreamConfig, tool_name};

/// How long an upstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A failure to reach or use an upstream, in words for the person or the LLM that reads it.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("MCP server {server:?} could not be started: {message}")]
    Start { server: String, message: String },
    #[error("MCP server {server:?} failed the call: {message}")]
    Call { server: String, message: String },
}

/// One connected upstream server.
struct Upstream {
    name: String,
    /// Calls go through the peer, so they run concurrently.
    peer: Peer<RoleClient>,
    /// Kept to close the connection.
    service: Mutex<RunningService<RoleClient, ()>>,
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
            match tokio::time::timeout(START_TIMEOUT, start(name, config)).await {
                Ok(Ok((service, tools))) => upstreams.add(name, config, service, tools),
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(UpstreamError::Start {
                    server: name.clone(),
                    message: format!("it did not answer within {}s", START_TIMEOUT.as_secs()),
                }),
            }
        }
        (upstreams, errors)
    }

    fn add(
        &mut self,
        name: &str,
        config: &UpstreamConfig,
        service: RunningService<RoleClient, ()>,
        tools: Vec<Tool>,
    ) {
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
            peer: service.peer().clone(),
            service: Mutex::new(service),
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
    /// (content and `isError` kept).
    pub async fn call(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
    ) -> Result<CallToolResult, UpstreamError> {
        let failed = |message: String| UpstreamError::Call {
            server: tool.server.clone(),
            message,
        };
        let upstream = self
            .servers
            .iter()
            .find(|s| s.name == tool.server)
            .ok_or_else(|| failed("it is not connected".into()))?;
        let params =
            CallToolRequestParams::new(tool.upstream_name.clone()).with_arguments(arguments);
        upstream
            .peer
            .call_tool(params)
            .await
            .map_err(|e| failed(e.to_string()))
    }

    /// Ends every connection (stdio servers are asked to exit, then stopped).
    pub async fn close(&self) {
        for upstream in &self.servers {
            let _ = upstream.service.lock().await.close().await;
        }
    }
}

/// Starts one server and lists its tools.
async fn start(
    name: &str,
    config: &UpstreamConfig,
) -> Result<(RunningService<RoleClient, ()>, Vec<Tool>), UpstreamError> {
    let failed = |message: String| UpstreamError::Start {
        server: name.to_owned(),
        message,
    };
    let service = match config.transport() {
        Some(Transport::Stdio { command, args, env }) => {
            let mut cmd = Command::new(command);
            cmd.args(args).envs(env);
            let transport = TokioChildProcess::new(cmd)
                .map_err(|e| failed(format!("cannot run {command:?}: {e}")))?;
            ().serve(transport)
                .await
                .map_err(|e| failed(e.to_string()))?
        }
        Some(Transport::Http { url, headers }) => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let header = HeaderName::try_from(k.as_str())
                    .map_err(|_| failed(format!("{k:?} is not a header name")))?;
                let value = HeaderValue::try_from(v.as_str())
                    .map_err(|_| failed(format!("the value of header {k} is not valid")))?;
                custom.insert(header, value);
            }
            let transport = StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom),
            );
            ().serve(transport)
                .await
                .map_err(|e| failed(e.to_string()))?
        }
        None => return Err(failed("it has neither command nor url".into())),
    };
    let tools = service
        .list_all_tools()
        .await
        .map_err(|e| failed(format!("listing its tools failed: {e}")))?;
    Ok((service, tools))
}
