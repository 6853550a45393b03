//! The hold lifecycle as pure functions: decide, expire, withdraw, remind. What is common to
//! every kind is here; each kind's decisions and outcomes are its own module's
//! ([`approval`](super::approval), [`question`](super::question)), reached by exhaustive
//! matches on the hold's spec.

use holdpoint_protocol::{
    Actor, DecideOutcome, Decision, EventPayload, Grant, Hold, HoldSpec, HoldStatus, Outcome,
    OutcomeStatus, Principal, Source, Timestamp, Verdict,
};

use super::{approval, question};
use crate::audit::EventDraft;
use crate::error::EngineError;
use crate::limits::Limits;
use crate::policy::Policy;
use crate::roles;

/// A hold's next version, with the events and grants that go with the change.
#[derive(Debug, Clone)]
pub struct Transition {
    pub hold: Hold,
    pub events: Vec<EventDraft>,
    pub grants: Vec<Grant>,
}

impl Transition {
    pub(super) fn new(hold: Hold, actor: Actor, at: Timestamp, payload: EventPayload) -> Self {
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

pub(super) fn next(hold: &Hold) -> Hold {
    let mut h = hold.clone();
    h.version += 1;
    h
}

pub(super) fn outcome(
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

pub(super) fn resolved(hold: &Hold, outcome: Outcome) -> Hold {
    let mut h = next(hold);
    h.status = HoldStatus::from(outcome.status);
    h.pending_answer = None;
    h.outcome = Some(outcome);
    h
}

pub(super) fn not_offered(hold: &Hold, decision: &Decision) -> EngineError {
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

pub(super) fn check_reason(reason: Option<&String>, limits: &Limits) -> Result<(), EngineError> {
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
    let by = vec![who.name.clone()];
    let mut o = match &hold.spec {
        HoldSpec::Approval(_) => approval::fail_closed(by, now),
        HoldSpec::Question(q) => question::fail_closed(q, by, now),
    };
    o.reason = reason;
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
    match &hold.spec {
        HoldSpec::Approval(spec) => {
            approval::decide(hold, spec, who, decision, now, policy, limits)
        }
        HoldSpec::Question(q) => question::decide(hold, q, who, decision, now, limits),
    }
}

pub(super) fn person_resolution(
    hold: &Hold,
    who: &Principal,
    outcome: Outcome,
    now: Timestamp,
) -> Decided {
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

/// The timeout outcome, once the deadline has passed.
pub fn expire(hold: &Hold, now: Timestamp) -> Option<Transition> {
    if !hold.is_open() || hold.deadline.is_none_or(|d| d > now) {
        return None;
    }
    let o = match &hold.spec {
        HoldSpec::Approval(spec) => approval::timed_out(&hold.on_timeout, spec, now),
        HoldSpec::Question(q) => question::timed_out(q, now),
    };
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
    match &hold.spec {
        // A withdrawn approval's call does not run.
        HoldSpec::Approval(_) => o.verdict = Some(Verdict::Deny),
        HoldSpec::Question(_) => {}
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

#[cfg(test)]
mod tests;
