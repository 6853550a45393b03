//! Commits answered once written ([`Store::commit_written`]), before their fsync: readers see
//! them at once, a process killed before the fsync keeps them, their sync is answered only
//! after an fsync, and their events are published only then, in log order.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::hold::validate_question;
use holdpoint_core::limits::Limits;
use holdpoint_core::store::Store;
use holdpoint_core::verify;
use holdpoint_protocol::{HoldId, QuestionSpec};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::question;
use tokio::sync::broadcast::error::TryRecvError;

use super::crash::new_hold;

const DB_VAR: &str = "HOLDPOINT_WRITTEN_TEST_DB";

fn spec() -> QuestionSpec {
    validate_question(&question("Q", &["a"]), &Limits::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_commit_is_read_at_once_and_durable_only_after_an_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("holdpoint.db")).unwrap());
    let mut published = store.subscribe();
    let before = store.syncs();
    let held = store.hold_syncs();

    let (id, tx) = new_hold(&spec());
    let (events, synced) = tokio::time::timeout(Duration::from_secs(30), store.commit_written(tx))
        .await
        .expect("a written commit waited for its fsync")
        .unwrap();
    assert_eq!(events.len(), 1);
    // Answered with no fsync made, and read by another connection.
    assert_eq!(store.syncs(), before, "answered only after an fsync");
    assert!(store.hold(id).await.unwrap().is_some(), "not visible");
    assert!(
        matches!(published.try_recv(), Err(TryRecvError::Empty)),
        "published before it was durable"
    );
    let mut syncing = tokio::spawn(synced.wait());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut syncing)
            .await
            .is_err(),
        "the sync was answered while every fsync was held back"
    );

    drop(held);
    syncing.await.unwrap().unwrap();
    assert!(
        store.syncs() > before,
        "the sync was answered without an fsync"
    );
    let event = published.recv().await.unwrap();
    assert_eq!(event.seq, events[0].seq);

    // Written and durable commits at once keep one gapless chain, in one order.
    let spec = spec();
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (store, spec) = (store.clone(), spec.clone());
        tasks.push(tokio::spawn(async move {
            let (_, tx) = new_hold(&spec);
            if i % 2 == 0 {
                let (events, synced) = store.commit_written(tx).await.unwrap();
                synced.wait().await.unwrap();
                events
            } else {
                store.commit(tx).await.unwrap()
            }
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.extend(t.await.unwrap().iter().map(|e| e.seq));
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (2..=41).collect::<Vec<u64>>());
    let mut order = Vec::new();
    while let Ok(e) = published.try_recv() {
        order.push(e.seq);
    }
    assert_eq!(order, seqs, "published out of log order");
    let report = verify(store.as_ref()).await.unwrap().unwrap();
    assert_eq!(report.events, 41);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_written_commit_survives_its_process_killed_before_the_fsync as its child"]
async fn child_written() {
    let Ok(path) = std::env::var(DB_VAR) else {
        return;
    };
    let store = SqliteStore::open(path).unwrap();
    let (first, tx) = new_hold(&spec());
    store.commit(tx).await.unwrap();
    println!("durable {first}");
    let before = store.syncs();
    // No fsync from here on: what follows is only written when the parent kills this.
    let _held = store.hold_syncs();
    let (id, tx) = new_hold(&spec());
    let (_, _synced) = store.commit_written(tx).await.unwrap();
    assert_eq!(store.syncs(), before);
    println!("written {id}");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_commit_survives_its_process_killed_before_the_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::written::child_written",
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
    let mut written: Vec<HoldId> = Vec::new();
    while written.len() < 2 {
        let line = lines.next().expect("the child stopped early").unwrap();
        // The test harness prints its own words before the child's on the first line.
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[0] == "durable" || pair[0] == "written" {
                written.push(pair[1].parse().unwrap());
            }
        }
    }
    // SIGKILL: nothing of the process runs after it, its fsync least of all.
    child.kill().unwrap();
    child.wait().unwrap();

    let store = SqliteStore::open(&path).unwrap();
    for id in &written {
        assert!(
            store.hold(*id).await.unwrap().is_some(),
            "hold {id} was lost"
        );
    }
    let report = verify(&store).await.unwrap().unwrap();
    assert_eq!(report.events, 2);
    store.close().await;
}
