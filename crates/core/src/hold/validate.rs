//! Validation of what agents and LLMs supply. Errors name the field and say what is allowed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use holdpoint_protocol::{ApprovalRequest, QuestionRequest, QuestionSpec};
use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::error::ValidationError;
use crate::limits::Limits;

/// A world, chat, agent or call name: not empty, bounded, no control characters.
pub fn check_name(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    check_text(field, value, max)
}

fn check_text(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.len() > max {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes long; at most {max} are allowed", value.len()),
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(ValidationError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

fn check_optional_text(
    field: &str,
    value: Option<&str>,
    max: usize,
) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| check_text(field, v, max))
}

fn check_json_size(field: &str, value: &Value, max: usize) -> Result<(), ValidationError> {
    let size = canonical::to_string(value).len();
    if size > max {
        return Err(ValidationError::new(
            field,
            format!("is {size} bytes as JSON; at most {max} are allowed"),
        ));
    }
    Ok(())
}

/// The bound on the arguments of a call a person is asked about: they are stored with its
/// hold and shown on its card. A call that policy allows or denies at once needs no hold,
/// so its arguments are bounded only by the request that carries them.
pub fn check_held_arguments(req: &ApprovalRequest, limits: &Limits) -> Result<(), ValidationError> {
    check_json_size("arguments", &req.arguments, limits.arguments)
}

/// Tool names: letters, digits, `_`, `-`, `.`, `:` and `/` (MCP tools are `server__tool`).
fn check_tool_name(value: &str, max: usize) -> Result<(), ValidationError> {
    check_name("tool", value, max)?;
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.:/".contains(*c)))
    {
        return Err(ValidationError::new(
            "tool",
            format!("{c:?} is not allowed in a tool name (letters, digits, _ - . : / only)"),
        ));
    }
    Ok(())
}

/// Checks an approval request. Returns the arguments' schema validator's verdict separately
/// so callers can tell "this call is malformed" (which goes back to the LLM) from the rest.
pub fn validate_approval(req: &ApprovalRequest, limits: &Limits) -> Result<(), ValidationError> {
    check_tool_name(&req.tool, limits.tool)?;
    if let Some(id) = &req.tool_call_id {
        check_name("tool_call_id", id, limits.name)?;
    }
    check_optional_text("description", req.description.as_deref(), limits.reason)?;
    if let Some(mcp) = &req.mcp {
        check_name("mcp.server", &mcp.server, limits.tool)?;
        check_name("mcp.tool", &mcp.tool, limits.tool)?;
        // The card shows the server and tool; policy and grants match `tool`: one call.
        if req.tool != crate::mcp::tool_name(&mcp.server, &mcp.tool) {
            return Err(ValidationError::new(
                "mcp",
                format!(
                    "names server {:?} and tool {:?}, so tool must be {:?}",
                    mcp.server,
                    mcp.tool,
                    crate::mcp::tool_name(&mcp.server, &mcp.tool)
                ),
            ));
        }
    }
    if !req.arguments.is_object() {
        return Err(ValidationError::new("arguments", "must be a JSON object"));
    }
    // The arguments' size is bounded where they are kept: see `check_held_arguments`.
    if let Some(schema) = &req.schema {
        check_json_size("schema", schema, limits.schema)?;
        check_against_schema(schema, &req.arguments)?;
    }
    Ok(())
}

/// Schemas compiled already, by the SHA-256 of their canonical JSON. A tool sends the same
/// schema with every call, and compiling one (which checks it against its meta-schema first)
/// costs many times what checking arguments against it does.
static COMPILED: LazyLock<Mutex<HashMap<[u8; 32], Arc<jsonschema::Validator>>>> =
    LazyLock::new(Mutex::default);
/// Past this many schemas the cache starts afresh: a caller sending made-up schemas cannot
/// grow it without bound.
const COMPILED_MAX: usize = 1024;

/// `schema`, compiled (or the one compiled before from the same schema).
fn compiled(schema: &Value) -> Result<Arc<jsonschema::Validator>, ValidationError> {
    let key: [u8; 32] = Sha256::digest(canonical::to_string(schema).as_bytes()).into();
    if let Some(validator) = COMPILED.lock().get(&key) {
        return Ok(validator.clone());
    }
    let validator =
        Arc::new(jsonschema::validator_for(schema).map_err(|e| {
            ValidationError::new("schema", format!("is not a valid JSON Schema: {e}"))
        })?);
    let mut cache = COMPILED.lock();
    if cache.len() >= COMPILED_MAX {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

/// Checks arguments against a tool's JSON Schema (no remote references are fetched).
pub(crate) fn check_against_schema(
    schema: &Value,
    arguments: &Value,
) -> Result<(), ValidationError> {
    let validator = compiled(schema)?;
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .take(5)
        .map(|e| {
            let at = field_path(&e.instance_path().to_string());
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ValidationError::new(
            "arguments",
            format!("do not match the tool's schema: {}", problems.join("; ")),
        ))
    }
}

/// A JSON pointer into the arguments (`/files/0/path`) as people and models read a field's
/// name (`files[0].path`).
fn field_path(pointer: &str) -> String {
    let mut path = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            path.push_str(&format!("[{token}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&token);
        }
    }
    path
}

const QUESTION_FIELDS: &[&str] = &[
    "tool_call_id",
    "question",
    "options",
    "multiple",
    "confirm",
    "default_option",
    "context",
    "deadline",
];
const OPTION_FIELDS: &[&str] = &["id", "label", "description"];
const FREE_TEXT_HINTS: &[&str] = &[
    "free_text",
    "allow_free_text",
    "freeform",
    "free_form",
    "freetext",
    "text_input",
    "allow_other",
    "other",
    "input",
    "placeholder",
    "answer",
    "text",
    "type",
    "multiline",
];
const OPTIONS_ONLY: &str =
    "questions are options-only: free-text answers are not supported; offer the choices as options";

/// Reads a question from untrusted JSON (an LLM's tool call, an API body), refusing free-text
/// answer fields with a clear error.
pub fn parse_question(value: &Value) -> Result<QuestionRequest, ValidationError> {
    let Some(obj) = value.as_object() else {
        return Err(ValidationError::new("", "a question must be a JSON object"));
    };
    for key in obj.keys() {
        if !QUESTION_FIELDS.contains(&key.as_str()) {
            return Err(unknown_field(key, "", QUESTION_FIELDS));
        }
    }
    if let Some(Value::Array(options)) = obj.get("options") {
        for (i, o) in options.iter().enumerate() {
            if let Some(o) = o.as_object()
                && let Some(key) = o.keys().find(|k| !OPTION_FIELDS.contains(&k.as_str()))
            {
                return Err(unknown_field(key, &format!("options[{i}]"), OPTION_FIELDS));
            }
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ValidationError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })
}

fn unknown_field(key: &str, at: &str, allowed: &[&str]) -> ValidationError {
    let field = if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    };
    if FREE_TEXT_HINTS.contains(&key.to_ascii_lowercase().as_str()) {
        ValidationError::new(field, OPTIONS_ONLY)
    } else {
        ValidationError::new(
            field,
            format!("unknown field; allowed fields are {}", allowed.join(", ")),
        )
    }
}

/// Checks a question and returns what the hold will show.
pub fn validate_question(
    req: &QuestionRequest,
    limits: &Limits,
) -> Result<QuestionSpec, ValidationError> {
    check_name("question", &req.question, limits.question)?;
    if let Some(id) = &req.tool_call_id {
        check_name("tool_call_id", id, limits.name)?;
    }
    if req.options.is_empty() {
        return Err(ValidationError::new(
            "options",
            format!("give at least one option ({OPTIONS_ONLY})"),
        ));
    }
    if req.options.len() > limits.options {
        return Err(ValidationError::new(
            "options",
            format!(
                "{} options given; at most {} are allowed",
                req.options.len(),
                limits.options
            ),
        ));
    }
    let mut ids = HashSet::new();
    for (i, o) in req.options.iter().enumerate() {
        let at = |f: &str| format!("options[{i}].{f}");
        check_name(&at("id"), &o.id, limits.option_id)?;
        if let Some(c) =
            o.id.chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "_-.:".contains(*c)))
        {
            return Err(ValidationError::new(
                at("id"),
                format!("{c:?} is not allowed in an option id (letters, digits, _ - . : only)"),
            ));
        }
        if !ids.insert(o.id.as_str()) {
            return Err(ValidationError::new(
                at("id"),
                format!(
                    "{:?} is used by an earlier option; ids must be unique",
                    o.id
                ),
            ));
        }
        check_name(&at("label"), &o.label, limits.option_label)?;
        check_optional_text(
            &at("description"),
            o.description.as_deref(),
            limits.option_description,
        )?;
    }
    if let Some(d) = &req.default_option
        && !ids.contains(d.as_str())
    {
        return Err(ValidationError::new(
            "default_option",
            format!(
                "{d:?} is not one of the options ({})",
                req.options
                    .iter()
                    .map(|o| o.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if let Some(ctx) = &req.context {
        check_json_size("context", &Value::Object(ctx.clone()), limits.context)?;
    }
    Ok(QuestionSpec {
        question: req.question.clone(),
        options: req.options.clone(),
        multiple: req.multiple,
        confirm: req.confirm,
        default_option: req.default_option.clone(),
        context: req.context.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_is_compiled_once_and_an_invalid_one_is_refused_every_time() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        // The same schema, its keys in another order: one compiled validator.
        let again = json!({"properties": {"path": {"type": "string"}}, "type": "object"});
        assert!(Arc::ptr_eq(
            &compiled(&schema).unwrap(),
            &compiled(&again).unwrap()
        ));
        assert!(check_against_schema(&schema, &json!({"path": "a"})).is_ok());
        let refused = check_against_schema(&schema, &json!({"path": 1})).unwrap_err();
        assert_eq!(refused.field, "arguments");
        let invalid = json!({"type": "no such type"});
        for _ in 0..2 {
            let e = check_against_schema(&invalid, &json!({})).unwrap_err();
            assert_eq!(e.field, "schema", "{e:?}");
        }
    }

    fn question(v: Value) -> Result<QuestionSpec, ValidationError> {
        validate_question(&parse_question(&v)?, &Limits::default())
    }

    #[test]
    fn a_valid_question_passes() {
        let spec = question(json!({
            "question": "Deploy?",
            "options": [{"id": "yes", "label": "Deploy"}, {"id": "no", "label": "Abort", "description": "stop"}],
            "confirm": true, "default_option": "no", "context": {"version": "2.1"}
        }))
        .unwrap();
        assert_eq!(spec.options.len(), 2);
        assert!(spec.confirm);
    }

    #[test]
    fn free_text_fields_are_refused_clearly() {
        for v in [
            json!({"question": "Name?", "options": [{"id": "a", "label": "A"}], "free_text": true}),
            json!({"question": "Name?", "options": [{"id": "a", "label": "A", "type": "text"}]}),
        ] {
            let err = question(v).unwrap_err();
            assert!(err.message.contains("options-only"), "{err}");
        }
        let err =
            question(json!({"question": "Q", "options": [{"id": "a", "label": "A"}], "colour": 1}))
                .unwrap_err();
        assert_eq!(err.field, "colour");
        assert!(err.message.contains("allowed fields are"), "{err}");
    }

    #[test]
    fn option_rules_name_the_field() {
        let cases = [
            (
                json!({"question": "Q", "options": []}),
                "options",
                "at least one option",
            ),
            (
                json!({"question": "", "options": [{"id": "a", "label": "A"}]}),
                "question",
                "must not be empty",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]}),
                "options[1].id",
                "unique",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a b", "label": "A"}]}),
                "options[0].id",
                "not allowed",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": ""}]}),
                "options[0].label",
                "must not be empty",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a", "label": "A"}], "default_option": "z"}),
                "default_option",
                "not one of the options",
            ),
            (
                json!({"question": "Q", "options": [{"id": "a"}]}),
                "options[0]",
                "missing field `label`",
            ),
            (
                json!({"question": "Q", "options": "a,b"}),
                "options",
                "invalid type",
            ),
            (
                json!({"question": "Q\u{1b}[2J", "options": [{"id": "a", "label": "A"}]}),
                "question",
                "control characters",
            ),
        ];
        for (v, field, msg) in cases {
            let err = question(v.clone()).unwrap_err();
            assert_eq!(err.field, field, "{v}: {err}");
            assert!(err.message.contains(msg), "{v}: {err}");
        }
    }

    #[test]
    fn sizes_are_bounded() {
        let many: Vec<Value> = (0..51)
            .map(|i| json!({"id": format!("o{i}"), "label": "x"}))
            .collect();
        let err = question(json!({"question": "Q", "options": many})).unwrap_err();
        assert!(err.message.contains("at most 50"), "{err}");
        let big = "x".repeat(9000);
        assert_eq!(
            question(json!({"question": big, "options": [{"id": "a", "label": "A"}]}))
                .unwrap_err()
                .field,
            "question"
        );
    }

    #[test]
    fn approvals_check_tool_names_sizes_and_schema() {
        let limits = Limits::default();
        let req = |tool: &str, args: Value, schema: Option<Value>| ApprovalRequest {
            tool_call_id: None,
            tool: tool.into(),
            arguments: args,
            schema,
            annotations: None,
            description: None,
            deadline: None,
            always_ask: false,
            offers: None,
            mcp: None,
        };
        assert!(validate_approval(&req("fs__write_file", json!({}), None), &limits).is_ok());
        let mut of_server = req("fs__write_file", json!({}), None);
        of_server.mcp = Some(holdpoint_protocol::McpTool {
            server: "fs".into(),
            tool: "write_file".into(),
        });
        assert!(validate_approval(&of_server, &limits).is_ok());
        of_server.tool = "fs__read_file".into();
        let err = validate_approval(&of_server, &limits).unwrap_err();
        assert_eq!(err.field, "mcp");
        assert!(err.message.contains("fs__write_file"), "{err}");
        assert_eq!(
            validate_approval(&req("a b", json!({}), None), &limits)
                .unwrap_err()
                .field,
            "tool"
        );
        assert_eq!(
            validate_approval(&req("t", json!([1]), None), &limits)
                .unwrap_err()
                .field,
            "arguments"
        );
        let huge = req("t", json!({"x": "y".repeat(300 * 1024)}), None);
        assert!(validate_approval(&huge, &limits).is_ok());
        assert!(
            check_held_arguments(&huge, &limits)
                .unwrap_err()
                .message
                .contains("at most")
        );
        let schema = json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}});
        let err = validate_approval(&req("t", json!({"path": 3}), Some(schema.clone())), &limits)
            .unwrap_err();
        assert_eq!(err.field, "arguments");
        assert!(
            err.message.contains("path: 3 is not of type") && !err.message.contains("/path"),
            "named as a field, not a JSON pointer: {err}"
        );
        let nested = json!({"type": "object", "properties": {"files": {"type": "array", "items": {"type": "object", "properties": {"a/b": {"type": "string"}}}}}});
        let err = validate_approval(
            &req("t", json!({"files": [{"a/b": 1}]}), Some(nested)),
            &limits,
        )
        .unwrap_err();
        assert!(
            err.message.contains("files[0].a/b: 1 is not of type"),
            "{err}"
        );
        assert!(validate_approval(&req("t", json!({"path": "a"}), Some(schema)), &limits).is_ok());
        let err = validate_approval(&req("t", json!({}), Some(json!({"type": 12}))), &limits)
            .unwrap_err();
        assert_eq!(err.field, "schema");
    }
}
