//! `holdpoint serve --database-url`: holds decided on PostgreSQL outlive the process, the
//! audit chain verifies there, and a database that cannot be reached stops the start with
//! what to fix.

use holdpoint_test_support::pg::TempSchema;
use serde_json::json;

use super::serve::{admin, served};
use super::{holdpoint, stderr, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_decided_on_postgres_is_decided_after_a_restart_and_the_chain_verifies() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let mut first = served(data.path(), &["--database-url", &schema.url]);
    let url = first.url().await;
    let api = admin(data.path(), &url);
    api.get("/readyz").await.expect(200);
    api.post("/api/v1/worlds", json!({"name": "lab"}))
        .await
        .expect(201);
    let token = api
        .post(
            "/api/v1/tokens",
            json!({"name": "bot", "role": "agent", "world": "lab"}),
        )
        .await
        .expect(201)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = api.as_token(&token);
    let raised = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"items": [{"kind": "approval", "tool": "deploy", "arguments": {"env": "prod"}}]}),
        )
        .await
        .expect(201);
    let hold = raised["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.post(
        &format!("/api/v1/holds/{hold}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);
    assert!(first.terminate().await.success());
    assert!(
        !data.path().join("holdpoint.db").exists(),
        "nothing was written to SQLite"
    );

    let mut second = served(data.path(), &["--database-url", &schema.url]);
    let url = second.url().await;
    let shown = admin(data.path(), &url)
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(shown["hold"]["status"], "approved");
    assert!(second.terminate().await.success());

    let out = holdpoint(&["audit", "verify", "--database-url", &schema.url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("audit chain intact: "),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_database_that_cannot_be_reached_stops_the_start_saying_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("postgres://hp:s3cret@127.0.0.1:{port}/holdpoint");
    let out = holdpoint(&[
        "serve",
        "--data",
        dir.path().to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains(&format!(
            "cannot reach PostgreSQL at 127.0.0.1:{port}/holdpoint"
        )),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");

    let out = holdpoint(&[
        "serve",
        "--data",
        dir.path().to_str().unwrap(),
        "--database-url",
        "mysql://db/x",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--database-url: "),
        "{}",
        stderr(&out)
    );
}
