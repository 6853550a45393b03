//! The gateway: an MCP server whose tools are the upstream servers' tools (`server__tool`) and
//! Holdpoint's own, every call going through Holdpoint's gate first.
//!
//! Allowed → forwarded as asked; denied → an `isError` result that says which rule; asked → a
//! hold, progress notifications while it waits, then the upstream's result for exactly the
//! arguments approved (or the recorded edit), or an `isError` result that says who refused and
//! why, or that the deadline passed. A client that cancels the call, or goes away, withdraws
//! its hold. A hold is also put to the client's user when the client can be asked and a
//! person's credential was given (`elicit`); a call sent as a task goes on without its
//! request (`tasks`). An upstream tool whose server requires tasks is listed so, refused
//! without one (-32601), and called at its server as a task (`upstream::task_call`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use holdpoint_core::store::{StoreError, Synced};
use holdpoint_protocol::{ApprovalRequest, HoldRequest, Verdict};
use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, InitializeRequestParams, InitializeResult, JsonObject,
    ListToolsResult, MetaObject, NotificationMetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::transport::IntoTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::elicit::{Approver, Elicitor};
use crate::holds::{Asked, CANCELED, DISCONNECTED, Holds, Progress, STOPPED, Stops, refusal};
use crate::reach::HoldpointError;
use crate::tasks::{self, Task, Tasks};
use crate::upstream::{FIRST_LIST_PATIENCE, OfferedTool, TaskSupport, UpstreamError, Upstreams};
use crate::{own, stdio, wire};

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
    /// The person who answers this session's elicitations, when one was given.
    approver: Option<Approver>,
    /// Canceled when the process serving the gateway shuts down: the holds still waited on
    /// are withdrawn saying so, not as if the client had gone.
    shutdown: CancellationToken,
}

struct Inner {
    holds: Holds,
    /// Canceled when the client goes away (its input ends, its HTTP session is deleted): its
    /// waiting calls are withdrawn at once.
    disconnected: CancellationToken,
    /// Over HTTP, each call's own: canceled when the response stream of that call closes
    /// before its answer (children of `disconnected`), by the call's JSON-RPC id.
    calls: Mutex<HashMap<String, CancellationToken>>,
    /// Canceled when the gateway stops serving: its tasks end, and their holds are withdrawn.
    /// (On stdio that is when its one client goes away, since the process ends then.)
    stopping: CancellationToken,
    /// Shared with other sessions over HTTP: a session that ends leaves them open.
    upstreams: Arc<Upstreams>,
    tasks: Tasks,
    /// `initialize` was answered: a session negotiates once.
    initialized: AtomicBool,
}

/// How one call asks a person: what ends its wait, where its progress goes, whom else it
/// asks, and the task it runs as.
struct Asking {
    stops: Stops,
    progress: Option<Progress>,
    elicitor: Option<Elicitor>,
    task: Option<Arc<Task>>,
}

impl Gateway {
    pub fn new(holds: Holds, upstreams: Arc<Upstreams>) -> Gateway {
        Gateway {
            inner: Arc::new(Inner {
                holds,
                disconnected: CancellationToken::new(),
                calls: Mutex::default(),
                stopping: CancellationToken::new(),
                upstreams,
                tasks: Tasks::default(),
                initialized: AtomicBool::new(false),
            }),
            approver: None,
            shutdown: CancellationToken::new(),
        }
    }

    /// This gateway, told by `shutdown` that the process serving it shuts down.
    pub fn stopped_by(self, shutdown: CancellationToken) -> Gateway {
        Gateway { shutdown, ..self }
    }

    /// This gateway, putting the holds its client's calls raise to the client's user as well
    /// (elicitation, when the client supports it), and deciding what they answer as
    /// `approver`. Without one, no elicitation is sent: the gateway's own credential is an
    /// agent's, and agents never decide holds.
    pub fn with_approver(self, approver: Approver) -> Gateway {
        Gateway {
            approver: Some(approver),
            ..self
        }
    }

    /// Serves one client on this process's standard input and output (`holdpoint mcp`) until
    /// it goes away; then closes the upstreams, which were this client's alone.
    pub async fn serve_stdio(self) -> Result<(), GatewayError> {
        let transport = stdio::relay(self.inner.disconnected.clone());
        let served = self.clone().serve_on(transport).await;
        self.inner.upstreams.close().await;
        served
    }

    /// Serves one client on `transport` until it goes away; then withdraws the holds its
    /// calls and tasks still waited on. The upstreams stay open.
    async fn serve_on<T, E, A>(self, transport: T) -> Result<(), GatewayError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let served = ServiceExt::serve(self.clone(), transport).await;
        let result = match served {
            Ok(service) => {
                // Shutting down ends the service too, as its client leaving would.
                let ends = service.cancellation_token();
                let shutdown = self.shutdown.clone();
                let ending = tokio::spawn(async move {
                    shutdown.cancelled().await;
                    ends.cancel();
                });
                let waited = service.waiting().await;
                ending.abort();
                waited.map(|_| ()).map_err(|e| GatewayError(e.to_string()))
            }
            Err(e) => Err(GatewayError(e.to_string())),
        };
        self.inner.disconnected.cancel();
        self.inner.stopping.cancel();
        let why = if self.shutdown.is_cancelled() {
            STOPPED
        } else {
            DISCONNECTED
        };
        self.inner.holds.withdraw_all(why).await;
        result
    }

    /// Withdraws the holds its calls still wait on, recording `why`.
    pub(crate) async fn withdraw_waiting(&self, why: &str) {
        self.inner.holds.withdraw_all(why).await;
    }

    /// The client went away (its HTTP session ended): calls still waiting withdraw their
    /// holds, and so do its tasks (the gateway serves it no more).
    pub(crate) fn disconnect(&self) {
        self.inner.disconnected.cancel();
        self.inner.stopping.cancel();
    }

    /// Watches the call with JSON-RPC id `key` (see [`call_key`]) until [`Gateway::unwatch`]:
    /// canceling the token returned withdraws the call's hold as disconnected.
    pub(crate) fn watch(&self, key: String) -> CancellationToken {
        let token = self.inner.disconnected.child_token();
        self.inner.calls.lock().insert(key, token.clone());
        token
    }

    pub(crate) fn unwatch(&self, key: &str) {
        self.inner.calls.lock().remove(key);
    }

    /// What ends a call's wait as disconnected: its own token when it is watched, else the
    /// client's.
    fn disconnected(&self, context: &RequestContext<RoleServer>) -> CancellationToken {
        let watched = serde_json::to_value(&context.id)
            .ok()
            .and_then(|id| call_key(&id))
            .and_then(|key| self.inner.calls.lock().get(&key).cloned());
        watched.unwrap_or_else(|| self.inner.disconnected.clone())
    }

    /// How a call made by `context`'s request asks: its progress notifications and
    /// elicitations go to the client, and its cancellation or the client's going away
    /// withdraws its hold.
    fn asking(&self, context: &RequestContext<RoleServer>) -> Asking {
        Asking {
            stops: Stops {
                canceled: context.ct.clone(),
                canceled_why: CANCELED,
                disconnected: self.disconnected(context),
                shutdown: self.shutdown.clone(),
            },
            progress: context.meta.get_progress_token().map(|token| Progress {
                peer: context.peer.clone(),
                token,
                meta: None,
            }),
            elicitor: Elicitor::new(&context.peer, self.approver.as_ref()),
            task: None,
        }
    }

    /// One call of a tool, Holdpoint's own or an upstream's.
    async fn run(
        &self,
        request: CallToolRequestParams,
        asking: Asking,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if name == own::ASK_HUMAN || name == own::REQUEST_APPROVAL {
            return Ok(match own::request(name, arguments) {
                Ok(item) => match self.ask_durable(item, asking).await {
                    Ok(asked) => own::result(asked),
                    Err(e) => refused(format!("Holdpoint could not be asked: {e}")),
                },
                Err(why) => refused(why),
            });
        }
        // A tool of a server still making its first start is waited for.
        let tool = match self.inner.upstreams.tool_once_started(name).await {
            Some(tool) => tool,
            None => match self.offered(name)? {
                Ok(tool) => tool,
                Err(down) => return Ok(refused(format!("{name} was not called: {down}"))),
            },
        };
        if tool.task_support == TaskSupport::Required && asking.task.is_none() {
            return Err(task_required(name));
        }
        Ok(self.forward(&tool, arguments, asking).await)
    }

    /// The upstream tool clients call `name`; or why it cannot be called now, when it names
    /// a server that has not started yet (a result, not a protocol error: the tool may well
    /// exist once it runs).
    fn offered(&self, name: &str) -> Result<Result<OfferedTool, UpstreamError>, ErrorData> {
        let upstreams = &self.inner.upstreams;
        if let Some(tool) = upstreams.tool(name) {
            return Ok(Ok(tool));
        }
        match upstreams.unavailable(name) {
            Some(down) => Ok(Err(down)),
            None => Err(ErrorData::invalid_params(
                format!("there is no tool {name:?}: tools/list names the tools offered"),
                None,
            )),
        }
    }

    /// Tells the client each time the tools offered change (an upstream that was down came
    /// up), until it goes away.
    fn follow_tool_changes(&self, peer: Peer<RoleServer>) {
        let mut changes = self.inner.upstreams.changes();
        let gone = self.inner.disconnected.clone();
        let stopping = self.inner.stopping.clone();
        tokio::spawn(async move {
            changes.mark_unchanged();
            loop {
                tokio::select! {
                    () = gone.cancelled() => return,
                    () = stopping.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() {
                        return;
                    },
                }
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// A call of an upstream tool.
    async fn forward(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
        asking: Asking,
    ) -> CallToolResult {
        let name = tool.tool.name.to_string();
        let progress = asking.progress.as_ref().map(|p| Progress {
            peer: p.peer.clone(),
            token: p.token.clone(),
            meta: p.meta.clone(),
        });
        let item = HoldRequest::Approval(ApprovalRequest {
            tool_call_id: None,
            tool: name.clone(),
            arguments: serde_json::Value::Object(arguments.clone()),
            schema: Some(serde_json::Value::Object((*tool.tool.input_schema).clone())),
            annotations: crate::plain::annotations(&tool.tool),
            description: None,
            deadline: None,
            always_ask: tool.requires_approval,
            offers: None,
            mcp: Some(holdpoint_protocol::McpTool {
                server: tool.server.clone(),
                tool: tool.upstream_name.clone(),
            }),
        });
        let not_called = |why: String| refused(format!("{name} was not called: {why}."));
        // A task's call is given up when the task is canceled, or the gateway stops serving;
        // a plain call's when its request ends, as rmcp has it.
        let given_up = CancellationToken::new();
        let _watching = asking
            .task
            .is_some()
            .then(|| any_of(&asking.stops, &given_up));
        // Who edited the arguments before approving, when a person did.
        let mut edited_by = None;
        // An allowed call is forwarded once its record is written, and its result returned
        // once that record is durable: the fsync runs while the upstream works.
        let mut owed = None;
        let arguments = match self.ask(item, asking).await {
            Ok(Asked::Allowed(synced)) => {
                owed = Some(synced);
                arguments
            }
            Ok(Asked::Denied(why) | Asked::Invalid(why)) => return not_called(why),
            Ok(Asked::Withdrawn) => return not_called("the call was canceled".into()),
            Ok(Asked::Decided(hold)) => {
                let Some(outcome) = &hold.outcome else {
                    return not_called("the hold ended without an outcome".into());
                };
                if outcome.verdict != Some(Verdict::Approve) {
                    return not_called(refusal(outcome));
                }
                if outcome.edited {
                    edited_by = Some(outcome.decided_by.join(", "));
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
        let ran = edited_by.map(|by| (by, arguments.clone()));
        let result = match self
            .call_upstream(tool, arguments, progress, &given_up)
            .await
        {
            Ok(result) => match ran {
                Some((by, arguments)) => told_of_edit(result, &name, &by, arguments),
                None => result,
            },
            Err(e) => refused(e.to_string()),
        };
        match owed.map(Synced::wait) {
            Some(synced) => match synced.await {
                Ok(()) => result,
                Err(e) => refused(unrecorded(&name, &e)),
            },
            None => result,
        }
    }

    /// Like [`Gateway::ask`], for an answer that has no call to make meanwhile: an allowed
    /// item's record is durable when it returns.
    async fn ask_durable(
        &self,
        item: HoldRequest,
        asking: Asking,
    ) -> Result<Asked, HoldpointError> {
        match self.ask(item, asking).await? {
            Asked::Allowed(synced) => {
                synced.wait().await.map_err(|e| {
                    HoldpointError::failed("recording the allowed call", e.to_string())
                })?;
                Ok(Asked::Allowed(Synced::done()))
            }
            asked => Ok(asked),
        }
    }

    /// Calls the upstream, passing its progress notifications on to the client under the
    /// client's own progress token (and the task's `_meta`, for a task's call).
    async fn call_upstream(
        &self,
        tool: &OfferedTool,
        arguments: JsonObject,
        progress: Option<Progress>,
        given_up: &CancellationToken,
    ) -> Result<CallToolResult, UpstreamError> {
        let upstreams = &self.inner.upstreams;
        let Some(to) = progress else {
            return upstreams.call(tool, arguments, None, given_up).await;
        };
        let (sink, mut progressed) = mpsc::unbounded_channel::<ProgressNotificationParam>();
        let passing_on = async {
            // Ends when the call does: it drops the sending side.
            while let Some(mut note) = progressed.recv().await {
                note.progress_token = to.token.clone();
                note.meta = to
                    .meta
                    .clone()
                    .map(|m| NotificationMetaObject(MetaObject(m)));
                let _ = to.peer.notify_progress(note).await;
            }
        };
        tokio::join!(
            upstreams.call(tool, arguments, Some(sink), given_up),
            passing_on
        )
        .0
    }

    /// Raises `item` and waits for its outcome. A hold it raises is shown on the call's task,
    /// and put to the client's user too when it can be asked; whichever channel answers first
    /// decides, and the elicitation is withdrawn once the wait ends.
    async fn ask(&self, item: HoldRequest, asking: Asking) -> Result<Asked, HoldpointError> {
        let Asking {
            stops,
            progress,
            elicitor,
            task,
        } = asking;
        let (held, raised) = oneshot::channel();
        let ended = CancellationToken::new();
        let waiting = async {
            let asked = self
                .inner
                .holds
                .ask(item, &stops, progress, Some(held))
                .await;
            ended.cancel();
            asked
        };
        let following = async {
            let Ok(hold) = raised.await else {
                return;
            };
            if let Some(task) = &task {
                task.waiting_on(&hold);
            }
            if let Some(elicitor) = &elicitor {
                elicitor.run(hold, ended.clone(), task.as_deref()).await;
            }
        };
        tokio::join!(waiting, following).0
    }

    /// A `tools/call` with `task`: the task at once, the call going on without the request.
    /// Its hold waits until a person decides, the task is canceled, or the gateway stops
    /// serving. It is asked like a plain call's otherwise: put to the client's user as an
    /// elicitation when the client can be asked (the first answer on any channel wins), with
    /// progress notifications under the request's progress token, which 2025-11-25 keeps
    /// for the task's whole life.
    fn call_as_task(
        &self,
        params: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let params = params.unwrap_or_default();
        let ttl = params["task"].get("ttl").and_then(Value::as_u64);
        let request: CallToolRequestParams = serde_json::from_value(params)
            .map_err(|e| ErrorData::invalid_params(format!("params: {e}"), None))?;
        let name = request.name.as_ref();
        if name != own::ASK_HUMAN && name != own::REQUEST_APPROVAL {
            // A tool of a server that is down is a task too, which ends with why.
            let _tool_or_why_not = self.offered(name)?;
        }
        let task = self.inner.tasks.create(ttl)?;
        let asking = Asking {
            stops: Stops {
                canceled: task.canceled.clone(),
                canceled_why: tasks::CANCELED,
                disconnected: self.inner.stopping.clone(),
                shutdown: self.shutdown.clone(),
            },
            progress: context.meta.get_progress_token().map(|token| Progress {
                peer: context.peer.clone(),
                token,
                meta: Some(task.related()),
            }),
            elicitor: Elicitor::new(&context.peer, self.approver.as_ref()),
            task: Some(task.clone()),
        };
        let gateway = self.clone();
        let running = task.clone();
        tokio::spawn(async move {
            let result = gateway.run(request, asking).await;
            running.finish(result);
        });
        Ok(json!({ "task": task.describe() }))
    }

    /// The task requests of 2025-11-25 (see `wire`).
    async fn task_request(
        &self,
        method: &str,
        params: Option<Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let tasks = &self.inner.tasks;
        match method {
            wire::CALL_AS_TASK => self.call_as_task(params, context),
            wire::TASKS_GET => Ok(tasks.get(params.as_ref())?.describe()),
            wire::TASKS_RESULT => tasks.get(params.as_ref())?.result().await,
            wire::TASKS_CANCEL => tasks.get(params.as_ref())?.cancel(),
            wire::TASKS_LIST => tasks.list(params.as_ref()),
            other => Err(misfit(other, params)),
        }
    }
}

/// The error for a request that reached the gateway as a method of its own: one of MCP's
/// whose params the SDK could not read (it then passes the request on as unknown), else a
/// method this server does not have.
fn misfit(method: &str, params: Option<Value>) -> ErrorData {
    let takes = match method {
        "tools/call" => {
            let why = serde_json::from_value::<CallToolRequestParams>(params.unwrap_or_default())
                .err()
                .map_or_else(String::new, |e| format!(" ({e})"));
            return ErrorData::invalid_params(
                format!(
                    "params: tools/call takes an object with name (a string) and arguments \
                     (an object){why}"
                ),
                None,
            );
        }
        "tools/list" => "an object with an optional cursor (a string)",
        "initialize" => {
            "an object with protocolVersion (a string), capabilities (an object) and \
             clientInfo (an object with name and version)"
        }
        "ping" => "no params, or an object",
        _ => {
            return ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("{method} is not a method of this server"),
                None,
            );
        }
    };
    ErrorData::invalid_params(format!("params: {method} takes {takes}"), None)
}

/// The error for a plain `tools/call` of a tool that must be called as a task: 2025-11-25's
/// -32601 (Method not found).
fn task_required(name: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "{name} must be called as a task: its server requires task augmentation \
             (execution.taskSupport \"required\"); send tools/call with \"task\" (MCP 2025-11-25)"
        ),
        None,
    )
}

/// Cancels `into` as soon as the wait of `stops` would end (canceled, disconnected, shutdown),
/// until the guard returned is dropped.
fn any_of(stops: &Stops, into: &CancellationToken) -> tokio_util::sync::DropGuard {
    let done = CancellationToken::new();
    let (canceled, disconnected, shutdown) = (
        stops.canceled.clone(),
        stops.disconnected.clone(),
        stops.shutdown.clone(),
    );
    let (into, watching) = (into.clone(), done.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = canceled.cancelled() => into.cancel(),
            () = disconnected.cancelled() => into.cancel(),
            () = shutdown.cancelled() => into.cancel(),
            () = watching.cancelled() => {}
        }
    });
    done.drop_guard()
}

/// The `_meta` key that marks, in the gateway's own `tools/list` answer, a tool that must be
/// called as a task; `wire` turns it into the tool's `execution` on the way to the client.
pub(crate) const TASK_REQUIRED_META: &str = "holdpoint/taskSupport";

/// A JSON-RPC request id as a key: numbers and strings apart (`1` is not `"1"`).
pub(crate) fn call_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::Number(n) => Some(format!("n:{n}")),
        serde_json::Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

fn refused(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
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

    /// The session's one `initialize`: a second is refused, and leaves the revision and the
    /// client's capabilities negotiated by the first as they are.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.inner.initialized.swap(true, Ordering::SeqCst) {
            let revision = context
                .peer
                .peer_info()
                .map(|info| format!(" (revision {})", info.protocol_version))
                .unwrap_or_default();
            return Err(ErrorData::invalid_request(
                format!(
                    "this session is initialized already{revision}: initialize is sent once, \
                     first; open a new session to negotiate again"
                ),
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// Every tool in one page: there is no next page, so no cursor to ask for. Servers still
    /// making their first start are waited for a moment; those slower than that are announced
    /// with `notifications/tools/list_changed` when they are up.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            return Err(ErrorData::invalid_params(
                format!(
                    "cursor: {cursor:?} is not a cursor of this server; tools/list answers with \
                     every tool at once, without nextCursor"
                ),
                None,
            ));
        }
        let upstreams = &self.inner.upstreams;
        upstreams.first_starts_within(FIRST_LIST_PATIENCE).await;
        // A tool that must be called as a task is offered to sessions that have tasks, marked
        // so; the others could not call it.
        let tasks = context
            .peer
            .peer_info()
            .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2025_11_25);
        let mut listed = own::tools();
        for offered in upstreams.tools() {
            let mut tool = offered.tool;
            if offered.task_support == TaskSupport::Required {
                if !tasks {
                    continue;
                }
                tool.meta
                    .get_or_insert_with(|| MetaObject(JsonObject::new()))
                    .0
                    .insert(TASK_REQUIRED_META.into(), json!("required"));
            }
            listed.push(tool);
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.follow_tool_changes(context.peer);
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let asking = self.asking(&context);
        Ok(self.run(request, asking).await?.into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.task_request(&request.method, request.params, &context)
            .await
            .map(CustomResult)
    }
}

/// `result` of a call whose arguments `by` edited before approving, saying so as Holdpoint's
/// own agents hear it: a text note first, and in `_meta` the arguments that ran.
fn told_of_edit(
    mut result: CallToolResult,
    name: &str,
    by: &str,
    arguments: JsonObject,
) -> CallToolResult {
    let shown = serde_json::to_string(&arguments).unwrap_or_default();
    let note = format!(
        "Note: {by} edited the arguments of {name} before approving; it ran with {shown}, not \
         the arguments you sent."
    );
    result.content.insert(0, ContentBlock::text(note));
    let meta = result
        .meta
        .get_or_insert_with(|| MetaObject(JsonObject::new()));
    meta.0.insert(
        EDITED_META.to_owned(),
        serde_json::json!({"by": by, "arguments": arguments}),
    );
    result
}

/// The `_meta` key of a result whose arguments a person edited: `{"by", "arguments"}`.
pub const EDITED_META: &str = "holdpoint/edited";

/// Why an allowed call's result is withheld: the call ran, but its record could not be made
/// durable, and a result is returned only once it is.
fn unrecorded(name: &str, e: &StoreError) -> String {
    format!(
        "{name} was called, but its record in Holdpoint's audit log could not be made durable \
         ({e}), so its result is withheld"
    )
}
