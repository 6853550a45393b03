//! What an upstream says of its tools' tasks (revision 2025-11-25): each tool's
//! `execution.taskSupport` in `tools/list`. rmcp 3.11's `Tool` has no place for it and drops it
//! as it reads the answer, so it is read from the messages as they arrive, before rmcp does:
//! on stdio from the child's output, line by line ([`Tapped`]); over streamable HTTP from a
//! listing of its own, in a short session beside rmcp's ([`probe`]), since rmcp's HTTP client
//! keeps its responses to itself.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

/// How a tool may be called as a task (`execution.taskSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never as a task: 2025-11-25's default, when a tool says nothing.
    #[default]
    Forbidden,
    Optional,
    /// Only as a task: a plain `tools/call` is refused.
    Required,
}

impl TaskSupport {
    fn of(tool: &Value) -> TaskSupport {
        match tool["execution"]["taskSupport"].as_str() {
            Some("required") => TaskSupport::Required,
            Some("optional") => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        }
    }
}

/// The task support of the tools an upstream listed, by their own names, as last listed.
#[derive(Default)]
pub(crate) struct Tap {
    support: Mutex<HashMap<String, TaskSupport>>,
}

impl Tap {
    /// How the tool the server calls `name` may be called, as it last listed it.
    pub(crate) fn support(&self, name: &str) -> TaskSupport {
        self.support.lock().get(name).copied().unwrap_or_default()
    }

    /// One message from the server, as it came: when it answers `tools/list`, what it says of
    /// each tool's tasks is kept. Only messages that can be such an answer are parsed.
    pub(crate) fn seen(&self, message: &[u8]) {
        if !contains(message, b"\"inputSchema\"") {
            return;
        }
        if let Ok(message) = serde_json::from_slice::<Value>(message) {
            self.seen_value(&message);
        }
    }

    fn seen_value(&self, message: &Value) {
        let Some(tools) = message["result"]["tools"].as_array() else {
            return;
        };
        let mut support = self.support.lock();
        for tool in tools {
            if let Some(name) = tool["name"].as_str() {
                support.insert(name.to_owned(), TaskSupport::of(tool));
            }
        }
    }
}

fn contains(line: &[u8], needle: &[u8]) -> bool {
    line.windows(needle.len()).any(|w| w == needle)
}

/// A child's standard output, each line of which (one message) the tap sees as it is read.
/// Lines are bounded by what it reads (`Capped`, under it).
pub(super) struct Tapped<R> {
    inner: R,
    line: Vec<u8>,
    tap: Arc<Tap>,
}

impl<R> Tapped<R> {
    pub(super) fn new(inner: R, tap: Arc<Tap>) -> Tapped<R> {
        Tapped {
            inner,
            line: Vec::new(),
            tap,
        }
    }

    fn read(&mut self, mut read: &[u8]) {
        while let Some(end) = read.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&read[..end]);
            self.tap.seen(&self.line);
            self.line.clear();
            read = &read[end + 1..];
        }
        self.line.extend_from_slice(read);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tapped<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.read(&buf.filled()[before..]);
        }
        polled
    }
}

/// The revision the probe speaks: the one with tasks.
const PROBE_REVISION: &str = "2025-11-25";

/// Lists the tools of the streamable HTTP server at `url` in a session of its own (initialize,
/// `tools/list` page by page, then the session is ended), for the tap to see; answers larger
/// than `max` bytes are refused.
pub(super) async fn probe(
    url: &str,
    headers: &BTreeMap<String, String>,
    max: usize,
    tap: &Tap,
) -> Result<(), String> {
    let mut session = Probe {
        client: reqwest::Client::new(),
        url,
        headers: headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::try_from(k.as_str()).ok()?,
                    HeaderValue::try_from(v.as_str()).ok()?,
                ))
            })
            .collect(),
        session: None,
        revision: None,
        max,
    };
    let initialized = session
        .request(
            "initialize",
            json!({
                "protocolVersion": PROBE_REVISION,
                "capabilities": {},
                "clientInfo": {"name": "holdpoint", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
        .await?;
    session.revision = initialized["result"]["protocolVersion"]
        .as_str()
        .map(str::to_owned);
    let listed = async {
        session.notify("notifications/initialized").await?;
        let mut cursor: Option<Value> = None;
        for _ in 0..100 {
            let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let page = session.request("tools/list", params).await?;
            if let Some(e) = page.get("error") {
                return Err(format!("tools/list failed: {e}"));
            }
            tap.seen_value(&page);
            cursor = page["result"]
                .get("nextCursor")
                .filter(|c| !c.is_null())
                .cloned();
            if cursor.is_none() {
                return Ok(());
            }
        }
        Err("tools/list gave more than 100 pages".into())
    }
    .await;
    session.end().await;
    listed
}

struct Probe<'a> {
    client: reqwest::Client,
    url: &'a str,
    headers: Vec<(HeaderName, HeaderValue)>,
    session: Option<HeaderValue>,
    revision: Option<String>,
    max: usize,
}

impl Probe<'_> {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(self.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(revision) = &self.revision {
            request = request.header("mcp-protocol-version", revision.as_str());
        }
        request
    }

    /// A request's answer: the message that answers it, out of a JSON body or an event stream.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = format!("holdpoint-probe-{}", uuid::Uuid::new_v4());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut response = self
            .post(&body)
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{method}: HTTP status {}", response.status()));
        }
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.clone());
        }
        let events = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|t| t.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut read = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| format!("{method}: {e}"))?;
            let Some(chunk) = chunk else { break };
            read.extend_from_slice(&chunk);
            if read.len() > self.max {
                return Err(format!(
                    "{method}: the answer is larger than {} bytes",
                    self.max
                ));
            }
            // An event stream may stay open after the answer: it is read up to the answer.
            if events && let Some(answer) = answer_in_events(&read, &id) {
                return Ok(answer);
            }
        }
        let answer = if events {
            answer_in_events(&read, &id)
        } else {
            serde_json::from_slice::<Value>(&read)
                .ok()
                .filter(|m| m["id"] == json!(id))
        };
        answer.ok_or_else(|| format!("{method}: the server did not answer it"))
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        let body = json!({"jsonrpc": "2.0", "method": method});
        let response = self
            .post(&body)
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("{method}: HTTP status {}", response.status()))
        }
    }

    /// Ends the session, if the server gave one (a server that cannot is left to forget it).
    async fn end(&self) {
        let Some(session) = &self.session else {
            return;
        };
        let mut request = self
            .client
            .delete(self.url)
            .header("mcp-session-id", session);
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        if let Some(revision) = &self.revision {
            request = request.header("mcp-protocol-version", revision.as_str());
        }
        let _ = request.send().await;
    }
}

/// The message with `id` among the events of `stream` (their `data:` lines), when it is there.
fn answer_in_events(stream: &[u8], id: &str) -> Option<Value> {
    let text = String::from_utf8_lossy(stream);
    let text = text.replace("\r\n", "\n");
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        if let Ok(message) = serde_json::from_str::<Value>(&data.join("\n"))
            && message["id"] == json!(id)
        {
            return Some(message);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_tools_list_read_from_a_child_keeps_each_tools_task_support() {
        let tap = Arc::new(Tap::default());
        let listed = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"},
             "execution": {"taskSupport": "required"}},
            {"name": "either", "inputSchema": {"type": "object"},
             "execution": {"taskSupport": "optional"}},
            {"name": "plain", "inputSchema": {"type": "object"}},
        ]}});
        let data = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}\n{listed}\n");
        let mut out = Vec::new();
        Tapped::new(data.as_bytes(), tap.clone())
            .read_to_end(&mut out)
            .await
            .unwrap();
        assert_eq!(out, data.as_bytes(), "what is read is left as it is");
        assert_eq!(tap.support("slow"), TaskSupport::Required);
        assert_eq!(tap.support("either"), TaskSupport::Optional);
        assert_eq!(tap.support("plain"), TaskSupport::Forbidden);
        assert_eq!(tap.support("unknown"), TaskSupport::Forbidden);
        // Listed again without it: it is a plain tool from then on.
        let again = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"}}]}});
        tap.seen(again.to_string().as_bytes());
        assert_eq!(tap.support("slow"), TaskSupport::Forbidden);
    }

    #[test]
    fn an_answer_is_found_among_events_split_anywhere() {
        let stream = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n\n";
        assert_eq!(
            answer_in_events(stream.as_bytes(), "x").unwrap()["result"],
            json!({})
        );
        assert_eq!(answer_in_events(&stream.as_bytes()[..60], "x"), None);
    }
}
