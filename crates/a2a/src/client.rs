//! Calling a remote A2A agent: reading its Agent Card, sending it a message and reading the
//! streamed answer (A2A 1.0's `SendStreamingMessage` with `A2A-Version: 1.0`, or 0.3's
//! `message/stream` for a card of 0.3's shape: a top-level `url` and no
//! `supportedInterfaces`), answering Google ADK's confirmation requests, and cancelling a task.
//!
//! The answer is read as it streams: its text is told to the caller piece by piece as it comes
//! ([`Progress`]), and the whole is summed up in a [`Reply`]: the task and context, the state
//! the task ended or stopped in, its text, and the tool calls it asks its caller to confirm, in
//! whichever of the three shapes it asked (Google ADK's `adk_request_confirmation`, kagent's
//! `tool_approval` interrupt, Holdpoint's own holds), which is the shape the answer goes back
//! in ([`Shape`]). Whatever cannot be read as A2A is a [`ClientError`] that says what came, so
//! a broken agent is a clear error, never a wait.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use holdpoint_protocol::{ApproveScope, Decision};

use crate::jsonrpc::Version;

/// Where an agent's card is, under its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The most bytes one answer (a card, a stream) may have.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// The name of ADK's confirmation request (a function call in a data part).
pub const ADK_CONFIRMATION: &str = "adk_request_confirmation";

/// Why a call of a remote agent did not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("could not reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("{url} broke off its answer: {message}")]
    Broken { url: String, message: String },
    #[error("{url} did not answer within {waited:?}")]
    Timeout { url: String, waited: Duration },
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the Agent Card at {url} cannot be used: {message}")]
    Card { url: String, message: String },
    #[error("{url} sent something that is not an A2A answer: {message}")]
    Garbage { url: String, message: String },
    #[error("the remote agent answered with error {code}: {message}")]
    Remote { code: i64, message: String },
    #[error("a header cannot be sent: {0}")]
    Header(String),
}

/// What Holdpoint needs of an Agent Card.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub name: String,
    pub description: String,
    /// Each skill's name and description.
    pub skills: Vec<(String, String)>,
    /// Where its JSON-RPC endpoint is.
    pub endpoint: String,
    /// Which version of A2A it speaks there.
    pub version: Version,
}

/// The state of a remote task, in either version's spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
    Other(String),
}

impl State {
    fn parse(name: &str) -> State {
        let n = name
            .strip_prefix("TASK_STATE_")
            .unwrap_or(name)
            .to_ascii_lowercase()
            .replace('_', "-");
        match n.as_str() {
            "submitted" => State::Submitted,
            "working" => State::Working,
            "input-required" => State::InputRequired,
            "auth-required" => State::AuthRequired,
            "completed" => State::Completed,
            "failed" => State::Failed,
            "canceled" | "cancelled" => State::Canceled,
            "rejected" => State::Rejected,
            _ => State::Other(name.to_owned()),
        }
    }

    /// The stream ends here: the task is over, or waits for its caller.
    pub fn stops(&self) -> bool {
        !matches!(self, State::Submitted | State::Working | State::Other(_))
    }
}

/// The shape a remote agent asked for a confirmation in, which is the shape its answer takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Google ADK's `adk_request_confirmation` function call, answered by its function
    /// response `{"confirmed": true|false}`.
    Adk,
    /// kagent's `{"interrupt_type": "tool_approval", "action_requests": [...]}`, answered by
    /// `{"decision_type": "approve"}`, `{"decision_type": "reject", "rejection_reason"}`, or
    /// for several calls `batch` with a decision per call.
    Kagent,
    /// Holdpoint's `{"holdpoint": {"holds": [...]}}`, answered by
    /// `{"holdpoint": {"decisions": [{"hold", "decision"}]}}`, an approval bound to the digest
    /// it showed.
    Holdpoint,
}

/// A tool call the remote agent asks its caller to confirm.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmation {
    /// What the answer must name: ADK's confirmation id (`adk-…`), kagent's call id,
    /// Holdpoint's hold id.
    pub id: String,
    /// The remote tool and its arguments.
    pub tool: String,
    pub arguments: Value,
    /// What the remote agent says of it.
    pub hint: Option<String>,
    pub shape: Shape,
    /// Holdpoint's: the digest of the arguments it showed, which an approval is bound to.
    pub digest: Option<String>,
    /// Holdpoint's: not a call but a question for a person, answered with its options.
    pub question: Option<Question>,
}

/// A multiple-choice question a remote Holdpoint asks a person (a question hold).
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    pub text: String,
    /// Each option's id and label.
    pub options: Vec<(String, String)>,
    pub multiple: bool,
}

/// The answer to a confirmation: whether it is given, and why not; for a question, the
/// options chosen (none, and not confirmed: the question is cancelled).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub confirmed: bool,
    pub reason: Option<String>,
    pub options: Vec<String>,
}

/// What a stream tells as it comes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Progress<'a> {
    /// The task's id, as soon as it is known (to cancel it meanwhile).
    Task(&'a str),
    /// A piece of the remote agent's text: an artifact's, a working status message's, or the
    /// question of a task that waits for words.
    Text(&'a str),
}

/// A message's answer, as far as it went.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// The last state the task was in (`Completed` for an answer that is a bare message).
    pub state: State,
    /// The answer's text: its artifacts', else the last status message's.
    pub text: String,
    /// What the task asks to confirm, when it is `InputRequired`.
    pub confirmations: Vec<Confirmation>,
}

/// What to send: text, or answers to confirmations, in a context and task.
#[derive(Clone, Debug, Default)]
pub struct Outgoing {
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub text: Option<String>,
    /// Answers to confirmations, each in the shape it was asked in.
    pub confirmations: Vec<(Confirmation, Answer)>,
}

/// One remote agent, reached with its headers and its timeout.
#[derive(Clone, Debug)]
pub struct Remote {
    pub headers: BTreeMap<String, String>,
    pub timeout: Duration,
}

/// A client for remote A2A agents. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Client {
    http: reqwest::Client,
}

/// The card's URL for `url`, a card's URL or an agent's base URL.
pub fn card_url(url: &str) -> String {
    if url.ends_with(".json") {
        url.to_owned()
    } else {
        format!("{}{CARD_PATH}", url.trim_end_matches('/'))
    }
}

impl Client {
    pub fn new() -> Client {
        Client::default()
    }

    fn headers(remote: &Remote, version: Version) -> Result<HeaderMap, ClientError> {
        let mut map = HeaderMap::new();
        for (name, value) in &remote.headers {
            let name = HeaderName::try_from(name.as_str())
                .map_err(|e| ClientError::Header(format!("{name}: {e}")))?;
            let value = HeaderValue::try_from(value.as_str())
                .map_err(|e| ClientError::Header(format!("{name}: {e}")))?;
            map.insert(name, value);
        }
        if version == Version::V1 {
            map.insert("a2a-version", HeaderValue::from_static("1.0"));
        }
        Ok(map)
    }

    /// Reads the Agent Card at `url` (a card's URL or the agent's base URL).
    pub async fn card(&self, url: &str, remote: &Remote) -> Result<Card, ClientError> {
        let url = card_url(url);
        let request = self
            .http
            .get(&url)
            .headers(Self::headers(remote, Version::V1)?)
            .header("accept", "application/json");
        let body = within(&url, remote.timeout, async {
            let response = send(&url, request).await?;
            read_all(&url, response).await
        })
        .await?;
        let card: Value = serde_json::from_slice(&body).map_err(|e| ClientError::Card {
            url: url.clone(),
            message: format!("it is not JSON ({e})"),
        })?;
        parse_card(&url, &card)
    }

    /// Sends a message and reads the answer until the task ends or waits for input;
    /// `on_progress` is told the task's id and the text as they come.
    pub async fn send(
        &self,
        card: &Card,
        remote: &Remote,
        message: &Outgoing,
        on_progress: &(dyn Fn(Progress<'_>) + Send + Sync),
    ) -> Result<Reply, ClientError> {
        let url = &card.endpoint;
        let (method, message) = match card.version {
            Version::V1 => ("SendStreamingMessage", message_v1(message)),
            Version::V03 => ("message/stream", message_v03(message)),
        };
        let body = json!({
            "jsonrpc": "2.0",
            "id": uuid::Uuid::now_v7().to_string(),
            "method": method,
            "params": {"message": message},
        });
        let request = self
            .http
            .post(url)
            .headers(Self::headers(remote, card.version)?)
            .header("accept", "text/event-stream")
            .json(&body);
        within(url, remote.timeout, async {
            let response = send(url, request).await?;
            read_stream(url, response, on_progress).await
        })
        .await
    }

    /// Asks the remote agent to cancel a task.
    pub async fn cancel(
        &self,
        card: &Card,
        remote: &Remote,
        task_id: &str,
    ) -> Result<(), ClientError> {
        let url = &card.endpoint;
        let method = match card.version {
            Version::V1 => "CancelTask",
            Version::V03 => "tasks/cancel",
        };
        let body = json!({
            "jsonrpc": "2.0",
            "id": uuid::Uuid::now_v7().to_string(),
            "method": method,
            "params": {"id": task_id},
        });
        let request = self
            .http
            .post(url)
            .headers(Self::headers(remote, card.version)?)
            .json(&body);
        let answer = within(url, remote.timeout, async {
            let response = send(url, request).await?;
            read_all(url, response).await
        })
        .await?;
        let answer: Value = serde_json::from_slice(&answer).map_err(|e| ClientError::Garbage {
            url: url.clone(),
            message: e.to_string(),
        })?;
        match rpc_error(&answer) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

async fn within<T>(
    url: &str,
    timeout: Duration,
    work: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ClientError::Timeout {
            url: url.to_owned(),
            waited: timeout,
        })?
}

async fn send(
    url: &str,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ClientError> {
    let response = request.send().await.map_err(|e| ClientError::Unreachable {
        url: url.to_owned(),
        message: error_chain(&e),
    })?;
    let status = response.status();
    if !status.is_success() {
        let body = read_all(url, response).await.unwrap_or_default();
        let body: String = String::from_utf8_lossy(&body).chars().take(300).collect();
        return Err(ClientError::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body,
        });
    }
    Ok(response)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn read_all(url: &str, response: reqwest::Response) -> Result<Vec<u8>, ClientError> {
    let mut body = response.bytes_stream();
    let mut all = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ClientError::Unreachable {
            url: url.to_owned(),
            message: error_chain(&e),
        })?;
        all.extend_from_slice(&chunk);
        if all.len() > MAX_ANSWER {
            return Err(ClientError::Garbage {
                url: url.to_owned(),
                message: format!("the answer is longer than {MAX_ANSWER} bytes"),
            });
        }
    }
    Ok(all)
}

fn parse_card(url: &str, card: &Value) -> Result<Card, ClientError> {
    let bad = |message: String| ClientError::Card {
        url: url.to_owned(),
        message,
    };
    if !card.is_object() {
        return Err(bad("it is not a JSON object".into()));
    }
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let skills = card
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            let name = match text(s, "name") {
                n if n.is_empty() => text(s, "id"),
                n => n,
            };
            (name, text(s, "description"))
        })
        .collect();
    let base = reqwest::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let absolute = |endpoint: &str| {
        base.join(endpoint)
            .map(String::from)
            .map_err(|e| bad(format!("its url {endpoint:?} is not a URL ({e})")))
    };
    let (endpoint, version) = match card.get("supportedInterfaces").and_then(Value::as_array) {
        Some(interfaces) => {
            let jsonrpc = interfaces.iter().find(|i| {
                text(i, "protocolBinding").eq_ignore_ascii_case("JSONRPC")
                    && !text(i, "url").is_empty()
            });
            let Some(interface) = jsonrpc else {
                let bindings: Vec<String> = interfaces
                    .iter()
                    .map(|i| text(i, "protocolBinding"))
                    .collect();
                return Err(bad(format!(
                    "it offers no JSON-RPC interface (only {}), and Holdpoint speaks JSON-RPC",
                    bindings.join(", ")
                )));
            };
            let version = if text(interface, "protocolVersion").starts_with("0.") {
                Version::V03
            } else {
                Version::V1
            };
            (absolute(&text(interface, "url"))?, version)
        }
        None => {
            let endpoint = text(card, "url");
            if endpoint.is_empty() {
                return Err(bad(
                    "it has neither supportedInterfaces (A2A 1.0) nor url (A2A 0.3)".into(),
                ));
            }
            let transport = text(card, "preferredTransport");
            if !transport.is_empty() && !transport.eq_ignore_ascii_case("JSONRPC") {
                return Err(bad(format!(
                    "its transport is {transport}, and Holdpoint speaks JSON-RPC"
                )));
            }
            (absolute(&endpoint)?, Version::V03)
        }
    };
    Ok(Card {
        name: text(card, "name"),
        description: text(card, "description"),
        skills,
        endpoint,
        version,
    })
}

fn message_v1(m: &Outgoing) -> Value {
    let mut parts = Vec::new();
    if let Some(text) = &m.text {
        parts.push(json!({"text": text}));
    }
    parts.extend(answer_parts(&m.confirmations));
    let mut message = json!({
        "messageId": uuid::Uuid::now_v7().to_string(),
        "role": "ROLE_USER",
        "parts": parts,
    });
    ids(&mut message, m);
    message
}

fn message_v03(m: &Outgoing) -> Value {
    let mut parts = Vec::new();
    if let Some(text) = &m.text {
        parts.push(json!({"kind": "text", "text": text}));
    }
    for mut part in answer_parts(&m.confirmations) {
        part["kind"] = json!("data");
        parts.push(part);
    }
    let mut message = json!({
        "kind": "message",
        "messageId": uuid::Uuid::now_v7().to_string(),
        "role": "user",
        "parts": parts,
    });
    ids(&mut message, m);
    message
}

/// The data parts that answer confirmations, each shape its own way: ADK's one function
/// response per confirmation (which ADK reads only with `metadata.adk_type`, in the task's own
/// task and context), kagent's one decision (a batch for several calls), Holdpoint's one list
/// of decisions per hold.
fn answer_parts(answers: &[(Confirmation, Answer)]) -> Vec<Value> {
    let mut parts = Vec::new();
    let of = |shape: Shape| -> Vec<&(Confirmation, Answer)> {
        answers.iter().filter(|(c, _)| c.shape == shape).collect()
    };
    for (c, a) in of(Shape::Adk) {
        parts.push(json!({
            "data": {"name": ADK_CONFIRMATION, "id": c.id, "response": {"confirmed": a.confirmed}},
            "metadata": {"adk_type": "function_response"},
        }));
    }
    let kagent = of(Shape::Kagent);
    match kagent.as_slice() {
        [] => {}
        [(_, a)] if a.confirmed => parts.push(json!({"data": {"decision_type": "approve"}})),
        [(_, a)] => {
            let mut reject = json!({"decision_type": "reject"});
            if let Some(reason) = &a.reason {
                reject["rejection_reason"] = json!(reason);
            }
            parts.push(json!({ "data": reject }));
        }
        several => {
            let mut decisions = serde_json::Map::new();
            let mut reasons = serde_json::Map::new();
            for (c, a) in several {
                let verdict = if a.confirmed { "approve" } else { "reject" };
                decisions.insert(c.id.clone(), json!(verdict));
                if let (false, Some(reason)) = (a.confirmed, &a.reason) {
                    reasons.insert(c.id.clone(), json!(reason));
                }
            }
            parts.push(
                json!({"data": {"decision_type": "batch", "decisions": decisions,
                "rejection_reasons": reasons}}),
            );
        }
    }
    let holdpoint = of(Shape::Holdpoint);
    if !holdpoint.is_empty() {
        let decisions: Vec<Value> = holdpoint
            .iter()
            .map(|(c, a)| {
                let decision = if c.question.is_some() {
                    if a.confirmed {
                        Decision::Answer {
                            options: a.options.clone(),
                        }
                    } else {
                        Decision::Cancel {
                            reason: a.reason.clone(),
                        }
                    }
                } else if a.confirmed {
                    Decision::Approve {
                        scope: ApproveScope::Once,
                        expires_in: None,
                        digest: c.digest.clone(),
                        reason: None,
                    }
                } else {
                    Decision::Deny {
                        reason: a.reason.clone(),
                    }
                };
                json!({"hold": c.id, "decision": decision})
            })
            .collect();
        parts.push(json!({"data": {"holdpoint": {"decisions": decisions}}}));
    }
    parts
}

fn ids(message: &mut Value, m: &Outgoing) {
    if let Some(c) = &m.context_id {
        message["contextId"] = json!(c);
    }
    if let Some(t) = &m.task_id {
        message["taskId"] = json!(t);
    }
}

fn rpc_error(answer: &Value) -> Option<ClientError> {
    let error = answer.get("error")?;
    Some(ClientError::Remote {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_owned(),
    })
}

/// Reads a streamed answer (or a plain JSON-RPC answer, which some servers send instead).
async fn read_stream(
    url: &str,
    response: reqwest::Response,
    on_progress: &(dyn Fn(Progress<'_>) + Send + Sync),
) -> Result<Reply, ClientError> {
    let event_stream = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut reader = Reader::new(url);
    if !event_stream {
        let body = read_all(url, response).await?;
        reader.event(&String::from_utf8_lossy(&body))?;
        reader.tell(on_progress);
        return reader.finish();
    }
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut data = String::new();
    let mut read = 0usize;
    while let Some(chunk) = body.next().await {
        // The answer had begun: a failure now is the agent's (it crashed, or the connection
        // was cut), not a wrong address.
        let chunk = chunk.map_err(|e| ClientError::Broken {
            url: url.to_owned(),
            message: error_chain(&e),
        })?;
        read += chunk.len();
        if read > MAX_ANSWER {
            return Err(reader.garbage(format!("the stream is longer than {MAX_ANSWER} bytes")));
        }
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    reader.event(&std::mem::take(&mut data))?;
                    reader.tell(on_progress);
                    if reader.reply.state.stops() {
                        return reader.finish();
                    }
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
    }
    if !data.is_empty() {
        reader.event(&data)?;
        reader.tell(on_progress);
    }
    reader.finish()
}

/// Sums a task's events up.
struct Reader {
    url: String,
    reply: Reply,
    /// Whether any event came.
    seen: bool,
    /// Each artifact's text, in the order they came.
    artifacts: Vec<(String, String)>,
    /// The last status message's text.
    status_text: String,
    /// The answer was a bare message.
    message: bool,
    /// Text that came and was not told yet.
    told: Vec<String>,
    /// The task's id, as last told.
    told_task: Option<String>,
    /// Text told from status messages that no artifact has repeated yet: ADK sends its answer
    /// in a `working` status message, then again as the task's artifact.
    unrepeated: String,
}

impl Reader {
    fn new(url: &str) -> Reader {
        Reader {
            url: url.to_owned(),
            reply: Reply {
                task_id: None,
                context_id: None,
                state: State::Submitted,
                text: String::new(),
                confirmations: Vec::new(),
            },
            seen: false,
            artifacts: Vec::new(),
            status_text: String::new(),
            message: false,
            told: Vec::new(),
            told_task: None,
            unrepeated: String::new(),
        }
    }

    /// Tells what came since the last time: the task's id when it is new, and the text.
    fn tell(&mut self, on_progress: &(dyn Fn(Progress<'_>) + Send + Sync)) {
        if self.reply.task_id != self.told_task {
            self.told_task = self.reply.task_id.clone();
            if let Some(task) = &self.told_task {
                on_progress(Progress::Task(task));
            }
        }
        for text in self.told.drain(..) {
            on_progress(Progress::Text(&text));
        }
    }

    fn garbage(&self, message: impl Into<String>) -> ClientError {
        ClientError::Garbage {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    fn event(&mut self, data: &str) -> Result<(), ClientError> {
        let shown: String = data.chars().take(200).collect();
        let answer: Value = serde_json::from_str(data)
            .map_err(|e| self.garbage(format!("{shown:?} is not JSON ({e})")))?;
        if let Some(e) = rpc_error(&answer) {
            return Err(e);
        }
        let Some(result) = answer.get("result").filter(|r| r.is_object()) else {
            return Err(self.garbage(format!("{shown:?} is not a JSON-RPC answer")));
        };
        self.seen = true;
        // 1.0 wraps each event in its kind; 0.3 names it in `kind`.
        let (kind, body) = match result.get("kind").and_then(Value::as_str) {
            Some(kind) => (kind, result),
            None => match ["task", "statusUpdate", "artifactUpdate", "message"]
                .into_iter()
                .find_map(|k| Some((k, result.get(k)?)))
            {
                Some(found) => found,
                // A bare task, as GetTask answers in 1.0.
                None if result.get("status").is_some() => ("task", result),
                None => return Err(self.garbage(format!("{shown:?} is no A2A event"))),
            },
        };
        let ids = |r: &mut Reply, task: Option<&Value>, context: Option<&Value>| {
            if let Some(t) = task.and_then(Value::as_str) {
                r.task_id = Some(t.to_owned());
            }
            if let Some(c) = context.and_then(Value::as_str) {
                r.context_id = Some(c.to_owned());
            }
        };
        match kind {
            "task" => {
                ids(&mut self.reply, body.get("id"), body.get("contextId"));
                for artifact in body
                    .get("artifacts")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.artifact(artifact, false);
                }
                self.status(body.get("status"), body.get("metadata"))?;
            }
            "statusUpdate" | "status-update" => {
                ids(&mut self.reply, body.get("taskId"), body.get("contextId"));
                self.status(body.get("status"), body.get("metadata"))?;
            }
            "artifactUpdate" | "artifact-update" => {
                ids(&mut self.reply, body.get("taskId"), body.get("contextId"));
                let append = body.get("append").and_then(Value::as_bool) == Some(true);
                match body.get("artifact") {
                    Some(a) => self.artifact(a, append),
                    None => return Err(self.garbage("an artifact update has no artifact")),
                }
            }
            "message" => {
                ids(&mut self.reply, body.get("taskId"), body.get("contextId"));
                self.status_text = texts(body);
                self.say(self.status_text.clone());
                self.message = true;
                self.reply.state = State::Completed;
            }
            other => return Err(self.garbage(format!("an event of kind {other:?}"))),
        }
        Ok(())
    }

    /// Keeps `text` to be told, when there is any.
    fn say(&mut self, text: String) {
        if !text.is_empty() {
            self.told.push(text);
        }
    }

    fn artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact
            .get("artifactId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let text = texts(artifact);
        // What is new: an appended piece, or what a replacement adds to the text it replaces.
        let new = match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, t)) if append => {
                t.push_str(&text);
                text
            }
            Some((_, t)) => {
                let new = match text.strip_prefix(t.as_str()) {
                    Some(rest) => rest.to_owned(),
                    None => format!("\n{text}"),
                };
                *t = text;
                new
            }
            None => {
                self.artifacts.push((id, text.clone()));
                text
            }
        };
        // Told already, from a status message: not told twice.
        if !new.is_empty()
            && let Some(at) = self.unrepeated.find(&new)
        {
            self.unrepeated.drain(..at + new.len());
            return;
        }
        self.say(new);
    }

    fn status(
        &mut self,
        status: Option<&Value>,
        metadata: Option<&Value>,
    ) -> Result<(), ClientError> {
        let Some(state) = status.and_then(|s| s.get("state")).and_then(Value::as_str) else {
            return Err(self.garbage("a status without a state"));
        };
        self.reply.state = State::parse(state);
        let message = status.and_then(|s| s.get("message"));
        self.reply.confirmations.clear();
        if let Some(message) = message {
            let text = texts(message);
            self.reply.confirmations = confirmations(message, metadata);
            // Told: what the agent says while it works, and the question of a task waiting
            // for words; not the text beside confirmations, which become holds of their own.
            if matches!(self.reply.state, State::Working | State::Submitted)
                || (self.reply.state == State::InputRequired && self.reply.confirmations.is_empty())
            {
                self.unrepeated.push_str(&text);
                self.say(text.clone());
            }
            if !text.is_empty() {
                self.status_text = text;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Reply, ClientError> {
        if !self.seen {
            return Err(self.garbage("the answer has no event"));
        }
        if !self.reply.state.stops() {
            return Err(self.garbage(format!(
                "the stream ended while the task was still {:?}",
                self.reply.state
            )));
        }
        let artifacts: Vec<&str> = self
            .artifacts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        self.reply.text = if artifacts.is_empty() || self.reply.state != State::Completed {
            self.status_text
        } else {
            artifacts.join("\n")
        };
        Ok(self.reply)
    }
}

/// The text parts of a message or artifact, one per line.
fn texts(holder: &Value) -> String {
    holder
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The confirmations a status message asks for, in one shape: Holdpoint's holds when it
/// carries them (a Holdpoint agent writes all three shapes, and its own is the one bound to
/// digests); else kagent's, and else ADK's.
///
/// kagent (0.10.4) asks as ADK does, with `adk_request_confirmation` parts, but marks them
/// `kagent_type` where ADK writes `adk_type`, and reads only its own answer: `decision_type`,
/// a batch naming each call by the id of the original function call. The tool-approval summary
/// `{"interrupt_type": "tool_approval", "action_requests": [{name, args, id}]}` (in a data part,
/// or in the metadata of the message or of the update), which kagent's UI reads, is answered
/// the same way.
fn confirmations(message: &Value, metadata: Option<&Value>) -> Vec<Confirmation> {
    let parts: Vec<&Value> = message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let data: Vec<&Value> = parts.iter().filter_map(|p| p.get("data")).collect();
    let holdpoint: Vec<Confirmation> = data
        .iter()
        .filter_map(|d| d.get("holdpoint")?.get("holds")?.as_array())
        .flatten()
        .filter_map(|h| {
            let question = match h.get("kind").and_then(Value::as_str)? {
                "approval" => None,
                "question" => Some(Question {
                    text: text_of(h, "question"),
                    options: h
                        .get("options")?
                        .as_array()?
                        .iter()
                        .filter_map(|o| {
                            Some((o.get("id")?.as_str()?.to_owned(), text_of(o, "label")))
                        })
                        .collect(),
                    multiple: h.get("multiple").and_then(Value::as_bool) == Some(true),
                }),
                _ => return None,
            };
            Some(Confirmation {
                id: h.get("id")?.as_str()?.to_owned(),
                tool: text_of(h, "tool"),
                arguments: h.get("arguments").cloned().unwrap_or_else(|| json!({})),
                hint: None,
                shape: Shape::Holdpoint,
                digest: h.get("digest").and_then(Value::as_str).map(str::to_owned),
                question,
            })
        })
        .collect();
    if !holdpoint.is_empty() {
        return holdpoint;
    }
    let adk: Vec<Confirmation> = parts
        .iter()
        .filter_map(|p| {
            let d = p.get("data")?;
            if d.get("name").and_then(Value::as_str) != Some(ADK_CONFIRMATION) {
                return None;
            }
            let args = d.get("args");
            let call = args.and_then(|a| a.get("originalFunctionCall"));
            let kagent = p
                .get("metadata")
                .is_some_and(|m| m.get("kagent_type").is_some() && m.get("adk_type").is_none());
            let id = if kagent {
                call.and_then(|c| c.get("id"))?.as_str()?
            } else {
                d.get("id")?.as_str()?
            };
            Some(Confirmation {
                id: id.to_owned(),
                tool: call.map(|c| text_of(c, "name")).unwrap_or_default(),
                arguments: call
                    .and_then(|c| c.get("args"))
                    .cloned()
                    .unwrap_or_else(|| json!({})),
                hint: args
                    .and_then(|a| a.get("toolConfirmation"))
                    .and_then(|t| t.get("hint"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                shape: if kagent { Shape::Kagent } else { Shape::Adk },
                digest: None,
                question: None,
            })
        })
        .collect();
    if !adk.is_empty() {
        return adk;
    }
    let holders = || {
        data.iter()
            .copied()
            .chain(message.get("metadata"))
            .chain(metadata)
    };
    if !holders().any(|d| d.get("interrupt_type").and_then(Value::as_str) == Some("tool_approval"))
    {
        return Vec::new();
    }
    holders()
        .find_map(|d| d.get("action_requests")?.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(Confirmation {
                id: r.get("id")?.as_str()?.to_owned(),
                tool: text_of(r, "name"),
                arguments: r.get("args").cloned().unwrap_or_else(|| json!({})),
                hint: None,
                shape: Shape::Kagent,
                digest: None,
                question: None,
            })
        })
        .collect()
}

fn text_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(events: &[Value]) -> Result<Reply, ClientError> {
        let mut r = Reader::new("http://x/");
        for e in events {
            r.event(&e.to_string())?;
        }
        r.finish()
    }

    #[test]
    fn an_adk_confirmation_request_is_read_from_a_1_0_stream() {
        let reply = read(&[
            json!({"result": {"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}}}),
            json!({"result": {"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"role": "ROLE_AGENT", "parts": [{"data": {"id": "adk-1", "name": "adk_request_confirmation",
                    "args": {"originalFunctionCall": {"id": "call_1", "args": {"amount": 5.0}, "name": "transfer"},
                             "toolConfirmation": {"hint": "Approve?", "confirmed": false}}},
                    "metadata": {"adk_type": "function_call", "adk_is_long_running": true}}]}}}}}),
        ])
        .unwrap();
        assert_eq!(reply.state, State::InputRequired);
        assert_eq!(
            (reply.task_id.as_deref(), reply.context_id.as_deref()),
            (Some("t1"), Some("c1"))
        );
        assert_eq!(
            reply.confirmations,
            [Confirmation {
                id: "adk-1".into(),
                tool: "transfer".into(),
                arguments: json!({"amount": 5.0}),
                hint: Some("Approve?".into()),
                shape: Shape::Adk,
                digest: None,
                question: None,
            }]
        );
    }

    #[test]
    fn kagents_and_holdpoints_requests_are_read_in_their_shapes() {
        let status = |parts: Value, metadata: Value| {
            read(&[json!({"result": {"statusUpdate": {"taskId": "t", "contextId": "c", "metadata": metadata,
                "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"parts": parts}}}}})])
            .unwrap()
            .confirmations
        };
        // kagent 0.10.4: ADK's request, marked kagent_type, named by the original call's id.
        let kagent = status(
            json!([{"data": {"id": "adk-9", "name": "adk_request_confirmation",
                "args": {"originalFunctionCall": {"id": "call_1", "name": "delete", "args": {"path": "/x"}}}},
                "metadata": {"kagent_type": "function_call", "kagent_is_long_running": true}}]),
            json!({}),
        );
        assert_eq!(
            (
                kagent[0].shape,
                kagent[0].id.as_str(),
                kagent[0].tool.as_str()
            ),
            (Shape::Kagent, "call_1", "delete")
        );
        // The tool-approval summary, its requests in the update's metadata.
        let summary = status(
            json!([{"text": "Approve?"}]),
            json!({"interrupt_type": "tool_approval", "action_requests": [{"name": "rm", "args": {"p": 1}, "id": "r1"}]}),
        );
        assert_eq!(
            summary,
            [Confirmation {
                id: "r1".into(),
                tool: "rm".into(),
                arguments: json!({"p": 1}),
                hint: None,
                shape: Shape::Kagent,
                digest: None,
                question: None,
            }]
        );
        // Holdpoint's own holds win over the ADK and kagent shapes beside them.
        let holdpoint = status(
            json!([
                {"data": {"id": "adk-h1", "name": "adk_request_confirmation", "args": {"originalFunctionCall": {"id": "c", "name": "x", "args": {}}}},
                 "metadata": {"adk_type": "function_call"}},
                {"data": {"holdpoint": {"holds": [
                    {"id": "h1", "kind": "approval", "tool": "x", "arguments": {"a": 1}, "digest": "d1"},
                    {"id": "h2", "kind": "question", "question": "?", "options": [{"id": "a", "label": "A"}]}]}}},
            ]),
            json!({}),
        );
        assert_eq!(holdpoint.len(), 2, "{holdpoint:?}");
        assert_eq!(
            (
                holdpoint[0].shape,
                holdpoint[0].id.as_str(),
                holdpoint[0].digest.as_deref()
            ),
            (Shape::Holdpoint, "h1", Some("d1"))
        );
        // Its questions too, with their options.
        assert_eq!(
            holdpoint[1].question,
            Some(Question {
                text: "?".into(),
                options: vec![("a".into(), "A".into())],
                multiple: false,
            })
        );
    }

    #[test]
    fn answers_go_back_in_the_shape_they_were_asked_in() {
        let asked = |id: &str, shape: Shape| Confirmation {
            id: id.into(),
            tool: "t".into(),
            arguments: json!({}),
            hint: None,
            shape,
            digest: Some("d".into()),
            question: None,
        };
        let yes = Answer {
            confirmed: true,
            reason: None,
            options: vec![],
        };
        let no = Answer {
            confirmed: false,
            reason: Some("not now".into()),
            options: vec![],
        };
        let parts = answer_parts(&[(asked("adk-1", Shape::Adk), yes.clone())]);
        assert_eq!(parts[0]["data"]["response"], json!({"confirmed": true}));
        assert_eq!(parts[0]["metadata"]["adk_type"], "function_response");
        let parts = answer_parts(&[(asked("c1", Shape::Kagent), no.clone())]);
        assert_eq!(
            parts[0]["data"],
            json!({"decision_type": "reject", "rejection_reason": "not now"})
        );
        let parts = answer_parts(&[
            (asked("c1", Shape::Kagent), yes.clone()),
            (asked("c2", Shape::Kagent), no.clone()),
        ]);
        assert_eq!(
            parts[0]["data"],
            json!({"decision_type": "batch", "decisions": {"c1": "approve", "c2": "reject"},
                   "rejection_reasons": {"c2": "not now"}})
        );
        let question = Confirmation {
            question: Some(Question {
                text: "Which?".into(),
                options: vec![("a".into(), "A".into())],
                multiple: false,
            }),
            ..asked("h3", Shape::Holdpoint)
        };
        let chose = Answer {
            options: vec!["a".into()],
            ..yes.clone()
        };
        let parts = answer_parts(&[
            (asked("h1", Shape::Holdpoint), yes),
            (asked("h2", Shape::Holdpoint), no),
            (question, chose),
        ]);
        assert_eq!(
            parts[0]["data"]["holdpoint"]["decisions"],
            json!([{"hold": "h1", "decision": {"action": "approve", "scope": "once", "digest": "d"}},
                   {"hold": "h2", "decision": {"action": "deny", "reason": "not now"}},
                   {"hold": "h3", "decision": {"action": "answer", "options": ["a"]}}])
        );
    }

    #[test]
    fn text_is_told_as_it_comes() {
        let mut r = Reader::new("http://x/");
        let told = std::sync::Mutex::new(Vec::<String>::new());
        let on = |p: Progress<'_>| {
            told.lock().unwrap().push(match p {
                Progress::Task(t) => format!("task {t}"),
                Progress::Text(t) => t.to_owned(),
            })
        };
        for e in [
            json!({"result": {"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "Looking"}]}}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "append": true, "artifact": {"artifactId": "a", "parts": [{"text": "lo"}]}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": [{"text": "Hello!"}]}}}}),
        ] {
            r.event(&e.to_string()).unwrap();
            r.tell(&on);
        }
        assert_eq!(
            *told.lock().unwrap(),
            ["task t", "Looking", "Hel", "lo", "!"]
        );

        // What a status message said, an artifact does not say again (ADK sends both).
        let mut r = Reader::new("http://x/");
        told.lock().unwrap().clear();
        for e in [
            json!({"result": {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "All done."}]}}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": [{"text": "All done."}]}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "append": true, "artifact": {"artifactId": "a", "parts": [{"text": " More."}]}}}}),
        ] {
            r.event(&e.to_string()).unwrap();
            r.tell(&on);
        }
        assert_eq!(*told.lock().unwrap(), ["task t", "All done.", " More."]);
    }

    #[test]
    fn text_comes_from_artifacts_in_either_version() {
        let v1 = read(&[
            json!({"result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "thinking"}]}}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": [{"text": "Done"}]}}}}),
            json!({"result": {"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true, "artifact": {"artifactId": "a", "parts": [{"text": "!"}]}}}}),
            json!({"result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}}),
        ])
        .unwrap();
        assert_eq!((v1.state, v1.text.as_str()), (State::Completed, "Done!"));
        let v03 = read(&[
            json!({"result": {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "submitted"}}}),
            json!({"result": {"kind": "artifact-update", "taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "hi"}]}}}),
            json!({"result": {"kind": "status-update", "taskId": "t", "contextId": "c", "final": true, "status": {"state": "completed"}}}),
        ])
        .unwrap();
        assert_eq!((v03.state, v03.text.as_str()), (State::Completed, "hi"));
    }

    #[test]
    fn garbage_and_errors_and_unfinished_streams_are_errors() {
        let mut r = Reader::new("http://x/");
        let e = r.event("not json").unwrap_err().to_string();
        assert!(e.contains("not JSON"), "{e}");
        let e = read(&[json!({"error": {"code": -32603, "message": "boom"}})]).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        let e = read(&[
            json!({"result": {"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}}),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("still"), "{e}");
        let e = read(&[]).unwrap_err();
        assert!(e.to_string().contains("no event"), "{e}");
    }

    #[test]
    fn cards_of_both_versions_are_read() {
        let v1 = parse_card(
            "http://h/.well-known/agent-card.json",
            &json!({"name": "echo", "description": "d", "skills": [{"id": "s", "name": "S", "description": "does"}],
                    "supportedInterfaces": [{"url": "http://h/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}),
        )
        .unwrap();
        assert_eq!(
            (v1.endpoint.as_str(), v1.version),
            ("http://h/rpc", Version::V1)
        );
        assert_eq!(v1.skills, [("S".to_owned(), "does".to_owned())]);
        let v03 = parse_card(
            "http://h/.well-known/agent-card.json",
            &json!({"name": "banker", "url": "http://127.0.0.1:9200"}),
        )
        .unwrap();
        assert_eq!(
            (v03.endpoint.as_str(), v03.version),
            ("http://127.0.0.1:9200/", Version::V03)
        );
        let grpc = parse_card(
            "http://h/x.json",
            &json!({"supportedInterfaces": [{"url": "http://h", "protocolBinding": "GRPC"}]}),
        )
        .unwrap_err();
        assert!(grpc.to_string().contains("GRPC"), "{grpc}");
        assert_eq!(
            card_url("http://h/"),
            "http://h/.well-known/agent-card.json"
        );
    }
}
