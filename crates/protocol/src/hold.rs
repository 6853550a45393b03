//! Holds: approvals (a tool call waiting for permission) and questions (the LLM asks a person,
//! with options), their state and their one final outcome.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    ApproveScope, BatchId, DecisionKind, HoldId, LineageStep, McpTool, PolicyLayer, PolicyVersion,
    Source, Timestamp,
};

/// One hold: what is asked, of whom, until when, and (once decided) its outcome.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Hold {
    pub id: HoldId,
    /// Every hold belongs to a batch; a hold raised on its own is a batch of one.
    pub batch: BatchId,
    pub world: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Set when an agent called another to make this call: every agent from the one in
    /// `chat` (the conversation a person follows, where the hold is shown) to the one whose
    /// call is held (`agent`; a remote A2A agent has no id), outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<LineageStep>,
    /// Name of the principal (agent credential or turn) that raised the hold.
    pub requested_by: String,
    pub created_at: Timestamp,
    /// `None` only when `never` was configured explicitly.
    pub deadline: Option<Timestamp>,
    /// When the reminder event fires (before the deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<Timestamp>,
    #[serde(default)]
    pub reminded: bool,
    /// What applies when the deadline passes.
    pub on_timeout: OnTimeout,
    /// The policy rule that asked, when a rule did (not the mode default or a question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    /// Why a person is asked where policy alone would have allowed the call: its caller
    /// always asks for it (`creating an agent always needs a person (policy alone would allow
    /// it: rule "agents")`). Absent when a rule or the mode asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks_because: Option<String>,
    /// People allowed to decide; empty means any approver or admin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Approvals from distinct people needed to approve (any deny denies).
    pub quorum: u32,
    /// The decisions this hold accepts.
    pub offers: Vec<DecisionKind>,
    pub spec: HoldSpec,
    pub status: HoldStatus,
    /// A chosen answer waiting for its confirm step (questions with `confirm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_answer: Option<PendingAnswer>,
    /// Approvals recorded towards the quorum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The policy in force when the hold was raised (holds keep theirs when it changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyVersion>,
    /// Increases with every change; the store applies a change only at the version it was read.
    pub version: u64,
}

impl Hold {
    pub fn kind(&self) -> HoldKind {
        match self.spec {
            HoldSpec::Approval(_) => HoldKind::Approval,
            HoldSpec::Question(_) => HoldKind::Question,
        }
    }

    pub fn is_open(&self) -> bool {
        self.status.is_open()
    }

    /// The tool an approval asks to run; a question has none.
    pub fn tool(&self) -> Option<&str> {
        match &self.spec {
            HoldSpec::Approval(a) => Some(&a.tool),
            HoldSpec::Question(_) => None,
        }
    }

    /// The argument digest shown with an approval.
    pub fn digest(&self) -> Option<&str> {
        match &self.spec {
            HoldSpec::Approval(a) => Some(&a.digest),
            HoldSpec::Question(_) => None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum HoldKind {
    Approval,
    Question,
}

impl HoldKind {
    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Every decision a hold of this kind can offer; each decision kind belongs to one
    /// (`DecisionKind::hold_kind`).
    pub fn decisions(self) -> &'static [DecisionKind] {
        match self {
            HoldKind::Approval => &DecisionKind::APPROVAL,
            HoldKind::Question => &DecisionKind::QUESTION,
        }
    }
}

/// What the hold asks.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HoldSpec {
    Approval(ApprovalSpec),
    Question(QuestionSpec),
}

/// A tool call waiting for permission, bound to the digest of the arguments shown.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalSpec {
    /// `server__tool` for MCP tools, the bare name for built-in ones.
    pub tool: String,
    pub arguments: Value,
    /// SHA-256 (hex) of the canonical JSON of `arguments`.
    pub digest: String,
    /// The tool's JSON Schema for its arguments; edited arguments are validated against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Why the agent wants to run it, as the agent put it (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a tool of an MCP server: which server, and the tool's own name there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpTool>,
}

/// MCP tool annotations (hints from the tool's server; rules may match them).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolAnnotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ToolAnnotations {
    /// Whether a tool annotated `actual` has each annotation these require (each one given
    /// here must be set there, and equal): how policy rules and channel routes match them.
    pub fn required_of(&self, actual: Option<&ToolAnnotations>) -> bool {
        let have = actual.copied().unwrap_or_default();
        let ok = |w: Option<bool>, h: Option<bool>| w.is_none() || w == h;
        ok(self.read_only, have.read_only)
            && ok(self.destructive, have.destructive)
            && ok(self.idempotent, have.idempotent)
            && ok(self.open_world, have.open_world)
    }
}

/// A multiple-choice question. Options only: there is no free-text answer.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QuestionSpec {
    pub question: String,
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    #[serde(default)]
    pub multiple: bool,
    /// After choosing, the person must confirm or cancel.
    #[serde(default)]
    pub confirm: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_option: Option<String>,
    /// Data the LLM supplied to help the person decide, shown as data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The rule of the policy that asked for a hold or decided a call.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuleRef {
    /// Position in the policy's `rules` list, from 0.
    pub index: usize,
    pub name: String,
    /// The policy layer the rule is in, where a world has a policy of its own (a locked rule
    /// of the base, or one of the world's); absent when the base alone applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<PolicyLayer>,
}

impl std::fmt::Display for RuleRef {
    /// As people and the LLM read it: `rule "name"`, or `rules[N]` for a rule without a name
    /// (whose name is that already).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name == format!("rules[{}]", self.index) {
            f.write_str(&self.name)
        } else {
            write!(f, "rule {:?}", self.name)
        }
    }
}

/// What applies when a hold's deadline passes.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(TimeoutAction),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "What applies at a deadline: `OnTimeout`'s `action`, as on the wire.")]
pub enum OnTimeout {
    /// Approvals: the call is denied (the default: fail closed).
    Deny,
    /// Approvals: the call is approved (only when configured).
    Approve,
    /// Questions: this option is applied (the question's default, else its option `no`).
    Choose { option: String },
    /// Questions without a default or a `no` option: nobody chose, so no option is applied
    /// and the question ends `timed_out` with none.
    NoAnswer,
}

/// A hold's lifecycle state. `pending` and `awaiting_confirm` are open; the rest are final.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum HoldStatus {
    Pending,
    AwaitingConfirm,
    Approved,
    Denied,
    Answered,
    Confirmed,
    Canceled,
    TimedOut,
}

impl HoldStatus {
    pub fn is_open(self) -> bool {
        matches!(self, HoldStatus::Pending | HoldStatus::AwaitingConfirm)
    }

    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

impl From<OutcomeStatus> for HoldStatus {
    fn from(s: OutcomeStatus) -> Self {
        match s {
            OutcomeStatus::Approved => HoldStatus::Approved,
            OutcomeStatus::Denied => HoldStatus::Denied,
            OutcomeStatus::Answered => HoldStatus::Answered,
            OutcomeStatus::Confirmed => HoldStatus::Confirmed,
            OutcomeStatus::Canceled => HoldStatus::Canceled,
            OutcomeStatus::TimedOut => HoldStatus::TimedOut,
        }
    }
}

/// An answer chosen for a question with `confirm`, waiting for the confirm step.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PendingAnswer {
    pub options: Vec<ChosenOption>,
    pub by: String,
    pub at: Timestamp,
}

/// One approval counted towards a quorum.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Vote {
    pub by: String,
    pub scope: ApproveScope,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The final status of a hold.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum OutcomeStatus {
    Approved,
    Denied,
    Answered,
    Confirmed,
    Canceled,
    TimedOut,
}

/// What happens to the tool call of an approval.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Verdict {
    Approve,
    Deny,
}

/// A chosen option, with the label the person saw.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ChosenOption {
    pub id: String,
    pub label: String,
}

/// The one final outcome of a hold: what was decided, by whom or what, and what it means for
/// the call. Approvals carry `verdict` (and, when approved, the exact arguments that run);
/// questions carry the chosen `options`.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Outcome {
    pub status: OutcomeStatus,
    pub source: Source,
    /// The people who decided (several for a quorum); empty for timeouts and the system.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decided_by: Vec<String>,
    pub decided_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Approvals: whether the call runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Approvals approved by a person: how far the approval reaches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ApproveScope>,
    /// Approvals denied with "deny and stop": the turn ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_turn: bool,
    /// Approvals that run: exactly the arguments that run (the edited ones after an edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// Questions: the options applied (chosen, confirmed or applied on timeout).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<ChosenOption>,
}
