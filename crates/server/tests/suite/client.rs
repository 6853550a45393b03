//! The typed client against a real server: its pagers, and its paths being the served API's.

use holdpoint_client::Client;
use holdpoint_protocol::HoldsParams;

use super::{TestServer, held, question, raise};

/// The admin's typed client.
fn client(t: &TestServer) -> Client {
    Client::new(&t.server.url(), t.server.admin_token().unwrap().to_owned()).unwrap()
}

#[tokio::test]
async fn all_holds_reads_every_page_to_the_end() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let mut raised = Vec::new();
    for i in 0..5 {
        raised.push(held(
            &raise(&agent, "lab", vec![question(&format!("Q{i}?"), &["yes"])]).await,
            0,
        ));
    }
    let params = HoldsParams {
        world: Some("lab".into()),
        limit: Some(2),
        ..HoldsParams::default()
    };
    let client = client(&t);
    assert_eq!(client.holds(&params).await.unwrap().items.len(), 2);
    let all: Vec<String> = client
        .all_holds(&params)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id.to_string())
        .collect();
    assert_eq!(all, raised);
}

#[tokio::test]
async fn health_answers_without_a_token() {
    let t = TestServer::start().await;
    let anonymous = Client::new(&t.server.url(), String::new()).unwrap();
    assert_eq!(anonymous.health().await.unwrap().status, "ok");
    let nowhere = Client::new("http://127.0.0.1:1", String::new()).unwrap();
    assert!(matches!(
        nowhere.health().await,
        Err(holdpoint_client::ClientError::Unreachable { .. })
    ));
}
