//! A streaming client for OpenAI-compatible chat completions with tools: OpenAI, Ollama, vLLM,
//! llama.cpp's server, LM Studio, OpenRouter, and anything else that speaks the same API.
//!
//! [`LlmClient::complete`] sends one request, streams the answer (handing text to the caller
//! as it arrives), accumulates tool-call fragments by index, and returns the whole completion.
//! Failures become [`LlmError`]s that say what to fix. Rate limits, server errors and refused
//! connections are retried with backoff, but only before the first token: a half-streamed
//! answer is never repeated. Dropping the future cancels the request.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod request;
mod stream;

use std::time::Duration;

use holdpoint_protocol::{LlmSettings, Message, ToolCall};
use serde_json::Value;

pub use error::LlmError;
/// The answer's parsers without a connection, for the fuzz targets (`fuzz/`).
#[doc(hidden)]
pub use stream::{StreamReader, whole};

/// A tool as the LLM is told of it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// One request: the agent's settings, its instructions, the conversation and the tools.
#[derive(Clone, Copy, Debug)]
pub struct ChatRequest<'a> {
    pub settings: &'a LlmSettings,
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
}

/// Token counts, when the server reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A whole answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

/// How long to wait, and how often to try again.
#[derive(Clone, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    /// Until the response's headers arrive.
    pub first_byte: Duration,
    /// Between two pieces of a streamed answer.
    pub idle: Duration,
    /// Extra attempts after a rate limit, a server error or a refused connection.
    pub retries: u32,
    /// The first wait between attempts; it doubles each time.
    pub backoff: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(90),
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// Shares connections between requests; cheap to clone.
#[derive(Clone, Debug)]
pub struct LlmClient {
    http: reqwest::Client,
    timeouts: Timeouts,
}

/// The longest a server may ask us to wait before retrying.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

impl LlmClient {
    pub fn new(timeouts: Timeouts) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .user_agent(concat!("holdpoint/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Setup {
                message: e.to_string(),
            })?;
        Ok(LlmClient { http, timeouts })
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// Sends the request and streams the answer; `on_text` gets each piece of text as it
    /// arrives.
    pub async fn complete(
        &self,
        req: ChatRequest<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let prepared = request::prepare(req)?;
        let mut attempt = 0;
        loop {
            let mut started = false;
            let result = self
                .attempt(&prepared, &mut |t: &str| {
                    started = true;
                    on_text(t);
                })
                .await;
            let wait = match &result {
                Err(e) if !started && attempt < self.timeouts.retries => {
                    e.retry_after(self.timeouts.backoff * 2u32.pow(attempt))
                }
                _ => None,
            };
            match wait {
                Some(wait) => {
                    tracing::info!(attempt, error = %result.as_ref().err().map(ToString::to_string).unwrap_or_default(), "retrying the LLM request");
                    tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
                    attempt += 1;
                }
                None => return result,
            }
        }
    }

    async fn attempt(
        &self,
        p: &request::Prepared,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let mut builder = self
            .http
            .post(&p.url)
            .headers(p.headers.clone())
            .body(p.body.clone());
        builder = builder.header(reqwest::header::CONTENT_TYPE, "application/json");
        let response = tokio::time::timeout(self.timeouts.first_byte, builder.send())
            .await
            .map_err(|_| LlmError::Timeout {
                url: p.url.clone(),
                waited: self.timeouts.first_byte,
            })?
            .map_err(|e| LlmError::from_send(&p.url, &e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = tokio::time::timeout(self.timeouts.idle, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(LlmError::from_status(
                status.as_u16(),
                &body,
                p,
                retry_after,
            ));
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            let body = tokio::time::timeout(self.timeouts.idle, response.bytes())
                .await
                .map_err(|_| LlmError::Stalled {
                    waited: self.timeouts.idle,
                })?
                .map_err(|e| LlmError::ConnectionLost {
                    message: e.to_string(),
                })?;
            return stream::whole(&body, on_text);
        }
        stream::read(response, self.timeouts.idle, on_text).await
    }
}
