//! The turn loop.
//!
//! A turn is driven as a sequence of steps, each persisted before the next begins, so that a
//! new process can pick the turn up where the last one stopped:
//!
//! 1. **think** — call the LLM with the conversation; record its answer and the tool calls it
//!    proposes (or finish, when it proposes none);
//! 2. **gate** — validate each call and let policy decide; calls to ask become holds of one
//!    batch. The engine is called with an idempotency key of the turn and step, so doing this
//!    again after a crash returns the same holds;
//! 3. **run** the calls policy allowed, at once; then **wait** for every hold of the batch;
//!    then run what was approved, with the arguments approved. A call is recorded as running
//!    before it runs: if the process dies meanwhile, the next one reports it as interrupted
//!    and does not run it again;
//! 4. **conclude** — give the LLM exactly one result per call, in call order, and think again.
//!
//! One node drives a turn, under a lease renewed while it does (`lease.rs`); when the node
//! dies another takes the turn over once the lease has ended. Every save is also checked
//! against the turn's version, so two drivers of one turn (a node that lost its lease while
//! the database was away, say) cannot both act: the one whose save fails stops.

mod api;
mod driver;
mod gating;
mod lease;
mod nested;
mod outcome;
mod remote;
mod running;
mod thinking;
mod waiting;

use holdpoint_protocol::{CallRecord, CallState, EventPayload, ToolResult, TurnId};

pub(crate) use lease::{ActiveTurn, Driving, keep as keep_leases};

/// Marks a call of `turn` done with `result`; the event that says so.
pub(crate) fn finished(turn: TurnId, rec: &mut CallRecord, result: ToolResult) -> EventPayload {
    rec.state = CallState::Done;
    rec.result = Some(result.clone());
    EventPayload::TurnToolFinished {
        turn,
        call: rec.call.id.clone(),
        result,
    }
}
