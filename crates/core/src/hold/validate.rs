//! Validation shared by every kind of what agents and LLMs supply (names, text, sizes, JSON
//! Schemas). Errors name the field and say what is allowed.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::error::ValidationError;

/// A world, chat, agent or call name: not empty, bounded, no control characters.
pub fn check_name(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    check_text(field, value, max)
}

pub(super) fn check_text(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
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

pub(super) fn check_optional_text(
    field: &str,
    value: Option<&str>,
    max: usize,
) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| check_text(field, v, max))
}

pub(super) fn check_json_size(
    field: &str,
    value: &Value,
    max: usize,
) -> Result<(), ValidationError> {
    let size = canonical::to_string(value).len();
    if size > max {
        return Err(ValidationError::new(
            field,
            format!("is {size} bytes as JSON; at most {max} are allowed"),
        ));
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
}
