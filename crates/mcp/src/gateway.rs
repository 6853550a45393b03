//! The gateway: an MCP server whose tools are the upstream servers' tools (`server__tool`) and
//! Holdpoint's own, every call going through Holdpoint's gate first.
//!
//! Allowed → forwarded as asked; denied → an `isError` result that says which rule; asked → a
//! hold, progress notifications while it waits, then the upstream's result for exactly the
//! arguments approved (or the recorded edit), or an `isError` result that says who refused and
//! why, or that the deadline passed. A client that cancels the call, or goes away, withdraws
//! its hold.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use holdpoint_protocol::{ApprovalRequest, HoldRequest, Verdict};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::IntoTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::holds::{Asked, DISCONNECTED, Holds, Progress, Stops, refusal};
use crate::own;
use crate::reach::HoldpointError;
use crate::upstream::{OfferedTool, Upstreams};

/// The newest revision the gateway serves. Holdpoint serves the revisions that negotiate with
/// `initialize` (2024-11-05 to 2025-11-25): the official SDKs of today offer 2025-11-25 and
/// fall back to it from 2026-07-28's `server/discover`.
pub const LATEST_REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// A failure of the gateway itself (not of one call).
#[derive(Debug, thiserror::Error)]
#[error("the MCP gateway failed: {0}")]
pub struct GatewayError(String);

/// The gateway for one world. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    holds: Holds,
    /// Canceled when the client goes away (its input ends, its HTTP session is deleted): its
    /// waiting calls are withdrawn at once.
    disconnected: CancellationToken,
    /// Over HTTP, each call's own: canceled when the response stream of that call closes
    /// before its answer (children of `disconnected`), by the call's JSON-RPC id.
    calls: Mutex<HashMap<String, CancellationToken>>,
    /// Shared with other sessions over HTTP: a session that ends leaves them open.
    upstreams: Arc<Upstreams>,
    /// Holdpoint's own tools and the upstream ones, as listed.
    listed: Vec<Tool>,
}

impl Gateway {
    pub fn new(holds: Holds, upstreams: Arc<Upstreams>) -> Gateway {
        let mut listed = own::tools();
        listed.extend(upstreams.tools().iter().map(|t| t.tool.clone()));
        Gateway {
            inner: Arc::new(Inner {
                holds,
                disconnected: CancellationToken::new(),
                calls: Mutex::default(),
                upstreams,
                listed,
            }),
        }
    }

    /// Serves one client on this process's standard input and output (`holdpoint mcp`) until
    /// it goes away; then closes the upstreams, which were this client's alone.
    pub async fn serve_stdio(self) -> Result<(), GatewayError> {
        let (stdin, stdout) = rmcp::transport::stdio();
        let stdin = WatchEnd {
            inner: stdin,
            ended: self.inner.disconnected.clone(),
        };
        let served = self.clone().serve_on((stdin, stdout)).await;
        self.inner.upstreams.close().await;
        served
    }

    /// Serves one client on `transport` until it goes away; then withdraws the holds its
    /// calls still waited on. The upstreams stay open.
    async fn serve_on<T, E, A>(self, transport: T) -> Result<(), GatewayError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let served = ServiceExt::serve(self.clone(), transport).await;
        let result = match served {
            Ok(service) => service
                .waiting()
                .await
                .map(|_| ())
                .map_err(|e| GatewayError(e.to_string())),
            Err(e) => Err(GatewayError(e.to_string())),
        };
        self.inner.disconnected.cancel();
        self.inner.holds.withdraw_all(DISCONNECTED).await;
        result
    }

    /// The client went away (its HTTP session ended): calls still waiting withdraw their
    /// holds.
    pub(crate) fn disconnect(&self) {
        self.inner.disconnected.cancel();
    }

    /// Watches the call with JSON-RPC id `key` (see [`call_key`]) until [`Gateway::unwatch`]:
    /// canceling the token returned withdraws the call's hold as disconnected.
    pub(crate) fn watch(&self, key: String) -> CancellationToken {
        let token = self.inner.disconnected.child_token();
        if let Ok(mut calls) = self.inner.calls.lock() {
            calls.insert(key, token.clone());
        }
        token
    }

    pub(crate) fn unwatch(&self, key: &str) {
        if let Ok(mut calls) = self.inner.calls.lock() {
            calls.remove(key);
        }
    }

    /// What ends a call's wait as disconnected: its own token when it is watched, else the
    /// client's.
    fn disconnected(&self, context: &RequestContext<RoleServer>) -> CancellationToken {
        let watched = serde_json::to_value(&context.id)
            .ok()
            .and_then(|id| call_key(&id))
            .and_then(|key| self.inner.calls.lock().ok()?.get(&key).cloned());
        watched.unwrap_or_else(|| self.inner.disconnected.clone())
    }

    /// A call of an upstream tool.
    async fn forward(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let name = tool.tool.name.to_string();
        let item = HoldRequest::Approval(ApprovalRequest {
            tool_call_id: None,
            tool: name.clone(),
            arguments: serde_json::Value::Object(arguments.clone()),
            schema: Some(serde_json::Value::Object((*tool.tool.input_schema).clone())),
            annotations: tool.tool.annotations.as_ref().map(|a| {
                holdpoint_protocol::ToolAnnotations {
                    read_only: a.read_only_hint,
                    destructive: a.destructive_hint,
                    idempotent: a.idempotent_hint,
                    open_world: a.open_world_hint,
                }
            }),
            description: None,
            deadline: None,
            always_ask: tool.requires_approval,
            offers: None,
        });
        let not_called = |why: String| refused(format!("{name} was not called: {why}."));
        let arguments = match self.ask(item, context).await {
            Ok(Asked::Allowed) => arguments,
            Ok(Asked::Denied(why) | Asked::Invalid(why)) => return not_called(why),
            Ok(Asked::Withdrawn) => return not_called("the call was canceled".into()),
            Ok(Asked::Decided(hold)) => {
                let Some(outcome) = &hold.outcome else {
                    return not_called("the hold ended without an outcome".into());
                };
                if outcome.verdict != Some(Verdict::Approve) {
                    return not_called(refusal(outcome));
                }
                // Exactly what was approved: the arguments shown, or the recorded edit.
                match &outcome.arguments {
                    Some(serde_json::Value::Object(approved)) => approved.clone(),
                    _ => {
                        return not_called(
                            "the approval does not carry the arguments it approved".into(),
                        );
                    }
                }
            }
            Err(e) => return not_called(format!("Holdpoint could not be asked: {e}")),
        };
        match self.inner.upstreams.call(tool, arguments).await {
            Ok(result) => result,
            Err(e) => refused(e.to_string()),
        }
    }

    async fn ask(
        &self,
        item: HoldRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<Asked, HoldpointError> {
        let progress = context.meta.get_progress_token().map(|token| Progress {
            peer: context.peer.clone(),
            token,
        });
        let stops = Stops {
            canceled: context.ct.clone(),
            disconnected: self.disconnected(context),
        };
        self.inner.holds.ask(item, &stops, progress).await
    }
}

/// A JSON-RPC request id as a key: numbers and strings apart (`1` is not `"1"`).
pub(crate) fn call_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::Number(n) => Some(format!("n:{n}")),
        serde_json::Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

/// The client's input, telling `ended` when it ends (or fails): the SDK notices only after
/// waiting seconds for the calls in flight, and those calls are exactly the ones waiting on
/// holds that must be withdrawn now.
struct WatchEnd<R> {
    inner: R,
    ended: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for WatchEnd<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let (before, room) = (buf.filled().len(), buf.remaining() > 0);
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &polled {
            // Nothing read into room for something: the end of the input.
            Poll::Ready(Ok(())) if room && buf.filled().len() == before => this.ended.cancel(),
            Poll::Ready(Err(_)) => this.ended.cancel(),
            _ => {}
        }
        polled
    }
}

fn refused(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(LATEST_REVISION)
            .with_server_info(Implementation::new("holdpoint", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools are named server__tool after the MCP server that provides them. \
                 Calls go through Holdpoint's policy: some run at once, some are refused, and \
                 some wait for a person to approve them. ask_human and request_approval ask a \
                 person directly.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&LATEST_REVISION))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.listed.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if name == own::ASK_HUMAN || name == own::REQUEST_APPROVAL {
            let result = match own::request(name, arguments) {
                Ok(item) => match self.ask(item, &context).await {
                    Ok(asked) => own::result(asked),
                    Err(e) => refused(format!("Holdpoint could not be asked: {e}")),
                },
                Err(why) => refused(why),
            };
            return Ok(result.into());
        }
        let Some(tool) = self.inner.upstreams.tool(name) else {
            return Err(ErrorData::invalid_params(
                format!("there is no tool {name:?}: tools/list names the tools offered"),
                None,
            ));
        };
        Ok(self.forward(tool, arguments, &context).await.into())
    }
}
