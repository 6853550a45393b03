//! A credential that ends — a token revoked, a browser session signed out — ends every request
//! under way with it within a second: live streams (bearer or cookie), long polls. Seen from
//! the attacker's side: a person cut off keeps nothing open that still delivers holds.

use std::time::Duration;

use reqwest::Method;
use tokio::time::Instant;

use super::{Api, TestServer, browser, held, question, raise};
use holdpoint_test_support::http::Ended;

/// How soon after the revocation answered its requests must have ended.
const WITHIN: Duration = Duration::from_secs(1);

/// A token's id, by its name.
async fn token_id(t: &TestServer, name: &str) -> String {
    let tokens = t.api.get("/api/v1/tokens").await.expect(200);
    tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A live stream opened with a session cookie; it is read until it ends.
async fn cookie_stream(api: &Api, cookie: &str) -> reqwest::Response {
    let response = api
        .request(Method::GET, "/api/v1/events")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// Reads `response` until it ends; when it did, or `None` if it went on past `deadline`.
async fn ends_by(mut response: reqwest::Response, deadline: Instant) -> Option<Instant> {
    loop {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Err(_) => return None,
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None) | Err(_)) => return Some(Instant::now()),
        }
    }
}

#[tokio::test]
async fn revoking_a_token_ends_its_streams_waits_and_sessions_within_a_second() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice_token = t.token("alice", "approver", None).await;
    let alice = t.api.as_token(&alice_token);
    let bob = t.caller("bob", "approver", None).await;
    let (cookie, _) = browser(&t, &alice_token).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Go?", &["yes", "no"])]).await,
        0,
    );

    let mut bearer = alice.events("", None).await;
    let mut others = bob.events("", None).await;
    let session = cookie_stream(&t.api.anonymous(), &cookie).await;
    let waiting = {
        let alice = alice.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            alice
                .get(&format!("/api/v1/holds/{hold}/wait?timeout=1m"))
                .await
        })
    };
    super::streams_become(&t, 3).await;
    let in_flight = "holdpoint_http_requests_in_flight{route=\"/api/v1/holds/{hold}/wait\"} 1";
    let admin = &t.api;
    holdpoint_test_support::eventually(|| async move {
        match admin.get("/metrics").await.text.contains(in_flight) {
            true => Ok(()),
            false => Err("the long poll is not under way".to_owned()),
        }
    })
    .await;

    t.api
        .delete(&format!("/api/v1/tokens/{}", token_id(&t, "alice").await))
        .await
        .expect(204);
    let deadline = Instant::now() + WITHIN;
    let ended = loop {
        match tokio::time::timeout_at(deadline, bearer.read(WITHIN)).await {
            Err(_) | Ok(Ok(None)) => break false,
            Ok(Ok(Some(_))) => {}
            Ok(Err(Ended::Closed | Ended::Broke(_))) => break true,
        }
    };
    assert!(
        ended,
        "the bearer token's stream went on after its revocation"
    );
    assert!(
        ends_by(session, deadline).await.is_some(),
        "the session's stream went on after its token's revocation"
    );
    let waited = tokio::time::timeout_at(deadline, waiting)
        .await
        .expect("the long poll went on after its token's revocation")
        .unwrap();
    assert_eq!(waited.error(401).0, "unauthorized");

    // Everyone else's stream goes on, and delivers what comes next.
    answer_and_see(&t, &hold, &mut others).await;
}

async fn answer_and_see(
    t: &TestServer,
    hold: &str,
    stream: &mut holdpoint_test_support::http::Sse,
) {
    super::answer(&t.api, hold, "yes").await.expect(200);
    let decided = stream.next_of("hold.decided").await;
    assert_eq!(decided.data["hold"], hold);
}

#[tokio::test]
async fn signing_out_ends_the_sessions_streams_and_no_other() {
    let t = TestServer::start().await;
    let alice = t.token("alice", "approver", None).await;
    let (cookie, csrf) = browser(&t, &alice).await;
    let (other_cookie, _) = browser(&t, &alice).await;
    let anonymous = t.api.anonymous();
    let signed_out = cookie_stream(&anonymous, &cookie).await;
    let other = cookie_stream(&anonymous, &other_cookie).await;
    super::streams_become(&t, 2).await;

    anonymous
        .send(
            anonymous
                .request(Method::POST, "/api/v1/logout")
                .header("cookie", &cookie)
                .header("x-csrf-token", &csrf),
        )
        .await
        .expect(204);
    let deadline = Instant::now() + WITHIN;
    assert!(
        ends_by(signed_out, deadline).await.is_some(),
        "the stream of a signed-out session went on"
    );
    // The same person's other browser is still signed in.
    assert!(
        ends_by(other, Instant::now() + Duration::from_millis(300))
            .await
            .is_none(),
        "signing out one browser ended another's stream"
    );
}

#[tokio::test]
async fn a_stream_opened_as_its_token_is_revoked_does_not_outlive_it() {
    // Revocations and stream starts race: whichever comes first, no stream survives.
    let t = TestServer::start().await;
    for round in 0..5 {
        let name = format!("carol-{round}");
        let carol = t.caller(&name, "approver", None).await;
        let id = token_id(&t, &name).await;
        let opened = tokio::spawn(async move { carol.try_events("", None).await });
        t.api
            .delete(&format!("/api/v1/tokens/{id}"))
            .await
            .expect(204);
        if let Ok(mut stream) = opened.await.unwrap() {
            let deadline = Instant::now() + WITHIN;
            let ended = loop {
                match tokio::time::timeout_at(deadline, stream.read(WITHIN)).await {
                    Err(_) | Ok(Ok(None)) => break false,
                    Ok(Ok(Some(_))) => {}
                    Ok(Err(_)) => break true,
                }
            };
            assert!(ended, "round {round}: a stream outlived its token");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_node_ends_its_stream_on_another() {
    let Some(schema) = holdpoint_test_support::pg::TempSchema::new().await else {
        return;
    };
    let on_schema = |s: &mut holdpoint_server::Settings| s.store.url = Some(schema.url.clone());
    let first = TestServer::with(super::ASK_ALL, on_schema).await;
    // The second node shares the first one's data directory, as nodes must.
    let mut settings = holdpoint_server::Settings::default();
    settings.server.bind = "127.0.0.1:0".parse().unwrap();
    on_schema(&mut settings);
    let data = first.server.admin_token_file().parent().unwrap().to_owned();
    let second = holdpoint_server::Server::start(&data, &settings)
        .await
        .unwrap();
    let alice = first.token("alice", "approver", None).await;
    let on_second = Api::new(&second.url(), Some(&alice));
    let mut stream = on_second.events("", None).await;

    first
        .api
        .delete(&format!(
            "/api/v1/tokens/{}",
            token_id(&first, "alice").await
        ))
        .await
        .expect(204);
    let deadline = Instant::now() + WITHIN;
    let ended = loop {
        match tokio::time::timeout_at(deadline, stream.read(WITHIN)).await {
            Err(_) | Ok(Ok(None)) => break false,
            Ok(Ok(Some(_))) => {}
            Ok(Err(_)) => break true,
        }
    };
    assert!(
        ended,
        "the stream on the other node went on after the revocation"
    );
    second.stop().await.unwrap();
    first.server.stop().await.unwrap();
}
