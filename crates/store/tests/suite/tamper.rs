//! Editing, deleting or reordering any stored event is detected by `verify`.

use holdpoint_core::policy::Policy;
use holdpoint_core::{Scope, verify};
use holdpoint_protocol::{ApproveScope, Decision, GateResult};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate};
use proptest::prelude::*;
use rusqlite::{Connection, params};
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum Tamper {
    /// Change a character of an event's content.
    EditBody,
    /// Change content and recompute that event's hash, as a careful forger would.
    EditAndRehash,
    /// Change an indexed column only.
    EditColumn,
    Delete,
    /// Swap two events' contents.
    Swap,
    /// Cut events off the end.
    Truncate,
}

/// A database with a realistic chain of `n` holds raised and decided; returns its path.
async fn chain(dir: &std::path::Path, holds: usize) -> (std::path::PathBuf, u64) {
    let temp = holdpoint_test_support::TempStore {
        store: std::sync::Arc::new(SqliteStore::open(dir.join("holdpoint.db")).unwrap()),
        dir: tempfile::tempdir().unwrap(),
    };
    let path = temp.store.path().to_path_buf();
    let t = TestEngine::on(
        temp,
        Policy::default(),
        holdpoint_core::clock::ManualClock::new(holdpoint_test_support::START),
    )
    .await;
    for i in 0..holds {
        let res = t
            .engine
            .gate(
                &agent("bot"),
                gate("w", Some("c"), vec![approval("t", json!({ "i": i }))]),
            )
            .await
            .unwrap();
        let GateResult::Held { hold } = &res.results[0] else {
            panic!()
        };
        let scope = if i % 2 == 0 {
            ApproveScope::Once
        } else {
            ApproveScope::Chat
        };
        t.engine
            .decide(
                &approver("alice"),
                hold.id,
                Decision::Approve {
                    scope,
                    expires_in: None,
                    digest: None,
                    reason: None,
                },
                &Scope::any(),
                None,
            )
            .await
            .unwrap();
    }
    let events = t.engine.verify_audit().await.unwrap().unwrap().events;
    let (_dir, _clock) = t.shut_down().await;
    (path, events)
}

fn tamper(path: &std::path::Path, how: Tamper, at: u64, other: u64) {
    let conn = Connection::open(path).unwrap();
    let body = |seq: u64| -> (String, String) {
        conn.query_row(
            "SELECT body, hash FROM events WHERE seq = ?",
            [seq as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    match how {
        Tamper::EditBody | Tamper::EditAndRehash => {
            let (b, _) = body(at);
            let edited = b
                .replacen("\"alice\"", "\"mallory\"", 1)
                .replacen("\"bot\"", "\"eve\"", 1);
            assert_ne!(edited, b);
            let hash = holdpoint_core::canonical::sha256_hex(edited.as_bytes());
            let sql = if matches!(how, Tamper::EditBody) {
                "UPDATE events SET body = ?1 WHERE seq = ?3"
            } else {
                "UPDATE events SET body = ?1, hash = ?2 WHERE seq = ?3"
            };
            conn.execute(sql, params![edited, hash, at as i64]).unwrap();
        }
        Tamper::EditColumn => {
            conn.execute(
                "UPDATE events SET world = 'elsewhere' WHERE seq = ?",
                [at as i64],
            )
            .unwrap();
        }
        Tamper::Delete => {
            conn.execute("DELETE FROM events WHERE seq = ?", [at as i64])
                .unwrap();
        }
        Tamper::Swap => {
            let (a, b) = (at.min(other), at.max(other).max(at.min(other) + 1));
            conn.execute_batch(&format!(
                "UPDATE events SET seq = -1 WHERE seq = {a}; UPDATE events SET seq = {a} WHERE seq = {b}; UPDATE events SET seq = {b} WHERE seq = -1;"
            ))
            .unwrap();
        }
        Tamper::Truncate => {
            conn.execute("DELETE FROM events WHERE seq >= ?", [at as i64])
                .unwrap();
        }
    }
}

fn tamper_kind() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        Just(Tamper::EditBody),
        Just(Tamper::EditAndRehash),
        Just(Tamper::EditColumn),
        Just(Tamper::Delete),
        Just(Tamper::Swap),
        Just(Tamper::Truncate),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn any_tampering_is_detected(holds in 2..6usize, how in tamper_kind(), pick in 0.0..1.0f64, pick2 in 0.0..1.0f64) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let (path, events) = chain(dir.path(), holds).await;
            let mut at = 1 + ((events - 1) as f64 * pick) as u64;
            let other = 1 + ((events - 1) as f64 * pick2) as u64;
            if matches!(how, Tamper::EditBody | Tamper::EditAndRehash) {
                // Events that name a person or an agent: creations and decisions.
                let conn = Connection::open(&path).unwrap();
                let named: Vec<i64> = conn
                    .prepare("SELECT seq FROM events WHERE body LIKE '%\"alice\"%' OR body LIKE '%\"bot\"%'").unwrap()
                    .query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
                at = named[(pick * (named.len() - 1) as f64) as usize] as u64;
            }
            if matches!(how, Tamper::Swap) && at == events {
                at -= 1;
            }
            tamper(&path, how, at, other);
            let store = SqliteStore::open_read_only(&path).unwrap();
            let err = verify(&store).await.unwrap().expect_err("tampering went unnoticed");
            // A rehashed edit shows at the next link (or at the head record) instead.
            prop_assert!(err.seq <= at.max(other) + 1, "{how:?} at {at}: reported {err}");
            Ok(())
        })?;
    }
}
