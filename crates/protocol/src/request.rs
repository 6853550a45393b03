//! Requests to raise holds: what an agent (a turn, an external agent, a script) asks for.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use strum::VariantArray;

use crate::{
    BatchId, Deadline, DecidedBy, DecisionKind, Hold, HoldKind, McpTool, QuestionOption,
    ToolAnnotations,
};

/// A tool call that may need a person's approval. Policy decides first: it may allow or deny
/// the call at once, or raise an approval hold.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub tool: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// The tool's JSON Schema for its arguments: the arguments (and any edit) must satisfy it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A deadline for this hold, within the policy's `max_deadline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
    /// Ask even where a rule, a grant or the mode would allow (deny rules still deny). Such a
    /// hold offers no grants.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_ask: bool,
    /// Narrows the decisions the hold offers (never widens what the policy offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offers: Option<Vec<DecisionKind>>,
    /// For a tool of an MCP server: the server and the tool's own name there, shown with the
    /// hold. `tool` must then be `server__tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpTool>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A multiple-choice question for a person. Options only.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub question: String,
    pub options: Vec<QuestionOption>,
    #[serde(default)]
    pub multiple: bool,
    #[serde(default)]
    pub confirm: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_option: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

/// One item of a gate request. Its variants are `HoldKind`'s, named alike (the `wire_names`
/// test checks).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HoldRequest {
    Approval(ApprovalRequest),
    Question(QuestionRequest),
}

impl HoldRequest {
    pub fn kind(&self) -> HoldKind {
        match self {
            HoldRequest::Approval(_) => HoldKind::Approval,
            HoldRequest::Question(_) => HoldKind::Question,
        }
    }
}

/// The request schema of each kind.
fn request_schema(kind: HoldKind) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::PartialSchema;
    match kind {
        HoldKind::Approval => ApprovalRequest::schema(),
        HoldKind::Question => QuestionRequest::schema(),
    }
}

/// Each variant's fields with `kind` among them, in one object: the variants refuse unknown
/// fields, and `allOf` a variant's closed object and `{kind}` (what the derive writes) is
/// satisfied by nothing at all.
impl utoipa::PartialSchema for HoldRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::schema::tagged(
            "kind",
            HoldKind::VARIANTS
                .iter()
                .map(|&k| (k.as_str(), request_schema(k))),
            "One item of a gate request: an approval (`kind` `approval`) or a question (`kind` `question`).",
        )
    }
}

impl utoipa::ToSchema for HoldRequest {
    fn name() -> std::borrow::Cow<'static, str> {
        "HoldRequest".into()
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        for &kind in HoldKind::VARIANTS {
            match kind {
                HoldKind::Approval => <ApprovalRequest as utoipa::ToSchema>::schemas(schemas),
                HoldKind::Question => <QuestionRequest as utoipa::ToSchema>::schemas(schemas),
            }
        }
    }
}

/// Everything one LLM response (or one external request) needs decided. The holds it raises
/// form one batch.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GateRequest {
    pub world: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub items: Vec<HoldRequest>,
    /// Repeating a request with the same key returns the first response, raising nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// What became of one item.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum GateResult {
    /// Policy (a rule, a grant or the mode) allowed the call: run it now.
    Allowed {
        digest: String,
        decided_by: DecidedBy,
    },
    /// Policy denied the call: do not run it.
    Denied {
        digest: String,
        decided_by: DecidedBy,
    },
    /// A hold was raised; wait for its outcome.
    // The hold its `hold.created` event carries (shared, not copied).
    Held { hold: Arc<Hold> },
    /// The item is malformed (arguments that fail the tool's schema, a bad question); nothing
    /// was raised. For a turn, this goes back to the LLM as an error.
    Invalid { field: String, message: String },
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GateResponse {
    /// The batch of the holds raised, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchId>,
    /// One result per item, in order.
    pub results: Vec<GateResult>,
}
