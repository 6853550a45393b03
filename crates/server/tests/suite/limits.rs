//! `[limits]`: each limit refuses with 429 (one credential's) or 503 (the server's), with
//! `Retry-After` and the setting named, and frees up once the client stops.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Api, Reply, TestServer, answer, held, question, streams_become};

/// The error's setting, after checking the status, the code and `Retry-After`.
#[track_caller]
fn refused(reply: Reply, status: u16) -> (String, u64) {
    let retry: u64 = reply
        .headers
        .get("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {}", reply.text))
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = reply.expect(status);
    assert_eq!(body["error"]["code"], "limit_reached");
    let setting = body["error"]["details"]["setting"]
        .as_str()
        .unwrap()
        .to_owned();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&setting), "{message}");
    assert_eq!(body["error"]["details"]["retry_after"], retry);
    assert!(retry >= 1);
    (setting, retry)
}

/// Repeats `f` until it answers `status`, or panics after [`PATIENCE`].
async fn until<F: Future<Output = Reply>>(status: u16, mut f: impl FnMut() -> F) -> Reply {
    holdpoint_test_support::eventually(|| {
        let reply = f();
        async move {
            let reply = reply.await;
            if reply.status == status {
                Ok(reply)
            } else {
                Err(format!("still {}: {}", reply.status, reply.text))
            }
        }
    })
    .await
}

#[tokio::test]
async fn streams_per_token_answer_429_until_one_closes() {
    let t = TestServer::with(super::ASK_ALL, |s| s.limits.streams_per_token = 2).await;
    let bot = t.caller("bot", "agent", None).await;
    let first = bot.events("", None).await;
    let _second = bot.events("", None).await;
    let (setting, retry) = refused(bot.get("/api/v1/events").await, 429);
    assert_eq!((setting.as_str(), retry), ("limits.streams_per_token", 5));
    // Another credential has its own.
    let _other = t
        .caller("other", "agent", None)
        .await
        .events("", None)
        .await;
    streams_become(&t, 3).await;
    drop(first);
    streams_become(&t, 2).await;
    let _again = bot.events("", None).await;
}

#[tokio::test]
async fn all_streams_answer_503_to_agents_first_and_free_up_when_closed() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.limits.streams = 10;
        s.limits.streams_per_token = 10;
    })
    .await;
    let bot = t.caller("bot", "agent", None).await;
    let mut open = Vec::new();
    for _ in 0..9 {
        open.push(bot.events("", None).await);
    }
    let other = t.caller("other", "agent", None).await;
    let (setting, _) = refused(other.get("/api/v1/events").await, 503);
    assert_eq!(setting, "limits.streams");
    // The last tenth is kept for people.
    let alice = t.caller("alice", "approver", None).await;
    let person = alice.events("", None).await;
    let (setting, _) = refused(t.api.get("/api/v1/events").await, 503);
    assert_eq!(setting, "limits.streams");
    drop(person);
    open.truncate(4);
    streams_become(&t, 4).await;
    let _admitted = other.events("", None).await;
}

#[tokio::test]
async fn long_polls_per_token_answer_429_and_free_up_when_one_ends_or_is_dropped() {
    let t = TestServer::with(super::ASK_ALL, |s| s.limits.waits_per_token = 1).await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let raised = super::raise(&bot, "lab", vec![question("Go?", &["yes"])]).await;
    let hold = held(&raised, 0);
    let wait = format!("/api/v1/holds/{hold}/wait?timeout=60s");
    // A probe that does not wait, so it never holds the place itself for long.
    let probe = format!("/api/v1/holds/{hold}/wait?timeout=0s");
    let poll = tokio::spawn(long_poll(bot.clone(), wait.clone()));
    // Once the first poll holds the one place, a second is refused.
    let second = until(429, || bot.get(&probe)).await;
    let (setting, retry) = refused(second, 429);
    assert_eq!((setting.as_str(), retry), ("limits.waits_per_token", 1));
    answer(&alice, &hold, "yes").await.expect(200);
    assert_eq!(poll.await.unwrap().expect(200)["decided"], true);
    bot.get(&probe).await.expect(200);

    // A poll whose client goes away gives its place back.
    let raised = super::raise(&bot, "lab", vec![question("Again?", &["yes"])]).await;
    let hold = held(&raised, 0);
    let wait = format!("/api/v1/holds/{hold}/wait?timeout=60s");
    let probe = format!("/api/v1/holds/{hold}/wait?timeout=0s");
    let poll = tokio::spawn(long_poll(bot.clone(), wait.clone()));
    until(429, || bot.get(&probe)).await;
    poll.abort();
    let _ = poll.await;
    let reply = until(200, || bot.get(&probe)).await;
    assert_eq!(reply.body["decided"], false);
}

/// A long poll that takes the place when a probe held it for a moment.
async fn long_poll(api: Api, wait: String) -> Reply {
    until(200, || api.get(&wait)).await
}

fn raise_reply(
    agent: &Api,
    world: &str,
    items: Vec<Value>,
    key: Option<&str>,
) -> impl Future<Output = Reply> {
    let mut r = agent
        .request(
            reqwest::Method::POST,
            &format!("/api/v1/worlds/{world}/holds"),
        )
        .json(&json!({"items": items}));
    if let Some(key) = key {
        r = r.header("idempotency-key", key);
    }
    agent.send(r)
}

#[tokio::test]
async fn pending_holds_per_token_and_per_world_answer_429_and_nothing_is_raised() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.limits.pending_holds_per_token = 2;
        s.limits.pending_holds_per_world = 3;
    })
    .await;
    t.world("lab").await;
    t.world("ops").await;
    let bot = t.caller("bot", "agent", None).await;
    let other = t.caller("other", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let q = || question("Go?", &["yes"]);
    let first = raise_reply(&bot, "lab", vec![q()], Some("k1"))
        .await
        .expect(201);
    raise_reply(&bot, "lab", vec![q()], None).await.expect(201);
    let (setting, retry) = refused(raise_reply(&bot, "ops", vec![q()], None).await, 429);
    assert_eq!(
        (setting.as_str(), retry),
        ("limits.pending_holds_per_token", 10)
    );
    // A retry of a raise that was answered is answered again, at the cap or not.
    let again = raise_reply(&bot, "lab", vec![q()], Some("k1"))
        .await
        .expect(201);
    assert_eq!(again, first);
    // All or nothing: two more would pass the world's cap of 3.
    let (setting, _) = refused(raise_reply(&other, "lab", vec![q(), q()], None).await, 429);
    assert_eq!(setting, "limits.pending_holds_per_world");
    raise_reply(&other, "lab", vec![q()], None)
        .await
        .expect(201);
    let (setting, _) = refused(raise_reply(&other, "lab", vec![q()], None).await, 429);
    assert_eq!(setting, "limits.pending_holds_per_world");
    let open = t.api.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(
        open["items"].as_array().unwrap().len(),
        3,
        "nothing more was raised"
    );
    // Another world is not this one.
    raise_reply(&other, "ops", vec![q()], None)
        .await
        .expect(201);
    // A decision frees a place.
    answer(&alice, &held(&first, 0), "yes").await.expect(200);
    raise_reply(&bot, "lab", vec![q()], None).await.expect(201);
}

#[tokio::test]
async fn requests_per_second_answer_429_per_credential_and_refill() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.limits.requests_per_second = 1;
        s.limits.request_burst = 3;
    })
    .await;
    let bot = t.caller("bot", "agent", None).await;
    for _ in 0..3 {
        bot.get("/api/v1/worlds").await.expect(200);
    }
    let (setting, retry) = refused(bot.get("/api/v1/worlds").await, 429);
    assert_eq!((setting.as_str(), retry), ("limits.requests_per_second", 1));
    // A person's credential is not slowed by the agent's flood.
    let alice = t.caller("alice", "approver", None).await;
    alice.get("/api/v1/worlds").await.expect(200);
    // Probes are not counted.
    t.api.anonymous().get("/healthz").await.expect(200);
    // Retry-After is honoured: after it, the bucket has one again.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    bot.get("/api/v1/worlds").await.expect(200);
}
