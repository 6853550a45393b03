//! A client for a running Holdpoint server: JSON requests, and the live event stream read as
//! server-sent events.

use std::time::Duration;

use holdpoint_protocol::sse::SseDecoder;
use reqwest::header::HeaderMap;
/// What requests are built with, for callers that build their own.
pub use reqwest::{Method, RequestBuilder};
use serde_json::Value;

use crate::PATIENCE;

/// Talks to one server as one caller.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// A response: its status, headers and JSON body (`Null` when the body is empty or not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// The body, after checking the status.
    #[track_caller]
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(
            self.status, status,
            "unexpected status; the body: {}",
            self.text
        );
        self.body
    }

    /// The error's code and message, after checking the status.
    #[track_caller]
    pub fn error(self, status: u16) -> (String, String) {
        let body = self.expect(status);
        let error = &body["error"];
        (
            error["code"].as_str().unwrap_or_default().to_owned(),
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    }
}

impl Api {
    /// `base` is like `http://127.0.0.1:7717`.
    pub fn new(base: &str, token: Option<&str>) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
        }
    }

    /// The same server, another caller.
    pub fn as_token(&self, token: &str) -> Api {
        Api {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    /// No credentials at all.
    pub fn anonymous(&self) -> Api {
        Api {
            token: None,
            ..self.clone()
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// A request to `path` (from the server's root), with this caller's token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    pub async fn send(&self, request: RequestBuilder) -> Reply {
        self.try_send(request).await.expect("the request failed")
    }

    /// Like [`Api::send`], but a server that cannot be reached, or that dies before it
    /// answers, is an error rather than a panic: for clients of several nodes, which then
    /// try another.
    pub async fn try_send(&self, request: RequestBuilder) -> Result<Reply, reqwest::Error> {
        let response = tokio::time::timeout(PATIENCE * 3, request.send())
            .await
            .expect("the server did not answer in time")?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.request(Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(self.request(Method::POST, path).json(&body))
            .await
    }

    pub async fn put(&self, path: &str, body: Value) -> Reply {
        self.send(self.request(Method::PUT, path).json(&body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Reply {
        self.send(self.request(Method::PATCH, path).json(&body))
            .await
    }

    /// Opens `GET /api/v1/events` (with `query`, and `Last-Event-ID` if given).
    pub async fn events(&self, query: &str, last_event_id: Option<u64>) -> Sse {
        match self.try_events(query, last_event_id).await {
            Ok(sse) => sse,
            Err(Refused::Status(reply)) => panic!("the stream was refused: {}", reply.text),
            Err(Refused::Unreachable(e)) => panic!("the stream request failed: {e}"),
        }
    }

    /// Like [`Api::events`], but a server that cannot be reached, or that refuses the
    /// stream, is an error rather than a panic: for clients that reconnect.
    pub async fn try_events(
        &self,
        query: &str,
        last_event_id: Option<u64>,
    ) -> Result<Sse, Refused> {
        let mut r = self.request(Method::GET, &format!("/api/v1/events{query}"));
        if let Some(id) = last_event_id {
            r = r.header("last-event-id", id.to_string());
        }
        let response = tokio::time::timeout(PATIENCE, r.send())
            .await
            .expect("the stream did not open in time")
            .map_err(Refused::Unreachable)?;
        if response.status().as_u16() != 200 {
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(Refused::Status(Reply {
                status,
                headers: HeaderMap::new(),
                body,
                text,
            }));
        }
        Ok(Sse {
            response,
            frames: SseDecoder::default(),
        })
    }
}

/// Why a stream did not open.
#[derive(Debug)]
pub enum Refused {
    /// The server answered, with another status than 200.
    Status(Reply),
    /// No server answered.
    Unreachable(reqwest::Error),
}

/// How a stream ended.
#[derive(Debug)]
pub enum Ended {
    /// The server closed it.
    Closed,
    /// The connection broke (the server died, say).
    Broke(reqwest::Error),
}

/// One server-sent event.
#[derive(Clone, Debug)]
pub struct SseMessage {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// Reads a `text/event-stream`.
pub struct Sse {
    response: reqwest::Response,
    frames: SseDecoder,
}

impl Sse {
    /// The next message (comments and heartbeats skipped), or `None` when the stream ends.
    pub async fn try_next(&mut self, patience: Duration) -> Option<SseMessage> {
        match self.read(patience).await {
            Ok(message) => message,
            Err(Ended::Closed) => None,
            Err(Ended::Broke(e)) => panic!("the stream broke: {e}"),
        }
    }

    /// The next message; `Ok(None)` when none came within `patience`, `Err` when the stream
    /// ended or broke.
    pub async fn read(&mut self, patience: Duration) -> Result<Option<SseMessage>, Ended> {
        loop {
            if let Some(frame) = self.frames.next_frame() {
                return Ok(Some(SseMessage {
                    id: frame.id.and_then(|id| id.parse().ok()),
                    event: frame.event,
                    data: serde_json::from_str(&frame.data).unwrap_or(Value::String(frame.data)),
                }));
            }
            let Ok(chunk) = tokio::time::timeout(patience, self.response.chunk()).await else {
                return Ok(None);
            };
            match chunk {
                Ok(Some(chunk)) => self.frames.push(&chunk),
                Ok(None) => return Err(Ended::Closed),
                Err(e) => return Err(Ended::Broke(e)),
            }
        }
    }

    /// Waits for a heartbeat (a comment line), keeping any message that comes with it for
    /// [`Sse::next`]; `false` if none came within `patience`.
    pub async fn heartbeat(&mut self, patience: Duration) -> bool {
        loop {
            let Ok(chunk) = tokio::time::timeout(patience, self.response.chunk()).await else {
                return false;
            };
            let Some(chunk) = chunk.expect("the stream broke") else {
                return false;
            };
            self.frames.push(&chunk);
            if String::from_utf8_lossy(&chunk)
                .lines()
                .any(|l| l.starts_with(':'))
            {
                return true;
            }
        }
    }

    pub async fn next(&mut self) -> SseMessage {
        self.try_next(PATIENCE)
            .await
            .expect("no event arrived in time")
    }

    /// Skips messages until one of type `event` arrives.
    pub async fn next_of(&mut self, event: &str) -> SseMessage {
        loop {
            let m = self.next().await;
            if m.event == event {
                return m;
            }
        }
    }
}
