//! A scripted OpenAI-compatible LLM: a real HTTP server on port 0 that answers each chat
//! completion request with the next step of its script, streamed the way OpenAI streams, and
//! records every request so tests can check what the LLM was sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A tool call the script makes.
#[derive(Clone, Debug)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

pub fn call(id: &str, name: &str, arguments: Value) -> ScriptedCall {
    ScriptedCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

/// One answer.
#[derive(Clone, Debug)]
pub enum Step {
    /// Text, streamed in these pieces.
    Text(Vec<String>),
    /// Tool calls, their arguments split into `fragments` pieces each and interleaved, after
    /// optional text.
    Calls {
        text: Option<String>,
        calls: Vec<ScriptedCall>,
        fragments: usize,
    },
    /// An HTTP error.
    Status(u16, String),
    /// A chunk that is not JSON.
    Malformed,
    /// Headers and one piece of text, then silence.
    Stall,
    /// Some text, then the connection closes without finishing.
    Hangup,
    /// The answer as one JSON document (servers that ignore `stream`).
    Whole(Value),
    /// Wait, then answer.
    Delay(Duration, Box<Step>),
}

impl Step {
    pub fn text(t: &str) -> Step {
        let mid = t
            .char_indices()
            .nth(t.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        Step::Text(vec![t[..mid].to_owned(), t[mid..].to_owned()])
    }

    pub fn calls(calls: Vec<ScriptedCall>) -> Step {
        Step::Calls {
            text: None,
            calls,
            fragments: 3,
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    /// The messages sent, as JSON.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The content of the latest tool result for `call_id`, parsed.
    pub fn tool_result(&self, call_id: &str) -> Option<Value> {
        self.messages()
            .into_iter()
            .rfind(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
            .and_then(|m| serde_json::from_str(m["content"].as_str()?).ok())
    }
}

/// Answers a request the script has no step for, from the request itself.
type Responder = Box<dyn Fn(&Recorded) -> Step + Send + Sync>;

#[derive(Default)]
struct Script {
    steps: Mutex<VecDeque<Step>>,
    /// For a server that outlives any fixed script (a crash loop, say, where a turn asks
    /// again after a restart): what to answer once the steps are used up.
    responder: Option<Responder>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Notify,
}

/// The running server. It stops when dropped.
pub struct ScriptedLlm {
    base_url: String,
    script: Arc<Script>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedLlm {
    pub async fn start(steps: Vec<Step>) -> Self {
        Self::serve(Script {
            steps: Mutex::new(steps.into()),
            ..Script::default()
        })
        .await
    }

    /// A server that answers every request with what `respond` makes of it: the same
    /// request gets the same answer however often it is sent.
    pub async fn answering(respond: impl Fn(&Recorded) -> Step + Send + Sync + 'static) -> Self {
        Self::serve(Script {
            responder: Some(Box::new(respond)),
            ..Script::default()
        })
        .await
    }

    async fn serve(script: Script) -> Self {
        let script = Arc::new(script);
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ScriptedLlm {
            base_url: format!("http://{addr}/v1"),
            script,
            task,
        }
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    pub fn push(&self, step: Step) {
        self.script.steps.lock().unwrap().push_back(step);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }

    /// Waits (up to [`crate::PATIENCE`]) until `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<Recorded> {
        let wait = async {
            loop {
                let arrived = self.script.arrived.notified();
                let requests = self.requests();
                if requests.len() >= n {
                    return requests;
                }
                arrived.await;
            }
        };
        tokio::time::timeout(crate::PATIENCE, wait)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the LLM did not get {n} requests (got {})",
                    self.requests().len()
                )
            })
    }

    /// Steps not yet used.
    pub fn remaining(&self) -> usize {
        self.script.steps.lock().unwrap().len()
    }
}

async fn answer(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let recorded = Recorded { headers, body };
    let step = script.steps.lock().unwrap().pop_front().or_else(|| {
        let respond = script.responder.as_ref()?;
        Some(respond(&recorded))
    });
    script.requests.lock().unwrap().push(recorded);
    script.arrived.notify_waiters();
    match step {
        Some(step) => respond(step).await,
        None => status(500, "the script has no more steps"),
    }
}

fn status(code: u16, body: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Body::from(json!({"error": {"message": body}}).to_string()))
        .unwrap()
}

fn sse(events: Vec<String>, then: Ending) -> Response {
    let frames = stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, std::io::Error>(Bytes::from(format!("data: {e}\n\n")))),
    );
    let body = match then {
        Ending::Done => Body::from_stream(
            frames.chain(stream::iter([Ok(Bytes::from_static(b"data: [DONE]\n\n"))])),
        ),
        Ending::Close => Body::from_stream(frames),
        Ending::Stall => Body::from_stream(frames.chain(stream::pending())),
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

enum Ending {
    Done,
    Close,
    Stall,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": "scripted",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

fn text_chunks(pieces: &[String]) -> Vec<String> {
    // The first chunk carries the role; later ones omit optional fields, as some servers do.
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    out.extend(
        pieces
            .iter()
            .map(|p| json!({"choices": [{"delta": {"content": p}}]}).to_string()),
    );
    out
}

async fn respond(step: Step) -> Response {
    match step {
        Step::Delay(d, inner) => {
            tokio::time::sleep(d).await;
            Box::pin(respond(*inner)).await
        }
        Step::Status(code, body) => status(code, &body),
        Step::Text(pieces) => {
            let mut events = text_chunks(&pieces);
            events.push(chunk(json!({}), Some("stop")));
            events.push(
                json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
                    .to_string(),
            );
            sse(events, Ending::Done)
        }
        Step::Calls {
            text,
            calls,
            fragments,
        } => {
            let mut events = text.map(|t| text_chunks(&[t])).unwrap_or_default();
            for (i, c) in calls.iter().enumerate() {
                events.push(chunk(json!({"tool_calls": [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}), None));
            }
            let pieces: Vec<Vec<String>> = calls
                .iter()
                .map(|c| split(&c.arguments, fragments.max(1)))
                .collect();
            let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
            for round in 0..longest {
                for (i, p) in pieces.iter().enumerate() {
                    if let Some(piece) = p.get(round) {
                        events.push(json!({"choices": [{"delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}}]}).to_string());
                    }
                }
            }
            events.push(chunk(json!({}), Some("tool_calls")));
            sse(events, Ending::Done)
        }
        Step::Malformed => sse(
            vec![chunk(json!({"content": "ok"}), None), "{not json".into()],
            Ending::Done,
        ),
        Step::Stall => sse(text_chunks(&["thinking…".into()]), Ending::Stall),
        Step::Hangup => sse(text_chunks(&["partial".into()]), Ending::Close),
        Step::Whole(v) => Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
    }
}

/// Splits text into about `n` pieces, on character boundaries.
fn split(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(n).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
