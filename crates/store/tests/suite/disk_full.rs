//! A SQLite store on a small filesystem that fills up: once short of space, its writer takes
//! only the transactions that change holds already raised (a decision, a withdrawal, a
//! timeout) and refuses every other with how much space is free and how much is needed, so
//! nothing else uses up the space it set aside; once that much is free, it takes everything
//! again.

use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::audit::EventDraft;
use holdpoint_core::clock::ManualClock;
use holdpoint_core::policy::Policy;
use holdpoint_core::store::{CommitError, Record, RecordKind, Store, Transaction, Write};
use holdpoint_core::{EngineError, Scope};
use holdpoint_protocol::{
    Actor, ApproveScope, Decision, EventPayload, GateResult, GrantId, Hold, HoldStatus, Source,
};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::tmpfs::Tmpfs;
use holdpoint_test_support::{
    START, TempStore, TestEngine, agent, approval, approver, eventually, gate,
};
use serde_json::json;

const MIB: u64 = 1024 * 1024;

/// Raises one approval of `tool` with about 100 KiB of arguments.
async fn raise(t: &TestEngine, n: usize) -> Result<Hold, EngineError> {
    let args = json!({ "n": n, "padding": "x".repeat(100 * 1024) });
    let res = t
        .engine
        .gate(
            &agent("bot"),
            gate("w", None, vec![approval("deploy", args)]),
        )
        .await?;
    match res.results.into_iter().next() {
        Some(GateResult::Held { hold }) => Ok(Arc::unwrap_or_clone(hold)),
        other => panic!("deploy was not held: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_short_of_space_writes_only_what_serves_raised_holds() {
    let Some(fs) = Tmpfs::mount(32) else {
        return;
    };
    let store = Arc::new(SqliteStore::open(fs.path().join("holdpoint.db")).unwrap());
    assert_eq!(store.short_of_space(), None);
    let temp = TempStore {
        store: store.clone(),
        dir: tempfile::tempdir().unwrap(),
    };
    let policy = Policy::from_toml("default_deadline = \"10m\"\n").unwrap();
    let t = TestEngine::on(temp, policy, ManualClock::new(START)).await;
    let mut holds = Vec::new();
    for n in 0..3 {
        holds.push(raise(&t, n).await.unwrap());
    }

    // The disk fills up; raises go on until one finds it full, and is refused.
    assert!(fs.fill("ballast") > 0);
    let mut n = 3;
    let short = loop {
        match raise(&t, n).await {
            Ok(hold) => holds.push(hold),
            Err(EngineError::StorageFull(short)) => break short,
            Err(e) => panic!("{e}"),
        }
        n += 1;
        assert!(n < 500, "500 holds of 100 KiB fitted on a full disk");
    };
    assert_eq!(short.needed, 16 * MIB);
    assert!(short.free < short.needed, "{short}");
    let message = short.to_string();
    assert!(
        message.contains("MiB free") && message.contains("16.0 MiB needed"),
        "{message}"
    );
    assert_eq!(store.short_of_space().map(|s| s.needed), Some(16 * MIB));

    // Anything but a change to a hold already raised is refused, with the figures, and
    // applies nothing: a new hold, a record, an event alone.
    let refused = |result: Result<_, CommitError>, what: &str| match result {
        Err(CommitError::Store(e)) => {
            let short = e.space_short().unwrap_or_else(|| panic!("{what}: {e}"));
            assert_eq!(short.needed, 16 * MIB, "{what}");
        }
        Ok(_) => panic!("{what} was written while short of space"),
        Err(e) => panic!("{what}: {e}"),
    };
    let head = store.audit_head().await.unwrap();
    assert!(matches!(
        raise(&t, n).await,
        Err(EngineError::StorageFull(_))
    ));
    let world = Record {
        kind: RecordKind::World,
        id: uuid::Uuid::now_v7(),
        parent: None,
        key: Some("elsewhere".into()),
        version: 1,
        data: json!({"name": "elsewhere"}),
    };
    let put = Transaction {
        writes: vec![Write::PutRecord(Box::new(world))],
        events: vec![],
    };
    refused(store.commit(put).await, "a record");
    let marker = EventDraft {
        at: START,
        world: Some("w".into()),
        chat: None,
        hold: None,
        actor: Actor::of(Source::System),
        payload: EventPayload::GrantRevoked {
            grant: GrantId::random(),
        },
    };
    let event = Transaction {
        writes: vec![],
        events: vec![marker.into()],
    };
    refused(store.commit(event).await, "an event");
    assert_eq!(store.audit_head().await.unwrap(), head);

    // A decision (with the grant it makes and its idempotency record), a withdrawal and a
    // timeout are written, in the space set aside.
    let approve = Decision::Approve {
        scope: ApproveScope::AlwaysTool,
        digest: None,
        reason: None,
        expires_in: None,
    };
    let who = approver("alice");
    let decided = t
        .engine
        .decide(&who, holds[0].id, approve, &Scope::any(), Some("once"))
        .await
        .unwrap();
    assert_eq!(decided.hold.status, HoldStatus::Approved);
    assert_eq!(store.grants(Some("w")).await.unwrap().len(), 1);
    let key = format!("decide:{}:alice:once", holds[0].id);
    assert!(store.idempotent(&key).await.unwrap().is_some(), "{key}");
    let withdrawn = t
        .engine
        .withdraw(&agent("bot"), holds[1].id, None, &Scope::any())
        .await
        .unwrap();
    assert_eq!(withdrawn.status, HoldStatus::Canceled);
    t.clock.advance(Duration::from_secs(601));
    for hold in &holds[2..] {
        let outcome = t
            .engine
            .wait(hold.id, Duration::from_secs(30), &Scope::any())
            .await
            .unwrap();
        assert!(outcome.is_some(), "hold {} did not time out", hold.id);
    }
    for hold in &holds[2..] {
        let stored = store.hold(hold.id).await.unwrap().unwrap();
        assert_eq!(stored.status, HoldStatus::TimedOut, "{}", hold.id);
    }
    assert!(store.short_of_space().is_some());

    // Space is freed: once 16 MiB are free, everything is taken again.
    std::fs::remove_file(fs.path().join("ballast")).unwrap();
    let store_ref = &store;
    eventually(|| async move {
        match store_ref.short_of_space() {
            None => Ok(()),
            Some(short) => Err(format!("still short of space after it was freed: {short}")),
        }
    })
    .await;
    // (The grant made above allows deploy now: another tool asks.)
    let req = gate("w", None, vec![approval("ship", json!({}))]);
    let res = t.engine.gate(&agent("bot"), req).await.unwrap();
    assert!(
        matches!(res.results[0], GateResult::Held { .. }),
        "{:?}",
        res.results
    );
    let (_dir, _clock) = t.shut_down().await;
}

/// The disk filled up while the store was closed, its reserve still set aside: opening gives
/// the reserve up first (creating the WAL and its shared memory needs room), and the store
/// opens short of space, refusing what it may not write then, instead of failing to open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_on_a_disk_that_filled_while_it_was_closed_opens_short_of_space() {
    let Some(fs) = Tmpfs::mount(32) else {
        return;
    };
    let path = fs.path().join("holdpoint.db");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.short_of_space(), None);
    store.close().await;
    drop(store);
    assert!(fs.path().join("holdpoint.db-reserve").is_file());

    assert!(fs.fill("ballast") > 0);
    let store = SqliteStore::open(&path).unwrap();
    let short = store
        .short_of_space()
        .expect("not short of space on a full disk");
    assert_eq!(short.needed, 16 * MIB);
    assert!(short.free < short.needed, "{short}");
    let world = Record {
        kind: RecordKind::World,
        id: uuid::Uuid::now_v7(),
        parent: None,
        key: Some("lab".into()),
        version: 1,
        data: json!({"name": "lab"}),
    };
    let put = Transaction {
        writes: vec![Write::PutRecord(Box::new(world))],
        events: vec![],
    };
    match store.commit(put).await {
        Err(CommitError::Store(e)) => assert_eq!(e.space_short().map(|s| s.needed), Some(16 * MIB)),
        other => panic!("a record was not refused for want of space: {other:?}"),
    }
    assert_eq!(store.audit_head().await.unwrap(), None);
    store.close().await;
}
