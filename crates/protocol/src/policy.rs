//! Policies in layers: the server's base policy and each world's own, versioned.

use serde::{Deserialize, Serialize};

use crate::{Actor, Timestamp};

/// Which layer of policy a rule belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum PolicyLayer {
    /// The server's policy file (its locked rules and mode floor bind every world).
    Base,
    /// A world's own policy, set through the API.
    World,
}

impl PolicyLayer {
    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The policy in force when a hold was raised: the base file by the SHA-256 of its text, and
/// the world's own policy by its version (absent when the world had none).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PolicyVersion {
    /// SHA-256 (hex) of the base policy file's text; empty when the server runs without one.
    pub base: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<u64>,
}

/// A new version of a world's policy (`PUT /api/v1/worlds/{world}/policy`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPolicy {
    /// The policy's TOML text (docs/policy.md); checked, examples and checks run, before it
    /// applies.
    pub text: String,
}

/// One version of a world's policy.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorldPolicy {
    /// The world's id.
    pub world: String,
    /// 1 for the first policy the world was given, then one more for each change.
    pub version: u64,
    /// SHA-256 (hex) of `text`.
    pub digest: String,
    pub text: String,
    /// Who set it.
    pub by: Actor,
    pub at: Timestamp,
}

/// A world's policy as it stands (`GET /api/v1/worlds/{world}/policy`): its own version, if
/// it has one, and the base it lies on.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorldPolicyState {
    /// The world's own policy; absent when the base alone applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<WorldPolicy>,
    /// SHA-256 (hex) of the base policy's text; empty without a policy file.
    pub base_digest: String,
    /// Rules of the base that no world can loosen, by name.
    pub locked: Vec<String>,
    /// The least strict mode a world may use, when the base sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_floor: Option<String>,
}

/// The base policy after a reload (`POST /api/v1/policy/reload`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PolicyReloaded {
    /// SHA-256 (hex) of the text now in force.
    pub digest: String,
    /// Whether the text differs from the one in force before.
    pub changed: bool,
}

/// A rule made from a hold (`GET /api/v1/holds/{hold}/suggested-rule`): the narrowest rule
/// that would have decided its call as the person did, in the policy file's format, with the
/// call as its own `must_match` example.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SuggestedRule {
    /// `allow` for a hold that was approved (or is still pending), `deny` for one denied.
    pub action: crate::CallVerdict,
    /// A `[[rules]]` entry (TOML), to review, edit and add to a world's policy.
    pub rule: String,
}

/// A candidate policy to replay over a world's recorded calls
/// (`POST /api/v1/worlds/{world}/policy/replay`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The candidate policy's TOML text, as it would be set for the world.
    pub text: String,
    /// Only calls recorded this recently (`"7d"`, `"24h"`); all of them when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub since: Option<crate::Deadline>,
}

/// What a candidate policy would have decided differently over recorded calls.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayReport {
    /// Calls replayed.
    pub calls: u64,
    /// Calls the candidate decides as they were decided.
    pub unchanged: u64,
    /// Calls the candidate's rules would have asked for (or denied by its mode) that a grant
    /// in force at the time allowed instead, as the gate would have: grants are replayed as
    /// they stood at each call. Counted among `unchanged` or `changes` as allowed.
    #[serde(default)]
    pub granted: u64,
    /// The calls decided differently, by what happened then and what the candidate decides.
    pub changes: Vec<ReplayChange>,
}

/// One kind of difference: `count` calls that were `before` and would now be `after`.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayChange {
    /// What happened: `allowed` or `denied` by policy (or a grant), or asked and then
    /// `approved` or `denied_by_person`, `timed_out`, `withdrawn`, or still `pending`.
    pub before: String,
    /// What the candidate decides, with the grants in force at the time.
    pub after: crate::CallVerdict,
    pub count: u64,
    /// The first few such calls.
    pub examples: Vec<ReplayExample>,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayExample {
    pub at: Timestamp,
    pub tool: String,
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// The hold the call raised, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<crate::HoldId>,
}
