//! Building the HTTP request: URL, headers, and the JSON body in the OpenAI shape.

use holdpoint_protocol::{Message, MessageRole};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::{ChatRequest, LlmError};

/// A request ready to send (again, on a retry).
pub(crate) struct Prepared {
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) model: String,
    pub(crate) api_key_env: Option<String>,
}

pub(crate) fn prepare(req: ChatRequest<'_>) -> Result<Prepared, LlmError> {
    let s = req.settings;
    let base = s.base_url.trim().trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LlmError::Settings {
            message: format!("base_url {base:?} must start with http:// or https://"),
        });
    }
    let url = format!("{base}/chat/completions");
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    if let Some(var) = &s.api_key_env {
        let key = std::env::var(var).ok().filter(|k| !k.trim().is_empty());
        let key = key.ok_or_else(|| LlmError::MissingApiKey { var: var.clone() })?;
        let value = HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
            LlmError::Settings {
                message: format!("the API key in ${var} has characters a header cannot carry"),
            }
        })?;
        headers.insert(AUTHORIZATION, value);
    }
    for (name, value) in &s.headers {
        let bad = |what: &str| LlmError::Settings {
            message: format!("header {name:?}: invalid {what}"),
        };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
        let value = HeaderValue::from_str(value).map_err(|_| bad("value"))?;
        headers.insert(name, value);
    }
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        messages.push(json!({ "role": "system", "content": req.system }));
    }
    messages.extend(req.messages.iter().map(message));
    let mut body = json!({ "model": s.model, "messages": messages, "stream": true });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(t) = s.temperature {
        body["temperature"] = json!(t);
    }
    let body = serde_json::to_vec(&body).map_err(|e| LlmError::Settings {
        message: e.to_string(),
    })?;
    Ok(Prepared {
        url,
        headers,
        body,
        model: s.model.clone(),
        api_key_env: s.api_key_env.clone(),
    })
}

fn message(m: &Message) -> Value {
    match m.role {
        MessageRole::User => {
            json!({ "role": "user", "content": m.content.clone().unwrap_or_default() })
        }
        MessageRole::Assistant => {
            let mut v = json!({ "role": "assistant", "content": m.content });
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
            }
            v
        }
        MessageRole::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id,
            "content": m.content.clone().unwrap_or_default(),
        }),
    }
}
