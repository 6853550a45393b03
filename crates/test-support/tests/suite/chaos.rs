//! The crash loop's checks fail where a promise was broken: each doctored observation below
//! is what a broken server would leave behind.

use std::sync::Arc;

use holdpoint_protocol::{Event, Timestamp};
use holdpoint_test_support::chaos::check::{Observed, check};
use holdpoint_test_support::chaos::load::{Decided, Followed, Raised};
use serde_json::{Value, json};

const TURN: &str = "01a20c31-a489-72e6-b4d3-c542fe2ae8c5";

/// An event of the log at `seq` with `payload`.
fn event(seq: u64, payload: Value) -> Arc<Event> {
    Arc::new(
        serde_json::from_value(json!({
            "seq": seq, "at": "2026-01-01T00:00:00Z", "chat": "chat-1",
            "actor": {"source": "system"}, "payload": payload, "hash": "h",
        }))
        .unwrap(),
    )
}

/// A turn that ran one call tagged `t1` to the end, as the log has it.
fn a_finished_turn() -> Vec<Arc<Event>> {
    let command = "echo t1 >> /tmp/effects && sleep 0.1";
    vec![
        event(1, json!({"type": "turn.started", "turn": TURN})),
        event(
            2,
            json!({"type": "turn.tool_call", "turn": TURN, "call": {"id": "c1", "name": "shell_cmd", "arguments": json!({"command": command}).to_string()}}),
        ),
        event(
            3,
            json!({"type": "turn.tool_started", "turn": TURN, "call": "c1", "name": "shell_cmd"}),
        ),
        event(
            4,
            json!({"type": "turn.tool_finished", "turn": TURN, "call": "c1", "result": {"status": "executed", "output": "", "approved_by": "person"}}),
        ),
        event(5, json!({"type": "turn.finished", "turn": TURN})),
    ]
}

/// What a sound run with that turn leaves: everything checks.
fn sound() -> Observed {
    Observed {
        raised: Vec::new(),
        decided: Vec::new(),
        waited: Vec::new(),
        turns: vec![TURN.to_owned()],
        followed: vec![Followed {
            seen: (1..=5).map(|s| (s, None)).collect(),
            turns: Vec::new(),
            resumes: 1,
            refused: Vec::new(),
        }],
        log: a_finished_turn(),
        holds: Default::default(),
        effects: "t1\n".to_owned(),
        audit: Ok(()),
        now: Timestamp::from_millis(1_800_000_000_000),
        grace_ms: 3000,
        up: vec![(1_799_999_000_000, 1_800_000_000_000)],
    }
}

/// The violations of `o`, which must include one containing `needle`.
#[track_caller]
fn fails(o: &Observed, needle: &str) {
    let report = check(o);
    assert!(
        report.violations.iter().any(|v| v.contains(needle)),
        "no violation with {needle:?}:\n{report}"
    );
}

#[test]
fn a_sound_run_passes() {
    let report = check(&sound());
    assert!(report.ok(), "{report}");
    assert_eq!(report.get("tool calls run (result executed, one line)"), 1);
    assert_eq!(report.get("  finished"), 1);
}

#[test]
fn a_tool_call_that_ran_twice_fails() {
    let mut o = sound();
    o.effects = "t1\nt1\n".to_owned();
    fails(&o, "the call tagged t1 ran 2 times");
}

#[test]
fn a_call_reported_executed_without_its_line_fails() {
    let mut o = sound();
    o.effects.clear();
    fails(&o, "lines in the file");
}

#[test]
fn a_turn_left_under_way_fails() {
    let mut o = sound();
    o.log.pop();
    o.followed[0].seen.pop();
    fails(&o, "neither ended nor waits on a pending hold");
}

#[test]
fn a_stream_that_skipped_or_repeated_an_event_fails() {
    let mut o = sound();
    o.followed[0].seen.remove(2);
    fails(&o, "stream client 0 received 4 events where the log has 5");
    let mut o = sound();
    o.followed[0].seen.insert(3, (3, None));
    fails(&o, "stream client 0 received 6 events");
}

#[test]
fn an_acknowledged_hold_or_decision_that_is_missing_fails() {
    let mut o = sound();
    o.raised.push(Raised {
        id: "lost".into(),
        key: "bot0-1".into(),
        expiring: false,
    });
    fails(&o, "acknowledged hold lost is not in the store");
    let mut o = sound();
    o.decided.push(Decided {
        hold: "lost".into(),
        action: "approve".into(),
    });
    fails(&o, "decided hold lost is not in the store");
}

#[test]
fn a_failed_audit_fails() {
    let mut o = sound();
    o.audit = Err("the chain is broken at 3".into());
    fails(&o, "audit verify failed");
}

/// A hold whose 1-second deadline passed at `deadline`, timed out at `applied` (ms).
fn timed_out(deadline: i64, applied: i64) -> holdpoint_protocol::Hold {
    let at = |ms: i64| Timestamp::from_millis(ms).to_string();
    serde_json::from_value(json!({
        "id": "01a20c40-04cf-73ec-9198-b033fdeb60f3", "batch": "01a20c40-04cf-73ec-9198-b032a1a478fa",
        "world": "lab", "requested_by": "bot", "created_at": at(deadline - 1000),
        "deadline": at(deadline), "reminded": false, "on_timeout": {"action": "deny"}, "quorum": 1,
        "offers": ["approve_once", "deny"],
        "spec": {"kind": "approval", "tool": "expire_me", "arguments": {}, "digest": "d"},
        "status": "timed_out", "version": 2,
        "outcome": {"status": "timed_out", "source": "timeout", "decided_by": [], "decided_at": at(applied)},
    }))
    .unwrap()
}

#[test]
fn a_deadline_applied_late_while_the_server_was_up_fails_and_one_due_at_a_restart_does_not() {
    let deadline = 1_799_999_500_000;
    let mut o = sound();
    o.holds
        .insert("h".into(), timed_out(deadline, deadline + 5000));
    fails(&o, "timed out 5000 ms after it was due");
    // Down from before the deadline until 4 s after it: due at the restart.
    o.up = vec![
        (1_799_999_000_000, deadline - 100),
        (deadline + 4000, 1_800_000_000_000),
    ];
    let report = check(&o);
    assert!(
        !report
            .violations
            .iter()
            .any(|v| v.contains("after it was due")),
        "{report}"
    );
    assert_eq!(
        report.get("  the latest, ms after it was due (server up)"),
        1000
    );
}
