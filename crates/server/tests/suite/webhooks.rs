//! Webhooks: signed deliveries to a local receiver, retries, and the record of each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use holdpoint_test_support::PATIENCE;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

use super::{TestServer, answer, audit_after, held, last_seq, question, raise};

/// What the receiver got.
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

/// A receiver on a loopback port that fails the first `failures` requests with 500.
async fn receiver(
    failures: usize,
) -> (
    String,
    mpsc::UnboundedReceiver<Received>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let failed = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let tx = tx.clone();
            let failed = failed.clone();
            async move {
                let _ = tx.send(Received {
                    headers,
                    body: body.to_vec(),
                });
                if failed.fetch_add(1, Ordering::SeqCst) < failures {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, rx, task)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("no delivery arrived in time")
        .unwrap()
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// Checks the signature as a receiver would: HMAC-SHA256 of "<timestamp>.<body>".
fn verify(secret: &str, r: &Received) {
    let timestamp = header(r, "x-holdpoint-timestamp");
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(&r.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        header(r, "x-holdpoint-signature"),
        format!("sha256={expected}")
    );
    let age = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - timestamp.parse::<u64>().unwrap();
    assert!(age < 60, "the timestamp is current");
}

/// Subscribes a receiver to the world `lab`; returns the created webhook and its secret.
async fn subscribe(t: &TestServer, body: Value) -> Value {
    t.api
        .post("/api/v1/worlds/lab/webhooks", body)
        .await
        .expect(201)
}

#[tokio::test]
async fn deliveries_are_signed_and_cover_created_and_decided() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let (url, mut rx, _task) = receiver(0).await;
    let created = subscribe(&t, json!({"url": url})).await;
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        created["webhook"]["events"],
        json!([
            "hold.created",
            "hold.reminded",
            "hold.decided",
            "hold.expired"
        ])
    );
    let listed = t.api.get("/api/v1/worlds/lab/webhooks").await.expect(200);
    assert!(
        !listed.to_string().contains(&secret),
        "the secret is shown once"
    );

    let agent = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Ship?", &["yes", "no"])]).await,
        0,
    );
    answer(&alice, &hold, "no").await.expect(200);

    // Each event is delivered on its own, so the two may arrive in either order.
    let mut received = vec![next(&mut rx).await, next(&mut rx).await];
    received.sort_by_key(|r| header(r, "x-holdpoint-event") != "hold.created");
    let mut deliveries = Vec::new();
    for (expected, r) in ["hold.created", "hold.decided"].into_iter().zip(received) {
        verify(&secret, &r);
        assert_eq!(header(&r, "x-holdpoint-event"), expected);
        assert_eq!(header(&r, "content-type"), "application/json");
        let event: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            (event["payload"]["type"].as_str(), event["hold"].as_str()),
            (Some(expected), Some(hold.as_str()))
        );
        deliveries.push(header(&r, "x-holdpoint-delivery").to_owned());
    }
    let id = created["webhook"]["id"].as_str().unwrap();
    let recorded = wait_for(&t, id, |d| {
        d.iter().filter(|d| d["status"] == "delivered").count() == 2
    })
    .await;
    for d in recorded.as_array().unwrap() {
        assert_eq!(
            (d["attempts"].as_u64(), d["last_status"].as_u64()),
            (Some(1), Some(204))
        );
        assert!(deliveries.contains(&d["id"].as_str().unwrap().to_owned()));
    }

    // The listing comes a page at a time.
    let path = format!("/api/v1/webhooks/{id}/deliveries");
    let first = t.api.get(&format!("{path}?limit=1")).await.expect(200);
    let after = first["next"].as_u64().unwrap();
    let second = t
        .api
        .get(&format!("{path}?limit=1&after={after}"))
        .await
        .expect(200);
    assert_eq!(
        [first["items"][0].clone(), second["items"][0].clone()],
        [recorded[0].clone(), recorded[1].clone()]
    );
    let rest = t
        .api
        .get(&format!("{path}?after={}", second["next"]))
        .await
        .expect(200);
    assert_eq!(rest, json!({"items": []}));
    for bad in ["limit=0", "limit=5000", "colour=red"] {
        let (_, message) = t.api.get(&format!("{path}?{bad}")).await.error(400);
        assert!(
            message.starts_with(bad.split('=').next().unwrap()),
            "{message}"
        );
    }
}

/// The deliveries of webhook `id` (a first page), once `done` holds for them (polled up to
/// PATIENCE: attempts are recorded as they are made, with no event of their own).
async fn wait_for(t: &TestServer, id: &str, done: impl Fn(&Vec<Value>) -> bool) -> Value {
    let done = &done;
    holdpoint_test_support::eventually(|| async move {
        let d = t
            .api
            .get(&format!("/api/v1/webhooks/{id}/deliveries"))
            .await
            .expect(200)["items"]
            .clone();
        if done(d.as_array().unwrap()) {
            Ok(d)
        } else {
            Err(format!("deliveries did not settle: {d}"))
        }
    })
    .await
}

#[tokio::test]
async fn a_receiver_that_fails_first_gets_the_retry() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let (url, mut rx, _task) = receiver(2).await;
    let created = subscribe(&t, json!({"url": url, "events": ["hold.created"]})).await;
    let secret = created["secret"].as_str().unwrap();
    let agent = t.caller("bot", "agent", None).await;
    let hold = held(
        &raise(&agent, "lab", vec![question("Ship?", &["yes"])]).await,
        0,
    );

    let attempts: Vec<Received> = vec![
        next(&mut rx).await,
        next(&mut rx).await,
        next(&mut rx).await,
    ];
    let delivery = header(&attempts[0], "x-holdpoint-delivery").to_owned();
    for r in &attempts {
        verify(secret, r);
        assert_eq!(
            header(r, "x-holdpoint-delivery"),
            delivery,
            "retries keep the delivery id"
        );
        let event: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(event["hold"], hold.as_str());
    }
    let id = created["webhook"]["id"].as_str().unwrap();
    let recorded = wait_for(&t, id, |d| {
        d.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(recorded[0]["attempts"], 3);
    assert_eq!(recorded[0]["last_status"], 204);
}

#[tokio::test]
async fn a_receiver_that_never_answers_well_is_marked_failed() {
    let t = TestServer::with(super::ASK_ALL, |s| s.webhooks.attempts = 2).await;
    t.world("lab").await;
    let (url, mut rx, _task) = receiver(usize::MAX).await;
    let created = subscribe(&t, json!({"url": url, "events": ["hold.created"]})).await;
    let agent = t.caller("bot", "agent", None).await;
    raise(&agent, "lab", vec![question("Ship?", &["yes"])]).await;
    next(&mut rx).await;
    next(&mut rx).await;
    let id = created["webhook"]["id"].as_str().unwrap();
    let recorded = wait_for(&t, id, |d| {
        d.first().is_some_and(|d| d["status"] == "failed")
    })
    .await;
    assert_eq!(recorded[0]["attempts"], 2);
    assert!(
        recorded[0]["last_error"].as_str().unwrap().contains("500"),
        "{recorded}"
    );
}

#[tokio::test]
async fn finished_deliveries_are_forgotten_after_their_retention_and_pending_ones_kept() {
    const HOUR: Duration = Duration::from_secs(3600);
    let t = TestServer::with(super::ASK_ALL, |s| s.webhooks.backoff = HOUR).await;
    t.world("lab").await;
    let (good_url, mut good_rx, _good) = receiver(0).await;
    let (bad_url, mut bad_rx, _bad) = receiver(usize::MAX).await;
    let good = subscribe(&t, json!({"url": good_url, "events": ["hold.created"]})).await;
    let bad = subscribe(&t, json!({"url": bad_url, "events": ["hold.created"]})).await;
    let (good, bad) = (
        good["webhook"]["id"].as_str().unwrap(),
        bad["webhook"]["id"].as_str().unwrap(),
    );
    let agent = t.caller("bot", "agent", None).await;
    raise(&agent, "lab", vec![question("Ship?", &["yes"])]).await;
    next(&mut good_rx).await;
    next(&mut bad_rx).await;
    wait_for(&t, good, |d| {
        d.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    // The failed first attempt is recorded; the next one is an hour away.
    wait_for(&t, bad, |d| d.first().is_some_and(|d| d["attempts"] == 1)).await;

    let app = t.server.app();
    let keep = app.config().webhooks.keep_deliveries;
    let housekeeping = app.housekeeping();
    let swept = housekeeping.sweep(app.now().saturating_add(keep - HOUR));
    assert_eq!(swept.await.unwrap().deliveries, 0);
    let swept = housekeeping.sweep(app.now().saturating_add(keep + HOUR));
    assert_eq!(swept.await.unwrap().deliveries, 1);
    let listed = |id: &str| format!("/api/v1/webhooks/{id}/deliveries");
    assert_eq!(
        t.api.get(&listed(good)).await.expect(200),
        json!({"items": []})
    );
    let pending = t.api.get(&listed(bad)).await.expect(200);
    assert_eq!(pending["items"][0]["status"], "pending", "{pending}");
}

#[tokio::test]
async fn subscriptions_are_checked_and_admin_only() {
    let t = TestServer::start().await;
    t.world("lab").await;
    for (body, field) in [
        (json!({"url": "not a url"}), "url:"),
        (json!({"url": "file:///etc/passwd"}), "url:"),
        (
            json!({"url": "http://127.0.0.1:9/x", "events": []}),
            "events:",
        ),
        (
            json!({"url": "http://127.0.0.1:9/x", "events": ["hold.created", "hold.exploded"]}),
            "events[1]:",
        ),
        (json!({"events": ["hold.created"]}), "url: is required"),
    ] {
        let (_, message) = t
            .api
            .post("/api/v1/worlds/lab/webhooks", body.clone())
            .await
            .error(422);
        assert!(message.contains(field), "{body}: {message}");
    }
    let alice = t.caller("alice", "approver", None).await;
    alice
        .post(
            "/api/v1/worlds/lab/webhooks",
            json!({"url": "http://127.0.0.1:9/x"}),
        )
        .await
        .error(403);
    let created = t
        .api
        .post(
            "/api/v1/worlds/lab/webhooks",
            json!({"url": "http://127.0.0.1:9/x"}),
        )
        .await
        .expect(201);
    let id = created["webhook"]["id"].as_str().unwrap();
    alice
        .delete(&format!("/api/v1/webhooks/{id}"))
        .await
        .error(403);
    t.api
        .delete(&format!("/api/v1/webhooks/{id}"))
        .await
        .expect(204);
    t.api
        .get(&format!("/api/v1/webhooks/{id}/deliveries"))
        .await
        .error(404);
}

#[tokio::test]
async fn subscribing_and_unsubscribing_are_logged_with_who_did_it_never_the_secret() {
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let carol = t.caller("carol", "admin", None).await;
    let from = last_seq(&t).await;
    let created = carol
        .post(
            "/api/v1/worlds/lab/webhooks",
            json!({"url": "http://127.0.0.1:9/x", "events": ["hold.created", "hold.withdrawn"]}),
        )
        .await
        .expect(201);
    let webhook = created["webhook"].clone();
    let secret = created["secret"].as_str().unwrap();
    carol
        .delete(&format!(
            "/api/v1/webhooks/{}",
            webhook["id"].as_str().unwrap()
        ))
        .await
        .expect(204);

    let events = audit_after(&t, from).await;
    let logged: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["payload"]["type"].as_str().unwrap(),
                e["world"].clone(),
                e["actor"].clone(),
                e["payload"]["webhook"].clone(),
            )
        })
        .collect();
    let carol_actor = json!({"source": "person", "name": "carol", "role": "admin"});
    assert_eq!(
        logged,
        [
            (
                "webhook.created",
                world["id"].clone(),
                carol_actor.clone(),
                webhook.clone()
            ),
            ("webhook.deleted", world["id"].clone(), carol_actor, webhook),
        ]
    );
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains(secret), "the secret is in the log: {text}");

    // A subscription's URL can itself be a secret: only admins, who may list webhooks, see
    // these events.
    let alice = t.caller("alice", "approver", None).await;
    let seen = alice
        .get(&format!("/api/v1/audit/events?after={from}&limit=1000"))
        .await
        .expect(200);
    let types: Vec<&str> = seen["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["type"].as_str().unwrap())
        .filter(|t| t.starts_with("webhook."))
        .collect();
    assert_eq!(types, Vec::<&str>::new(), "an approver sees webhook events");
}

#[tokio::test]
async fn every_subscription_of_a_world_is_listed_however_many_there_are() {
    use holdpoint_core::record::put;
    use holdpoint_core::store::RecordKind;
    let t = TestServer::start().await;
    let world = t.world("lab").await;
    let first = t
        .api
        .post(
            "/api/v1/worlds/lab/webhooks",
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await
        .expect(201);
    let world_id: uuid::Uuid = world["id"].as_str().unwrap().parse().unwrap();
    // More than the one page of 1,000 the listing (and the deliveries) used to read, stored
    // in one transaction as subscriptions are stored.
    const MORE: usize = 1_000;
    let writes = (0..MORE)
        .map(|_| {
            let id = uuid::Uuid::now_v7();
            let mut webhook = first["webhook"].clone();
            webhook["id"] = json!(id);
            put(
                RecordKind::Webhook,
                id,
                Some(world_id),
                None,
                1,
                &json!({"webhook": webhook, "secret": "whsec_x"}),
            )
            .unwrap()
        })
        .collect();
    t.server
        .app()
        .records()
        .commit(writes, vec![])
        .await
        .unwrap();
    let listed = t.api.get("/api/v1/worlds/lab/webhooks").await.expect(200);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), MORE + 1);
    assert_eq!(listed[0], first["webhook"]);
}

/// The hold id a delivery is about.
fn about(r: &Received) -> String {
    let event: Value = serde_json::from_slice(&r.body).unwrap();
    event["hold"].as_str().unwrap().to_owned()
}

/// The sender matches each event against the subscriptions made before it, which it keeps
/// from the log: one made while it runs gets the events after it, one deleted gets none.
#[tokio::test]
async fn a_subscription_gets_the_events_after_it_was_made_and_none_after_it_was_deleted() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let ask = || raise(&agent, "lab", vec![question("Ship?", &["yes", "no"])]);
    let only_created = json!({"events": ["hold.created"]});

    let (first_url, mut first, _a) = receiver(0).await;
    let first_hook = subscribe(&t, json!({"url": first_url, "events": ["hold.created"]})).await;
    let one = held(&ask().await, 0);
    assert_eq!(about(&next(&mut first).await), one);

    let (second_url, mut second, _b) = receiver(0).await;
    let mut body = only_created.clone();
    body["url"] = json!(second_url);
    subscribe(&t, body).await;
    let two = held(&ask().await, 0);
    assert_eq!(about(&next(&mut first).await), two);
    assert_eq!(about(&next(&mut second).await), two);

    let id = first_hook["webhook"]["id"].as_str().unwrap();
    t.api
        .delete(&format!("/api/v1/webhooks/{id}"))
        .await
        .expect(204);
    let three = held(&ask().await, 0);
    assert_eq!(about(&next(&mut second).await), three);
    // The deleted subscription's receiver got nothing after hold two.
    assert!(
        first.try_recv().is_err(),
        "a deleted subscription was sent an event"
    );
}
