//! Replay: what a candidate policy would have decided for the calls recorded in the log,
//! against what happened then — allowed or denied without asking, or asked and then approved,
//! denied, timed out, withdrawn or still pending. Grants are left aside: the question is what
//! the rules decide.

use std::collections::{BTreeMap, HashMap};

use holdpoint_protocol::{
    Event, EventPayload, HoldId, HoldSpec, ReplayChange, ReplayExample, ReplayReport, Timestamp,
    ToolAnnotations, Verdict,
};
use serde_json::Value;

use super::{Action, Call, Policy};

struct Recorded<'a> {
    at: Timestamp,
    tool: &'a str,
    arguments: &'a Value,
    annotations: Option<&'a ToolAnnotations>,
    before: &'static str,
    hold: Option<HoldId>,
}

/// What `candidate` decides for each call in `events` (in log order) that differs from what
/// happened, as counts with the first `examples` calls of each kind.
pub fn replay<'a>(
    candidate: &Policy,
    events: impl IntoIterator<Item = &'a Event>,
    examples: usize,
) -> ReplayReport {
    let mut calls: Vec<Recorded<'a>> = Vec::new();
    let mut holds: HashMap<HoldId, usize> = HashMap::new();
    for e in events {
        let (before, tool, arguments, annotations, hold) = match &e.payload {
            EventPayload::CallAllowed {
                tool,
                arguments: Some(arguments),
                annotations,
                ..
            } => ("allowed", tool, arguments, annotations.as_ref(), None),
            EventPayload::CallDenied {
                tool,
                arguments: Some(arguments),
                annotations,
                ..
            } => ("denied", tool, arguments, annotations.as_ref(), None),
            EventPayload::HoldCreated { hold } => match &hold.spec {
                HoldSpec::Approval(spec) => (
                    "pending",
                    &spec.tool,
                    &spec.arguments,
                    spec.annotations.as_ref(),
                    Some(hold.id),
                ),
                HoldSpec::Question(_) => continue,
            },
            payload => {
                let then = match payload {
                    EventPayload::HoldDecided { outcome } => {
                        if outcome.verdict == Some(Verdict::Approve) {
                            "approved"
                        } else {
                            "denied_by_person"
                        }
                    }
                    EventPayload::HoldExpired { .. } => "timed_out",
                    EventPayload::HoldWithdrawn { .. } => "withdrawn",
                    _ => continue,
                };
                if let Some(i) = e.hold.and_then(|h| holds.get(&h)) {
                    calls[*i].before = then;
                }
                continue;
            }
        };
        if let Some(h) = hold {
            holds.insert(h, calls.len());
        }
        calls.push(Recorded {
            at: e.at,
            tool,
            arguments,
            annotations,
            before,
            hold,
        });
    }

    let mut report = ReplayReport {
        calls: calls.len() as u64,
        ..ReplayReport::default()
    };
    let mut changes: BTreeMap<(&'static str, Action), ReplayChange> = BTreeMap::new();
    for c in &calls {
        let call = Call {
            tool: c.tool,
            arguments: c.arguments,
            annotations: c.annotations,
        };
        let after = candidate.evaluate(&call).action;
        let was = match c.before {
            "allowed" => Action::Allow,
            "denied" => Action::Deny,
            _ => Action::Ask,
        };
        if after == was {
            report.unchanged += 1;
            continue;
        }
        let change = changes
            .entry((c.before, after))
            .or_insert_with(|| ReplayChange {
                before: c.before.to_owned(),
                after: after.verdict(),
                count: 0,
                examples: Vec::new(),
            });
        change.count += 1;
        if change.examples.len() < examples {
            change.examples.push(ReplayExample {
                at: c.at,
                tool: c.tool.to_owned(),
                arguments: c.arguments.clone(),
                hold: c.hold,
            });
        }
    }
    report.changes = changes.into_values().collect();
    report
}
