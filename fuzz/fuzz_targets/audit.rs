//! The audit verifier over arbitrary rows. Each line of the input is one stored row:
//! - a JSON object: an event, sealed into the chain after the rows before it, with the
//!   indexed columns it names: the verifier must accept it exactly when it is an event;
//! - `!` and a JSON object `{seq, body, hash, type, hold, world, chat}`: a row as a damaged
//!   or forged store might hold it, whatever it says.
//!
//! Rows are verified in order up to the first refused; the head record names the last
//! accepted row, so finishing must succeed. Accepted events go through the state check.
#![no_main]

use holdpoint_core::audit::state::{Checked, StateCheck};
use holdpoint_core::audit::{AuditHead, ChainVerifier, EventDraft, GENESIS, RawEvent, seal};
use holdpoint_core::canonical;
use holdpoint_protocol::EventPayload;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// A row and whether the verifier must accept it (`None`: either way).
fn row(line: &str, seq: u64, prev: &str) -> Option<(RawEvent, Option<bool>)> {
    if let Some(raw) = line.strip_prefix('!') {
        let v: Value = serde_json::from_str(raw).ok()?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        return Some((
            RawEvent {
                seq: v.get("seq").and_then(Value::as_u64).unwrap_or(seq),
                body: text("body").unwrap_or_default(),
                hash: text("hash").unwrap_or_default(),
                type_name: text("type").unwrap_or_default(),
                hold: text("hold"),
                world: text("world"),
                chat: text("chat"),
            },
            None,
        ));
    }
    let value: Value = serde_json::from_str(line).ok()?;
    // Read from the canonical text, as the verifier reads the stored body.
    let canonical_text = canonical::to_string(&value);
    let draft = serde_json::from_str::<EventDraft>(&canonical_text).ok();
    if let Some(d) = &draft {
        // The engine writes a draft's canonical text straight from it, not through a `Value`.
        let through_value = canonical::to_string(&serde_json::to_value(d).expect("plain data"));
        assert_eq!(d.canonical(), through_value, "the draft's canonical text differs");
    }
    let sealed = seal(seq, prev, &canonical_text);
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
    let type_name = draft
        .as_ref()
        .map(|d| d.payload.type_name().to_owned())
        .unwrap_or_default();
    Some((
        RawEvent {
            seq,
            body: sealed.body,
            hash: sealed.hash,
            type_name,
            hold: draft.as_ref().and_then(|d| d.hold).map(|h| h.to_string()),
            world: text("world"),
            chat: text("chat"),
        },
        Some(draft.is_some()),
    ))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut chain = ChainVerifier::new();
    let mut state = StateCheck::new();
    let mut head: Option<AuditHead> = None;
    let mut created = Vec::new();
    for line in text.lines() {
        let seq = head.as_ref().map_or(1, |h| h.seq + 1);
        let prev = head
            .as_ref()
            .map_or(GENESIS, |h| h.hash.as_str())
            .to_owned();
        let Some((row, must_accept)) = row(line, seq, &prev) else {
            continue;
        };
        match chain.push(&row) {
            Ok(event) => {
                assert_ne!(
                    must_accept,
                    Some(false),
                    "accepted a row that is no event: {row:?}"
                );
                assert_eq!(row.seq, seq);
                assert_eq!(row.hash, canonical::sha256_hex(row.body.as_bytes()));
                let event_value: Value = serde_json::from_str(&row.body)
                    .unwrap_or_else(|e| panic!("accepted a body that is not JSON: {e}"));
                assert_eq!(canonical::to_string(&event_value), row.body);
                if let Err(e) = holdpoint_core::audit::open(&row.body, &row.hash) {
                    panic!("accepted a body that does not open: {e}");
                }
                state.observe(seq, &event);
                if let EventPayload::HoldCreated { hold } = &event.payload {
                    created.push(hold.clone());
                }
                head = Some(AuditHead {
                    seq,
                    hash: row.hash.clone(),
                });
            }
            Err(e) => {
                assert_ne!(
                    must_accept,
                    Some(true),
                    "refused a sealed event: {e}: {row:?}"
                );
                assert!(e.seq <= seq, "{e}");
                break;
            }
        }
    }
    let expected = head.as_ref().map_or(0, |h| h.seq);
    match chain.finish(head) {
        Ok(report) => assert_eq!(report.events, expected),
        Err(e) => panic!("the head names the last accepted row, yet: {e}"),
    }
    for hold in &created {
        let _ = state.hold_differs(hold);
    }
    let _ = state.grants_differ(&[]);
    let _ = state.finish(Checked {
        holds: created.len() as u64,
        ..Checked::default()
    });
});
