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
