//! The log checks the state: what the store serves for each hold, grant and turn must be what
//! the log's events say of it.
//!
//! The chain proves the events were not edited; it says nothing of the tables the API reads,
//! where an outcome could be changed behind Holdpoint's back. While the chain is walked,
//! [`StateCheck::observe`] keeps, for each hold and grant, a digest of what its events say
//! (the hold as raised, its status, its outcome; the grant as made, and whether it was
//! revoked; each chat's messages, each tool call's final result, how each turn ended); then
//! [`StateCheck::hold_differs`], [`StateCheck::grants_differ`],
//! [`StateCheck::message_differs`] and [`StateCheck::turn_differs`] compare what the store
//! serves. Digests (not copies) keep a million events in bounded, small memory.

use std::collections::{HashMap, HashSet};

use holdpoint_protocol::{
    AuditMismatch, EventPayload, Grant, GrantId, Hold, HoldId, HoldStatus, Message, Outcome, Turn,
    TurnId, TurnStatus,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::EventDraft;
use crate::canonical;

/// How many mismatches a report lists; the rest are only counted.
pub const LISTED: usize = 100;

type Fingerprint = [u8; 32];

/// The canonical JSON's SHA-256: equal for equal values whatever their key order.
fn fingerprint(value: &impl Serialize) -> Fingerprint {
    let text = canonical::to_string_of(value).unwrap_or_default();
    Sha256::digest(text.as_bytes()).into()
}

/// A hold without what its later events change (status, votes, the answer awaiting
/// confirmation, the reminder, the outcome, the version): what was raised and shown.
fn as_raised(hold: &Hold) -> Fingerprint {
    let mut h = hold.clone();
    h.status = HoldStatus::Pending;
    h.pending_answer = None;
    h.votes = Vec::new();
    h.reminded = false;
    h.outcome = None;
    h.version = 0;
    fingerprint(&h)
}

struct HoldSays {
    raised: Fingerprint,
    status: HoldStatus,
    outcome: Option<Fingerprint>,
    /// The last event about it.
    seq: u64,
    /// Whether the store served it.
    served: bool,
}

struct GrantSays {
    made: Fingerprint,
    /// The event that revoked it.
    revoked: Option<u64>,
    seq: u64,
}

/// What the log says of the conversations. Messages carry no id of their own, so each chat's
/// are counted by digest: a message the store serves takes one of its digest, and one the log
/// has none left of was edited or added behind Holdpoint's back.
#[derive(Default)]
struct TurnsSay {
    /// By chat (the events' `chat`): how many messages of each digest were created.
    messages: HashMap<String, HashMap<Fingerprint, u32>>,
    /// Each tool call's last recorded result, by turn and call.
    results: HashMap<(TurnId, String), Fingerprint>,
    /// How each turn that ended, ended.
    ended: HashMap<TurnId, TurnStatus>,
}

/// What the log says of every hold, grant and turn, and the differences found so far.
#[derive(Default)]
pub struct StateCheck {
    holds: HashMap<HoldId, HoldSays>,
    grants: HashMap<GrantId, GrantSays>,
    turns: TurnsSay,
    mismatches: Vec<AuditMismatch>,
    mismatched: u64,
}

/// The state check's findings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, serde::Deserialize)]
pub struct StateReport {
    /// Holds the store serves, each compared.
    pub holds: u64,
    /// Active grants the store serves, each compared.
    pub grants: u64,
    /// Messages of chats the store serves, each compared.
    pub messages: u64,
    /// Turns the store serves, each compared (their calls' results and how they ended).
    pub turns: u64,
    /// The first [`LISTED`] differences.
    pub mismatches: Vec<AuditMismatch>,
    /// How many differences in all.
    pub mismatched: u64,
}

impl StateCheck {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in the event at `seq` (already verified as part of the chain).
    pub fn observe(&mut self, seq: u64, event: &EventDraft) {
        let resolution = |o: &Outcome| (HoldStatus::from(o.status), Some(fingerprint(o)));
        let (status, outcome) = match &event.payload {
            EventPayload::HoldCreated { hold } => {
                self.holds.insert(
                    hold.id,
                    HoldSays {
                        raised: as_raised(hold),
                        status: hold.status,
                        outcome: hold.outcome.as_ref().map(fingerprint),
                        seq,
                        served: false,
                    },
                );
                return;
            }
            EventPayload::GrantCreated { grant } => {
                self.grants.insert(
                    grant.id,
                    GrantSays {
                        made: grant_fingerprint(grant),
                        revoked: None,
                        seq,
                    },
                );
                return;
            }
            EventPayload::GrantRevoked { grant } => {
                if let Some(g) = self.grants.get_mut(grant) {
                    g.revoked = Some(seq);
                    g.seq = seq;
                }
                return;
            }
            EventPayload::MessageCreated { message } => {
                if let Some(chat) = &event.chat {
                    let counts = self.turns.messages.entry(chat.clone()).or_default();
                    *counts.entry(fingerprint(message)).or_default() += 1;
                }
                return;
            }
            EventPayload::TurnToolFinished { turn, call, result } => {
                self.turns
                    .results
                    .insert((*turn, call.clone()), fingerprint(result));
                return;
            }
            EventPayload::TurnFinished { turn } => return self.ended(*turn, TurnStatus::Finished),
            EventPayload::TurnFailed { turn, .. } => return self.ended(*turn, TurnStatus::Failed),
            EventPayload::TurnCanceled { turn } => return self.ended(*turn, TurnStatus::Canceled),
            EventPayload::TurnStopped { turn } => return self.ended(*turn, TurnStatus::Stopped),
            EventPayload::HoldAwaitingConfirm { .. } => (HoldStatus::AwaitingConfirm, None),
            EventPayload::HoldDecided { outcome }
            | EventPayload::HoldExpired { outcome }
            | EventPayload::HoldWithdrawn { outcome } => resolution(outcome),
            _ => return,
        };
        if let Some(h) = event.hold.and_then(|id| self.holds.get_mut(&id)) {
            h.status = status;
            h.outcome = outcome;
            h.seq = seq;
        }
    }

    fn ended(&mut self, turn: TurnId, status: TurnStatus) {
        self.turns.ended.insert(turn, status);
    }

    /// Whether a message the store serves in `chat` is one the log created there (each
    /// message of the log answers for one served message).
    pub fn message_differs(&mut self, chat: &str, message: &Message) -> Option<String> {
        let left = self
            .turns
            .messages
            .get_mut(chat)
            .and_then(|counts| counts.get_mut(&fingerprint(message)))
            .filter(|n| **n > 0);
        match left {
            Some(n) => {
                *n -= 1;
                None
            }
            None => Some(format!(
                "no event created this message in chat {chat}: its role, text, tool result or time \
                 differs from every message the log has there"
            )),
        }
    }

    /// How a turn as the store serves it differs from what the log says: its calls' results
    /// and how it ended.
    pub fn turn_differs(&self, turn: &Turn) -> Option<String> {
        let mut differ = Vec::new();
        for rec in &turn.calls {
            let Some(result) = &rec.result else { continue };
            match self.turns.results.get(&(turn.id, rec.call.id.clone())) {
                None => differ.push(format!(
                    "call {} has a result but no event recorded one",
                    rec.call.id
                )),
                Some(said) if *said != fingerprint(result) => differ.push(format!(
                    "call {}'s result differs from the one the log recorded",
                    rec.call.id
                )),
                Some(_) => {}
            }
        }
        let ended = self.turns.ended.get(&turn.id).copied();
        let status = |s: TurnStatus| {
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        match ended {
            Some(said) if said != turn.status => differ.push(format!(
                "its status is {} but the log says it ended {}",
                status(turn.status),
                status(said)
            )),
            None if !turn.status.is_active() => differ.push(format!(
                "its status is {} but the log never ended it",
                status(turn.status)
            )),
            _ => {}
        }
        (!differ.is_empty()).then(|| differ.join("; "))
    }

    /// Records a difference.
    pub fn mismatch(&mut self, kind: &str, id: String, reason: String) {
        self.mismatched += 1;
        if self.mismatches.len() < LISTED {
            self.mismatches.push(AuditMismatch {
                kind: kind.to_owned(),
                id,
                reason,
            });
        }
    }

    /// How one hold as the store serves it differs from what the log says, if it does.
    pub fn hold_differs(&mut self, hold: &Hold) -> Option<String> {
        let Some(says) = self.holds.get_mut(&hold.id) else {
            return Some("the store serves this hold but no event raised it".into());
        };
        says.served = true;
        let mut differ = Vec::new();
        if as_raised(hold) != says.raised {
            differ.push("what was asked (tool, arguments, deadline, approvers…) differs from the hold as raised".to_owned());
        }
        if hold.status != says.status {
            differ.push(format!(
                "its status is {} but the log says {}",
                hold.status.as_str(),
                says.status.as_str()
            ));
        }
        if hold.outcome.as_ref().map(fingerprint) != says.outcome {
            differ.push(match (&hold.outcome, &says.outcome) {
                (Some(_), None) => "it has an outcome but the log resolved it with none".into(),
                (None, Some(_)) => "it has no outcome but the log resolved it".into(),
                _ => "its outcome differs from the one the log recorded".into(),
            });
        }
        (!differ.is_empty())
            .then(|| format!("{} (last event about it: {})", differ.join("; "), says.seq))
    }

    /// How the grants the store serves as active differ from what the log says: each grant
    /// served and each the log has active, with what differs.
    pub fn grants_differ(&self, active: &[Grant]) -> Vec<(GrantId, String)> {
        let mut out = Vec::new();
        let mut served = HashSet::with_capacity(active.len());
        for grant in active {
            served.insert(grant.id);
            let reason = match self.grants.get(&grant.id) {
                None => "the store serves this grant as active but no event made it".to_owned(),
                Some(GrantSays {
                    revoked: Some(seq), ..
                }) => format!("the store serves this grant as active but event {seq} revoked it"),
                Some(says) if grant_fingerprint(grant) != says.made => {
                    format!("the grant differs from the one event {} made", says.seq)
                }
                Some(_) => continue,
            };
            out.push((grant.id, reason));
        }
        for (id, g) in &self.grants {
            if g.revoked.is_none() && !served.contains(id) {
                out.push((
                    *id,
                    format!(
                        "event {} made this grant and none revoked it, but the store does not serve it",
                        g.seq
                    ),
                ));
            }
        }
        out
    }

    /// Ends the check: holds the log raised that the store did not serve are missing.
    pub fn finish(mut self, checked: Checked) -> StateReport {
        let mut missing: Vec<(HoldId, u64)> = self
            .holds
            .iter()
            .filter(|(_, h)| !h.served)
            .map(|(id, h)| (*id, h.seq))
            .collect();
        missing.sort_by_key(|(_, seq)| *seq);
        for (id, seq) in missing {
            self.mismatch(
                "hold",
                id.to_string(),
                format!("the log raised this hold (last event about it: {seq}) but the store does not serve it"),
            );
        }
        StateReport {
            holds: checked.holds,
            grants: checked.grants,
            messages: checked.messages,
            turns: checked.turns,
            mismatches: self.mismatches,
            mismatched: self.mismatched,
        }
    }
}

/// How many of each thing the store served were compared.
#[derive(Clone, Copy, Default)]
pub struct Checked {
    pub holds: u64,
    pub grants: u64,
    pub messages: u64,
    pub turns: u64,
}

/// A grant as made (a revoked grant's stored copy may carry when it was revoked).
fn grant_fingerprint(grant: &Grant) -> Fingerprint {
    let mut g = grant.clone();
    g.revoked_at = None;
    fingerprint(&g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_protocol::{Actor, MessageRole, Source, Timestamp};

    fn created(chat: &str, message: &Message) -> EventDraft {
        EventDraft {
            at: message.at,
            world: Some("lab".into()),
            chat: Some(chat.into()),
            hold: None,
            actor: Actor::of(Source::System),
            payload: EventPayload::MessageCreated {
                message: message.clone(),
            },
        }
    }

    fn said(text: &str) -> Message {
        Message {
            role: MessageRole::User,
            content: Some(text.into()),
            tool_calls: vec![],
            tool_call_id: None,
            turn: None,
            at: Timestamp::from_millis(7),
        }
    }

    #[test]
    fn each_message_of_the_log_answers_for_one_served_message_of_its_chat() {
        let mut check = StateCheck::new();
        let (yes, no) = (said("yes"), said("no"));
        // The same words twice in one chat: two messages, alike.
        check.observe(1, &created("a", &yes));
        check.observe(2, &created("a", &yes));
        check.observe(3, &created("b", &no));
        assert_eq!(check.message_differs("a", &yes), None);
        assert_eq!(check.message_differs("a", &yes), None);
        // A third copy, a message of another chat, a changed text: none was created.
        assert!(check.message_differs("a", &yes).is_some());
        assert!(check.message_differs("a", &no).is_some());
        assert!(check.message_differs("b", &said("No")).is_some());
        assert_eq!(check.message_differs("b", &no), None);
    }
}
