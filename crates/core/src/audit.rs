//! The tamper-evident audit chain.
//!
//! Every event is stored as a canonical JSON *body* `{"event":…,"prev":…,"seq":…}` and its
//! SHA-256 *hash*. The body names the previous entry's hash, so editing, deleting or reordering
//! any entry breaks the chain from that point. The store keeps the newest (seq, hash) in a
//! separate head record, so that removing entries from the end is detected too.
//!
//! This module owns the format; stores call [`seal`] inside their write transaction and
//! [`ChainVerifier`] reads the rows back.

use holdpoint_protocol::{Actor, Event, EventPayload, HoldId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::canonical;

pub mod state;

/// The `prev` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// An event before it is committed: everything but its position and hash.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct EventDraft {
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldId>,
    pub actor: Actor,
    pub payload: EventPayload,
}

impl EventDraft {
    /// The draft's canonical JSON, computed once (off the store's write path).
    pub fn canonical(&self) -> String {
        match canonical::to_string_of(self) {
            Ok(text) => text,
            // Serialising plain data cannot fail; an empty object keeps the chain well-formed.
            Err(_) => "{}".to_owned(),
        }
    }

    /// The committed event at `seq` with `hash`.
    pub fn into_event(self, seq: u64, hash: String) -> Event {
        Event {
            seq,
            at: self.at,
            world: self.world,
            chat: self.chat,
            hold: self.hold,
            actor: self.actor,
            payload: self.payload,
            hash,
        }
    }
}

/// A body and its hash, ready to store at `seq`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Sealed {
    pub seq: u64,
    pub body: String,
    pub hash: String,
}

/// Seals the draft (given as its canonical JSON) at `seq`, after the entry whose hash is `prev`.
pub fn seal(seq: u64, prev: &str, draft_canonical: &str) -> Sealed {
    // Keys in canonical order: event < prev < seq. `prev` is hex, so needs no escaping.
    // Joined in one allocation of the right size: every event committed passes here.
    let body = [
        "{\"event\":",
        draft_canonical,
        ",\"prev\":\"",
        prev,
        "\",\"seq\":",
        &seq.to_string(),
        "}",
    ]
    .concat();
    let hash = canonical::sha256_hex(body.as_bytes());
    Sealed { seq, body, hash }
}

/// The parsed form of a stored body.
#[derive(Deserialize)]
pub struct Body {
    pub event: EventDraft,
    pub prev: String,
    pub seq: u64,
}

/// Parses a stored body back into the committed event.
pub fn open(body: &str, hash: &str) -> Result<Event, serde_json::Error> {
    let b: Body = serde_json::from_str(body)?;
    Ok(b.event.into_event(b.seq, hash.to_owned()))
}

/// One stored row, as read back for verification: the body and hash plus the columns a store
/// indexes (which must agree with the body).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RawEvent {
    pub seq: u64,
    pub body: String,
    pub hash: String,
    pub type_name: String,
    pub hold: Option<String>,
    pub world: Option<String>,
    pub chat: Option<String>,
}

/// The newest entry's position and hash, kept apart from the entries.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct AuditHead {
    pub seq: u64,
    pub hash: String,
}

/// What a successful verification covered.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct VerifyReport {
    pub events: u64,
    pub head: Option<AuditHead>,
    /// Whether the stored holds, grants, messages and turns are what the events say (see
    /// [`state`]).
    #[serde(default)]
    pub state: state::StateReport,
}

/// The first place the chain is broken.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("audit chain broken at event {seq}: {reason}")]
pub struct ChainError {
    pub seq: u64,
    pub reason: String,
}

/// Checks rows in order, one at a time, so a chain of any length is verified in bounded memory.
#[derive(Debug, Clone)]
pub struct ChainVerifier {
    prev_seq: u64,
    prev_hash: String,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier {
            prev_seq: 0,
            prev_hash: GENESIS.to_owned(),
        }
    }
}

impl ChainVerifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks the next row, and gives back its event.
    pub fn push(&mut self, row: &RawEvent) -> Result<EventDraft, ChainError> {
        let expected = self.prev_seq + 1;
        let fail = |reason: String| ChainError {
            seq: expected.min(row.seq),
            reason,
        };
        if row.seq != expected {
            return Err(fail(format!(
                "expected event {expected} next but found event {} (an event was deleted or reordered)",
                row.seq
            )));
        }
        let computed = canonical::sha256_hex(row.body.as_bytes());
        if computed != row.hash {
            return Err(fail(
                "the stored hash does not match the event's content (the event was edited)".into(),
            ));
        }
        let body: Body = serde_json::from_str(&row.body)
            .map_err(|e| fail(format!("the event's body is not a valid entry: {e}")))?;
        if body.seq != row.seq {
            return Err(fail(format!(
                "the body names position {} (the event was moved)",
                body.seq
            )));
        }
        if body.prev != self.prev_hash {
            return Err(fail(
                "the event does not follow the previous event's hash (an earlier event was edited, deleted or reordered)".into(),
            ));
        }
        let hold = body.event.hold.as_ref().map(|h| h.to_string());
        let columns = [
            (
                "type",
                Some(body.event.payload.type_name()),
                Some(row.type_name.as_str()),
            ),
            ("hold", hold.as_deref(), row.hold.as_deref()),
            ("world", body.event.world.as_deref(), row.world.as_deref()),
            ("chat", body.event.chat.as_deref(), row.chat.as_deref()),
        ];
        for (name, in_body, in_column) in columns {
            if in_body != in_column {
                return Err(fail(format!(
                    "the indexed column `{name}` ({in_column:?}) disagrees with the event ({in_body:?})"
                )));
            }
        }
        if canonical::to_string(&serde_json::from_str(&row.body).unwrap_or_default()) != row.body {
            return Err(fail("the event's body is not in canonical form".into()));
        }
        self.prev_seq = row.seq;
        self.prev_hash = row.hash.clone();
        Ok(body.event)
    }

    /// Ends the walk: the head record must name the last row.
    pub fn finish(self, head: Option<AuditHead>) -> Result<VerifyReport, ChainError> {
        let last = (self.prev_seq > 0).then_some(AuditHead {
            seq: self.prev_seq,
            hash: self.prev_hash,
        });
        match (&head, &last) {
            (None, None) => {}
            (Some(h), Some(l)) if h == l => {}
            (Some(h), _) if h.seq > self.prev_seq => {
                return Err(ChainError {
                    seq: self.prev_seq + 1,
                    reason: format!(
                        "the log ends at event {} but the head record names event {} (events were removed from the end)",
                        self.prev_seq, h.seq
                    ),
                });
            }
            (h, _) => {
                return Err(ChainError {
                    seq: self.prev_seq,
                    reason: format!(
                        "the head record ({}) does not name the last event (the head or the last event was altered)",
                        h.as_ref()
                            .map_or("missing".to_owned(), |h| format!("event {}", h.seq))
                    ),
                });
            }
        }
        Ok(VerifyReport {
            events: self.prev_seq,
            head: last,
            state: state::StateReport::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_protocol::{GrantId, Source};

    fn draft(n: u64) -> EventDraft {
        EventDraft {
            at: Timestamp::from_millis(n as i64),
            world: Some("w".into()),
            chat: None,
            hold: None,
            actor: Actor::of(Source::System),
            payload: EventPayload::GrantRevoked {
                grant: GrantId::random(),
            },
        }
    }

    fn chain(n: u64) -> Vec<RawEvent> {
        let mut prev = GENESIS.to_owned();
        (1..=n)
            .map(|seq| {
                let d = draft(seq);
                let s = seal(seq, &prev, &d.canonical());
                prev = s.hash.clone();
                RawEvent {
                    seq,
                    body: s.body,
                    hash: s.hash,
                    type_name: d.payload.type_name().into(),
                    hold: None,
                    world: d.world,
                    chat: None,
                }
            })
            .collect()
    }

    fn verify(rows: &[RawEvent], head: Option<AuditHead>) -> Result<VerifyReport, ChainError> {
        let mut v = ChainVerifier::new();
        for r in rows {
            v.push(r)?;
        }
        v.finish(head)
    }

    fn head_of(rows: &[RawEvent]) -> Option<AuditHead> {
        rows.last().map(|r| AuditHead {
            seq: r.seq,
            hash: r.hash.clone(),
        })
    }

    #[test]
    fn an_intact_chain_verifies_and_opens() {
        let rows = chain(5);
        let report = verify(&rows, head_of(&rows)).unwrap();
        assert_eq!(report.events, 5);
        let event = open(&rows[2].body, &rows[2].hash).unwrap();
        assert_eq!(event.seq, 3);
        assert_eq!(verify(&[], None).unwrap().events, 0);
    }

    #[test]
    fn an_edited_body_is_detected() {
        let mut rows = chain(4);
        let head = head_of(&rows);
        rows[1].body = rows[1].body.replace("\"w\"", "\"x\"");
        let err = verify(&rows, head).unwrap_err();
        assert_eq!(err.seq, 2);
        assert!(err.reason.contains("edited"), "{err}");
    }

    #[test]
    fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
        let mut rows = chain(4);
        let head = head_of(&rows);
        rows[1].body = rows[1].body.replace("\"w\"", "\"x\"");
        rows[1].world = Some("x".into());
        rows[1].hash = canonical::sha256_hex(rows[1].body.as_bytes());
        let err = verify(&rows, head).unwrap_err();
        assert_eq!(err.seq, 3);
    }

    #[test]
    fn deletion_and_reordering_are_detected() {
        let rows = chain(4);
        let head = head_of(&rows);
        let deleted: Vec<_> = rows.iter().filter(|r| r.seq != 2).cloned().collect();
        assert_eq!(verify(&deleted, head.clone()).unwrap_err().seq, 2);
        let mut swapped = rows.clone();
        swapped.swap(1, 2);
        assert_eq!(verify(&swapped, head.clone()).unwrap_err().seq, 2);
        let truncated = &rows[..3];
        let err = verify(truncated, head).unwrap_err();
        assert!(err.reason.contains("removed from the end"), "{err}");
    }

    #[test]
    fn a_disagreeing_index_column_is_detected() {
        let mut rows = chain(2);
        let head = head_of(&rows);
        rows[0].world = Some("other".into());
        assert!(verify(&rows, head).unwrap_err().reason.contains("`world`"));
    }
}
