//! A process killed with SIGKILL loses nothing it acknowledged.
//!
//! The test binary runs itself as the child: `child_writer` (ignored unless asked for) commits
//! holds from several tasks and prints each acknowledged id. The parent kills it mid-stream,
//! reopens the database, and finds every acknowledged hold and an intact chain.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::hold::{HoldContext, question_hold, validate_question};
use holdpoint_core::limits::Limits;
use holdpoint_core::store::{Store, Transaction, Write};
use holdpoint_core::verify;
use holdpoint_protocol::{BatchId, Deadline, HoldId};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::{START, question};

const DB_VAR: &str = "HOLDPOINT_CRASH_TEST_DB";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by crash_loses_nothing_acknowledged as its child process"]
async fn child_writer() {
    let Ok(path) = std::env::var(DB_VAR) else {
        return;
    };
    let store = Arc::new(SqliteStore::open(path).unwrap());
    let spec = validate_question(&question("Q", &["a"]), &Limits::default()).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (store, spec) = (store.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let (id, tx) = new_hold(&spec);
                store.commit(tx).await.unwrap();
                println!("acked {id}");
            }
        }));
    }
    // The writers run until the parent kills this process.
    for t in tasks {
        let _ = t.await;
    }
}

/// A transaction raising one question hold in world `w`, and the hold's id.
pub(super) fn new_hold(spec: &holdpoint_protocol::QuestionSpec) -> (HoldId, Transaction) {
    let ctx = HoldContext {
        world: "w",
        chat: None,
        agent: None,
        requested_by: "child",
        batch: BatchId::random(),
        now: START,
        remind_before: Duration::from_secs(60),
        policy: None,
        lineage: &[],
    };
    let hold = question_hold(&ctx, spec.clone(), None, Deadline::Never);
    let event = holdpoint_core::audit::EventDraft {
        at: START,
        world: Some("w".into()),
        chat: None,
        hold: Some(hold.id),
        actor: holdpoint_protocol::Actor::of(holdpoint_protocol::Source::Agent),
        payload: holdpoint_protocol::EventPayload::HoldCreated {
            hold: std::sync::Arc::new(hold.clone()),
        },
    };
    let tx = Transaction {
        writes: vec![Write::InsertHold(Arc::new(hold.clone()))],
        events: vec![event.into()],
    };
    (hold.id, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::crash::child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DB_VAR, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked: Vec<HoldId> = Vec::new();
    // Wait (on the child's own output) until plenty is acknowledged, then kill it mid-stream.
    while acked.len() < 300 {
        let line = lines.next().expect("the child stopped early").unwrap();
        if let Some(id) = line.strip_prefix("acked ") {
            acked.push(id.parse().unwrap());
        }
    }
    child.kill().unwrap();
    // Whatever it printed before dying was acknowledged too.
    for line in lines {
        if let Some(id) = line.unwrap().strip_prefix("acked ") {
            acked.push(id.parse().unwrap());
        }
    }
    child.wait().unwrap();

    let store = SqliteStore::open(&path).unwrap();
    for id in &acked {
        assert!(
            store.hold(*id).await.unwrap().is_some(),
            "acknowledged hold {id} was lost"
        );
    }
    let report = verify(&store).await.unwrap().unwrap();
    assert!(
        report.events >= acked.len() as u64,
        "{} events for {} acknowledged holds",
        report.events,
        acked.len()
    );
    store.close().await;
}
