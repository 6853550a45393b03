use std::path::Path;

use holdpoint_core::Scope;
use holdpoint_core::policy::Policy;
use holdpoint_protocol::{Decision, GateResult};
use holdpoint_test_support::{TestEngine, agent, approval, approver, gate};
use pretty_assertions::assert_eq;
use rusqlite::Connection;
use serde_json::{Value, json};

use super::{holdpoint, stderr, stdout};

/// A data directory with a few decided holds.
fn data_dir() -> tempfile::TempDir {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let t = TestEngine::new(Policy::default()).await;
        for i in 0..3 {
            let res = t
                .engine
                .gate(
                    &agent("bot"),
                    gate("w", None, vec![approval("t", json!({ "i": i }))]),
                )
                .await
                .unwrap();
            let GateResult::Held { hold } = &res.results[0] else {
                panic!()
            };
            t.engine
                .decide(
                    &approver("alice"),
                    hold.id,
                    Decision::Deny { reason: None },
                    &Scope::any(),
                    None,
                )
                .await
                .unwrap();
        }
        t.shut_down().await.0
    })
}

fn verify(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["audit", "verify", "--data", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    holdpoint(&args)
}

#[test]
fn an_intact_chain_verifies() {
    let dir = data_dir();
    let out = verify(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("audit chain intact: 6 events; head 6:"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains(
            "\nstored state matches the log: 3 holds, 0 active grants, 0 messages, 0 turns\n"
        ),
        "{}",
        stdout(&out)
    );
    let out = verify(dir.path(), &["--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (v["intact"].clone(), v["events"].clone()),
        (json!(true), json!(6))
    );
}

#[test]
fn an_edited_event_is_named_and_exits_1() {
    let dir = data_dir();
    let db = dir.path().join("holdpoint.db");
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE events SET body = replace(body, '\"alice\"', '\"mallory\"') WHERE seq = 4",
            [],
        )
        .unwrap();
    let out = verify(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("audit chain broken at event 4: "),
        "{}",
        stderr(&out)
    );
    let out = verify(dir.path(), &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (v["intact"].clone(), v["first_bad_event"].clone()),
        (json!(false), json!(4))
    );
}

#[test]
fn an_outcome_edited_in_the_holds_table_is_named_and_exits_1() {
    let dir = data_dir();
    let conn = Connection::open(dir.path().join("holdpoint.db")).unwrap();
    let hold: String = conn
        .query_row(
            "SELECT json_extract(data, '$.id') FROM holds ORDER BY position LIMIT 1 OFFSET 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE holds SET status = 'approved', data = replace(data, '\"denied\"', '\"approved\"')
         WHERE json_extract(data, '$.id') = ?",
        [&hold],
    )
    .unwrap();
    drop(conn);
    let out = verify(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "hold {hold}: its status is approved but the log says denied; its outcome differs"
        )) && err.contains("1 of the holds, grants, messages and turns the store serves differ"),
        "{err}"
    );
    let out = verify(dir.path(), &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (
            v["intact"].clone(),
            v["mismatched"].clone(),
            v["mismatches"][0]["id"].clone()
        ),
        (json!(false), json!(1), json!(hold))
    );
}

#[test]
fn a_recorded_head_catches_a_rewritten_chain() {
    let dir = data_dir();
    let out = holdpoint(&["audit", "head", "--data", dir.path().to_str().unwrap()]);
    let head = stdout(&out).trim().to_owned();
    assert!(head.starts_with("6:") && head.len() == 66, "{head}");
    assert_eq!(
        verify(dir.path(), &["--expect-head", &head]).status.code(),
        Some(0)
    );

    // A forger with write access rewrites every hash after an edit, and the head record too.
    let conn = Connection::open(dir.path().join("holdpoint.db")).unwrap();
    conn.execute(
        "UPDATE events SET body = replace(body, '\"alice\"', '\"mallory\"') WHERE seq = 2",
        [],
    )
    .unwrap();
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT seq, body FROM events ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev = holdpoint_core::audit::GENESIS.to_owned();
    for (seq, body) in rows {
        let mut value: Value = serde_json::from_str(&body).unwrap();
        value["prev"] = json!(prev);
        let body = holdpoint_core::canonical::to_string(&value);
        let hash = holdpoint_core::canonical::sha256_hex(body.as_bytes());
        conn.execute(
            "UPDATE events SET body = ?, hash = ? WHERE seq = ?",
            rusqlite::params![body, hash, seq],
        )
        .unwrap();
        prev = hash;
    }
    conn.execute("UPDATE audit_head SET hash = ?", [&prev])
        .unwrap();
    drop(conn);
    // The chain alone passes; the holds table, left as it was, no longer matches the
    // rewritten decision.
    let out = verify(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("its outcome differs from the one the log recorded"),
        "{}",
        stderr(&out)
    );
    let out = verify(dir.path(), &["--expect-head", &head]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the chain was rewritten"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        verify(dir.path(), &["--expect-head", "6:xyz"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn a_missing_database_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = verify(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no Holdpoint database here"),
        "{}",
        stderr(&out)
    );
}
