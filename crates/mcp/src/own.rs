//! Holdpoint's own MCP tools, for agents that want to ask a person: `ask_human` (an
//! options-only question) and `request_approval` (an action and its arguments, approved or
//! denied).

use std::sync::Arc;

use holdpoint_protocol::{
    ApprovalRequest, Deadline, Hold, HoldRequest, OutcomeStatus, QuestionRequest, Verdict,
};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::holds::{Asked, refusal};

pub const ASK_HUMAN: &str = "ask_human";
pub const REQUEST_APPROVAL: &str = "request_approval";

/// The definitions clients list.
pub fn tools() -> Vec<Tool> {
    let ask = schema(json!({
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, as the person reads it."},
            "options": {
                "type": "array",
                "minItems": 1,
                "description": "The answers the person may choose from (there is no free text).",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "label": {"type": "string"},
                        "description": {"type": "string"}
                    },
                    "required": ["id", "label"]
                }
            },
            "multiple": {"type": "boolean", "description": "Several options may be chosen."},
            "confirm": {"type": "boolean", "description": "The person confirms the choice in a second step."},
            "default_option": {"type": "string", "description": "The option applied when no one answers in time."},
            "context": {"type": "object", "description": "Data that helps the person answer, shown as data."},
            "deadline": {"type": "string", "description": "How long to wait, such as \"10m\" (within the policy's limit)."}
        },
        "required": ["question", "options"]
    }));
    let approve = schema(json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "What you want to do, as a short name (policy rules match it as a tool name)."},
            "arguments": {"type": "object", "description": "Its exact parameters: the approval is for these."},
            "description": {"type": "string", "description": "Why, for the person who decides."},
            "deadline": {"type": "string", "description": "How long to wait, such as \"10m\" (within the policy's limit)."}
        },
        "required": ["action"]
    }));
    let waits = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .open_world(false);
    vec![
        Tool::new(
            ASK_HUMAN,
            "Ask a person a multiple-choice question through Holdpoint and wait for the answer. \
             The result names the chosen options, or says that no one answered.",
            ask,
        )
        .annotate(waits.clone()),
        Tool::new(
            REQUEST_APPROVAL,
            "Ask a person, through Holdpoint, to approve an action with exact arguments before you \
             take it, and wait for the decision. The result says approved or denied, by whom, and why.",
            approve,
        )
        .annotate(waits),
    ]
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalArgs {
    action: String,
    #[serde(default = "empty")]
    arguments: Value,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    deadline: Option<Deadline>,
}

fn empty() -> Value {
    Value::Object(Map::new())
}

/// The hold request a call of an own tool makes, or the text of what is wrong with its
/// arguments.
pub fn request(tool: &str, arguments: JsonObject) -> Result<HoldRequest, String> {
    let args = Value::Object(arguments);
    let bad = |e: serde_json::Error| format!("invalid arguments for {tool}: {e}");
    if tool == ASK_HUMAN {
        let mut q: QuestionRequest = serde_json::from_value(args).map_err(bad)?;
        q.tool_call_id = None;
        return Ok(HoldRequest::Question(q));
    }
    let a: ApprovalArgs = serde_json::from_value(args).map_err(bad)?;
    Ok(HoldRequest::Approval(ApprovalRequest {
        tool_call_id: None,
        tool: a.action,
        arguments: a.arguments,
        schema: None,
        annotations: None,
        description: a.description,
        deadline: a.deadline,
        // The agent asked for a person: rules and grants that allow do not answer for one
        // (deny rules still deny).
        always_ask: true,
        mcp: None,
        offers: None,
    }))
}

/// The result of an own tool's call: JSON for the agent, as text and as structured content.
pub fn result(asked: Asked) -> CallToolResult {
    match asked {
        // Its record is durable: the gateway waits for that before answering.
        Asked::Allowed(_) => answer(
            json!({"approved": true, "status": "approved", "source": "policy"}),
            false,
        ),
        Asked::Denied(why) => answer(
            json!({"approved": false, "status": "denied", "source": "policy", "reason": why}),
            false,
        ),
        Asked::Invalid(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
        Asked::Withdrawn => {
            CallToolResult::error(vec![ContentBlock::text("the request was withdrawn")])
        }
        Asked::Decided(hold) => decided(&hold),
    }
}

fn decided(hold: &Hold) -> CallToolResult {
    let Some(outcome) = &hold.outcome else {
        return CallToolResult::error(vec![ContentBlock::text(
            "the hold ended without an outcome",
        )]);
    };
    let status = match outcome.status {
        OutcomeStatus::Approved => "approved",
        OutcomeStatus::Denied => "denied",
        OutcomeStatus::Answered => "answered",
        OutcomeStatus::Confirmed => "confirmed",
        OutcomeStatus::Canceled => "canceled",
        OutcomeStatus::TimedOut => "timed_out",
    };
    let mut body = json!({
        "status": status,
        "source": outcome.source,
        "by": outcome.decided_by,
        "hold": hold.id,
    });
    if let Some(reason) = &outcome.reason {
        body["reason"] = json!(reason);
    }
    if let Some(verdict) = outcome.verdict {
        let approved = verdict == Verdict::Approve;
        body["approved"] = json!(approved);
        if approved && outcome.edited {
            body["arguments"] = outcome.arguments.clone().unwrap_or_default();
        }
        if !approved {
            body["said"] = json!(refusal(outcome));
        }
        return answer(body, false);
    }
    let options: Vec<Value> = outcome
        .options
        .iter()
        .map(|o| json!({"id": o.id, "label": o.label}))
        .collect();
    let unanswered = options.is_empty();
    body["options"] = Value::Array(options);
    if outcome.status == OutcomeStatus::TimedOut && !unanswered {
        body["by_default"] = json!(true);
    }
    answer(body, unanswered)
}

fn answer(body: Value, is_error: bool) -> CallToolResult {
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(body.to_string())])
    } else {
        CallToolResult::success(vec![ContentBlock::text(body.to_string())])
    };
    r.structured_content = Some(body);
    r
}
