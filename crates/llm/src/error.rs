//! What can go wrong talking to an LLM, said so a person can fix it.

use std::time::Duration;

use crate::request::Prepared;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("the agent's API key is missing: set the environment variable {var}")]
    MissingApiKey { var: String },
    #[error("the agent's LLM settings are invalid: {message}")]
    Settings { message: String },
    #[error("the LLM at {url} refused the API key (HTTP {status}){hint}: {body}")]
    Unauthorized {
        url: String,
        status: u16,
        hint: String,
        body: String,
    },
    #[error(
        "the LLM at {url} answered 404 Not Found: check the base URL (up to /v1) and the model name {model:?}: {body}"
    )]
    NotFound {
        url: String,
        model: String,
        body: String,
    },
    #[error("the LLM at {url} is rate limiting (HTTP 429): {body}")]
    RateLimited {
        url: String,
        body: String,
        retry_after: Option<Duration>,
    },
    #[error("the LLM at {url} failed (HTTP {status}): {body}")]
    Server {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the LLM at {url} refused the request (HTTP {status}): {body}")]
    Rejected {
        url: String,
        status: u16,
        body: String,
    },
    #[error(
        "cannot reach the LLM at {url}: {message} (is the server running, and is the base URL right?)"
    )]
    Connect { url: String, message: String },
    #[error("the LLM at {url} did not answer within {waited:?}")]
    Timeout {
        url: String,
        waited: std::time::Duration,
    },
    #[error("the LLM's answer stalled: nothing arrived for {waited:?}")]
    Stalled { waited: std::time::Duration },
    #[error("the connection to the LLM was lost mid-answer: {message}")]
    ConnectionLost { message: String },
    #[error("the LLM's answer could not be read: {message}")]
    Malformed { message: String },
    #[error("the LLM reported an error: {message}")]
    Reported { message: String },
    #[error("the HTTP client could not start: {message}")]
    Setup { message: String },
}

/// Response bodies are quoted in errors only this far.
const BODY_EXCERPT: usize = 300;

fn excerpt(body: &str) -> String {
    let body = body.trim();
    let mut out: String = body.chars().take(BODY_EXCERPT).collect();
    if out.len() < body.len() {
        out.push('…');
    }
    if out.is_empty() {
        "(empty body)".into()
    } else {
        out
    }
}

impl LlmError {
    pub(crate) fn from_status(
        status: u16,
        body: &str,
        p: &Prepared,
        retry_after: Option<Duration>,
    ) -> Self {
        let url = p.url.clone();
        let body = excerpt(body);
        match status {
            401 | 403 => {
                let hint = match &p.api_key_env {
                    Some(var) => format!(" — check the key in ${var}"),
                    None => " — this agent sends no API key; set llm.api_key_env".into(),
                };
                LlmError::Unauthorized {
                    url,
                    status,
                    hint,
                    body,
                }
            }
            404 => LlmError::NotFound {
                url,
                model: p.model.clone(),
                body,
            },
            429 => LlmError::RateLimited {
                url,
                body,
                retry_after,
            },
            500..=599 => LlmError::Server { url, status, body },
            _ => LlmError::Rejected { url, status, body },
        }
    }

    pub(crate) fn from_send(url: &str, e: &reqwest::Error) -> Self {
        let message = holdpoint_protocol::error_chain(e);
        if e.is_timeout() {
            return LlmError::Timeout {
                url: url.into(),
                waited: std::time::Duration::ZERO,
            };
        }
        LlmError::Connect {
            url: url.into(),
            message,
        }
    }

    /// How long to wait before trying again, if this error is worth another attempt.
    pub(crate) fn retry_after(&self, backoff: Duration) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } => Some(retry_after.unwrap_or(backoff)),
            LlmError::Server { .. } | LlmError::Connect { .. } => Some(backoff),
            _ => None,
        }
    }
}
