use holdpoint_core::audit::EventDraft;
use holdpoint_core::store::{PreparedEvent, Record, RecordKind, Store, Transaction, Write};
use holdpoint_core::verify;
use holdpoint_protocol::{Actor, EventPayload, GrantId, Source};
use holdpoint_store::{OpenError, SqliteStore};
use holdpoint_test_support::START;

fn marker() -> PreparedEvent {
    EventDraft {
        at: START,
        world: Some("w".into()),
        chat: None,
        hold: None,
        actor: Actor::of(Source::System),
        payload: EventPayload::GrantRevoked {
            grant: GrantId::random(),
        },
    }
    .into()
}

#[tokio::test]
async fn one_writer_per_database_while_readers_come_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("holdpoint.db");
    let writer = SqliteStore::open(&path).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::Locked { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("in use by another holdpoint process")
    );
    writer
        .commit(Transaction {
            writes: vec![],
            events: vec![marker()],
        })
        .await
        .unwrap();
    let reader = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(reader.audit_head().await.unwrap().unwrap().seq, 1);
    let err = reader
        .commit(Transaction {
            writes: vec![],
            events: vec![marker()],
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    writer.close().await;
    let again = SqliteStore::open(&path).unwrap();
    again.close().await;
    let missing = SqliteStore::open_read_only(dir.path().join("nope.db")).unwrap_err();
    assert!(matches!(missing, OpenError::Missing { .. }));
}

#[tokio::test]
async fn the_chain_continues_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.db");
    let store = SqliteStore::open(&path).unwrap();
    store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker(), marker()],
        })
        .await
        .unwrap();
    store.close().await;
    assert!(
        !dir.path().join("holdpoint.db-wal").exists()
            || std::fs::metadata(dir.path().join("holdpoint.db-wal"))
                .unwrap()
                .len()
                == 0,
        "closing checkpoints the WAL"
    );
    let store = SqliteStore::open(&path).unwrap();
    let next = store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker()],
        })
        .await
        .unwrap();
    assert_eq!(next[0].seq, 3);
    assert_eq!(verify(&store).await.unwrap().unwrap().events, 3);
    store.close().await;
    let err = store
        .commit(Transaction {
            writes: vec![],
            events: vec![marker()],
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
}

/// Under sustained writes the WAL is folded into the database as it grows, and starts over
/// once it reaches its bound (32 MiB, `WAL_BOUND` in writer.rs) rather than growing with
/// everything written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_folded_into_the_database_and_stays_bounded() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.db");
    let wal = dir.path().join("holdpoint.db-wal");
    let store = SqliteStore::open(&path).unwrap();
    let chat = uuid::Uuid::now_v7();
    let text = serde_json::Value::String("x".repeat(100_000));
    let mut written = 0;
    let mut largest_wal = 0;
    while written < 48 * MIB {
        let message = Record {
            kind: RecordKind::Message,
            id: uuid::Uuid::now_v7(),
            parent: Some(chat),
            key: None,
            version: 1,
            data: text.clone(),
        };
        store
            .commit(Transaction {
                writes: vec![Write::PutRecord(Box::new(message))],
                events: vec![],
            })
            .await
            .unwrap();
        written += 100_000;
        largest_wal = largest_wal.max(std::fs::metadata(&wal).unwrap().len());
    }
    assert!(
        largest_wal < 36 * MIB,
        "the WAL grew to {} MiB",
        largest_wal / MIB
    );
    let database = std::fs::metadata(&path).unwrap().len();
    assert!(
        database > 32 * MIB,
        "only {} MiB reached the database",
        database / MIB
    );
    store.close().await;
}
