//! Holds: validating what is asked, building the hold, and its lifecycle as pure functions.
//!
//! Every change to a hold is a [`Transition`]: the hold's next version plus the events and
//! grants that go with it. The engine commits a transition at the version it read, so two
//! racing changes cannot both apply.
//!
//! Each kind of hold is a module of its own (`approval.rs`, `question.rs`): what its request
//! must be, the hold it raises and the decisions it offers, what each decision does, and what
//! applies when nobody decides. The shared code reaches them through exhaustive matches on
//! `HoldSpec`, `HoldRequest` and `HoldKind`, so a new kind does not compile until every place
//! that must handle it does.

mod approval;
mod build;
mod machine;
mod question;
mod validate;

use holdpoint_protocol::{HoldKind, HoldRequest};
use serde::de::DeserializeOwned;
use serde_json::Value;
use strum::VariantArray;

pub use approval::{approval_hold, check_held_arguments, validate_approval};
pub use build::HoldContext;
pub use machine::{Decided, Transition, decide, expire, fail_closed, remind, withdraw};
pub use question::{fail_closed_option, parse_question, question_hold, validate_question};
pub use validate::check_name;

/// Whether raising a hold of this kind consults grants, so that the gate must first read up to
/// what other nodes committed (a grant revoked there must not allow a call here).
pub fn consults_grants(kind: HoldKind) -> bool {
    match kind {
        HoldKind::Approval => true,
        HoldKind::Question => false,
    }
}

/// How a caller reads JSON as a protocol type: the server's way names the path of the field at
/// fault, which serde loses inside an internally tagged enum.
pub trait ReadFields {
    type Error;
    /// Reads `fields` as `T`.
    fn read<T: DeserializeOwned>(&self, fields: Value) -> Result<T, Self::Error>;
    /// Refuses `field` of what is read.
    fn refuse(&self, field: &str, message: String) -> Self::Error;
}

/// Reads one item of a raise: its `kind` names the kind (as `HoldKind` spells it), and the
/// rest is read by `reader` as that kind's request, so errors can name the field inside it.
pub fn read_request<R: ReadFields>(mut item: Value, reader: &R) -> Result<HoldRequest, R::Error> {
    let tag = item.as_object_mut().and_then(|o| o.remove("kind"));
    let Some(kind) = tag
        .as_ref()
        .and_then(Value::as_str)
        .and_then(HoldKind::parse)
    else {
        return Err(reader.refuse("kind", format!("must be {}", kind_names())));
    };
    match kind {
        HoldKind::Approval => reader.read(item).map(HoldRequest::Approval),
        HoldKind::Question => reader.read(item).map(HoldRequest::Question),
    }
}

/// The kinds as people read a choice among them: `"approval" or "question"`.
fn kind_names() -> String {
    let names: Vec<String> = HoldKind::VARIANTS
        .iter()
        .map(|k| format!("{:?}", k.as_str()))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Plain;

    impl ReadFields for Plain {
        type Error = String;
        fn read<T: DeserializeOwned>(&self, fields: Value) -> Result<T, String> {
            serde_json::from_value(fields).map_err(|e| e.to_string())
        }
        fn refuse(&self, field: &str, message: String) -> String {
            format!("{field}: {message}")
        }
    }

    #[test]
    fn an_item_is_read_as_the_request_its_kind_names() {
        for kind in HoldKind::VARIANTS {
            let item = match kind {
                HoldKind::Approval => json!({"kind": "approval", "tool": "t"}),
                HoldKind::Question => json!({
                    "kind": "question", "question": "Q", "options": [{"id": "a", "label": "A"}]
                }),
            };
            let read = read_request(item.clone(), &Plain).unwrap();
            assert_eq!(read.kind(), *kind);
            assert_eq!(read, serde_json::from_value(item).unwrap());
        }
        assert_eq!(
            read_request(json!({"kind": "vote"}), &Plain).unwrap_err(),
            "kind: must be \"approval\" or \"question\""
        );
        assert!(read_request(json!({"tool": "t"}), &Plain).is_err());
    }
}
