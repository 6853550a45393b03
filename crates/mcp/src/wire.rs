//! MCP tasks as revision 2025-11-25 puts them on the wire, for a gateway built on rmcp 3.11,
//! whose model knows only the later tasks extension (SEP-2663): it drops the `task` of a
//! `tools/call`, reads `tasks/get` and `tasks/cancel` as that extension's (refusing clients
//! that did not declare it), and has no place for the `tasks` capability or a tool's
//! `execution`. So the messages are adapted as JSON on their way in and out: the four task
//! requests reach the gateway as requests of its own ([`CALL_AS_TASK`] and the `TASKS_*`),
//! with their parameters untouched, and the `initialize` and `tools/list` answers of a
//! 2025-11-25 session declare what the gateway serves.
//!
//! Both transports adapt through these two: the stdio relay line by line (`stdio.rs`), the
//! streamable HTTP endpoint a request's body and each server-sent event of its answer
//! (`http_gateway.rs`). Only messages that can need it are parsed, so calls pay nothing for
//! this.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::error::Category;
use serde_json::{Value, json};

/// A `tools/call` with `task`: the call runs as a task.
pub const CALL_AS_TASK: &str = "holdpoint/tools/call-as-task";
pub const TASKS_GET: &str = "holdpoint/tasks/get";
pub const TASKS_RESULT: &str = "holdpoint/tasks/result";
pub const TASKS_CANCEL: &str = "holdpoint/tasks/cancel";
pub const TASKS_LIST: &str = "holdpoint/tasks/list";

use crate::gateway::TASK_REQUIRED_META;

/// The revision that has tasks in this form.
const TASKS_REVISION: &str = "2025-11-25";

/// One message from the client (a line, or a request's body), as the gateway's SDK is to
/// read it: `Some` when it changed.
pub fn inbound(line: &[u8]) -> Option<Vec<u8>> {
    if !contains(line, b"\"task") {
        return None;
    }
    let mut message: Value = serde_json::from_slice(line).ok()?;
    let method = message.get("method")?.as_str()?;
    let ours = match method {
        "tools/call" if message["params"].get("task").is_some() => CALL_AS_TASK,
        "tasks/get" => TASKS_GET,
        "tasks/result" => TASKS_RESULT,
        "tasks/cancel" => TASKS_CANCEL,
        "tasks/list" => TASKS_LIST,
        _ => return None,
    };
    message["method"] = json!(ours);
    serde_json::to_vec(&message).ok()
}

/// JSON-RPC 2.0's error for what is not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0's error for JSON that is not a request, a notification or a response.
pub const INVALID_REQUEST: i32 = -32600;

/// A message from the client that the gateway answers itself instead of passing it on, as
/// JSON-RPC 2.0 asks: it is not JSON (or not UTF-8), or it is JSON but not one message of
/// MCP (no `"jsonrpc": "2.0"`, an id that is neither a string nor a number, a batch…).
#[derive(Debug)]
pub struct Unreadable {
    /// The error response: [`PARSE_ERROR`] with `id: null`, or [`INVALID_REQUEST`] with the
    /// message's id when it has one, else `null`.
    pub answer: Vec<u8>,
    /// It has a method and no id: a notification, which JSON-RPC never answers (on stdio it
    /// is dropped; over HTTP the POST still needs an answer).
    pub notification: bool,
}

/// Whether the gateway's SDK can read `message` (a line, or a request's body, after
/// [`inbound`]); if not, the answer to give. The SDK itself would drop what is not JSON
/// without a word, and answer the rest with an error that has no `id`.
pub fn check(message: &[u8]) -> Result<(), Unreadable> {
    let message = message.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(message);
    let Err(e) = serde_json::from_slice::<ClientJsonRpcMessage>(message) else {
        return Ok(());
    };
    let parsed = match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => None,
        Category::Data => serde_json::from_slice::<Value>(message).ok(),
    };
    let Some(value) = parsed else {
        let why = match std::str::from_utf8(message) {
            Ok(_) => format!("the message is not JSON: {e}"),
            Err(_) => "the message is not UTF-8 text".to_owned(),
        };
        return Err(Unreadable {
            answer: error_response(&Value::Null, PARSE_ERROR, &why),
            notification: false,
        });
    };
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let why = match &value {
        Value::Array(_) => {
            "a batch (a JSON array) is not served: send one message at a time".into()
        }
        Value::Object(o) if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") => {
            "jsonrpc: must be \"2.0\"".into()
        }
        Value::Object(o) if o.get("id").is_some_and(|i| i != &id) => {
            "id: must be a string or a number".into()
        }
        Value::Object(o) if o.contains_key("method") && !o["method"].is_string() => {
            "method: must be a string".into()
        }
        Value::Object(_) => format!("not a JSON-RPC message of MCP: {e}"),
        _ => "a JSON-RPC message is a JSON object".into(),
    };
    let notification =
        value.get("id").is_none() && value.get("method").is_some_and(Value::is_string);
    Err(Unreadable {
        answer: error_response(&id, INVALID_REQUEST, &why),
        notification,
    })
}

/// A JSON-RPC error response, as JSON.
pub fn error_response(id: &Value, code: i32, message: &str) -> Vec<u8> {
    let response = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    response.to_string().into_bytes()
}

/// The messages to one client, as 2025-11-25 wants them.
#[derive(Default)]
pub struct Outbound {
    /// `initialize` was answered.
    initialized: bool,
    /// The session speaks 2025-11-25, which has tasks.
    tasks: bool,
}

impl Outbound {
    /// One line to the client: `Some` when it changed.
    pub fn adapt(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        let wanted = if self.initialized {
            (self.tasks && contains(line, b"\"inputSchema\""))
                || contains(line, TASK_REQUIRED_META.as_bytes())
        } else {
            contains(line, b"\"capabilities\"")
        };
        if !wanted {
            return None;
        }
        let mut message: Value = serde_json::from_slice(line).ok()?;
        let revision = message["result"]["protocolVersion"]
            .as_str()
            .map(str::to_owned);
        let result = message.get_mut("result")?.as_object_mut()?;
        if !self.initialized {
            let capabilities = result.get_mut("capabilities")?.as_object_mut()?;
            self.initialized = true;
            self.tasks = revision.as_deref() == Some(TASKS_REVISION);
            if !self.tasks {
                return None;
            }
            // What `tools/call` as a task needs, and the task requests served.
            capabilities.insert(
                "tasks".into(),
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
            );
        } else {
            // Holdpoint runs any tool as a task of its own, whatever its server does; a tool
            // whose server requires tasks is marked by the gateway, and must be called so.
            let tools = result.get_mut("tools")?.as_array_mut()?;
            for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                let required = take_mark(tool);
                if self.tasks {
                    let support = if required { "required" } else { "optional" };
                    tool.insert("execution".into(), json!({"taskSupport": support}));
                }
            }
        }
        serde_json::to_vec(&message).ok()
    }
}

impl Outbound {
    /// One server-sent event to the client (`data:` with one JSON-RPC message, and perhaps an
    /// `id:`): `Some` when its message changed. Other lines are kept as they are.
    pub fn adapt_event(&mut self, event: &[u8]) -> Option<Vec<u8>> {
        let mut changed = None;
        let mut out = Vec::with_capacity(event.len() + 64);
        for line in event.split_inclusive(|&b| b == b'\n') {
            let data = line.strip_prefix(b"data:").filter(|_| changed.is_none());
            let adapted = data.and_then(|data| {
                let message = data.strip_prefix(b" ").unwrap_or(data);
                self.adapt(message.trim_ascii_end())
            });
            match adapted {
                Some(message) => {
                    out.extend_from_slice(b"data: ");
                    out.extend_from_slice(&message);
                    out.push(b'\n');
                    changed = Some(());
                }
                None => out.extend_from_slice(line),
            }
        }
        changed.map(|()| out)
    }
}

/// Takes the gateway's mark off `tool` (and its `_meta`, when nothing else is left in it):
/// whether the tool must be called as a task.
fn take_mark(tool: &mut serde_json::Map<String, Value>) -> bool {
    let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut) else {
        return false;
    };
    let marked = meta.remove(TASK_REQUIRED_META).is_some();
    if marked && meta.is_empty() {
        tool.remove("_meta");
    }
    marked
}

fn contains(line: &[u8], needle: &[u8]) -> bool {
    line.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapted(line: Value) -> Option<Value> {
        inbound(line.to_string().as_bytes()).map(|b| serde_json::from_slice(&b).unwrap())
    }

    #[test]
    fn task_requests_reach_the_gateway_under_its_own_names_with_their_params() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "up__x", "arguments": {}, "task": {"ttl": 60000}}});
        let got = adapted(call).unwrap();
        assert_eq!(got["method"], CALL_AS_TASK);
        assert_eq!(got["params"]["task"]["ttl"], 60000);
        let get =
            json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"taskId": "t"}});
        assert_eq!(adapted(get).unwrap()["method"], TASKS_GET);
        // A plain call, even one whose arguments say "task", is left alone.
        let plain = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "up__x", "arguments": {"task": 1}}});
        assert_eq!(adapted(plain), None);
    }

    #[test]
    fn a_2025_11_25_session_is_told_that_tools_can_be_called_as_tasks() {
        let mut out = Outbound::default();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "holdpoint", "version": "0"}}});
        let got: Value =
            serde_json::from_slice(&out.adapt(init.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(
            got["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let list = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"}}]}});
        let got: Value =
            serde_json::from_slice(&out.adapt(list.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(
            got["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
    }

    #[test]
    fn a_tool_whose_server_requires_tasks_is_listed_so_without_the_gateways_mark() {
        let mut out = Outbound::default();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "holdpoint", "version": "0"}}});
        out.adapt(init.to_string().as_bytes()).unwrap();
        let list = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"},
             "_meta": {TASK_REQUIRED_META: "required"}},
            {"name": "b", "inputSchema": {"type": "object"},
             "_meta": {TASK_REQUIRED_META: "required", "theirs": 1}},
            {"name": "c", "inputSchema": {"type": "object"}, "_meta": {"theirs": 2}}]}});
        let got: Value =
            serde_json::from_slice(&out.adapt(list.to_string().as_bytes()).unwrap()).unwrap();
        let tools = &got["result"]["tools"];
        assert_eq!(tools[0]["execution"]["taskSupport"], "required");
        assert_eq!(tools[0].get("_meta"), None, "{got}");
        assert_eq!(tools[1]["execution"]["taskSupport"], "required");
        assert_eq!(tools[1]["_meta"], json!({"theirs": 1}));
        assert_eq!(tools[2]["execution"]["taskSupport"], "optional");
        assert_eq!(tools[2]["_meta"], json!({"theirs": 2}));
        // A session without tasks is never shown the mark either.
        let mut old = Outbound::default();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "holdpoint", "version": "0"}}});
        assert_eq!(old.adapt(init.to_string().as_bytes()), None);
        let got: Value =
            serde_json::from_slice(&old.adapt(list.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(got["result"]["tools"][0].get("_meta"), None, "{got}");
        assert_eq!(got["result"]["tools"][0].get("execution"), None, "{got}");
    }

    #[test]
    fn server_sent_events_are_adapted_as_lines_are() {
        let mut out = Outbound::default();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "holdpoint", "version": "0"}}});
        let event = format!("id: 0/1\ndata: {init}\n\n");
        let got = out.adapt_event(event.as_bytes()).unwrap();
        let got = String::from_utf8(got).unwrap();
        assert!(got.starts_with("id: 0/1\ndata: {"), "{got}");
        assert!(got.ends_with("}\n\n"), "{got}");
        let message: Value =
            serde_json::from_str(got.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        assert_eq!(
            message["result"]["capabilities"]["tasks"]["list"],
            json!({})
        );
        // A keep-alive comment, or an event that needs nothing, is left alone.
        assert_eq!(out.adapt_event(b":\n\n"), None);
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 0}});
        assert_eq!(
            out.adapt_event(format!("data: {progress}\n\n").as_bytes()),
            None
        );
    }

    fn refused(message: &[u8]) -> (Value, bool) {
        let unreadable = check(message).unwrap_err();
        let answer = serde_json::from_slice(&unreadable.answer).unwrap();
        (answer, unreadable.notification)
    }

    #[test]
    fn what_is_not_json_is_a_parse_error_with_a_null_id() {
        for message in [
            &b"hello"[..],
            b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/li",
            b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"\xff\xfe\"}",
            b"",
        ] {
            let (answer, notification) = refused(message);
            assert_eq!(answer["jsonrpc"], "2.0");
            assert_eq!(answer["id"], Value::Null, "{answer}");
            assert!(answer.as_object().unwrap().contains_key("id"));
            assert_eq!(answer["error"]["code"], PARSE_ERROR, "{answer}");
            assert!(!notification);
        }
        let (answer, _) = refused(b"\xff\xfe{}");
        assert_eq!(answer["error"]["message"], "the message is not UTF-8 text");
    }

    #[test]
    fn json_that_is_not_a_message_is_an_invalid_request_with_its_id_when_it_has_one() {
        let cases = [
            (
                json!({"id": 9, "method": "tools/list"}),
                json!(9),
                "jsonrpc",
            ),
            (
                json!({"jsonrpc": "1.0", "id": "a", "method": "ping"}),
                json!("a"),
                "jsonrpc",
            ),
            (
                json!({"jsonrpc": "2.0", "id": true, "method": "ping"}),
                Value::Null,
                "id",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 4, "method": 5}),
                json!(4),
                "method",
            ),
            (
                json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
                Value::Null,
                "batch",
            ),
            (json!("ping"), Value::Null, "object"),
        ];
        for (message, id, said) in cases {
            let (answer, notification) = refused(message.to_string().as_bytes());
            assert_eq!(
                answer["error"]["code"], INVALID_REQUEST,
                "{message}: {answer}"
            );
            assert_eq!(answer["id"], id, "{message}: {answer}");
            let text = answer["error"]["message"].as_str().unwrap();
            assert!(text.contains(said), "{message}: {text}");
            assert!(!notification, "{message}");
        }
        // A notification is never answered.
        let (_, notification) = refused(br#"{"method": "notifications/initialized"}"#);
        assert!(notification);
    }

    #[test]
    fn messages_of_mcp_pass() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": 5}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "holdpoint/tasks/get", "params": {}}),
        ] {
            assert!(check(message.to_string().as_bytes()).is_ok(), "{message}");
        }
        assert!(check(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}").is_ok());
    }

    #[test]
    fn older_revisions_are_not_told_of_tasks() {
        let mut out = Outbound::default();
        let init = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "holdpoint", "version": "0"}}});
        assert_eq!(out.adapt(init.to_string().as_bytes()), None);
        let list = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "a", "inputSchema": {"type": "object"}}]}});
        assert_eq!(out.adapt(list.to_string().as_bytes()), None);
    }
}
