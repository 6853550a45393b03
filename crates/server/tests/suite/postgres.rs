//! A server on PostgreSQL: readiness follows the database, and the server recovers by itself
//! when the database comes back.

use holdpoint_test_support::pg::{Relay, TempSchema};
use serde_json::json;

use super::{ASK_ALL, TestServer, answer, held, question, raise};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_a_lost_database_and_the_server_recovers_when_it_returns() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let relay = Relay::start(&schema.url).await;
    let url = relay.url.clone();
    let t = TestServer::with(ASK_ALL, |s| s.store.url = Some(url)).await;
    t.api.get("/readyz").await.expect(200);
    t.world("lab").await;
    let agent = t.caller("bot", "agent", Some("lab")).await;

    relay.cut().await;
    let (code, message) = t.api.anonymous().get("/readyz").await.error(503);
    assert_eq!(code, "storage_unavailable");
    assert!(message.contains("PostgreSQL"), "{message}");
    let refused = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"items": [question("Deploy?", &["yes", "no"])]}),
        )
        .await;
    assert_eq!(refused.status, 503, "{:?}", refused.body);

    relay.restore();
    let probe = &t.api.anonymous();
    holdpoint_test_support::eventually(|| async move {
        match probe.get("/readyz").await.status {
            200 => Ok(()),
            status => Err(format!(
                "/readyz still {status} after the database came back"
            )),
        }
    })
    .await;
    let raised = raise(&agent, "lab", vec![question("Deploy?", &["yes", "no"])]).await;
    let hold = held(&raised, 0);
    answer(&t.api, &hold, "yes").await.expect(200);
    let shown = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(shown["hold"]["status"], "answered");
    t.server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_data_directory_is_not_the_others_is_refused_naming_what_to_do() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let on_schema = |s: &mut holdpoint_server::Settings| s.store.url = Some(schema.url.clone());
    let shared = tempfile::tempdir().unwrap();
    let first = TestServer::on(tempfile::tempdir().unwrap(), ASK_ALL, on_schema).await;
    // A node with a data directory of its own would run turns in other files.
    let mut settings = holdpoint_server::Settings::default();
    settings.server.bind = "127.0.0.1:0".parse().unwrap();
    on_schema(&mut settings);
    let refused = holdpoint_server::Server::start(shared.path(), &settings).await;
    let Err(e) = refused else {
        panic!("a node with another data directory started");
    };
    let message = e.to_string();
    assert!(
        message.contains(".holdpoint-workspace")
            && message.contains("same data directory")
            && message.contains("docs/deploy.md"),
        "{message}"
    );
    // A second node on the first one's data directory (a shared volume) starts.
    let second = holdpoint_server::Server::start(
        first.server.admin_token_file().parent().unwrap(),
        &settings,
    )
    .await
    .expect("a node on the shared data directory did not start");
    second.stop().await.unwrap();
    first.server.stop().await.unwrap();
}
