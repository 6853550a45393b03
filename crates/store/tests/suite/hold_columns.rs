//! `audit verify` checks every column of a hold's row that listings, lookups and version checks
//! filter on, not only the JSON the API shows: a decided hold marked open again by hand is
//! listed as pending, and verify must say so, naming the hold and the column. On SQLite and
//! on PostgreSQL, each column edited alone on a hold of its own, and a grant's `world`.

use std::sync::Arc;

use holdpoint_core::audit::VerifyReport;
use holdpoint_core::store::{HoldFilter, StatusSet, Store};
use holdpoint_core::{Engine, Scope, verify};
use holdpoint_protocol::{ApproveScope, Decision, GateResult, GrantId, HoldId};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::pg::TempSchema;
use holdpoint_test_support::{RecordingChannel, agent, approval, approver, gate};
use serde_json::json;

/// Each column a query filters on, edited alone, and how, in SQLite and in PostgreSQL. The
/// first edit is the one of the issue: a decided hold made pending again.
const EDITS: &[(&[&str], &str, &str)] = &[
    (
        &["open", "status"],
        "open = 1, status = 'pending'",
        "open = true, status = 'pending'",
    ),
    (&["open"], "open = 1 - open", "open = NOT open"),
    (&["status"], "status = 'denied'", "status = 'denied'"),
    (&["world"], "world = 'elsewhere'", "world = 'elsewhere'"),
    (&["chat"], "chat = 'other'", "chat = 'other'"),
    (&["agent"], "agent = 'mallory'", "agent = 'mallory'"),
    (&["tool"], "tool = 'rm'", "tool = 'rm'"),
    (&["kind"], "kind = 'question'", "kind = 'question'"),
    (
        &["batch"],
        "batch = randomblob(16)",
        "batch = gen_random_uuid()",
    ),
    (
        &["deadline"],
        "deadline = coalesce(deadline, 0) + 1",
        "deadline = coalesce(deadline, 0) + 1",
    ),
    (
        &["remind_at"],
        "remind_at = coalesce(remind_at, 0) + 1",
        "remind_at = coalesce(remind_at, 0) + 1",
    ),
    (
        &["version"],
        "version = version + 1",
        "version = version + 1",
    ),
];

/// Every column edited.
const COLUMNS: &[&str] = &[
    "open",
    "status",
    "world",
    "chat",
    "agent",
    "tool",
    "kind",
    "batch",
    "deadline",
    "remind_at",
    "version",
];

/// Raises one hold per edit and one more left alone, and approves them all.
async fn decided_holds(engine: &Engine) -> Vec<HoldId> {
    let mut ids = Vec::new();
    for i in 0..=EDITS.len() {
        let req = gate("w", Some("c"), vec![approval("deploy", json!({ "i": i }))]);
        let res = engine.gate(&agent("bot"), req).await.unwrap();
        let GateResult::Held { hold } = &res.results[0] else {
            panic!("deploy was not held: {:?}", res.results[0])
        };
        let approve = Decision::Approve {
            scope: ApproveScope::Once,
            digest: None,
            reason: None,
            expires_in: None,
        };
        engine
            .decide(&approver("alice"), hold.id, approve, &Scope::any(), None)
            .await
            .unwrap();
        ids.push(hold.id);
    }
    ids
}

/// Approves a call of `ship` for good: a grant of world `w`.
async fn granted(engine: &Engine) -> GrantId {
    let req = gate("w", Some("c"), vec![approval("ship", json!({}))]);
    let res = engine.gate(&agent("bot"), req).await.unwrap();
    let GateResult::Held { hold } = &res.results[0] else {
        panic!("ship was not held: {:?}", res.results[0])
    };
    let approve = Decision::Approve {
        scope: ApproveScope::AlwaysTool,
        digest: None,
        reason: None,
        expires_in: None,
    };
    engine
        .decide(&approver("alice"), hold.id, approve, &Scope::any(), None)
        .await
        .unwrap();
    let grants = engine.grants(Some("w")).await.unwrap();
    grants.iter().find(|g| g.tool == "ship").unwrap().id
}

/// The grant whose `world` column was edited is named with the column.
fn assert_grant_named(report: &VerifyReport, grant: GrantId) {
    let mismatches = &report.state.mismatches;
    let found: Vec<_> = mismatches
        .iter()
        .filter(|m| m.kind == "grant" && m.id == grant.to_string())
        .collect();
    assert_eq!(found.len(), 1, "{mismatches:#?}");
    assert!(
        found[0].reason.contains("column `world`"),
        "{}",
        found[0].reason
    );
}

/// What a store lists as pending in world `w`.
async fn pending(store: &dyn Store) -> Vec<HoldId> {
    let filter = HoldFilter {
        world: Some("w".into()),
        status: StatusSet::Open,
        limit: 100,
        ..HoldFilter::default()
    };
    let page = store.holds(&filter).await.unwrap();
    page.into_iter().map(|h| h.item.id).collect()
}

/// Each edited hold is reported once, naming the columns edited and no other; the hold left
/// alone is not.
fn assert_each_edit_named(report: &VerifyReport, ids: &[HoldId]) {
    let mismatches = &report.state.mismatches;
    for (id, (columns, ..)) in ids.iter().zip(EDITS) {
        let found: Vec<_> = mismatches
            .iter()
            .filter(|m| m.kind == "hold" && m.id == id.to_string())
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{columns:?} edited on {id}: {mismatches:#?}"
        );
        let reason = &found[0].reason;
        for column in COLUMNS {
            let named = reason.contains(&format!("column `{column}`"));
            assert_eq!(
                named,
                columns.contains(column),
                "{columns:?} edited on {id}; `{column}` named: {named}: {reason}"
            );
        }
    }
    // And the grant's.
    assert_eq!(
        report.state.mismatched,
        EDITS.len() as u64 + 1,
        "{mismatches:#?}"
    );
    let alone = ids[EDITS.len()].to_string();
    assert!(mismatches.iter().all(|m| m.id != alone), "{mismatches:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_each_hold_column_edited_by_hand_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holdpoint.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let engine = Engine::builder(store.clone())
        .channel(Arc::new(RecordingChannel::default()))
        .start()
        .await
        .unwrap();
    let ids = decided_holds(&engine).await;
    let grant = granted(&engine).await;
    let before = verify(store.as_ref()).await.unwrap().unwrap();
    assert_eq!(before.state.mismatched, 0, "{:#?}", before.state.mismatches);
    drop(engine);
    store.close().await;
    drop(store);

    let conn = rusqlite::Connection::open(&path).unwrap();
    for (id, (columns, sql, _)) in ids.iter().zip(EDITS) {
        let edited = conn
            .execute(
                &format!("UPDATE holds SET {sql} WHERE id = ?"),
                [id.as_uuid().as_bytes().as_slice()],
            )
            .unwrap();
        assert_eq!(edited, 1, "{columns:?}");
    }
    let edited = conn
        .execute(
            "UPDATE grants SET world = 'elsewhere' WHERE id = ?",
            [grant.as_uuid().as_bytes().as_slice()],
        )
        .unwrap();
    assert_eq!(edited, 1);
    drop(conn);

    let store = SqliteStore::open_read_only(&path).unwrap();
    // The edit's harm: the decided hold is in the inbox again.
    assert!(pending(&store).await.contains(&ids[0]));
    let report = verify(&store).await.unwrap().unwrap();
    assert_each_edit_named(&report, &ids);
    assert_grant_named(&report, grant);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_each_hold_column_edited_by_hand_on_postgres() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let store = schema.store().await;
    let engine = Engine::builder(store.clone())
        .channel(Arc::new(RecordingChannel::default()))
        .start()
        .await
        .unwrap();
    let ids = decided_holds(&engine).await;
    let grant = granted(&engine).await;
    let before = verify(store.as_ref()).await.unwrap().unwrap();
    assert_eq!(before.state.mismatched, 0, "{:#?}", before.state.mismatches);

    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    for (id, (columns, _, sql)) in ids.iter().zip(EDITS) {
        let edited = client
            .execute(
                &format!("UPDATE holds SET {sql} WHERE id = $1"),
                &[id.as_uuid()],
            )
            .await
            .unwrap();
        assert_eq!(edited, 1, "{columns:?}");
    }
    let edited = client
        .execute(
            "UPDATE grants SET world = 'elsewhere' WHERE id = $1",
            &[grant.as_uuid()],
        )
        .await
        .unwrap();
    assert_eq!(edited, 1);
    drop(client);
    let _ = connection.await;

    assert!(pending(store.as_ref()).await.contains(&ids[0]));
    let report = verify(store.as_ref()).await.unwrap().unwrap();
    assert_each_edit_named(&report, &ids);
    assert_grant_named(&report, grant);
    drop(engine);
    store.close().await;
}
