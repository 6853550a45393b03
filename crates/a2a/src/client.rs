//! Calling a remote A2A agent: reading its Agent Card, sending it a message and reading the
//! streamed answer (A2A 1.0's `SendStreamingMessage` with `A2A-Version: 1.0`, or 0.3's
//! `message/stream` for a card of 0.3's shape: a top-level `url` and no
//! `supportedInterfaces`), answering Google ADK's confirmation requests, and cancelling a task.
//!
//! The answer is read as it streams and summed up in a [`Reply`]: the task and context, the
//! state the task ended or stopped in, its text, and the tool calls it asks a person to confirm
//! (ADK's `adk_request_confirmation`). Whatever cannot be read as A2A is a [`ClientError`]
//! that says what came, so a broken agent is a clear error, never a wait.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

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

/// A tool call the remote agent asks its caller to confirm (ADK's `adk_request_confirmation`).
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmation {
    /// The confirmation's id (`adk-…`), which the answer must name.
    pub id: String,
    /// The remote tool and its arguments.
    pub tool: String,
    pub arguments: Value,
    /// What the remote agent says of it.
    pub hint: Option<String>,
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
    /// Answers to confirmations: the confirmation's id, and whether it is confirmed.
    pub confirmations: Vec<(String, bool)>,
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
    /// `on_task` is told the task's id as soon as it is known (to cancel it meanwhile).
    pub async fn send(
        &self,
        card: &Card,
        remote: &Remote,
        message: &Outgoing,
        on_task: &(dyn Fn(&str) + Send + Sync),
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
            read_stream(url, response, on_task).await
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
    for (id, confirmed) in &m.confirmations {
        parts.push(confirmation_part(id, *confirmed));
    }
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
    for (id, confirmed) in &m.confirmations {
        let mut part = confirmation_part(id, *confirmed);
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

/// ADK's answer to a confirmation request: a function response, which ADK reads only with
/// `metadata.adk_type` and in the task's own task and context.
fn confirmation_part(id: &str, confirmed: bool) -> Value {
    json!({
        "data": {"name": ADK_CONFIRMATION, "id": id, "response": {"confirmed": confirmed}},
        "metadata": {"adk_type": "function_response"},
    })
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
    on_task: &(dyn Fn(&str) + Send + Sync),
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
        return reader.finish();
    }
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut data = String::new();
    let mut read = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ClientError::Unreachable {
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
                    if let Some(task) = &reader.reply.task_id {
                        on_task(task);
                    }
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
                self.status(body.get("status"))?;
            }
            "statusUpdate" | "status-update" => {
                ids(&mut self.reply, body.get("taskId"), body.get("contextId"));
                self.status(body.get("status"))?;
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
                self.message = true;
                self.reply.state = State::Completed;
            }
            other => return Err(self.garbage(format!("an event of kind {other:?}"))),
        }
        Ok(())
    }

    fn artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact
            .get("artifactId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let text = texts(artifact);
        match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, t)) if append => t.push_str(&text),
            Some((_, t)) => *t = text,
            None => self.artifacts.push((id, text)),
        }
    }

    fn status(&mut self, status: Option<&Value>) -> Result<(), ClientError> {
        let Some(state) = status.and_then(|s| s.get("state")).and_then(Value::as_str) else {
            return Err(self.garbage("a status without a state"));
        };
        self.reply.state = State::parse(state);
        let message = status.and_then(|s| s.get("message"));
        self.reply.confirmations.clear();
        if let Some(message) = message {
            let text = texts(message);
            if !text.is_empty() {
                self.status_text = text;
            }
            self.reply.confirmations = confirmations(message);
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

/// ADK's confirmation requests in a status message.
fn confirmations(message: &Value) -> Vec<Confirmation> {
    message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let data = p.get("data")?;
            if data.get("name").and_then(Value::as_str) != Some(ADK_CONFIRMATION) {
                return None;
            }
            let id = data.get("id")?.as_str()?.to_owned();
            let args = data.get("args");
            let call = args.and_then(|a| a.get("originalFunctionCall"));
            Some(Confirmation {
                id,
                tool: call
                    .and_then(|c| c.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                arguments: call
                    .and_then(|c| c.get("args"))
                    .cloned()
                    .unwrap_or_else(|| json!({})),
                hint: args
                    .and_then(|a| a.get("toolConfirmation"))
                    .and_then(|t| t.get("hint"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect()
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
            }]
        );
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
