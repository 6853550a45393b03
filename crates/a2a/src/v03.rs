//! A2A 0.3's shapes, which kagent and older clients speak: `kind` on messages, parts and
//! events, lowercase roles and states (`input-required`), `final` on status updates, file
//! parts as `{"file": {"bytes"|"uri", "name", "mimeType"}}`, and answers that are the task or
//! message itself rather than 1.0's `{"task": …}`. Requests are turned into 1.0's shapes as
//! they are read; answers are turned into 0.3's as they are written.

use holdpoint_protocol::a2a::{A2aMessage, Part, StreamResponse, Task, TaskState, TaskStatus};
use serde_json::{Map, Value, json};

/// A 0.3 request's params in 1.0's shapes.
pub fn params_in(mut params: Value) -> Value {
    if let Some(message) = params.get_mut("message") {
        message_in(message);
    }
    if let Some(config) = params
        .get_mut("configuration")
        .and_then(Value::as_object_mut)
        && config.remove("blocking") == Some(Value::Bool(false))
    {
        config.insert("returnImmediately".into(), Value::Bool(true));
    }
    params
}

fn message_in(message: &mut Value) {
    let Some(m) = message.as_object_mut() else {
        return;
    };
    m.remove("kind");
    if let Some(role) = m.get_mut("role") {
        let named = match role.as_str() {
            Some("user") => Some("ROLE_USER"),
            Some("agent") => Some("ROLE_AGENT"),
            _ => None,
        };
        if let Some(named) = named {
            *role = Value::from(named);
        }
    }
    if let Some(parts) = m.get_mut("parts").and_then(Value::as_array_mut) {
        parts.iter_mut().for_each(part_in);
    }
}

fn part_in(part: &mut Value) {
    let Some(p) = part.as_object_mut() else {
        return;
    };
    let kind = p.remove("kind");
    if kind.as_ref().and_then(Value::as_str) == Some("file")
        && let Some(Value::Object(file)) = p.remove("file")
    {
        for (from, to) in [
            ("bytes", "raw"),
            ("uri", "url"),
            ("name", "filename"),
            ("mimeType", "mediaType"),
        ] {
            if let Some(v) = file.get(from) {
                p.insert(to.into(), v.clone());
            }
        }
    }
}

/// The name of a state in 0.3 (`input-required`).
pub fn state_name(state: TaskState) -> String {
    let name: &'static str = state.into();
    name.trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-")
}

fn part_out(part: &Part) -> Value {
    let mut out = Map::new();
    if let Some(text) = &part.text {
        out.insert("kind".into(), "text".into());
        out.insert("text".into(), text.clone().into());
    } else if let Some(data) = &part.data {
        out.insert("kind".into(), "data".into());
        out.insert("data".into(), data.clone());
    } else {
        let mut file = Map::new();
        for (value, key) in [
            (&part.raw, "bytes"),
            (&part.url, "uri"),
            (&part.filename, "name"),
            (&part.media_type, "mimeType"),
        ] {
            if let Some(v) = value {
                file.insert(key.into(), v.clone().into());
            }
        }
        out.insert("kind".into(), "file".into());
        out.insert("file".into(), file.into());
    }
    if let Some(metadata) = &part.metadata {
        out.insert("metadata".into(), metadata.clone().into());
    }
    out.into()
}

fn message_out(message: &A2aMessage) -> Value {
    let mut out = json!({
        "kind": "message",
        "messageId": message.message_id,
        "role": match message.role {
            holdpoint_protocol::a2a::A2aRole::User => "user",
            holdpoint_protocol::a2a::A2aRole::Agent => "agent",
        },
        "parts": message.parts.iter().map(part_out).collect::<Vec<_>>(),
    });
    for (key, value) in [
        ("contextId", &message.context_id),
        ("taskId", &message.task_id),
    ] {
        if let Some(v) = value {
            out[key] = v.clone().into();
        }
    }
    if let Some(metadata) = &message.metadata {
        out["metadata"] = metadata.clone().into();
    }
    out
}

fn status_out(status: &TaskStatus) -> Value {
    let mut out = json!({ "state": state_name(status.state) });
    if let Some(message) = &status.message {
        out["message"] = message_out(message);
    }
    if let Some(t) = &status.timestamp {
        out["timestamp"] = t.clone().into();
    }
    out
}

/// A task as 0.3 writes it.
pub fn task_out(task: &Task) -> Value {
    let mut out = json!({
        "kind": "task",
        "id": task.id,
        "contextId": task.context_id,
        "status": status_out(&task.status),
    });
    if !task.artifacts.is_empty() {
        out["artifacts"] = task
            .artifacts
            .iter()
            .map(|a| {
                let mut artifact = json!({
                    "artifactId": a.artifact_id,
                    "parts": a.parts.iter().map(part_out).collect::<Vec<_>>(),
                });
                if let Some(name) = &a.name {
                    artifact["name"] = name.clone().into();
                }
                artifact
            })
            .collect();
    }
    if !task.history.is_empty() {
        out["history"] = task.history.iter().map(message_out).collect();
    }
    if let Some(metadata) = &task.metadata {
        out["metadata"] = metadata.clone().into();
    }
    out
}

/// A `SendMessage` answer or a stream's event as 0.3 writes it: the object itself, with its
/// `kind`; a status update is `final` when the stream ends with it.
pub fn response_out(response: &StreamResponse) -> Value {
    match response {
        StreamResponse::Task(task) => task_out(task),
        StreamResponse::Message(message) => message_out(message),
        StreamResponse::StatusUpdate(update) => {
            let state = update.status.state;
            let mut out = json!({
                "kind": "status-update",
                "taskId": update.task_id,
                "contextId": update.context_id,
                "status": status_out(&update.status),
                "final": state.is_terminal() || state.is_interrupted(),
            });
            if let Some(metadata) = &update.metadata {
                out["metadata"] = metadata.clone().into();
            }
            out
        }
        StreamResponse::ArtifactUpdate(update) => {
            let mut artifact = json!({
                "artifactId": update.artifact.artifact_id,
                "parts": update.artifact.parts.iter().map(part_out).collect::<Vec<_>>(),
            });
            if let Some(name) = &update.artifact.name {
                artifact["name"] = name.clone().into();
            }
            json!({
                "kind": "artifact-update",
                "taskId": update.task_id,
                "contextId": update.context_id,
                "artifact": artifact,
                "append": update.append,
                "lastChunk": update.last_chunk,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use holdpoint_protocol::a2a::TaskStatusUpdateEvent;

    #[test]
    fn an_input_required_update_is_final_in_03_and_names_its_state_in_lowercase() {
        let update = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::InputRequired,
                message: Some(A2aMessage {
                    message_id: "m".into(),
                    context_id: None,
                    task_id: None,
                    role: holdpoint_protocol::a2a::A2aRole::Agent,
                    parts: vec![Part::data(json!({"decision_type": "approve"}))],
                    metadata: None,
                }),
                timestamp: None,
            },
            metadata: None,
        });
        let out = response_out(&update);
        assert_eq!(out["kind"], "status-update");
        assert_eq!(out["final"], true);
        assert_eq!(out["status"]["state"], "input-required");
        assert_eq!(out["status"]["message"]["role"], "agent");
        assert_eq!(out["status"]["message"]["parts"][0]["kind"], "data");
    }

    #[test]
    fn file_parts_and_blocking_are_read_as_10_writes_them() {
        let params = params_in(json!({
            "message": {"kind": "message", "messageId": "m", "role": "agent", "parts": [
                {"kind": "file", "file": {"uri": "https://x/y", "name": "y", "mimeType": "text/plain"}}
            ]},
            "configuration": {"blocking": false}
        }));
        assert_eq!(
            params["message"]["parts"][0],
            json!({"url": "https://x/y", "filename": "y", "mediaType": "text/plain"})
        );
        assert_eq!(params["message"]["role"], "ROLE_AGENT");
        assert_eq!(params["configuration"]["returnImmediately"], true);
    }
}
