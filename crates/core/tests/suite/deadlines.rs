use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_core::policy::Policy;
use holdpoint_protocol::{
    ApproveScope, Decision, EventPayload, GateResult, Hold, HoldRequest, HoldStatus, OutcomeStatus,
    Source, Verdict,
};
use holdpoint_store::{DATABASE_FILE, SqliteStore};
use holdpoint_test_support::{
    START, TempStore, TestEngine, agent, approval, approver, gate, next_matching, question,
};
use pretty_assertions::assert_eq;
use serde_json::json;

const POLICY: &str = r#"
default_deadline = "10m"
remind_before = "2m"

[[rules]]
name = "deploys wait an hour and then go ahead"
tools = ["deploy"]
action = "ask"
deadline = "1h"
on_timeout = "approve"
"#;

async fn raise(t: &TestEngine, items: Vec<HoldRequest>) -> Vec<Hold> {
    let res = t
        .engine
        .gate(&agent("bot"), gate("w", Some("c"), items))
        .await
        .unwrap();
    res.results
        .into_iter()
        .map(|r| match r {
            GateResult::Held { hold } => std::sync::Arc::unwrap_or_clone(hold),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn reminders_then_the_fail_closed_timeout() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut events = t.stream().await;
    let h = raise(&t, vec![approval("shell_cmd", json!({"command": "ls"}))])
        .await
        .remove(0);
    assert_eq!(
        h.deadline,
        Some(START.saturating_add(Duration::from_secs(600)))
    );
    assert_eq!(
        h.remind_at,
        Some(START.saturating_add(Duration::from_secs(480)))
    );
    let engine = t.engine.clone();
    let waiter = tokio::spawn(async move {
        engine
            .wait(h.id, Duration::from_secs(60), &Scope::any())
            .await
    });

    t.clock.advance(Duration::from_secs(480));
    let reminded = next_matching(&mut events, "a reminder", |e| {
        e.payload.type_name() == "hold.reminded"
    })
    .await;
    assert_eq!(
        reminded.payload,
        EventPayload::HoldReminded {
            deadline: h.deadline.unwrap()
        }
    );
    t.clock.advance(Duration::from_secs(120));
    let expired = next_matching(&mut events, "the timeout", |e| {
        e.payload.type_name() == "hold.expired"
    })
    .await;
    let outcome = waiter.await.unwrap().unwrap().unwrap();
    assert_eq!(expired.payload.resolution(), Some(&outcome));
    assert_eq!(
        (outcome.status, outcome.source, outcome.verdict),
        (
            OutcomeStatus::TimedOut,
            Source::Timeout,
            Some(Verdict::Deny)
        )
    );
    assert_eq!(outcome.decided_at, h.deadline.unwrap());
    assert_eq!(t.engine.tracked_timers(), 0);
    let err = t
        .engine
        .decide(
            &approver("alice"),
            h.id,
            Decision::Approve {
                scope: ApproveScope::Once,
                expires_in: None,
                digest: None,
                reason: None,
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        "already_decided",
        "a late decision loses to the timeout"
    );
}

#[tokio::test]
async fn configured_timeout_outcomes_apply() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut events = t.stream().await;
    let mut q = question("Which region?", &["eu", "us", "no"]);
    q.default_option = Some("eu".into());
    let holds = raise(
        &t,
        vec![
            approval("deploy", json!({"v": 3})),
            HoldRequest::Question(q),
            HoldRequest::Question(question("Go?", &["go", "no"])),
            HoldRequest::Question(question("Deploy to production?", &["deploy", "abort"])),
        ],
    )
    .await;
    t.clock.advance(Duration::from_secs(3600));
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        let e = next_matching(&mut events, "a timeout", |e| {
            e.payload.type_name() == "hold.expired"
        })
        .await;
        outcomes.push((e.hold.unwrap(), e.payload.resolution().unwrap().clone()));
    }
    let of = |h: &Hold| {
        outcomes
            .iter()
            .find(|(id, _)| *id == h.id)
            .unwrap()
            .1
            .clone()
    };
    let deploy = of(&holds[0]);
    assert_eq!(
        (deploy.verdict, deploy.arguments),
        (Some(Verdict::Approve), Some(json!({"v": 3})))
    );
    assert_eq!(of(&holds[1]).options[0].id, "eu", "the question's default");
    assert_eq!(of(&holds[2]).options[0].id, "no", "else the option `no`");
    assert!(of(&holds[2]).status == OutcomeStatus::TimedOut);
    let unanswered = of(&holds[3]);
    assert_eq!(
        (unanswered.status, unanswered.verdict, unanswered.options),
        (OutcomeStatus::TimedOut, None, Vec::new()),
        "without a default or `no`, nobody chose: no option applies"
    );
    let stored = t.engine.hold(holds[3].id, &Scope::any()).await.unwrap();
    assert_eq!(stored.status, HoldStatus::TimedOut);
}

#[tokio::test]
async fn pending_holds_survive_a_restart_and_expire_on_time() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let short = raise(&t, vec![approval("shell_cmd", json!({"command": "ls"}))])
        .await
        .remove(0);
    let long = raise(&t, vec![approval("deploy", json!({"v": 1}))])
        .await
        .remove(0);
    assert_eq!(t.engine.created_at(long.id).await.unwrap(), long.created_at);
    let (dir, clock) = t.shut_down().await;

    // Thirty minutes pass with nothing running: the short hold's deadline goes by.
    clock.advance(Duration::from_secs(1800));
    let store = Arc::new(SqliteStore::open(dir.path().join(DATABASE_FILE)).unwrap());
    let temp = TempStore { store, dir };
    let t = TestEngine::on(temp, Policy::from_toml(POLICY).unwrap(), clock).await;
    let outcome = t
        .engine
        .wait(short.id, holdpoint_test_support::PATIENCE, &Scope::any())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (outcome.status, outcome.source),
        (OutcomeStatus::TimedOut, Source::Timeout)
    );

    let reopened = t.engine.hold(long.id, &Scope::any()).await.unwrap();
    assert!(reopened.is_open());
    // Not kept in memory after the restart: read.
    assert_eq!(t.engine.created_at(long.id).await.unwrap(), long.created_at);
    assert_eq!(reopened.deadline, long.deadline, "the original deadline");
    let r = t
        .engine
        .decide(
            &approver("alice"),
            long.id,
            Decision::Deny { reason: None },
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.hold.status, holdpoint_protocol::HoldStatus::Denied);
    t.engine.verify_audit().await.unwrap().unwrap();
}

/// After a restart, every open hold's deadline is armed again, and its reminder unless it
/// was sent already: one hold reminded before the restart, one not yet.
#[tokio::test]
async fn a_restarted_engine_rearms_deadlines_and_the_reminders_not_yet_sent() {
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut events = t.stream().await;
    let reminded = raise(&t, vec![approval("shell_cmd", json!({"command": "ls"}))])
        .await
        .remove(0);
    t.clock.advance(Duration::from_secs(480));
    next_matching(&mut events, "the first hold's reminder", |e| {
        e.payload.type_name() == "hold.reminded" && e.hold == Some(reminded.id)
    })
    .await;
    let fresh = raise(&t, vec![approval("deploy", json!({}))])
        .await
        .remove(0);
    let (dir, clock) = t.shut_down().await;
    let temp = TempStore {
        store: Arc::new(SqliteStore::open(dir.path().join(DATABASE_FILE)).unwrap()),
        dir,
    };
    let t = TestEngine::on(temp, Policy::from_toml(POLICY).unwrap(), clock).await;
    assert_eq!(
        t.engine.tracked_timers(),
        3,
        "both deadlines, and the reminder of the hold not reminded yet"
    );
    let mut events = t.stream().await;
    let engine = t.engine.clone();
    let waiter = tokio::spawn(async move {
        engine
            .wait(fresh.id, Duration::from_secs(60), &Scope::any())
            .await
    });
    // Past the first hold's deadline: it expires without a second reminder.
    t.clock.advance(Duration::from_secs(120));
    let next = next_matching(&mut events, "the first hold's end", |e| {
        e.hold == Some(reminded.id)
    })
    .await;
    assert_eq!(next.payload.type_name(), "hold.expired");
    t.clock.advance(Duration::from_secs(3600));
    let outcome = waiter.await.unwrap().unwrap().unwrap();
    assert_eq!(outcome.status, OutcomeStatus::TimedOut);
}

/// Start reads the open holds' marks in four parts of their positions at once, each a page at
/// a time (4,096 a page): with more open than four pages, so that every part reads two, each
/// is counted and has its timers after a restart, and none twice.
#[tokio::test]
async fn a_restart_with_more_open_holds_than_a_page_of_marks_tracks_each_once() {
    const OPEN: usize = 16_384 + 300;
    let t = TestEngine::new(Policy::from_toml(POLICY).unwrap()).await;
    let mut raised = 0;
    while raised < OPEN {
        let n = 64.min(OPEN - raised);
        let items = (0..n)
            .map(|i| {
                approval(
                    "shell_cmd",
                    json!({"command": format!("ls {}", raised + i)}),
                )
            })
            .collect();
        raised += raise(&t, items).await.len();
    }
    assert_eq!(t.engine.open_holds(), OPEN as u64);
    let (dir, clock) = t.shut_down().await;
    let temp = TempStore {
        store: Arc::new(SqliteStore::open(dir.path().join(DATABASE_FILE)).unwrap()),
        dir,
    };
    let t = TestEngine::on(temp, Policy::from_toml(POLICY).unwrap(), clock).await;
    assert_eq!(t.engine.open_holds(), OPEN as u64);
    assert_eq!(
        t.engine.tracked_timers(),
        2 * OPEN,
        "each hold's reminder and deadline"
    );
}
