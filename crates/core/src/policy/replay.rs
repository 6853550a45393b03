//! Replay: what a candidate policy would have decided for the calls recorded in the log,
//! against what happened then — allowed or denied without asking, or asked and then approved,
//! denied, timed out, withdrawn or still pending.
//!
//! Grants count as they stood at each call: the log's `grant.*` events are replayed with the
//! calls, and a call the candidate's rules would ask for (or deny by mode) that a grant in
//! force at its instant covered is allowed, as the gate would have allowed it (a `deny` rule
//! still denies). Grants a different history would have made are beyond knowing: those made
//! are taken as they were. A hold was raised because no grant covered its call, so grants
//! never change a hold's replay.
//!
//! The log is read once, in order, a page at a time ([`Replay::record`]): what is kept is the
//! counts, the examples shown, the grants in force, and the holds whose candidate decision
//! differs until their outcome is known.

use std::collections::{BTreeMap, HashMap};

use holdpoint_protocol::{
    Event, EventPayload, HoldId, HoldSpec, ReplayChange, ReplayExample, ReplayReport, Timestamp,
    ToolAnnotations, Verdict,
};
use serde_json::Value;

use super::GrantIndex;
use super::{Action, Call, Policy};

/// A candidate's replay under way.
pub struct Replay<'p> {
    candidate: &'p Policy,
    examples: usize,
    /// Calls before this instant are not replayed (their grants still count).
    from: Option<Timestamp>,
    grants: GrantIndex,
    report: ReplayReport,
    changes: BTreeMap<(&'static str, Action), ReplayChange>,
    /// Holds the candidate decides differently, until their outcome is known; the number is
    /// the hold's place in the log, so those still pending are shown in log order.
    open: HashMap<HoldId, (u64, Action, ReplayExample)>,
}

impl<'p> Replay<'p> {
    /// `examples` calls are kept for each kind of difference; `from` leaves earlier calls out.
    pub fn new(candidate: &'p Policy, examples: usize, from: Option<Timestamp>) -> Self {
        Replay {
            candidate,
            examples,
            from,
            grants: GrantIndex::default(),
            report: ReplayReport::default(),
            changes: BTreeMap::new(),
            open: HashMap::new(),
        }
    }

    /// Takes the next event of the world's log (in log order).
    pub fn record(&mut self, e: &Event) {
        let recent = self.from.is_none_or(|from| e.at >= from);
        match &e.payload {
            EventPayload::GrantCreated { grant } => self.grants.insert(grant.clone()),
            EventPayload::GrantRevoked { grant } => self.grants.remove(*grant),
            EventPayload::CallAllowed {
                tool,
                digest,
                arguments: Some(arguments),
                annotations,
                ..
            } if recent => self.call(e, "allowed", tool, digest, arguments, annotations),
            EventPayload::CallDenied {
                tool,
                digest,
                arguments: Some(arguments),
                annotations,
                ..
            } if recent => self.call(e, "denied", tool, digest, arguments, annotations),
            EventPayload::HoldCreated { hold } if recent => {
                let spec = match &hold.spec {
                    HoldSpec::Approval(spec) => spec,
                    // A question is no call: no policy decides it.
                    HoldSpec::Question(_) => return,
                };
                self.report.calls += 1;
                let after = self.evaluate(&spec.tool, &spec.arguments, spec.annotations.as_ref());
                if after == Action::Ask {
                    // Asked then, asked now, whatever became of it.
                    self.report.unchanged += 1;
                } else {
                    let example = example(e.at, &spec.tool, &spec.arguments, Some(hold.id));
                    let place = self.report.calls;
                    self.open.insert(hold.id, (place, after, example));
                }
            }
            EventPayload::HoldDecided { outcome } => {
                let then = if outcome.verdict == Some(Verdict::Approve) {
                    "approved"
                } else {
                    "denied_by_person"
                };
                self.resolved(e.hold, then);
            }
            EventPayload::HoldExpired { .. } => self.resolved(e.hold, "timed_out"),
            EventPayload::HoldWithdrawn { .. } => self.resolved(e.hold, "withdrawn"),
            _ => {}
        }
    }

    /// The differences found, holds still open counted as `pending`.
    pub fn finish(mut self) -> ReplayReport {
        let mut pending: Vec<_> = std::mem::take(&mut self.open).into_values().collect();
        pending.sort_by_key(|(place, _, _)| *place);
        for (_, after, example) in pending {
            self.changed("pending", after, example);
        }
        self.report.changes = self.changes.into_values().collect();
        self.report
    }

    fn evaluate(
        &self,
        tool: &str,
        arguments: &Value,
        annotations: Option<&ToolAnnotations>,
    ) -> Action {
        let call = Call {
            tool,
            arguments,
            annotations,
        };
        self.candidate.evaluate(&call).action
    }

    /// A call decided without asking: what the candidate, with the grants then in force,
    /// decides instead.
    fn call(
        &mut self,
        e: &Event,
        before: &'static str,
        tool: &str,
        digest: &str,
        arguments: &Value,
        annotations: &Option<ToolAnnotations>,
    ) {
        self.report.calls += 1;
        let mut after = self.evaluate(tool, arguments, annotations.as_ref());
        if after != Action::Deny
            && let Some(world) = &e.world
            && self
                .grants
                .find(world, e.chat.as_deref(), tool, digest, e.at)
                .is_some()
        {
            if after != Action::Allow {
                self.report.granted += 1;
            }
            after = Action::Allow;
        }
        let was = if before == "allowed" {
            Action::Allow
        } else {
            Action::Deny
        };
        if after == was {
            self.report.unchanged += 1;
        } else {
            self.changed(before, after, example(e.at, tool, arguments, None));
        }
    }

    /// A hold's outcome: a hold the candidate decides differently is a difference of that kind.
    fn resolved(&mut self, hold: Option<HoldId>, then: &'static str) {
        if let Some((_, after, example)) = hold.and_then(|h| self.open.remove(&h)) {
            self.changed(then, after, example);
        }
    }

    fn changed(&mut self, before: &'static str, after: Action, example: ReplayExample) {
        let change = self
            .changes
            .entry((before, after))
            .or_insert_with(|| ReplayChange {
                before: before.to_owned(),
                after: after.verdict(),
                count: 0,
                examples: Vec::new(),
            });
        change.count += 1;
        if change.examples.len() < self.examples {
            change.examples.push(example);
        }
    }
}

fn example(at: Timestamp, tool: &str, arguments: &Value, hold: Option<HoldId>) -> ReplayExample {
    ReplayExample {
        at,
        tool: tool.to_owned(),
        arguments: arguments.clone(),
        hold,
    }
}

/// What `candidate` decides for each call in `events` (in log order) that differs from what
/// happened, as counts with the first `examples` calls of each kind.
pub fn replay<'a>(
    candidate: &Policy,
    events: impl IntoIterator<Item = &'a Event>,
    examples: usize,
) -> ReplayReport {
    let mut replay = Replay::new(candidate, examples, None);
    for e in events {
        replay.record(e);
    }
    replay.finish()
}
