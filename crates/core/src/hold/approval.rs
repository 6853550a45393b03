//! Approvals: a tool call waiting for a person's permission, bound to the digest of the
//! arguments shown. What an approval request must be, the hold it raises and the decisions
//! it offers, what each decision does, and what applies when nobody decides.

use holdpoint_protocol::{
    ApprovalRequest, ApprovalSpec, ApproveScope, Deadline, DecideOutcome, Decision, DecisionKind,
    EventPayload, Grant, GrantId, GrantScope, Hold, HoldSpec, OnTimeout, Outcome, OutcomeStatus,
    Principal, Source, Timestamp, Verdict, Vote,
};
use serde_json::Value;

use super::build::HoldContext;
use super::machine::{
    Decided, Transition, check_reason, next, not_offered, outcome, person_resolution, resolved,
};
use super::validate::{check_against_schema, check_json_size, check_name, check_optional_text};
use crate::audit::EventDraft;
use crate::canonical;
use crate::error::{EngineError, ValidationError};
use crate::limits::Limits;
use crate::policy::{Action, AskSettings, Call, Policy};
use crate::roles;

/// The bound on the arguments of a call a person is asked about: they are stored with its
/// hold and shown on its card. A call that policy allows or denies at once needs no hold,
/// so its arguments are bounded only by the request that carries them.
pub fn check_held_arguments(req: &ApprovalRequest, limits: &Limits) -> Result<(), ValidationError> {
    check_json_size("arguments", &req.arguments, limits.arguments)
}

/// Tool names: letters, digits, `_`, `-`, `.`, `:` and `/` (MCP tools are `server__tool`).
fn check_tool_name(value: &str, max: usize) -> Result<(), ValidationError> {
    check_name("tool", value, max)?;
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.:/".contains(*c)))
    {
        return Err(ValidationError::new(
            "tool",
            format!("{c:?} is not allowed in a tool name (letters, digits, _ - . : / only)"),
        ));
    }
    Ok(())
}

/// Checks an approval request. Returns the arguments' schema validator's verdict separately
/// so callers can tell "this call is malformed" (which goes back to the LLM) from the rest.
pub fn validate_approval(req: &ApprovalRequest, limits: &Limits) -> Result<(), ValidationError> {
    check_tool_name(&req.tool, limits.tool)?;
    if let Some(id) = &req.tool_call_id {
        check_name("tool_call_id", id, limits.name)?;
    }
    check_optional_text("description", req.description.as_deref(), limits.reason)?;
    if let Some(mcp) = &req.mcp {
        check_name("mcp.server", &mcp.server, limits.tool)?;
        check_name("mcp.tool", &mcp.tool, limits.tool)?;
        // The card shows the server and tool; policy and grants match `tool`: one call.
        if req.tool != crate::mcp::tool_name(&mcp.server, &mcp.tool) {
            return Err(ValidationError::new(
                "mcp",
                format!(
                    "names server {:?} and tool {:?}, so tool must be {:?}",
                    mcp.server,
                    mcp.tool,
                    crate::mcp::tool_name(&mcp.server, &mcp.tool)
                ),
            ));
        }
    }
    if !req.arguments.is_object() {
        return Err(ValidationError::new("arguments", "must be a JSON object"));
    }
    // The arguments' size is bounded where they are kept: see `check_held_arguments`.
    if let Some(schema) = &req.schema {
        check_json_size("schema", schema, limits.schema)?;
        check_against_schema(schema, &req.arguments)?;
    }
    Ok(())
}

/// An approval hold for a validated request. `deadline` is already resolved (request, rule,
/// tool or default) and checked.
pub fn approval_hold(
    ctx: &HoldContext<'_>,
    req: &ApprovalRequest,
    digest: String,
    settings: &AskSettings,
    deadline: Deadline,
) -> Hold {
    let spec = HoldSpec::Approval(ApprovalSpec {
        tool: req.tool.clone(),
        arguments: req.arguments.clone(),
        digest,
        schema: req.schema.clone(),
        annotations: req.annotations,
        description: req.description.clone(),
        mcp: req.mcp.clone(),
    });
    let mut hold = ctx.hold(req.tool_call_id.as_ref(), deadline, spec);
    hold.on_timeout = match settings.on_timeout {
        Verdict::Approve => OnTimeout::Approve,
        Verdict::Deny => OnTimeout::Deny,
    };
    hold.rule = settings.rule.clone();
    hold.approvers = settings.approvers.clone();
    hold.quorum = settings.quorum;
    hold.offers = settings
        .offers
        .iter()
        .copied()
        .filter(|k| req.offers.as_ref().is_none_or(|narrow| narrow.contains(k)))
        // A chat grant needs a chat; a hold that always asks remembers nothing.
        .filter(|k| *k != DecisionKind::ApproveChat || ctx.chat.is_some())
        .filter(|k| {
            !req.always_ask
                || !matches!(
                    k,
                    DecisionKind::ApproveChat
                        | DecisionKind::ApproveAlwaysArgs
                        | DecisionKind::ApproveAlwaysTool
                )
        })
        .collect();
    hold
}

/// A person's decision on an approval, once [`decide`](super::decide) checked who decides and
/// that the decision is offered.
pub(super) fn decide(
    hold: &Hold,
    spec: &ApprovalSpec,
    who: &Principal,
    decision: &Decision,
    now: Timestamp,
    policy: &Policy,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    match decision {
        Decision::Approve {
            scope,
            expires_in,
            digest,
            reason,
        } => {
            check_reason(reason.as_ref(), limits)?;
            let expires_at = grant_expiry(*scope, *expires_in, now)?;
            approve(
                hold,
                spec,
                who,
                (*scope, expires_at),
                digest.as_deref(),
                reason.clone(),
                now,
            )
        }
        Decision::Deny { reason } => deny(hold, who, reason, false, now, limits),
        Decision::DenyStop { reason } => deny(hold, who, reason, true, now, limits),
        Decision::Edit { arguments, reason } => {
            check_reason(reason.as_ref(), limits)?;
            edit(
                hold,
                spec,
                who,
                arguments,
                reason.clone(),
                now,
                policy,
                limits,
            )
        }
        Decision::Answer { .. } | Decision::Confirm | Decision::Cancel { .. } => {
            Err(not_offered(hold, decision))
        }
    }
}

/// When a grant made by approving with `scope` for `expires_in` stops matching.
fn grant_expiry(
    scope: ApproveScope,
    expires_in: Option<Deadline>,
    now: Timestamp,
) -> Result<Option<Timestamp>, EngineError> {
    let invalid = |m: &str| EngineError::invalid("invalid_input", "expires_in", m);
    match (scope, expires_in) {
        (_, None) => Ok(None),
        (ApproveScope::Once, Some(_)) => Err(invalid(
            "only a remembered approval expires: give it with scope chat, always_args or always_tool",
        )),
        (_, Some(Deadline::Never)) => Err(invalid(
            "leave expires_in out for a grant that lasts until it is revoked",
        )),
        (_, Some(Deadline::After(d))) if d.is_zero() => Err(invalid(
            "must be a duration longer than zero, such as \"10m\"",
        )),
        (_, Some(Deadline::After(d))) => Ok(Some(now.saturating_add(d))),
    }
}

fn approve(
    hold: &Hold,
    spec: &ApprovalSpec,
    who: &Principal,
    (scope, expires_at): (ApproveScope, Option<Timestamp>),
    digest: Option<&str>,
    reason: Option<String>,
    now: Timestamp,
) -> Result<Decided, EngineError> {
    if let Some(seen) = digest
        && seen != spec.digest
    {
        return Err(EngineError::conflict(
            "digest_mismatch",
            "the digest given is not the digest of this hold's arguments: approve only what was shown",
        ));
    }
    if hold.quorum > 1 {
        if hold.votes.iter().any(|v| v.by == who.name) {
            return Err(EngineError::conflict(
                "already_voted",
                format!(
                    "{} has already approved this hold; it needs approvals from {} different people",
                    who.name, hold.quorum
                ),
            ));
        }
        let vote = Vote {
            by: who.name.clone(),
            scope,
            at: now,
            reason: reason.clone(),
        };
        let mut votes = hold.votes.clone();
        votes.push(vote.clone());
        let approvals = votes.len() as u32;
        if approvals < hold.quorum {
            let mut h = next(hold);
            h.votes = votes;
            let payload = EventPayload::HoldVoted {
                vote,
                approvals,
                quorum: hold.quorum,
            };
            return Ok((
                Transition::new(h, roles::actor_of(who), now, payload),
                DecideOutcome::VoteRecorded,
            ));
        }
        // Differing scopes approve with the narrowest.
        let narrowest = votes
            .iter()
            .map(|v| v.scope)
            .min_by_key(|s| narrowness(*s))
            .unwrap_or(scope);
        let by = votes.iter().map(|v| v.by.clone()).collect();
        return Ok(approved(
            hold,
            spec,
            who,
            (narrowest, None),
            by,
            votes,
            reason,
            now,
        ));
    }
    Ok(approved(
        hold,
        spec,
        who,
        (scope, expires_at),
        vec![who.name.clone()],
        Vec::new(),
        reason,
        now,
    ))
}

#[allow(clippy::too_many_arguments)]
fn approved(
    hold: &Hold,
    spec: &ApprovalSpec,
    who: &Principal,
    (scope, expires_at): (ApproveScope, Option<Timestamp>),
    decided_by: Vec<String>,
    votes: Vec<Vote>,
    reason: Option<String>,
    now: Timestamp,
) -> Decided {
    let mut o = outcome(OutcomeStatus::Approved, Source::Person, decided_by, now);
    o.reason = reason;
    o.verdict = Some(Verdict::Approve);
    o.scope = Some(scope);
    o.arguments = Some(spec.arguments.clone());
    o.digest = Some(spec.digest.clone());
    let mut h = resolved(hold, o.clone());
    h.votes = votes;
    let mut t = Transition::new(
        h,
        roles::actor_of(who),
        now,
        EventPayload::HoldDecided { outcome: o },
    );
    if let Some(mut grant) = grant_for(hold, spec, scope, who, now) {
        grant.expires_at = expires_at;
        t.events.push(EventDraft {
            at: now,
            world: Some(grant.world.clone()),
            chat: grant.chat.clone(),
            hold: Some(hold.id),
            actor: roles::actor_of(who),
            payload: EventPayload::GrantCreated {
                grant: grant.clone(),
            },
        });
        t.grants.push(grant);
    }
    (t, DecideOutcome::Resolved)
}

fn grant_for(
    hold: &Hold,
    spec: &ApprovalSpec,
    scope: ApproveScope,
    who: &Principal,
    now: Timestamp,
) -> Option<Grant> {
    let (scope, chat, digest) = match scope {
        ApproveScope::Once => return None,
        ApproveScope::Chat => (
            GrantScope::Chat,
            Some(hold.chat.clone()?),
            Some(spec.digest.clone()),
        ),
        ApproveScope::AlwaysArgs => (GrantScope::AlwaysArgs, None, Some(spec.digest.clone())),
        ApproveScope::AlwaysTool => (GrantScope::AlwaysTool, None, None),
    };
    Some(Grant {
        id: GrantId::random(),
        scope,
        world: hold.world.clone(),
        chat,
        tool: spec.tool.clone(),
        digest,
        created_by: who.name.clone(),
        created_at: now,
        from_hold: hold.id,
        revoked_at: None,
        expires_at: None,
        expired: false,
    })
}

fn deny(
    hold: &Hold,
    who: &Principal,
    reason: &Option<String>,
    stop: bool,
    now: Timestamp,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    check_reason(reason.as_ref(), limits)?;
    let mut o = outcome(
        OutcomeStatus::Denied,
        Source::Person,
        vec![who.name.clone()],
        now,
    );
    o.reason = reason.clone();
    o.verdict = Some(Verdict::Deny);
    o.stop_turn = stop;
    Ok(person_resolution(hold, who, o, now))
}

#[allow(clippy::too_many_arguments)]
fn edit(
    hold: &Hold,
    spec: &ApprovalSpec,
    who: &Principal,
    arguments: &Value,
    reason: Option<String>,
    now: Timestamp,
    policy: &Policy,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    let invalid = |message: String| EngineError::invalid("invalid_arguments", "arguments", message);
    if !arguments.is_object() {
        return Err(invalid("edited arguments must be a JSON object".into()));
    }
    let size = canonical::to_string(arguments).len();
    if size > limits.arguments {
        return Err(invalid(format!(
            "are {size} bytes as JSON; at most {} are allowed",
            limits.arguments
        )));
    }
    if let Some(schema) = &spec.schema {
        check_against_schema(schema, arguments)
            .map_err(|e| invalid(format!("edited arguments {}", e.message)))?;
    }
    let eval = policy.evaluate(&Call {
        tool: &spec.tool,
        arguments,
        annotations: spec.annotations.as_ref(),
    });
    if eval.action == Action::Deny {
        let by = match policy.decided_by(&eval) {
            holdpoint_protocol::DecidedBy::Rule { rule } => format!("rule {:?}", rule.name),
            _ => format!("the policy's {} mode", policy.mode().as_str()),
        };
        return Err(EngineError::invalid(
            "edit_denied",
            "arguments",
            format!("the edited arguments are denied by {by}"),
        ));
    }
    let mut o = outcome(
        OutcomeStatus::Approved,
        Source::Person,
        vec![who.name.clone()],
        now,
    );
    o.reason = reason;
    o.verdict = Some(Verdict::Approve);
    o.scope = Some(ApproveScope::Once);
    o.digest = Some(canonical::digest(arguments));
    o.arguments = Some(arguments.clone());
    o.edited = true;
    Ok(person_resolution(hold, who, o, now))
}

/// The fail-closed default for an approval (see [`fail_closed`](super::fail_closed)): denied.
pub(super) fn fail_closed(by: Vec<String>, now: Timestamp) -> Outcome {
    let mut o = outcome(OutcomeStatus::Denied, Source::Default, by, now);
    o.verdict = Some(Verdict::Deny);
    o
}

/// An approval's outcome at its deadline: denied, unless policy said to approve.
pub(super) fn timed_out(on_timeout: &OnTimeout, spec: &ApprovalSpec, now: Timestamp) -> Outcome {
    let mut o = outcome(OutcomeStatus::TimedOut, Source::Timeout, Vec::new(), now);
    match on_timeout {
        OnTimeout::Approve => {
            o.verdict = Some(Verdict::Approve);
            o.scope = Some(ApproveScope::Once);
            o.arguments = Some(spec.arguments.clone());
            o.digest = Some(spec.digest.clone());
        }
        OnTimeout::Deny | OnTimeout::Choose { .. } | OnTimeout::NoAnswer => {
            o.verdict = Some(Verdict::Deny);
        }
    }
    o
}

/// Narrowness order of approval scopes: a quorum of differing scopes approves with the
/// narrowest.
fn narrowness(scope: ApproveScope) -> u8 {
    match scope {
        ApproveScope::Once => 0,
        ApproveScope::Chat => 1,
        ApproveScope::AlwaysArgs => 2,
        ApproveScope::AlwaysTool => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approvals_check_tool_names_sizes_and_schema() {
        let limits = Limits::default();
        let req = |tool: &str, args: Value, schema: Option<Value>| ApprovalRequest {
            tool_call_id: None,
            tool: tool.into(),
            arguments: args,
            schema,
            annotations: None,
            description: None,
            deadline: None,
            always_ask: false,
            offers: None,
            mcp: None,
        };
        assert!(validate_approval(&req("fs__write_file", json!({}), None), &limits).is_ok());
        let mut of_server = req("fs__write_file", json!({}), None);
        of_server.mcp = Some(holdpoint_protocol::McpTool {
            server: "fs".into(),
            tool: "write_file".into(),
        });
        assert!(validate_approval(&of_server, &limits).is_ok());
        of_server.tool = "fs__read_file".into();
        let err = validate_approval(&of_server, &limits).unwrap_err();
        assert_eq!(err.field, "mcp");
        assert!(err.message.contains("fs__write_file"), "{err}");
        assert_eq!(
            validate_approval(&req("a b", json!({}), None), &limits)
                .unwrap_err()
                .field,
            "tool"
        );
        assert_eq!(
            validate_approval(&req("t", json!([1]), None), &limits)
                .unwrap_err()
                .field,
            "arguments"
        );
        let huge = req("t", json!({"x": "y".repeat(300 * 1024)}), None);
        assert!(validate_approval(&huge, &limits).is_ok());
        assert!(
            check_held_arguments(&huge, &limits)
                .unwrap_err()
                .message
                .contains("at most")
        );
        let schema = json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}});
        let err = validate_approval(&req("t", json!({"path": 3}), Some(schema.clone())), &limits)
            .unwrap_err();
        assert_eq!(err.field, "arguments");
        assert!(
            err.message.contains("path: 3 is not of type") && !err.message.contains("/path"),
            "named as a field, not a JSON pointer: {err}"
        );
        let nested = json!({"type": "object", "properties": {"files": {"type": "array", "items": {"type": "object", "properties": {"a/b": {"type": "string"}}}}}});
        let err = validate_approval(
            &req("t", json!({"files": [{"a/b": 1}]}), Some(nested)),
            &limits,
        )
        .unwrap_err();
        assert!(
            err.message.contains("files[0].a/b: 1 is not of type"),
            "{err}"
        );
        assert!(validate_approval(&req("t", json!({"path": "a"}), Some(schema)), &limits).is_ok());
        let err = validate_approval(&req("t", json!({}), Some(json!({"type": 12}))), &limits)
            .unwrap_err();
        assert_eq!(err.field, "schema");
    }
}
