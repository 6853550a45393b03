//! A2A's JSON-RPC binding: one request per POST, answered with one response or, for the
//! streaming methods, with server-sent events each carrying one whole response.

use serde_json::{Value, json};

/// The protocol version a request speaks, by its method's name: 1.0's are `PascalCase`
/// (`SendMessage`), 0.3's are paths (`message/send`). Answers and events go back in it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Version {
    V1,
    V03,
}

/// The methods Holdpoint serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    CancelTask,
    SubscribeToTask,
}

impl Method {
    fn named(name: &str) -> Option<(Method, Version)> {
        Some(match name {
            "SendMessage" => (Method::SendMessage, Version::V1),
            "SendStreamingMessage" => (Method::SendStreamingMessage, Version::V1),
            "GetTask" => (Method::GetTask, Version::V1),
            "CancelTask" => (Method::CancelTask, Version::V1),
            "SubscribeToTask" => (Method::SubscribeToTask, Version::V1),
            "message/send" => (Method::SendMessage, Version::V03),
            "message/stream" => (Method::SendStreamingMessage, Version::V03),
            "tasks/get" => (Method::GetTask, Version::V03),
            "tasks/cancel" => (Method::CancelTask, Version::V03),
            "tasks/resubscribe" => (Method::SubscribeToTask, Version::V03),
            _ => return None,
        })
    }

    /// Answered with a stream of events rather than one response.
    pub fn streams(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

/// A request read from a body: its id (echoed in the answer), method, version and params
/// (in 1.0's shapes whatever the version it came in).
#[derive(Debug)]
pub struct Request {
    pub id: Value,
    pub method: Method,
    pub version: Version,
    pub params: Value,
}

/// An error as JSON-RPC sends it, with the protocol's codes.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn parse(message: impl Into<String>) -> RpcError {
        RpcError::new(-32700, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> RpcError {
        RpcError::new(-32600, message)
    }

    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            -32601,
            format!(
                "method {method:?} is not served here: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask (A2A 1.0), or message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe (0.3)"
            ),
        )
    }

    /// Bad parameters, naming the field at fault.
    pub fn invalid_params(field: &str, message: impl Into<String>) -> RpcError {
        let message = message.into();
        RpcError {
            code: -32602,
            message: if field.is_empty() {
                message.clone()
            } else {
                format!("{field}: {message}")
            },
            data: Some(json!({ "field": field, "message": message })),
        }
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(-32603, message)
    }

    pub fn task_not_found(id: &str) -> RpcError {
        RpcError::new(-32001, format!("task {id:?} not found"))
    }

    pub fn not_cancelable(message: impl Into<String>) -> RpcError {
        RpcError::new(-32002, message)
    }

    /// What the task's state does not allow (a message to a finished task, say), or what the
    /// caller may not do.
    pub fn unsupported(message: impl Into<String>) -> RpcError {
        RpcError::new(-32004, message)
    }

    pub fn version_not_supported(version: &str) -> RpcError {
        RpcError::new(
            -32009,
            format!(
                "A2A version {version:?} is not supported: send A2A-Version 1.0, or use 0.3's methods"
            ),
        )
    }

    /// With `details` (a JSON object) for the caller to act on.
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }
}

/// Reads one request. `version_header` is the `A2A-Version` header: absent or `1.0` (any
/// patch) for 1.0's methods; 0.3's methods need none.
pub fn read(body: &[u8], version_header: Option<&str>) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (Value::Null, RpcError::parse(format!("not JSON: {e}"))))?;
    let Value::Object(mut object) = value else {
        return Err((
            Value::Null,
            RpcError::invalid_request("a request is one JSON-RPC object (batches are not served)"),
        ));
    };
    let id = match object.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) | None => {
            return Err((
                Value::Null,
                RpcError::invalid_request(
                    "id must be a string or a number (notifications are not served)",
                ),
            ));
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(name) = object.get("method").and_then(Value::as_str) else {
        return Err((id, RpcError::invalid_request("method must be a string")));
    };
    let Some((method, version)) = Method::named(name) else {
        return Err((id, RpcError::method_not_found(name)));
    };
    if version == Version::V1
        && let Some(header) = version_header.map(str::trim)
        && !(header == "1.0" || header.starts_with("1.0."))
    {
        return Err((id, RpcError::version_not_supported(header)));
    }
    let params = match object.remove("params") {
        Some(p @ Value::Object(_)) => p,
        _ => {
            return Err((id, RpcError::invalid_params("params", "must be an object")));
        }
    };
    let params = match version {
        Version::V1 => params,
        Version::V03 => crate::v03::params_in(params),
    };
    Ok(Request {
        id,
        method,
        version,
        params,
    })
}

/// A response carrying `result`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A response carrying `error`. In 1.0, `data` is what the protocol (and its SDKs) read: a
/// list of `google.rpc` details — an `ErrorInfo` whose `metadata` carries Holdpoint's details
/// as strings (`reason`, `field`, …), and for bad parameters a `BadRequest` naming the field.
/// In 0.3, `data` is Holdpoint's details as they are.
pub fn error(id: &Value, error: &RpcError, version: Version) -> Value {
    let mut e = json!({ "code": error.code, "message": error.message });
    if let Some(data) = &error.data {
        e["data"] = match version {
            Version::V03 => data.clone(),
            Version::V1 => details(error.code, data),
        };
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": e })
}

fn details(code: i64, data: &Value) -> Value {
    let metadata: serde_json::Map<String, Value> = data
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            (k.clone(), Value::String(text))
        })
        .collect();
    let reason = data
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_ascii_uppercase)
        .unwrap_or_else(|| {
            match code {
                -32602 => "INVALID_PARAMS",
                -32001 => "TASK_NOT_FOUND",
                -32002 => "TASK_NOT_CANCELABLE",
                -32004 => "UNSUPPORTED_OPERATION",
                -32009 => "VERSION_NOT_SUPPORTED",
                _ => "INTERNAL",
            }
            .to_owned()
        });
    let mut out = vec![json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "holdpoint",
        "metadata": metadata,
    })];
    if code == -32602
        && let Some(field) = data.get("field").and_then(Value::as_str)
    {
        out.push(json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": data.get("message").and_then(Value::as_str).unwrap_or_default()}],
        }));
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn code(body: &str, header: Option<&str>) -> i64 {
        read(body.as_bytes(), header).unwrap_err().1.code
    }

    #[test]
    fn requests_are_read_by_their_method_in_either_version() {
        let r = read(
            br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}"#,
            Some("1.0"),
        )
        .unwrap();
        assert_eq!((r.method, r.version), (Method::GetTask, Version::V1));
        let r = read(
            br#"{"jsonrpc":"2.0","id":"a","method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}"#,
            None,
        )
        .unwrap();
        assert_eq!(
            (r.method, r.version),
            (Method::SendStreamingMessage, Version::V03)
        );
        assert_eq!(r.params["message"]["role"], "ROLE_USER");
        assert_eq!(r.params["message"]["parts"][0], json!({"text": "hi"}));
    }

    #[test]
    fn error_details_are_google_rpc_details_in_10_and_an_object_in_03() {
        let e = RpcError::invalid_params("message.role", "must be ROLE_USER");
        let v1 = error(&json!(1), &e, Version::V1);
        assert_eq!(
            v1["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(v1["error"]["data"][0]["metadata"]["field"], "message.role");
        assert_eq!(
            v1["error"]["data"][1]["fieldViolations"][0]["field"],
            "message.role"
        );
        let refused =
            RpcError::unsupported("no").with_data(json!({"reason": "agents_never_decide"}));
        let v1 = error(&json!(1), &refused, Version::V1);
        assert_eq!(v1["error"]["data"][0]["reason"], "AGENTS_NEVER_DECIDE");
        assert_eq!(
            v1["error"]["data"][0]["metadata"]["reason"],
            "agents_never_decide"
        );
        let v03 = error(&json!(1), &refused, Version::V03);
        assert_eq!(v03["error"]["data"]["reason"], "agents_never_decide");
    }

    #[test]
    fn malformed_requests_get_the_protocols_codes() {
        assert_eq!(code("{", None), -32700);
        assert_eq!(code("[]", None), -32600);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"GetTask","params":{}}"#, None),
            -32600
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}"#,
                None
            ),
            -32600
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"Nope","params":{}}"#,
                None
            ),
            -32601
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[]}"#,
                None
            ),
            -32602
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#,
                Some("2.0")
            ),
            -32009
        );
    }
}
