//! The HTTP API as the CLI uses it: typed requests with one error type, and the live event
//! stream.

use std::fmt;

use holdpoint_protocol::sse::SseDecoder;
use holdpoint_protocol::{ErrorBody, Event, Hold};
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
}

/// Why a request failed.
#[derive(Debug)]
pub enum ClientError {
    /// The server could not be reached at all.
    Unreachable { url: String, cause: String },
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
            ClientError::Unreachable { url, cause } => write!(
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
pub fn seg(s: &str) -> String {
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

/// A query string (`?a=1&b=2`) of the pairs whose value is set.
pub fn query<'a>(pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    let q = q.finish();
    if q.is_empty() { q } else { format!("?{q}") }
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
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ClientError> {
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
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
        }
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        self.with_body(Method::POST, path, body).await
    }

    /// A request with a JSON body.
    pub async fn with_body<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        self.send(self.request(method, path).json(body)).await
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.send(self.request(Method::DELETE, path)).await
    }

    /// A POST that the server records under `key`, so that sending it again (after a lost
    /// answer) does not do it twice.
    pub async fn post_once<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        key: &str,
    ) -> Result<T, ClientError> {
        let request = self
            .request(Method::POST, path)
            .header("idempotency-key", key)
            .json(body);
        self.send(request).await
    }

    /// Opens the live stream (`query` like `?world=lab`); it starts with what is committed
    /// from now on.
    pub async fn events(&self, query: &str) -> Result<EventStream, ClientError> {
        let response = self
            .request(Method::GET, &format!("/api/v1/events{query}"))
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
                    });
                }
            }
        }
    }
}
