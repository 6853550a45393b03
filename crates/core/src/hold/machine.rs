//! The hold lifecycle as pure functions: decide, expire, withdraw, remind.

use std::collections::HashSet;

use holdpoint_protocol::{
    Actor, ApprovalSpec, ApproveScope, ChosenOption, Deadline, DecideOutcome, Decision,
    EventPayload, Grant, GrantId, GrantScope, Hold, HoldSpec, HoldStatus, OnTimeout, Outcome,
    OutcomeStatus, PendingAnswer, Principal, QuestionOption, QuestionSpec, Source, Timestamp,
    Verdict, Vote,
};
use serde_json::Value;

use super::validate::check_against_schema;
use crate::audit::EventDraft;
use crate::canonical;
use crate::error::EngineError;
use crate::limits::Limits;
use crate::policy::{Action, Call, Policy};
use crate::roles;

/// A hold's next version, with the events and grants that go with the change.
#[derive(Debug, Clone)]
pub struct Transition {
    pub hold: Hold,
    pub events: Vec<EventDraft>,
    pub grants: Vec<Grant>,
}

impl Transition {
    fn new(hold: Hold, actor: Actor, at: Timestamp, payload: EventPayload) -> Self {
        let event = draft(&hold, actor, at, payload);
        Transition {
            hold,
            events: vec![event],
            grants: Vec::new(),
        }
    }
}

/// A decision's transition and what it did.
pub type Decided = (Transition, DecideOutcome);

/// An event about `hold`.
pub(crate) fn draft(hold: &Hold, actor: Actor, at: Timestamp, payload: EventPayload) -> EventDraft {
    EventDraft {
        at,
        world: Some(hold.world.clone()),
        chat: hold.chat.clone(),
        hold: Some(hold.id),
        actor,
        payload,
    }
}

fn next(hold: &Hold) -> Hold {
    let mut h = hold.clone();
    h.version += 1;
    h
}

fn outcome(
    status: OutcomeStatus,
    source: Source,
    decided_by: Vec<String>,
    at: Timestamp,
) -> Outcome {
    Outcome {
        status,
        source,
        decided_by,
        decided_at: at,
        reason: None,
        verdict: None,
        scope: None,
        stop_turn: false,
        arguments: None,
        digest: None,
        edited: false,
        options: Vec::new(),
    }
}

fn resolved(hold: &Hold, outcome: Outcome) -> Hold {
    let mut h = next(hold);
    h.status = HoldStatus::from(outcome.status);
    h.pending_answer = None;
    h.outcome = Some(outcome);
    h
}

fn not_offered(hold: &Hold, decision: &Decision) -> EngineError {
    let offers: Vec<&str> = hold.offers.iter().map(|k| k.as_str()).collect();
    EngineError::invalid(
        "decision_not_offered",
        "action",
        format!(
            "this hold offers {}; not {}",
            offers.join(", "),
            decision.kind().as_str()
        ),
    )
}

fn check_reason(reason: Option<&String>, limits: &Limits) -> Result<(), EngineError> {
    match reason {
        Some(r) if r.len() > limits.reason => Err(EngineError::invalid(
            "invalid_input",
            "reason",
            format!(
                "is {} bytes long; at most {} are allowed",
                r.len(),
                limits.reason
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether `who` may decide `hold` now: a person's role, the hold open, among its approvers.
fn check_decider(hold: &Hold, who: &Principal) -> Result<(), EngineError> {
    if !roles::may_decide(who.role) {
        return Err(EngineError::Forbidden(
            "agent credentials cannot decide holds; an approver or an admin must".into(),
        ));
    }
    if !hold.is_open() {
        return Err(EngineError::AlreadyDecided {
            hold: Box::new(hold.clone()),
        });
    }
    if !hold.approvers.is_empty() && !hold.approvers.contains(&who.name) {
        return Err(EngineError::Forbidden(format!(
            "only {} may decide this hold",
            hold.approvers.join(", ")
        )));
    }
    Ok(())
}

/// The option a question falls back to when nobody answers it — no one can be asked, or its
/// deadline passed: its default, else an option with the id `no`. `None`: no option applies
/// (never one nobody chose, such as the first).
pub fn fail_closed_option(q: &QuestionSpec) -> Option<&QuestionOption> {
    let id = q.default_option.as_deref().unwrap_or("no");
    q.options.iter().find(|o| o.id == id)
}

fn chosen_option(option: &QuestionOption) -> ChosenOption {
    ChosenOption {
        id: option.id.clone(),
        label: option.label.clone(),
    }
}

/// Applies the fail-closed default for a client that cannot ask anyone (no terminal, say),
/// recorded with source `default` and the name of whoever's client applied it: approvals are
/// denied; questions get their default option, else `no`, else are canceled. A chosen answer
/// awaiting its confirm step is not confirmed.
pub fn fail_closed(
    hold: &Hold,
    who: &Principal,
    reason: Option<String>,
    now: Timestamp,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    check_decider(hold, who)?;
    check_reason(reason.as_ref(), limits)?;
    let status = match &hold.spec {
        HoldSpec::Approval(_) => OutcomeStatus::Denied,
        HoldSpec::Question(q) if fail_closed_option(q).is_some() => OutcomeStatus::Answered,
        HoldSpec::Question(_) => OutcomeStatus::Canceled,
    };
    let mut o = outcome(status, Source::Default, vec![who.name.clone()], now);
    o.reason = reason;
    match &hold.spec {
        HoldSpec::Approval(_) => o.verdict = Some(Verdict::Deny),
        HoldSpec::Question(q) => {
            o.options = fail_closed_option(q)
                .map(chosen_option)
                .into_iter()
                .collect();
        }
    }
    let actor = Actor {
        source: Source::Default,
        ..roles::actor_of(who)
    };
    let h = resolved(hold, o.clone());
    Ok((
        Transition::new(h, actor, now, EventPayload::HoldDecided { outcome: o }),
        DecideOutcome::Resolved,
    ))
}

/// Applies a person's decision. Checks, in order: the role, that the hold is open, the named
/// approvers, that the decision is offered, and then the decision itself.
pub fn decide(
    hold: &Hold,
    who: &Principal,
    decision: &Decision,
    now: Timestamp,
    policy: &Policy,
    limits: &Limits,
) -> Result<Decided, EngineError> {
    check_decider(hold, who)?;
    if !hold.offers.contains(&decision.kind()) {
        return Err(not_offered(hold, decision));
    }
    match (&hold.spec, decision) {
        (
            HoldSpec::Approval(spec),
            Decision::Approve {
                scope,
                expires_in,
                digest,
                reason,
            },
        ) => {
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
        (HoldSpec::Approval(_), Decision::Deny { reason }) => {
            deny(hold, who, reason, false, now, limits)
        }
        (HoldSpec::Approval(_), Decision::DenyStop { reason }) => {
            deny(hold, who, reason, true, now, limits)
        }
        (HoldSpec::Approval(spec), Decision::Edit { arguments, reason }) => {
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
        (HoldSpec::Question(q), Decision::Answer { options }) => answer(hold, q, who, options, now),
        (HoldSpec::Question(_), Decision::Confirm) => confirm(hold, who, now),
        (HoldSpec::Question(_), Decision::Cancel { reason }) => {
            check_reason(reason.as_ref(), limits)?;
            let mut o = outcome(
                OutcomeStatus::Canceled,
                Source::Person,
                vec![who.name.clone()],
                now,
            );
            o.reason = reason.clone();
            Ok(person_resolution(hold, who, o, now))
        }
        _ => Err(not_offered(hold, decision)),
    }
}

fn person_resolution(hold: &Hold, who: &Principal, outcome: Outcome, now: Timestamp) -> Decided {
    let h = resolved(hold, outcome.clone());
    (
        Transition::new(
            h,
            roles::actor_of(who),
            now,
            EventPayload::HoldDecided { outcome },
        ),
        DecideOutcome::Resolved,
    )
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

fn chosen(q: &QuestionSpec, ids: &[String]) -> Result<Vec<ChosenOption>, EngineError> {
    if ids.is_empty() {
        return Err(EngineError::invalid(
            "invalid_option",
            "options",
            "choose at least one option",
        ));
    }
    if ids.len() > 1 && !q.multiple {
        return Err(EngineError::invalid(
            "invalid_option",
            "options",
            "this question takes exactly one option",
        ));
    }
    let mut seen = HashSet::new();
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            if !seen.insert(id) {
                return Err(EngineError::invalid(
                    "invalid_option",
                    format!("options[{i}]"),
                    format!("{id:?} is chosen twice"),
                ));
            }
            let opt = q.options.iter().find(|o| &o.id == id).ok_or_else(|| {
                let valid: Vec<&str> = q.options.iter().map(|o| o.id.as_str()).collect();
                let shown: String = id.chars().take(64).collect();
                EngineError::invalid(
                    "invalid_option",
                    format!("options[{i}]"),
                    format!(
                        "{shown:?} is not an option of this question; choose from {}",
                        valid.join(", ")
                    ),
                )
            })?;
            Ok(chosen_option(opt))
        })
        .collect()
}

fn answer(
    hold: &Hold,
    q: &QuestionSpec,
    who: &Principal,
    ids: &[String],
    now: Timestamp,
) -> Result<Decided, EngineError> {
    if hold.status == HoldStatus::AwaitingConfirm {
        return Err(EngineError::conflict(
            "awaiting_confirm",
            "an answer is waiting for its confirm step: confirm or cancel it",
        ));
    }
    let options = chosen(q, ids)?;
    if q.confirm {
        let answer = PendingAnswer {
            options,
            by: who.name.clone(),
            at: now,
        };
        let mut h = next(hold);
        h.status = HoldStatus::AwaitingConfirm;
        h.pending_answer = Some(answer.clone());
        let t = Transition::new(
            h,
            roles::actor_of(who),
            now,
            EventPayload::HoldAwaitingConfirm { answer },
        );
        return Ok((t, DecideOutcome::AwaitingConfirm));
    }
    let mut o = outcome(
        OutcomeStatus::Answered,
        Source::Person,
        vec![who.name.clone()],
        now,
    );
    o.options = options;
    Ok(person_resolution(hold, who, o, now))
}

fn confirm(hold: &Hold, who: &Principal, now: Timestamp) -> Result<Decided, EngineError> {
    let Some(pending) = hold
        .pending_answer
        .as_ref()
        .filter(|_| hold.status == HoldStatus::AwaitingConfirm)
    else {
        return Err(EngineError::invalid(
            "nothing_to_confirm",
            "action",
            "no answer waits for confirmation: answer the question first",
        ));
    };
    let mut by = vec![pending.by.clone()];
    if pending.by != who.name {
        by.push(who.name.clone());
    }
    let mut o = outcome(OutcomeStatus::Confirmed, Source::Person, by, now);
    o.options = pending.options.clone();
    Ok(person_resolution(hold, who, o, now))
}

/// The timeout outcome, once the deadline has passed.
pub fn expire(hold: &Hold, now: Timestamp) -> Option<Transition> {
    if !hold.is_open() || hold.deadline.is_none_or(|d| d > now) {
        return None;
    }
    let mut o = outcome(OutcomeStatus::TimedOut, Source::Timeout, Vec::new(), now);
    match (&hold.on_timeout, &hold.spec) {
        (OnTimeout::Approve, HoldSpec::Approval(spec)) => {
            o.verdict = Some(Verdict::Approve);
            o.scope = Some(ApproveScope::Once);
            o.arguments = Some(spec.arguments.clone());
            o.digest = Some(spec.digest.clone());
        }
        // A question falls to its fail-closed option, whatever an older version stored as
        // `on_timeout` (which could name the first option, one nobody chose); without one,
        // no option is chosen.
        (_, HoldSpec::Question(q)) => {
            o.options = fail_closed_option(q)
                .map(chosen_option)
                .into_iter()
                .collect();
        }
        (_, HoldSpec::Approval(_)) => o.verdict = Some(Verdict::Deny),
    }
    let h = resolved(hold, o.clone());
    Some(Transition::new(
        h,
        Actor::of(Source::Timeout),
        now,
        EventPayload::HoldExpired { outcome: o },
    ))
}

/// Withdraws an open hold (its turn was cancelled, or its agent withdrew it).
pub fn withdraw(
    hold: &Hold,
    actor: Actor,
    reason: Option<String>,
    now: Timestamp,
) -> Option<Transition> {
    if !hold.is_open() {
        return None;
    }
    let mut o = outcome(
        OutcomeStatus::Canceled,
        actor.source,
        actor.name.iter().cloned().collect(),
        now,
    );
    o.reason = reason;
    if matches!(hold.spec, HoldSpec::Approval(_)) {
        o.verdict = Some(Verdict::Deny);
    }
    let h = resolved(hold, o.clone());
    Some(Transition::new(
        h,
        actor,
        now,
        EventPayload::HoldWithdrawn { outcome: o },
    ))
}

/// The reminder, once its time has come.
pub fn remind(hold: &Hold, now: Timestamp) -> Option<Transition> {
    let deadline = hold.deadline?;
    if !hold.is_open() || hold.reminded || hold.remind_at.is_none_or(|r| r > now) {
        return None;
    }
    let mut h = next(hold);
    h.reminded = true;
    Some(Transition::new(
        h,
        Actor::of(Source::System),
        now,
        EventPayload::HoldReminded { deadline },
    ))
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
mod tests;
