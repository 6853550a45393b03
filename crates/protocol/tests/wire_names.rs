//! Every wire name is spelled once: the names the protocol's enums give themselves
//! (`as_str`, `parse`, derived with strum) are the names serde writes and reads, variant by
//! variant.

#![allow(clippy::unwrap_used)]

use holdpoint_protocol::{
    ApprovedBy, CallVerdict, DecisionKind, HoldKind, HoldStatus, PolicyLayer, Role,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strum::VariantArray;

/// Each variant's `as_str` is its serde name, and both `parse` and serde read it back.
fn same_names<T>(as_str: fn(T) -> &'static str)
where
    T: VariantArray + Copy + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
    T: std::str::FromStr,
{
    assert!(!T::VARIANTS.is_empty());
    for &v in T::VARIANTS {
        let name = as_str(v);
        assert_eq!(serde_json::to_value(v).unwrap(), Value::from(name), "{v:?}");
        let read: T = serde_json::from_value(Value::from(name)).unwrap();
        assert_eq!(read, v);
        assert!(
            name.parse::<T>().is_ok_and(|p| p == v),
            "{name} parses as {v:?}"
        );
    }
}

#[test]
fn every_enum_spells_its_names_as_serde_does() {
    same_names(HoldKind::as_str);
    same_names(HoldStatus::as_str);
    same_names(DecisionKind::as_str);
    same_names(ApprovedBy::as_str);
    same_names(Role::as_str);
    same_names(CallVerdict::as_str);
    same_names(PolicyLayer::as_str);
    assert_eq!(HoldStatus::parse("timed_out"), Some(HoldStatus::TimedOut));
    assert_eq!(HoldStatus::parse("TimedOut"), None);
    assert_eq!(
        DecisionKind::parse("approve_always_args"),
        Some(DecisionKind::ApproveAlwaysArgs)
    );
}

#[test]
fn each_approval_decision_approves_or_denies_and_question_decisions_neither() {
    for &k in DecisionKind::VARIANTS {
        let approval = DecisionKind::APPROVAL.contains(&k);
        assert_eq!(k.approves() || k.denies(), approval, "{k:?}");
        assert!(!(k.approves() && k.denies()), "{k:?}");
    }
    assert!(DecisionKind::Edit.approves());
    assert!(DecisionKind::DenyStop.denies());
}

#[test]
fn each_decision_kind_belongs_to_the_one_hold_kind_that_offers_it() {
    for &k in DecisionKind::VARIANTS {
        for &h in HoldKind::VARIANTS {
            assert_eq!(
                h.decisions().contains(&k),
                k.hold_kind() == h,
                "{k:?} {h:?}"
            );
        }
    }
    assert_eq!(HoldKind::parse("question"), Some(HoldKind::Question));
}

/// Each variant's strum name (`Into<&'static str>`) is its serde name.
fn serde_names<T>()
where
    T: VariantArray + Copy + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned,
    T: Into<&'static str>,
{
    assert!(!T::VARIANTS.is_empty());
    for &v in T::VARIANTS {
        let name: &'static str = v.into();
        assert_eq!(serde_json::to_value(v).unwrap(), Value::from(name), "{v:?}");
        let read: T = serde_json::from_value(Value::from(name)).unwrap();
        assert_eq!(read, v);
    }
}

/// The names of a tagged enum's variants, as its OpenAPI schema (serde's names) gives them,
/// in order: the one value of each `oneOf` item's `tag` property.
fn schema_tags<S: utoipa::PartialSchema>(tag: &str) -> Vec<String> {
    let schema = serde_json::to_value(S::schema()).unwrap();
    schema["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("no oneOf: {schema}"))
        .iter()
        .map(|item| {
            let item = item.get("allOf").map_or(item, |all| {
                all.as_array()
                    .unwrap()
                    .iter()
                    .find(|part| part["properties"].get(tag).is_some())
                    .unwrap()
            });
            item["properties"][tag]["enum"][0]
                .as_str()
                .unwrap_or_else(|| panic!("no {tag}: {item}"))
                .to_owned()
        })
        .collect()
}

/// A tagged enum's discriminants (strum's `EnumDiscriminants`) spell the tag's values as
/// serde does, in the same order.
fn same_tags<S: utoipa::PartialSchema, D>(tag: &str)
where
    D: VariantArray + Copy + Into<&'static str>,
{
    let names: Vec<&str> = D::VARIANTS.iter().map(|&d| d.into()).collect();
    assert_eq!(names, schema_tags::<S>(tag), "the {tag}s");
}

#[test]
fn the_other_enums_and_the_tags_spell_their_names_as_serde_does() {
    use holdpoint_protocol::*;
    serde_names::<Source>();
    serde_names::<OutcomeStatus>();
    serde_names::<Verdict>();
    serde_names::<ApproveScope>();
    serde_names::<GrantScope>();
    serde_names::<DecideOutcome>();
    serde_names::<Order>();
    serde_names::<DeliveryStatus>();
    serde_names::<NoticePurpose>();
    serde_names::<MessageRole>();
    serde_names::<TurnStatus>();
    serde_names::<CallState>();
    same_tags::<EventPayload, EventType>("type");
    same_tags::<Decision, DecisionAction>("action");
    same_tags::<OnTimeout, TimeoutAction>("action");
    same_tags::<DecidedBy, DecidedByKind>("by");
    same_tags::<ToolResult, ToolResultStatus>("status");
    same_tags::<MarkdownNode, MarkdownNodeType>("type");
    same_tags::<HoldSpec, HoldKind>("kind");
    same_tags::<HoldRequest, HoldKind>("kind");
    assert_eq!(EventType::VARIANTS.len(), 36);
}

#[test]
fn the_events_that_resolve_a_hold_are_those_with_its_outcome() {
    use holdpoint_protocol::{EventPayload, EventType};
    let schema = serde_json::to_value(<EventPayload as utoipa::PartialSchema>::schema()).unwrap();
    for (&t, item) in EventType::VARIANTS
        .iter()
        .zip(schema["oneOf"].as_array().unwrap())
    {
        let item = item.get("allOf").map_or(item.clone(), |all| {
            let mut props = serde_json::Map::new();
            for part in all.as_array().unwrap() {
                for (k, v) in part["properties"].as_object().into_iter().flatten() {
                    props.insert(k.clone(), v.clone());
                }
            }
            serde_json::json!({ "properties": props })
        });
        assert_eq!(item["properties"]["type"]["enum"][0], t.as_str());
        let has_outcome = item["properties"].get("outcome").is_some();
        assert_eq!(t.resolves_hold(), has_outcome, "{t:?}");
        assert!(!t.resolves_hold() || t.changes_hold(), "{t:?}");
        assert_eq!(t.changes_hold(), t.as_str().starts_with("hold."), "{t:?}");
    }
}
