//! Housekeeping: idempotency records past their retention and ended sessions are deleted.
//! Each sweep is run directly with a `now` in the future, as the hourly task would run it then.

use std::time::Duration;

use holdpoint_server::housekeeping::Swept;
use reqwest::Method;
use serde_json::json;

use super::{Api, TestServer, browser, question};

const HOUR: Duration = Duration::from_secs(3600);

async fn raise_with_key(agent: &Api, key: &str) -> String {
    let body = json!({"items": [question("Rotate the keys?", &["yes", "no"])]});
    let created = agent
        .send(
            agent
                .request(Method::POST, "/api/v1/worlds/lab/holds")
                .header("idempotency-key", key)
                .json(&body),
        )
        .await
        .expect(201);
    created["results"][0]["hold"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_idempotency_key_is_remembered_for_its_retention_then_forgotten() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.server.idempotency_retention = 24 * HOUR;
    })
    .await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let app = t.server.app();
    let first = raise_with_key(&agent, "rotate").await;
    let other = raise_with_key(&agent, "another").await;

    // Within the retention, nothing is forgotten and a retry is the same hold.
    let swept = app
        .housekeeping()
        .sweep(app.now().saturating_add(23 * HOUR))
        .await
        .unwrap();
    assert_eq!(swept, Swept::default());
    assert_eq!(raise_with_key(&agent, "rotate").await, first);

    // Past it, both keys are forgotten, and a retry raises a new hold.
    let swept = app
        .housekeeping()
        .sweep(app.now().saturating_add(25 * HOUR))
        .await
        .unwrap();
    assert_eq!(swept.idempotency_records, 2);
    let again = raise_with_key(&agent, "rotate").await;
    assert_ne!(again, first);
    assert_ne!(again, other);
    // The new hold's key is remembered afresh.
    assert_eq!(raise_with_key(&agent, "rotate").await, again);
    // Listing holds is for people: the admin counts them.
    let listed = t.api.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(listed["items"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn ended_browser_sessions_are_deleted() {
    let t = TestServer::start().await;
    let app = t.server.app();
    let (cookie, _) = browser(&t, t.server.admin_token().unwrap()).await;
    let api = t.api.anonymous();
    let signed_in = || async {
        api.send(
            api.request(Method::GET, "/api/v1/session")
                .header("cookie", &cookie),
        )
        .await
        .status
    };

    let swept = app
        .housekeeping()
        .sweep(app.now().saturating_add(HOUR))
        .await
        .unwrap();
    assert_eq!(swept.sessions, 0);
    assert_eq!(signed_in().await, 200);

    // Sessions last 12 hours. Deleted, the session is refused now, not only once it ends.
    let swept = app
        .housekeeping()
        .sweep(app.now().saturating_add(13 * HOUR))
        .await
        .unwrap();
    assert_eq!(swept.sessions, 1);
    assert_eq!(signed_in().await, 401);
}
