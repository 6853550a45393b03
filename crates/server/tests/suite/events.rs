//! The live event stream: order, filters, and resuming with Last-Event-ID.

use std::time::Duration;

use holdpoint_test_support::PATIENCE;

use super::{TestServer, answer, held, question, raise};

#[tokio::test]
async fn events_arrive_in_order_and_a_reconnect_replays_exactly_what_was_missed() {
    let t = TestServer::start().await;
    t.world("lab").await;
    t.world("ops").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;

    let mut stream = alice.events("?world=lab", None).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        raise(&agent, "ops", vec![question("Elsewhere?", &["yes"])]).await;
        let hold = held(
            &raise(
                &agent,
                "lab",
                vec![question(&format!("Q{i}?"), &["yes", "no"])],
            )
            .await,
            0,
        );
        let created = stream.next().await;
        assert_eq!(created.event, "hold.created");
        assert_eq!(created.data["hold"], hold.as_str());
        assert_eq!(
            created.data["payload"]["hold"]["spec"]["question"],
            format!("Q{i}?")
        );
        answer(&alice, &hold, "yes").await.expect(200);
        let decided = stream.next().await;
        assert_eq!(
            (decided.event.as_str(), decided.data["hold"].as_str()),
            ("hold.decided", Some(hold.as_str()))
        );
        ids.extend([created.id.unwrap(), decided.id.unwrap()]);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    // The id is the event's position in the log.
    let last = *ids.last().unwrap();
    drop(stream);

    // Missed while disconnected.
    let mut missed = Vec::new();
    for i in 0..4 {
        raise(&agent, "ops", vec![question("Elsewhere?", &["yes"])]).await;
        missed.push(held(
            &raise(&agent, "lab", vec![question(&format!("M{i}?"), &["yes"])]).await,
            0,
        ));
    }
    let mut resumed = alice.events("?world=lab", Some(last)).await;
    for hold in &missed {
        let m = resumed.next().await;
        assert_eq!(
            (m.event.as_str(), m.data["hold"].as_str()),
            ("hold.created", Some(hold.as_str()))
        );
        assert!(m.id.unwrap() > last);
    }
    // Nothing more than what was missed, until something new happens.
    assert!(resumed.try_next(Duration::from_millis(200)).await.is_none());
    let fresh = held(
        &raise(&agent, "lab", vec![question("New?", &["yes"])]).await,
        0,
    );
    assert_eq!(resumed.next().await.data["hold"], fresh.as_str());

    // The same through ?after=, and as the audit log lists them.
    let mut replay = alice
        .events(&format!("?world=lab&after={last}"), None)
        .await;
    let audit = alice
        .get(&format!("/api/v1/audit/events?world=lab&after={last}"))
        .await
        .expect(200);
    for event in audit["events"].as_array().unwrap() {
        let m = replay.next().await;
        assert_eq!(m.data, *event);
    }
}

#[tokio::test]
async fn a_stream_without_a_position_starts_with_what_happens_next() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    raise(&agent, "lab", vec![question("Old?", &["yes"])]).await;
    let mut stream = t.api.events("", None).await;
    let new = held(
        &raise(&agent, "lab", vec![question("New?", &["yes"])]).await,
        0,
    );
    let m = stream.next_of("hold.created").await;
    assert_eq!(m.data["hold"], new.as_str());
}

#[tokio::test]
async fn an_idle_stream_gets_heartbeats_and_stays_open() {
    let t = TestServer::with(super::ASK_ALL, |s| {
        s.server.heartbeat = Duration::from_millis(50);
    })
    .await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let mut stream = alice.events("?world=lab", None).await;
    for _ in 0..3 {
        assert!(stream.heartbeat(PATIENCE).await, "no heartbeat came");
    }
    let hold = held(
        &raise(&agent, "lab", vec![question("Go?", &["yes"])]).await,
        0,
    );
    let created = stream.next().await;
    assert_eq!(created.data["hold"], hold.as_str());
}

#[tokio::test]
async fn stream_filters_are_checked() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let (_, message) = t.api.get("/api/v1/events?chat=c1").await.error(400);
    assert!(message.starts_with("chat:"), "{message}");
    t.api.get("/api/v1/events?world=atlantis").await.error(404);
    let api = &t.api;
    let reply = api
        .send(
            api.request(reqwest::Method::GET, "/api/v1/events")
                .header("last-event-id", "yesterday"),
        )
        .await;
    let (_, message) = reply.error(400);
    assert!(message.starts_with("Last-Event-ID:"), "{message}");
    // Bytes that are not text were once taken for no header at all, so the stream started
    // from now and what the client missed was lost (found by fuzz/fuzz_targets/last_event_id.rs).
    // The answer's head is enough: a stream that started would never end.
    let response = api
        .request(reqwest::Method::GET, "/api/v1/events")
        .header(
            "last-event-id",
            reqwest::header::HeaderValue::from_bytes(b"0\xcb").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400, "the stream started as if from now");
    let body: serde_json::Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Last-Event-ID:"), "{body}");
    t.api.get("/api/v1/events?after=soon").await.error(400);
    // A position the log has not reached would skip every event until it does.
    let reply = api
        .send(
            api.request(reqwest::Method::GET, "/api/v1/events")
                .header("last-event-id", "9999"),
        )
        .await;
    let (_, message) = reply.error(400);
    assert!(message.contains("beyond the newest event"), "{message}");
    t.api.get("/api/v1/events?after=9999").await.error(400);
    let head = t.api.get("/api/v1/audit/verify").await.expect(200)["events"]
        .as_u64()
        .unwrap();
    // The newest position itself is fine: the stream goes on from there.
    t.api.events(&format!("?after={head}"), None).await;
}

#[tokio::test]
async fn a_world_limited_approver_sees_only_its_world() {
    let t = TestServer::start().await;
    t.world("lab").await;
    t.world("ops").await;
    let agent = t.caller("bot", "agent", None).await;
    let lab_only = t.caller("lee", "approver", Some("lab")).await;
    let mut stream = lab_only.events("", None).await;
    raise(&agent, "ops", vec![question("Ops?", &["yes"])]).await;
    let lab = held(
        &raise(&agent, "lab", vec![question("Lab?", &["yes"])]).await,
        0,
    );
    let m = stream.next().await;
    assert_eq!(m.data["hold"], lab.as_str());
    lab_only.get("/api/v1/events?world=ops").await.error(404);
}
