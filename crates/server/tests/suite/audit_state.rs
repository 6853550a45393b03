//! `GET /api/v1/audit/verify` checks the stored state against the log: a hold's outcome, a
//! grant's revocation, a tool's result or a turn's ending changed in the database behind
//! Holdpoint's back is named.

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use rusqlite::Connection;
use serde_json::{Value, json};

use super::{ASK_ALL, TestServer, approval, held, lab_chat, raise};

/// A server with a denied hold and a revoked grant; returns the server, its database file,
/// the denied hold and the revoked grant.
async fn decided() -> (TestServer, std::path::PathBuf, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("holdpoint.db");
    let t = TestServer::on(dir, ASK_ALL, |_| {}).await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let raised = raise(
        &agent,
        "lab",
        vec![
            approval("deploy", json!({"env": "prod"})),
            approval("deploy", json!({"env": "staging"})),
        ],
    )
    .await;
    let (denied, approved) = (held(&raised, 0), held(&raised, 1));
    for (hold, decision) in [
        (&denied, json!({"action": "deny"})),
        (
            &approved,
            json!({"action": "approve", "scope": "always_args"}),
        ),
    ] {
        alice
            .post(&format!("/api/v1/holds/{hold}/decision"), decision)
            .await
            .expect(200);
    }
    let grants = alice.get("/api/v1/worlds/lab/grants").await.expect(200);
    let grant = grants[0]["id"].as_str().unwrap().to_owned();
    alice
        .delete(&format!("/api/v1/grants/{grant}"))
        .await
        .expect(200);
    (t, db, denied, grant)
}

async fn verify(t: &TestServer) -> Value {
    t.api.get("/api/v1/audit/verify").await.expect(200)
}

#[tokio::test]
async fn an_untouched_store_matches_its_log() {
    let (t, _db, _, _) = decided().await;
    let report = verify(&t).await;
    assert_eq!(report["intact"], true, "{report}");
    assert_eq!(report["holds_checked"], 2, "{report}");
    assert_eq!(report["mismatched"], 0, "{report}");
    assert!(report.get("mismatches").is_none(), "{report}");
}

#[tokio::test]
async fn an_outcome_edited_in_the_holds_table_is_named() {
    let (t, db, denied, _) = decided().await;
    let conn = Connection::open(&db).unwrap();
    let edited = conn
        .execute(
            "UPDATE holds SET status = 'approved', data = replace(data, '\"denied\"', '\"approved\"')
             WHERE json_extract(data, '$.id') = ?",
            [&denied],
        )
        .unwrap();
    assert_eq!(edited, 1);
    drop(conn);

    let report = verify(&t).await;
    assert_eq!(report["intact"], false, "{report}");
    assert_eq!(report["mismatched"], 1, "{report}");
    let m = &report["mismatches"][0];
    assert_eq!((&m["kind"], &m["id"]), (&json!("hold"), &json!(denied)));
    let reason = m["reason"].as_str().unwrap();
    assert!(
        reason.contains("status is approved but the log says denied")
            && reason.contains("outcome differs"),
        "{reason}"
    );
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .contains("chain is intact")
    );
}

#[tokio::test]
async fn a_revoked_grant_made_active_again_is_named() {
    let (t, db, _, grant) = decided().await;
    let conn = Connection::open(&db).unwrap();
    let edited = conn
        .execute(
            "UPDATE grants SET revoked_at = NULL, data = json_remove(data, '$.revoked_at')
             WHERE json_extract(data, '$.id') = ?",
            [&grant],
        )
        .unwrap();
    assert_eq!(edited, 1);
    drop(conn);

    let report = verify(&t).await;
    assert_eq!(report["intact"], false, "{report}");
    assert_eq!(report["mismatched"], 1, "{report}");
    let m = &report["mismatches"][0];
    assert_eq!((&m["kind"], &m["id"]), (&json!("grant"), &json!(grant)));
    assert!(
        m["reason"].as_str().unwrap().contains("revoked it"),
        "{report}"
    );
}

/// A server on a SQLite file whose agent ran a tool (approved through the API) and answered;
/// the server and its database file.
async fn conversed() -> (TestServer, std::path::PathBuf) {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo shipped"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("holdpoint.db");
    let t = TestServer::on(dir, ASK_ALL, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Ship it"}),
        )
        .await
        .expect(202);
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    t.api
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    (t, db)
}

/// Changes the `data` of the records of `kind` that `filter` (SQL on `data`) picks.
fn edit_records(db: &std::path::Path, kind: &str, filter: &str, from: &str, to: &str) {
    let conn = Connection::open(db).unwrap();
    let edited = conn
        .execute(
            &format!("UPDATE records SET data = replace(data, ?, ?) WHERE kind = ? AND {filter}"),
            [from, to, kind],
        )
        .unwrap();
    assert_eq!(edited, 1, "one {kind} record should have been edited");
}

#[tokio::test]
async fn a_tool_result_edited_in_the_records_is_named_and_an_untouched_conversation_matches() {
    let (t, db) = conversed().await;
    let report = verify(&t).await;
    assert_eq!(report["intact"], true, "{report}");
    // The user's message, the call, its result, the answer; and the turn.
    assert_eq!(report["messages_checked"], 4, "{report}");
    assert_eq!(report["turns_checked"], 1, "{report}");

    // What the agent was told the tool printed, changed behind Holdpoint's back.
    edit_records(
        &db,
        "message",
        "json_extract(data, '$.role') = 'tool'",
        "shipped",
        "all fine",
    );
    let report = verify(&t).await;
    assert_eq!(report["intact"], false, "{report}");
    assert_eq!(report["mismatched"], 1, "{report}");
    let m = &report["mismatches"][0];
    assert_eq!(m["kind"], "message", "{report}");
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .contains("no event created this message"),
        "{report}"
    );
}

#[tokio::test]
async fn a_turn_whose_ending_was_edited_is_named() {
    let (t, db) = conversed().await;
    edit_records(
        &db,
        "turn",
        "1",
        "\"status\":\"finished\"",
        "\"status\":\"failed\"",
    );
    let report = verify(&t).await;
    assert_eq!(report["mismatched"], 1, "{report}");
    let m = &report["mismatches"][0];
    assert_eq!(m["kind"], "turn", "{report}");
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .contains("its status is failed but the log says it ended finished"),
        "{report}"
    );
}
