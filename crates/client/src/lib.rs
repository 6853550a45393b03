//! Holdpoint's HTTP API as typed calls: a method per operation, taking and returning the
//! `holdpoint-protocol` types that the server reads and writes, with one error type; and the
//! live event stream. The CLI uses it, and so can any Rust program that talks to a server.

use std::fmt;

use holdpoint_protocol::sse::SseDecoder;
use holdpoint_protocol::{
    ActivePolicy, Agent, AgentChanges, ApplyDefault, AuditReport, BatchId, Chat, ChatChanges,
    CreatedToken, CreatedWebhook, DecideBatchRequest, DecideBatchResult, DecideResult, Decision,
    DeliveriesPage, ErrorBody, ErrorDetail, Event, EventsPage, EventsParams, ExplainRequest,
    Explanation, GateResponse, Grant, GrantId, Health, Hold, HoldDetail, HoldId, HoldsParams,
    MessagesPage, NewAgent, NewChat, NewHolds, NewToken, NewWebhook, NewWorld, Page, PageParams,
    PolicyReloaded, RAISE_LINES, RaiseSynced, ReplayReport, ReplayRequest, SendMessage,
    SessionInfo, SetPolicy, StreamParams, SuggestedRule, TokenId, TokenInfo, Turn, TurnId,
    TurnStarted, UpstreamConfig, WaitParams, WaitResult, Webhook, WebhookId, Withdraw, World,
    WorldChanges, WorldPolicy, WorldPolicyState,
};
use reqwest::{Method, RequestBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Talks to one server with one token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    /// The client a person decides through, sent as `Holdpoint-Via`.
    via: Option<String>,
}

/// The rest of a raise answered before its record was durable ([`Client::raise_written`]).
#[must_use = "a raise answered written is durable only once its last line says so"]
pub struct Syncing(Option<Lines>);

impl Syncing {
    /// Waits for the server to say the raise's record is durable; an error when it says it
    /// could not be made so, or when the answer breaks off first (it may then be either).
    pub async fn wait(self) -> Result<(), ClientError> {
        let Some(mut lines) = self.0 else {
            return Ok(());
        };
        let last = lines.next().await?;
        let synced: RaiseSynced =
            serde_json::from_slice(&last).map_err(|e| ClientError::Protocol(e.to_string()))?;
        match (synced.synced, synced.error) {
            (true, _) => Ok(()),
            (false, error) => {
                let error = error.unwrap_or_else(|| ErrorDetail {
                    code: "internal".into(),
                    message: "the record could not be made durable".into(),
                    details: None,
                });
                Err(ClientError::Api {
                    status: 500,
                    code: error.code,
                    message: error.message,
                    details: error.details.unwrap_or(Value::Null),
                })
            }
        }
    }
}

/// A body of JSON lines, read a line at a time.
struct Lines {
    response: reqwest::Response,
    buffered: Vec<u8>,
    url: String,
}

/// The longest line read: far more than a raise's answer of its most items.
const LINE_MAX: usize = 64 << 20;

impl Lines {
    async fn next(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            if let Some(end) = self.buffered.iter().position(|b| *b == b'\n') {
                let rest = self.buffered.split_off(end + 1);
                let mut line = std::mem::replace(&mut self.buffered, rest);
                line.pop();
                return Ok(line);
            }
            if self.buffered.len() > LINE_MAX {
                return Err(ClientError::Protocol(format!(
                    "a line of the answer is longer than {LINE_MAX} bytes"
                )));
            }
            let broken = |cause: String| ClientError::Unreachable {
                url: self.url.clone(),
                cause,
                connected: true,
            };
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffered.extend_from_slice(&chunk),
                Ok(None) => return Err(broken("the answer ended before its last line".into())),
                Err(e) => return Err(broken(root_cause(&e))),
            }
        }
    }
}

/// Why a request failed.
#[derive(Debug)]
pub enum ClientError {
    /// The server could not be reached, or the connection broke before its answer.
    /// `connected`: a connection was made, so the request may have arrived and been acted on
    /// (retry it only where repeating it is safe, as with an idempotency key).
    Unreachable {
        url: String,
        cause: String,
        connected: bool,
    },
    /// The server refused the request; `code` is the API's error code.
    Api {
        status: u16,
        code: String,
        message: String,
        details: Value,
    },
    /// The server answered something this CLI does not understand.
    Protocol(String),
}

impl ClientError {
    /// The hold with its recorded decision, when a decision lost to an earlier one.
    pub fn already_decided(&self) -> Option<Hold> {
        match self {
            ClientError::Api { code, details, .. } if code == "already_decided" => {
                serde_json::from_value(details.get("hold")?.clone()).ok()
            }
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Unreachable { url, cause, .. } => write!(
                f,
                "cannot reach the Holdpoint server at {url}: {cause} (start one with `holdpoint serve`, or name it with --server URL or HOLDPOINT_SERVER)"
            ),
            ClientError::Api {
                status: 401,
                message,
                ..
            } => write!(
                f,
                "{message} (set HOLDPOINT_TOKEN to a token of this server, or run on the machine whose data directory holds the admin token)"
            ),
            ClientError::Api { message, .. } => f.write_str(message),
            ClientError::Protocol(m) => write!(f, "unexpected answer from the server: {m}"),
        }
    }
}

/// The innermost cause (`Connection refused`), which says what went wrong without the layers
/// of "error sending request" around it.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// A refusal: the API's error body, or what came instead of one.
fn api_error(status: reqwest::StatusCode, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(body) => ClientError::Api {
            status: status.as_u16(),
            code: body.error.code,
            message: body.error.message,
            details: body.error.details.unwrap_or(Value::Null),
        },
        Err(_) => {
            let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
            ClientError::Protocol(format!("{status}: {text}"))
        }
    }
}

/// A path segment, percent-encoded (world names may hold spaces and slashes).
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where the API is on a server.
pub const API_ROOT: &str = "/api/v1";
/// The API's OpenAPI document.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The API's paths: the one place that spells them.
mod path {
    use super::seg;

    pub const HEALTHZ: &str = "/healthz";
    pub const SESSION: &str = "/api/v1/session";
    pub const TOKENS: &str = "/api/v1/tokens";
    pub const WORLDS: &str = "/api/v1/worlds";
    pub const HOLDS: &str = "/api/v1/holds";
    pub const POLICY: &str = "/api/v1/policy";
    pub const EXPLAIN: &str = "/api/v1/policy/explain";
    pub const POLICY_RELOAD: &str = "/api/v1/policy/reload";
    pub const AUDIT_EVENTS: &str = "/api/v1/audit/events";
    pub const AUDIT_VERIFY: &str = "/api/v1/audit/verify";
    pub const EVENTS: &str = "/api/v1/events";

    pub fn token(id: &str) -> String {
        format!("{TOKENS}/{}", seg(id))
    }

    pub fn world(world: &str) -> String {
        format!("{WORLDS}/{}", seg(world))
    }

    /// `…/worlds/WORLD/KIND`, or one of them: `…/KIND/ID`.
    pub fn in_world(world: &str, kind: &str, id: Option<&str>) -> String {
        match id {
            Some(id) => format!("{}/{kind}/{}", self::world(world), seg(id)),
            None => format!("{}/{kind}", self::world(world)),
        }
    }

    /// `/api/v1/holds/ID`, or what is under it: `…/ID/ACTION`.
    pub fn hold(id: &str, action: Option<&str>) -> String {
        match action {
            Some(action) => format!("{HOLDS}/{}/{action}", seg(id)),
            None => format!("{HOLDS}/{}", seg(id)),
        }
    }

    pub fn batch_decision(batch: &str) -> String {
        format!("/api/v1/batches/{}/decision", seg(batch))
    }

    pub fn grant(id: &str) -> String {
        format!("/api/v1/grants/{}", seg(id))
    }

    pub fn webhook(id: &str, deliveries: bool) -> String {
        let base = format!("/api/v1/webhooks/{}", seg(id));
        if deliveries {
            format!("{base}/deliveries")
        } else {
            base
        }
    }
}

impl Client {
    /// `base` is like `http://127.0.0.1:7717`.
    pub fn new(base: &str, token: String) -> Result<Client, ClientError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
            via: None,
        })
    }

    /// This client, naming `via` as the client its person decides through: the server records
    /// it with each decision (header `Holdpoint-Via`; 1 to 200 characters, no control
    /// characters).
    pub fn with_via(self, via: impl Into<String>) -> Client {
        Client {
            via: Some(via.into()),
            ..self
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        match &self.via {
            Some(via) => request.header("holdpoint-via", via.as_str()),
            None => request,
        }
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ClientError> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        self.answer(response).await
    }

    /// A response's body as `T`, or the error it says.
    async fn answer<T: DeserializeOwned>(
        &self,
        response: reqwest::Response,
    ) -> Result<T, ClientError> {
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(api_error(status, &bytes));
        }
        let bytes = if bytes.is_empty() {
            &b"null"[..]
        } else {
            &bytes
        };
        serde_json::from_slice(bytes).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        ClientError::Unreachable {
            url: self.base.clone(),
            cause: root_cause(e),
            connected: !e.is_connect(),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path)).await
    }

    /// A GET with a query string made of `params`.
    async fn get_with<T: DeserializeOwned>(
        &self,
        path: &str,
        params: &impl Serialize,
    ) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, &with_query(path, params)?))
            .await
    }

    /// A request with a JSON body, recorded under `key` when one is given, so that sending it
    /// again (after a lost answer) does not do it twice.
    async fn with_body<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
        key: Option<&str>,
    ) -> Result<T, ClientError> {
        let mut request = self.request(method, path).json(body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        self.send(request).await
    }

    async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.send(self.request(Method::DELETE, path)).await
    }

    // Operations.

    /// Whether the server is up: its liveness probe, which needs no token.
    pub async fn health(&self) -> Result<Health, ClientError> {
        self.get(path::HEALTHZ).await
    }

    // Access.

    /// Who this client is.
    pub async fn session(&self) -> Result<SessionInfo, ClientError> {
        self.get(path::SESSION).await
    }

    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, ClientError> {
        self.get(path::TOKENS).await
    }

    pub async fn create_token(&self, new: &NewToken) -> Result<CreatedToken, ClientError> {
        self.with_body(Method::POST, path::TOKENS, new, None).await
    }

    pub async fn revoke_token(&self, id: TokenId) -> Result<(), ClientError> {
        self.delete(&path::token(&id.to_string())).await
    }

    // Worlds, agents, chats; `world`, `agent` are ids or names.

    pub async fn worlds(&self) -> Result<Vec<World>, ClientError> {
        self.get(path::WORLDS).await
    }

    pub async fn world(&self, world: &str) -> Result<World, ClientError> {
        self.get(&path::world(world)).await
    }

    pub async fn create_world(&self, new: &NewWorld) -> Result<World, ClientError> {
        self.with_body(Method::POST, path::WORLDS, new, None).await
    }

    pub async fn update_world(
        &self,
        world: &str,
        changes: &WorldChanges,
    ) -> Result<World, ClientError> {
        self.with_body(Method::PATCH, &path::world(world), changes, None)
            .await
    }

    pub async fn delete_world(&self, world: &str) -> Result<(), ClientError> {
        self.delete(&path::world(world)).await
    }

    /// The world's own MCP servers with their secrets, for a gateway that starts them.
    pub async fn world_mcp_servers(
        &self,
        world: &str,
    ) -> Result<std::collections::BTreeMap<String, UpstreamConfig>, ClientError> {
        self.get(&path::in_world(world, "mcp-servers", None)).await
    }

    pub async fn agents(&self, world: &str) -> Result<Vec<Agent>, ClientError> {
        self.get(&path::in_world(world, "agents", None)).await
    }

    pub async fn agent(&self, world: &str, agent: &str) -> Result<Agent, ClientError> {
        self.get(&path::in_world(world, "agents", Some(agent)))
            .await
    }

    pub async fn create_agent(&self, world: &str, new: &NewAgent) -> Result<Agent, ClientError> {
        let path = path::in_world(world, "agents", None);
        self.with_body(Method::POST, &path, new, None).await
    }

    pub async fn update_agent(
        &self,
        world: &str,
        agent: &str,
        changes: &AgentChanges,
    ) -> Result<Agent, ClientError> {
        let path = path::in_world(world, "agents", Some(agent));
        self.with_body(Method::PATCH, &path, changes, None).await
    }

    pub async fn delete_agent(&self, world: &str, agent: &str) -> Result<(), ClientError> {
        self.delete(&path::in_world(world, "agents", Some(agent)))
            .await
    }

    pub async fn chats(&self, world: &str) -> Result<Vec<Chat>, ClientError> {
        self.get(&path::in_world(world, "chats", None)).await
    }

    pub async fn chat(&self, world: &str, chat: &str) -> Result<Chat, ClientError> {
        self.get(&path::in_world(world, "chats", Some(chat))).await
    }

    pub async fn create_chat(&self, world: &str, new: &NewChat) -> Result<Chat, ClientError> {
        let path = path::in_world(world, "chats", None);
        self.with_body(Method::POST, &path, new, None).await
    }

    pub async fn update_chat(
        &self,
        world: &str,
        chat: &str,
        changes: &ChatChanges,
    ) -> Result<Chat, ClientError> {
        let path = path::in_world(world, "chats", Some(chat));
        self.with_body(Method::PATCH, &path, changes, None).await
    }

    pub async fn delete_chat(&self, world: &str, chat: &str) -> Result<(), ClientError> {
        self.delete(&path::in_world(world, "chats", Some(chat)))
            .await
    }

    /// A page of a chat's messages, oldest first.
    pub async fn messages(
        &self,
        world: &str,
        chat: &str,
        page: &PageParams,
    ) -> Result<MessagesPage, ClientError> {
        let path = format!("{}/messages", path::in_world(world, "chats", Some(chat)));
        self.get_with(&path, page).await
    }

    /// Sends a message: it starts a turn.
    pub async fn send_message(
        &self,
        world: &str,
        chat: &str,
        message: &SendMessage,
    ) -> Result<TurnStarted, ClientError> {
        let path = format!("{}/messages", path::in_world(world, "chats", Some(chat)));
        self.with_body(Method::POST, &path, message, None).await
    }

    pub async fn turn(&self, world: &str, turn: TurnId) -> Result<Turn, ClientError> {
        self.get(&path::in_world(world, "turns", Some(&turn.to_string())))
            .await
    }

    pub async fn cancel_turn(&self, world: &str, turn: TurnId) -> Result<Turn, ClientError> {
        let path = format!(
            "{}/cancel",
            path::in_world(world, "turns", Some(&turn.to_string()))
        );
        self.with_body(Method::POST, &path, &serde_json::Map::new(), None)
            .await
    }

    // Holds. A hold is named by its id as text, so that what a person typed reaches the
    // server as it was (which answers 404 for what is not a hold's id).

    /// Raises holds in a world, as an agent.
    pub async fn raise(
        &self,
        world: &str,
        new: &NewHolds,
        key: Option<&str>,
    ) -> Result<GateResponse, ClientError> {
        let path = path::in_world(world, "holds", None);
        self.with_body(Method::POST, &path, new, key).await
    }

    /// Like [`Client::raise`], but answered as soon as the record of calls allowed at once is
    /// written where a crash of the server's process cannot lose it, before it is durable
    /// ([`RAISE_LINES`]): the [`Syncing`] returned reads the rest of the answer, which comes
    /// once it is. A server that answers in one piece owes nothing.
    pub async fn raise_written(
        &self,
        world: &str,
        new: &NewHolds,
        key: Option<&str>,
    ) -> Result<(GateResponse, Syncing), ClientError> {
        let path = path::in_world(world, "holds", None);
        let mut request = self
            .request(Method::POST, &path)
            .json(new)
            .header(reqwest::header::ACCEPT, RAISE_LINES);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let in_lines = response.status().is_success()
            && response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|t| t.to_str().ok())
                .is_some_and(|t| t.starts_with(RAISE_LINES));
        if !in_lines {
            let answer = self.answer(response).await?;
            return Ok((answer, Syncing(None)));
        }
        let mut lines = Lines {
            response,
            buffered: Vec::new(),
            url: self.base.clone(),
        };
        let first = lines.next().await?;
        let answer =
            serde_json::from_slice(&first).map_err(|e| ClientError::Protocol(e.to_string()))?;
        Ok((answer, Syncing(Some(lines))))
    }

    /// One page of holds; its `next` is the `cursor` of the page after it.
    pub async fn holds(&self, params: &HoldsParams) -> Result<Page<Hold>, ClientError> {
        self.get_with(path::HOLDS, params).await
    }

    /// Every hold that `params` selects, read page after page (of its `limit`) to the end.
    pub async fn all_holds(&self, params: &HoldsParams) -> Result<Vec<Hold>, ClientError> {
        let mut params = params.clone();
        let mut all = Vec::new();
        loop {
            let page = self.holds(&params).await?;
            all.extend(page.items);
            match page.next {
                Some(next) => params.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// One hold with every event about it.
    pub async fn hold(&self, id: &str) -> Result<HoldDetail, ClientError> {
        self.get(&path::hold(id, None)).await
    }

    pub async fn decide(
        &self,
        id: &str,
        decision: &Decision,
        key: Option<&str>,
    ) -> Result<DecideResult, ClientError> {
        let path = path::hold(id, Some("decision"));
        self.with_body(Method::POST, &path, decision, key).await
    }

    /// Applies the fail-closed default (for a client with no one to ask).
    pub async fn apply_default(
        &self,
        id: HoldId,
        body: &ApplyDefault,
        key: Option<&str>,
    ) -> Result<DecideResult, ClientError> {
        let path = path::hold(&id.to_string(), Some("default"));
        self.with_body(Method::POST, &path, body, key).await
    }

    /// "Decide all" of a batch, bound to the approvals seen.
    pub async fn decide_batch(
        &self,
        batch: BatchId,
        request: &DecideBatchRequest,
        key: Option<&str>,
    ) -> Result<DecideBatchResult, ClientError> {
        let path = path::batch_decision(&batch.to_string());
        self.with_body(Method::POST, &path, request, key).await
    }

    /// Waits (long polling) until the hold is decided or the wait's timeout passes.
    pub async fn wait(&self, id: HoldId, params: &WaitParams) -> Result<WaitResult, ClientError> {
        self.get_with(&path::hold(&id.to_string(), Some("wait")), params)
            .await
    }

    pub async fn withdraw(&self, id: HoldId, body: &Withdraw) -> Result<Hold, ClientError> {
        let path = path::hold(&id.to_string(), Some("withdraw"));
        self.with_body(Method::POST, &path, body, None).await
    }

    // Grants and policy.

    pub async fn grants(&self, world: &str) -> Result<Vec<Grant>, ClientError> {
        self.get(&path::in_world(world, "grants", None)).await
    }

    pub async fn revoke_grant(&self, id: GrantId) -> Result<Grant, ClientError> {
        self.send(self.request(Method::DELETE, &path::grant(&id.to_string())))
            .await
    }

    /// The policy in force, its rules as data and its file's text (people only).
    pub async fn policy(&self) -> Result<ActivePolicy, ClientError> {
        self.get(path::POLICY).await
    }

    /// A world's own policy and the base it lies on (people only).
    pub async fn world_policy(&self, world: &str) -> Result<WorldPolicyState, ClientError> {
        self.get(&path::in_world(world, "policy", None)).await
    }

    /// Gives a world a new version of its policy (admins); an invalid text is refused (422,
    /// `invalid_policy`, every problem in `details.problems`) and changes nothing.
    pub async fn set_world_policy(
        &self,
        world: &str,
        body: &SetPolicy,
    ) -> Result<WorldPolicy, ClientError> {
        let path = path::in_world(world, "policy", None);
        self.with_body(Method::PUT, &path, body, None).await
    }

    /// Every version of a world's policy, oldest first (people only).
    pub async fn world_policy_history(&self, world: &str) -> Result<Vec<WorldPolicy>, ClientError> {
        self.get(&path::in_world(world, "policy", Some("history")))
            .await
    }

    /// The narrowest rule that would have decided a hold's call as it was decided (people).
    pub async fn suggested_rule(&self, id: HoldId) -> Result<SuggestedRule, ClientError> {
        self.get(&path::hold(&id.to_string(), Some("suggested-rule")))
            .await
    }

    /// What a candidate policy would have decided for a world's recorded calls (people).
    pub async fn replay_policy(
        &self,
        world: &str,
        body: &ReplayRequest,
    ) -> Result<ReplayReport, ClientError> {
        let path = path::in_world(world, "policy", Some("replay"));
        self.with_body(Method::POST, &path, body, None).await
    }

    /// Reads the server's policy file again (admins).
    pub async fn reload_policy(&self) -> Result<PolicyReloaded, ClientError> {
        self.send(self.request(Method::POST, path::POLICY_RELOAD))
            .await
    }

    pub async fn explain(&self, request: &ExplainRequest) -> Result<Explanation, ClientError> {
        self.with_body(Method::POST, path::EXPLAIN, request, None)
            .await
    }

    // Webhooks.

    pub async fn webhooks(&self, world: &str) -> Result<Vec<Webhook>, ClientError> {
        self.get(&path::in_world(world, "webhooks", None)).await
    }

    pub async fn create_webhook(
        &self,
        world: &str,
        new: &NewWebhook,
    ) -> Result<CreatedWebhook, ClientError> {
        let path = path::in_world(world, "webhooks", None);
        self.with_body(Method::POST, &path, new, None).await
    }

    pub async fn delete_webhook(&self, id: WebhookId) -> Result<(), ClientError> {
        self.delete(&path::webhook(&id.to_string(), false)).await
    }

    pub async fn deliveries(
        &self,
        id: WebhookId,
        page: &PageParams,
    ) -> Result<DeliveriesPage, ClientError> {
        self.get_with(&path::webhook(&id.to_string(), true), page)
            .await
    }

    // The audit log.

    pub async fn audit_events(&self, params: &EventsParams) -> Result<EventsPage, ClientError> {
        self.get_with(path::AUDIT_EVENTS, params).await
    }

    pub async fn audit_verify(&self) -> Result<AuditReport, ClientError> {
        self.get(path::AUDIT_VERIFY).await
    }

    /// Opens the live stream; without `after` it starts with what is committed from now on.
    pub async fn events(&self, params: &StreamParams) -> Result<EventStream, ClientError> {
        let response = self
            .request(Method::GET, &with_query(path::EVENTS, params)?)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        if !response.status().is_success() {
            let status = response.status();
            let bytes = response.bytes().await.map_err(|e| self.unreachable(&e))?;
            return Err(api_error(status, &bytes));
        }
        Ok(EventStream {
            response,
            frames: SseDecoder::default(),
            url: self.base.clone(),
        })
    }
}

/// `path` with the query string of `params` (nothing when they are all unset).
fn with_query(path: &str, params: &impl Serialize) -> Result<String, ClientError> {
    let query = serde_urlencoded::to_string(params)
        .map_err(|e| ClientError::Protocol(format!("a query string: {e}")))?;
    Ok(if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    })
}

/// The live stream of committed events.
pub struct EventStream {
    response: reqwest::Response,
    frames: SseDecoder,
    url: String,
}

impl EventStream {
    /// The next event; `None` when the server ends the stream (it is stopping). Cancel-safe:
    /// a chunk is only taken from the connection when it is stored.
    pub async fn next(&mut self) -> Result<Option<Event>, ClientError> {
        loop {
            if let Some(frame) = self.frames.next_frame() {
                return serde_json::from_str(&frame.data)
                    .map(Some)
                    .map_err(|e| ClientError::Protocol(format!("an event: {e}")));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.frames.push(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(ClientError::Unreachable {
                        url: self.url.clone(),
                        cause: format!("the live stream broke: {}", root_cause(&e)),
                        connected: true,
                    });
                }
            }
        }
    }
}
