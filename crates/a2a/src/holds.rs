//! Holds as A2A's `input-required`, and replies as decisions.
//!
//! A task whose turn waits on holds tells its caller about them in its status message, in
//! three shapes side by side, so that each kind of client finds the one it reads:
//! - Google ADK's (which kagent builds on): one `adk_request_confirmation` function call per
//!   held call, its id `adk-<hold id>`;
//! - kagent's: one `{"interrupt_type": "tool_approval", "action_requests": [...]}` summary
//!   (and `interrupt_type` in the update's metadata);
//! - Holdpoint's: `{"holdpoint": {"holds": [...]}}`, each hold whole (id, kind, tool,
//!   arguments, digest, deadline, the decisions it offers, a question's options).
//!
//! A reply decides them in any of these shapes — ADK's confirmation responses, kagent's
//! `decision_type` (`approve`, `reject` or the seed's `deny`, with a reason; `batch` with a
//! decision per call), Holdpoint's decisions per hold — or, failing structured data, in words
//! ("approve", "yes"; "deny", "no, because …"). Who may decide is not this module's business:
//! the engine's rules apply to whoever sent the reply.

use holdpoint_protocol::a2a::Part;
use holdpoint_protocol::{
    ApprovalSpec, ApproveScope, Decision, Hold, HoldId, HoldSpec, QuestionSpec,
};
use serde_json::{Map, Value, json};

/// The prefix of the ids of ADK confirmation requests: `adk-<hold id>`.
const ADK_PREFIX: &str = "adk-";
const ADK_CONFIRMATION: &str = "adk_request_confirmation";

/// The status message's parts for holds pending in a turn, and the metadata of the status
/// update that carries them.
pub fn held_parts(holds: &[Hold]) -> (Vec<Part>, Map<String, Value>) {
    let mut parts = vec![Part::text(summary(holds))];
    let approvals = calls(holds);
    for (hold, a) in &approvals {
        let mut metadata = Map::new();
        metadata.insert("adk_type".into(), "function_call".into());
        metadata.insert("adk_is_long_running".into(), true.into());
        parts.push(
            Part::data(json!({
                "id": format!("{ADK_PREFIX}{}", hold.id),
                "name": ADK_CONFIRMATION,
                "args": {
                    "originalFunctionCall": {
                        "id": hold.tool_call_id.clone().unwrap_or_else(|| hold.id.to_string()),
                        "name": a.tool,
                        "args": a.arguments,
                    },
                    "toolConfirmation": {
                        "hint": format!("Holdpoint holds this call of {} for a person's decision (hold {}).", a.tool, hold.id),
                        "confirmed": false,
                    },
                },
            }))
            .with_metadata(metadata),
        );
    }
    let mut metadata = Map::new();
    if !approvals.is_empty() {
        let requests: Vec<Value> = approvals
            .iter()
            .map(|(h, a)| {
                json!({
                    "name": a.tool,
                    "args": a.arguments,
                    "id": h.tool_call_id.clone().unwrap_or_else(|| h.id.to_string()),
                })
            })
            .collect();
        parts.push(Part::data(json!({
            "interrupt_type": "tool_approval",
            "action_requests": requests,
        })));
        metadata.insert("interrupt_type".into(), "tool_approval".into());
    }
    parts.push(Part::data(json!({
        "holdpoint": { "holds": holds.iter().map(hold_json).collect::<Vec<_>>() }
    })));
    (parts, metadata)
}

fn hold_json(hold: &Hold) -> Value {
    let mut out = json!({
        "id": hold.id,
        "kind": hold.kind(),
        "offers": hold.offers,
        "deadline": hold.deadline,
        "on_timeout": hold.on_timeout,
        "call_id": hold.tool_call_id,
        "agent": hold.agent,
    });
    if !hold.lineage.is_empty() {
        // A sub-agent's or a remote agent's call: the agents it came through.
        out["lineage"] = json!(hold.lineage);
    }
    match &hold.spec {
        HoldSpec::Approval(a) => {
            out["tool"] = a.tool.clone().into();
            out["arguments"] = a.arguments.clone();
            out["digest"] = a.digest.clone().into();
        }
        HoldSpec::Question(q) => {
            out["question"] = q.question.clone().into();
            out["options"] = json!(q.options);
            out["multiple"] = q.multiple.into();
        }
    }
    out
}

fn summary(holds: &[Hold]) -> String {
    let lines: Vec<String> = holds
        .iter()
        .map(|h| match &h.spec {
            HoldSpec::Approval(a) => format!("- {} {} (hold {})", a.tool, a.arguments, h.id),
            HoldSpec::Question(q) => format!("- {} (hold {})", q.question, h.id),
        })
        .collect();
    format!(
        "Waiting for a person's decision on:\n{}\nReply \"approve\" or \"deny\" (with a reason), or with a decision per hold.",
        lines.join("\n")
    )
}

/// What a reply decides about.
#[derive(Clone, PartialEq, Debug)]
pub enum Target {
    Hold(HoldId),
}

/// A reply that decides nothing, or decides wrongly: its field and what is allowed.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ReplyError {
    pub field: String,
    pub message: String,
}

fn fault(field: impl Into<String>, message: impl Into<String>) -> ReplyError {
    ReplyError {
        field: field.into(),
        message: message.into(),
    }
}

/// The decisions a reply's `parts` make about `pending` (the holds its task waits on). Data
/// parts come first; words only when no part carries structured data that decides.
pub fn reply_decisions(
    parts: &[Part],
    pending: &[Hold],
) -> Result<Vec<(Target, Decision)>, ReplyError> {
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let Some(data) = &part.data else {
            continue;
        };
        let field = format!("message.parts[{i}].data");
        data_decisions(data, &field, pending, &mut out)?;
    }
    if out.is_empty() {
        let text: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
        if let Some(decision) = words(&text.join(" ")) {
            for (hold, _) in calls(pending) {
                out.push((Target::Hold(hold.id), bind(decision.clone(), hold)));
            }
        }
    }
    if out.is_empty() {
        return Err(fault(
            "message.parts",
            "the task waits for a decision: reply with ADK's adk_request_confirmation response, kagent's decision_type (approve, reject, deny, batch), Holdpoint's {\"holdpoint\": {\"decisions\": [...]}}, or the words \"approve\" or \"deny\"",
        ));
    }
    Ok(out)
}

fn data_decisions(
    data: &Value,
    field: &str,
    pending: &[Hold],
    out: &mut Vec<(Target, Decision)>,
) -> Result<(), ReplyError> {
    if data.get("name").and_then(Value::as_str) == Some(ADK_CONFIRMATION)
        && data.get("response").is_some()
    {
        let id = data.get("id").and_then(Value::as_str).unwrap_or_default();
        let hold = id
            .strip_prefix(ADK_PREFIX)
            .and_then(|h| find(pending, h))
            .ok_or_else(|| {
                fault(
                    format!("{field}.id"),
                    format!("{id:?} is no confirmation this task waits on"),
                )
            })?;
        let response = match &data["response"] {
            // ADK accepts its response as JSON text too.
            Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            other => other.clone(),
        };
        let confirmed = response
            .get("confirmed")
            .and_then(Value::as_bool)
            .ok_or_else(|| {
                fault(
                    format!("{field}.response.confirmed"),
                    "must be true or false",
                )
            })?;
        let decision = if confirmed {
            approve(None)
        } else {
            Decision::Deny {
                reason: Some("declined over A2A".into()),
            }
        };
        out.push((Target::Hold(hold.id), bind(decision, hold)));
        return Ok(());
    }
    if let Some(kind) = data.get("decision_type") {
        return kagent(data, kind, field, pending, out);
    }
    if let Some(holdpoint) = data.get("holdpoint")
        && let Some(decisions) = holdpoint.get("decisions")
    {
        let Some(decisions) = decisions.as_array() else {
            return Err(fault(
                format!("{field}.holdpoint.decisions"),
                "must be a list of {\"hold\", \"decision\"}",
            ));
        };
        for (i, d) in decisions.iter().enumerate() {
            let at = format!("{field}.holdpoint.decisions[{i}]");
            let id = d.get("hold").and_then(Value::as_str).unwrap_or_default();
            let hold = find(pending, id).ok_or_else(|| {
                fault(
                    format!("{at}.hold"),
                    format!("{id:?} is no hold this task waits on"),
                )
            })?;
            let decision: Decision =
                serde_json::from_value(d.get("decision").cloned().unwrap_or(Value::Null))
                    .map_err(|e| fault(format!("{at}.decision"), e.to_string()))?;
            out.push((Target::Hold(hold.id), decision));
        }
    }
    Ok(())
}

/// kagent's shapes, and the seed's: `decision_type` approve | reject | deny (with
/// `rejection_reason` or `reason`), or batch with `decisions: {call id: approve|reject}` and
/// `rejection_reasons`; a question's answers in `ask_user_answers`.
fn kagent(
    data: &Value,
    kind: &Value,
    field: &str,
    pending: &[Hold],
    out: &mut Vec<(Target, Decision)>,
) -> Result<(), ReplyError> {
    let reason = data
        .get("rejection_reason")
        .or_else(|| data.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match kind.as_str() {
        Some("approve") => {
            for (hold, _) in calls(pending) {
                out.push((Target::Hold(hold.id), bind(approve(None), hold)));
            }
        }
        Some("reject" | "deny") => {
            for (hold, _) in calls(pending) {
                out.push((
                    Target::Hold(hold.id),
                    Decision::Deny {
                        reason: reason.clone(),
                    },
                ));
            }
        }
        Some("batch") => {
            let Some(decisions) = data.get("decisions").and_then(Value::as_object) else {
                return Err(fault(
                    format!("{field}.decisions"),
                    "a batch needs decisions: {call id: \"approve\" | \"reject\"}",
                ));
            };
            let reasons = data.get("rejection_reasons").and_then(Value::as_object);
            for (id, verdict) in decisions {
                let at = format!("{field}.decisions.{id}");
                let hold = find(pending, id)
                    .ok_or_else(|| fault(at.clone(), "is no call this task waits on"))?;
                let decision = match verdict.as_str() {
                    Some("approve") => bind(approve(None), hold),
                    Some("reject" | "deny") => Decision::Deny {
                        reason: reasons
                            .and_then(|r| r.get(id))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| reason.clone()),
                    },
                    _ => return Err(fault(at, "must be \"approve\" or \"reject\"")),
                };
                out.push((Target::Hold(hold.id), decision));
            }
        }
        _ => {
            return Err(fault(
                format!("{field}.decision_type"),
                format!("{kind} is not a decision: approve, reject, deny or batch"),
            ));
        }
    }
    if let Some(answers) = data.get("ask_user_answers") {
        answer_questions(answers, field, pending, out)?;
    }
    Ok(())
}

/// Answers to the pending questions, in their order: each a list of option ids or labels, a
/// single one, or `{"answer": …}`.
fn answer_questions(
    answers: &Value,
    field: &str,
    pending: &[Hold],
    out: &mut Vec<(Target, Decision)>,
) -> Result<(), ReplyError> {
    let Some(answers) = answers.as_array() else {
        return Err(fault(
            format!("{field}.ask_user_answers"),
            "must be a list, one answer per question",
        ));
    };
    for (i, (answer, (hold, q))) in answers.iter().zip(questions(pending)).enumerate() {
        let answer = answer.get("answer").unwrap_or(answer);
        let chosen: Vec<String> = match answer {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => {
                return Err(fault(
                    format!("{field}.ask_user_answers[{i}]"),
                    "must be an option or a list of options",
                ));
            }
        };
        // Options may be named by id or by label.
        let options = chosen
            .iter()
            .map(|c| {
                q.options
                    .iter()
                    .find(|o| &o.id == c || &o.label == c)
                    .map(|o| o.id.clone())
                    .ok_or_else(|| {
                        fault(
                            format!("{field}.ask_user_answers[{i}]"),
                            format!("{c:?} is not an option of {:?}", q.question),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push((Target::Hold(hold.id), Decision::Answer { options }));
    }
    Ok(())
}

/// The approvals among `holds` (the held tool calls, which ADK's and kagent's shapes carry),
/// with their specs. Every kind says here whether it is one.
fn calls(holds: &[Hold]) -> Vec<(&Hold, &ApprovalSpec)> {
    holds
        .iter()
        .filter_map(|h| match &h.spec {
            HoldSpec::Approval(a) => Some((h, a)),
            HoldSpec::Question(_) => None,
        })
        .collect()
}

/// The questions among `holds`, with their specs.
fn questions(holds: &[Hold]) -> Vec<(&Hold, &QuestionSpec)> {
    holds
        .iter()
        .filter_map(|h| match &h.spec {
            HoldSpec::Question(q) => Some((h, q)),
            HoldSpec::Approval(_) => None,
        })
        .collect()
}

fn find<'a>(pending: &'a [Hold], id: &str) -> Option<&'a Hold> {
    pending
        .iter()
        .find(|h| h.id.to_string() == id || h.tool_call_id.as_deref() == Some(id))
}

fn approve(reason: Option<String>) -> Decision {
    Decision::Approve {
        scope: ApproveScope::Once,
        expires_in: None,
        digest: None,
        reason,
    }
}

/// An approval bound to the arguments the caller was shown: the hold's digest.
fn bind(decision: Decision, hold: &Hold) -> Decision {
    match (decision, &hold.spec) {
        (
            Decision::Approve {
                scope,
                expires_in,
                digest: None,
                reason,
            },
            HoldSpec::Approval(a),
        ) => Decision::Approve {
            scope,
            expires_in,
            digest: Some(a.digest.clone()),
            reason,
        },
        (d, _) => d,
    }
}

/// A decision in words: the first word says which; after a denial, the rest is its reason.
fn words(text: &str) -> Option<Decision> {
    let text = text.trim();
    let first = text
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())?
        .to_lowercase();
    match first.as_str() {
        "approve" | "approved" | "yes" | "proceed" | "ok" | "allow" => Some(approve(None)),
        "deny" | "denied" | "reject" | "rejected" | "no" | "cancel" => {
            let rest = text[text
                .to_lowercase()
                .find(&first)
                .map_or(0, |i| i + first.len())..]
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .trim();
            Some(Decision::Deny {
                reason: (!rest.is_empty()).then(|| rest.to_owned()),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
