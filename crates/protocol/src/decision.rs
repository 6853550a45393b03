//! Decisions: what a person (or a client acting for one) answers to a hold.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Hold, HoldId, HoldKind, Outcome};

/// How far an approval reaches.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ApproveScope {
    /// This call only.
    #[default]
    Once,
    /// The same call (tool and arguments) is not asked again in this chat.
    Chat,
    /// The same call (tool and arguments) is not asked again anywhere in this world.
    AlwaysArgs,
    /// This tool, with any arguments, is not asked again anywhere in this world.
    AlwaysTool,
}

impl ApproveScope {
    pub fn kind(self) -> DecisionKind {
        match self {
            ApproveScope::Once => DecisionKind::ApproveOnce,
            ApproveScope::Chat => DecisionKind::ApproveChat,
            ApproveScope::AlwaysArgs => DecisionKind::ApproveAlwaysArgs,
            ApproveScope::AlwaysTool => DecisionKind::ApproveAlwaysTool,
        }
    }
}

/// A decision on one hold.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(DecisionAction),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "A decision's `action`, as on the wire.")]
pub enum Decision {
    /// Approve the call. `digest`, when given, must be the digest of the arguments the person
    /// saw; a mismatch is refused.
    Approve {
        #[serde(default)]
        scope: ApproveScope,
        /// With `chat`, `always_args` or `always_tool`: the grant lasts this long (`"10m"`,
        /// `"1h"`), then stops matching and the call is asked again. Without it, a grant
        /// lasts until it is revoked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<String>)]
        expires_in: Option<crate::Deadline>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Deny the call; the agent is told (with the reason) and continues.
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Deny the call and stop the turn.
    DenyStop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Replace the arguments, then approve this call once.
    Edit {
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Choose option(s) of a question.
    Answer { options: Vec<String> },
    /// Confirm the answer chosen earlier (questions with `confirm`).
    Confirm,
    /// Cancel a question (or, at the confirm step, the chosen answer).
    Cancel {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Decision {
    /// The kind of decision, as listed in a hold's `offers`.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Approve { scope, .. } => scope.kind(),
            Decision::Deny { .. } => DecisionKind::Deny,
            Decision::DenyStop { .. } => DecisionKind::DenyStop,
            Decision::Edit { .. } => DecisionKind::Edit,
            Decision::Answer { .. } => DecisionKind::Answer,
            Decision::Confirm => DecisionKind::Confirm,
            Decision::Cancel { .. } => DecisionKind::Cancel,
        }
    }
}

/// The kinds of decision a hold may offer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum DecisionKind {
    ApproveOnce,
    ApproveChat,
    ApproveAlwaysArgs,
    ApproveAlwaysTool,
    Deny,
    DenyStop,
    Edit,
    Answer,
    Confirm,
    Cancel,
}

impl DecisionKind {
    /// Everything an approval can offer.
    pub const APPROVAL: [DecisionKind; 7] = [
        DecisionKind::ApproveOnce,
        DecisionKind::ApproveChat,
        DecisionKind::ApproveAlwaysArgs,
        DecisionKind::ApproveAlwaysTool,
        DecisionKind::Deny,
        DecisionKind::DenyStop,
        DecisionKind::Edit,
    ];

    /// What a question offers (`confirm` only once an answer waits for it).
    pub const QUESTION: [DecisionKind; 3] = [
        DecisionKind::Answer,
        DecisionKind::Confirm,
        DecisionKind::Cancel,
    ];

    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether choosing it lets an approval's call run (an edit runs the edited arguments).
    /// Exhaustive, so a new kind must say.
    pub fn approves(self) -> bool {
        match self {
            DecisionKind::ApproveOnce
            | DecisionKind::ApproveChat
            | DecisionKind::ApproveAlwaysArgs
            | DecisionKind::ApproveAlwaysTool
            | DecisionKind::Edit => true,
            DecisionKind::Deny
            | DecisionKind::DenyStop
            | DecisionKind::Answer
            | DecisionKind::Confirm
            | DecisionKind::Cancel => false,
        }
    }

    /// Whether choosing it refuses an approval's call.
    pub fn denies(self) -> bool {
        match self {
            DecisionKind::Deny | DecisionKind::DenyStop => true,
            DecisionKind::ApproveOnce
            | DecisionKind::ApproveChat
            | DecisionKind::ApproveAlwaysArgs
            | DecisionKind::ApproveAlwaysTool
            | DecisionKind::Edit
            | DecisionKind::Answer
            | DecisionKind::Confirm
            | DecisionKind::Cancel => false,
        }
    }

    /// The kind of hold that offers it. Exhaustive, so a new kind must say.
    pub fn hold_kind(self) -> HoldKind {
        match self {
            DecisionKind::ApproveOnce
            | DecisionKind::ApproveChat
            | DecisionKind::ApproveAlwaysArgs
            | DecisionKind::ApproveAlwaysTool
            | DecisionKind::Deny
            | DecisionKind::DenyStop
            | DecisionKind::Edit => HoldKind::Approval,
            DecisionKind::Answer | DecisionKind::Confirm | DecisionKind::Cancel => {
                HoldKind::Question
            }
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// What a decision did to its hold.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum DecideOutcome {
    /// The hold is now decided; `hold.outcome` says how.
    Resolved,
    /// An approval was counted; the quorum is not reached yet.
    VoteRecorded,
    /// An answer was chosen and waits for its confirm step.
    AwaitingConfirm,
    /// In a batch decision only: this hold was decided before and was left as it was.
    AlreadyDecided,
}

/// The result of a decision: what happened, and the hold as it now stands.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DecideResult {
    pub result: DecideOutcome,
    pub hold: Hold,
}

impl DecideResult {
    pub fn outcome(&self) -> Option<&Outcome> {
        self.hold.outcome.as_ref()
    }
}

/// A hold as the person saw it when deciding a whole batch.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeenHold {
    pub hold: HoldId,
    pub digest: String,
}

/// The result of "decide all": one entry per hold of the batch.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DecideBatchResult {
    pub holds: Vec<DecideResult>,
}

/// "Decide all": one decision for every approval of a batch (named by the path), bound to the
/// holds (ids and argument digests) the person saw. A batch that differs from what was seen is
/// refused.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideBatchRequest {
    /// The approvals of the batch as shown (ids and argument digests).
    pub seen: Vec<SeenHold>,
    /// `approve`, `deny` or `deny_stop`.
    #[schema(schema_with = crate::schema::batch_decision)]
    pub decision: Decision,
}
