//! Holds whose raiser stopped waiting: a hold that its raiser waited on to its end
//! (`attend=true`, as the MCP gateway and `holdpoint ask` do) and then goes without a waiter
//! for `server.waiter_grace` is withdrawn, saying why, so that nobody approves a call that can
//! no longer run — also when the server restarted meanwhile. A waiter that comes back in time
//! keeps it; a hold only polled now and then is left alone.

use std::time::Duration;

use serde_json::Value;

use super::{Api, TestServer, held, question, raise};

const GRACE: Duration = Duration::from_secs(1);

async fn started(dir: tempfile::TempDir) -> TestServer {
    TestServer::on(dir, super::ASK_ALL, |s| s.server.waiter_grace = GRACE).await
}

/// A long poll on `hold` (attending it, or not) that the client gives up after `after`, as a
/// killed program would.
async fn wait_then_vanish(agent: &Api, hold: &str, attend: bool, after: Duration) {
    let path = format!("/api/v1/holds/{hold}/wait?timeout=1m&attend={attend}");
    let request = agent.get(&path);
    assert!(
        tokio::time::timeout(after, request).await.is_err(),
        "the long poll ended by itself"
    );
}

/// Waits on the live stream for `hold` to be resolved; the hold.
async fn resolved(t: &TestServer, hold: &str) -> Value {
    let mut events = t.api.events("", None).await;
    let shown = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    if shown["hold"]["outcome"].is_object() {
        return shown["hold"].clone();
    }
    loop {
        let m = events.next().await;
        if m.data["hold"] == hold && m.event.starts_with("hold.") && m.event != "hold.created" {
            return t
                .api
                .get(&format!("/api/v1/holds/{hold}"))
                .await
                .expect(200)["hold"]
                .clone();
        }
    }
}

#[tokio::test]
async fn a_hold_whose_waiter_vanished_is_withdrawn_after_the_grace_and_others_are_not() {
    let t = started(tempfile::tempdir().unwrap()).await;
    t.world("lab").await;
    let agent = t.caller("gateway", "agent", None).await;
    let raise_one = |text: &'static str| {
        let agent = agent.clone();
        async move {
            held(
                &raise(&agent, "lab", vec![question(text, &["yes"])]).await,
                0,
            )
        }
    };
    let abandoned = raise_one("Abandoned?").await;
    let kept = raise_one("Kept?").await;
    // Plain long polls (a program that polls several holds in turn) never leave a hold.
    let polled = raise_one("Polled now and then?").await;

    wait_then_vanish(&agent, &abandoned, true, Duration::from_millis(200)).await;
    wait_then_vanish(&agent, &kept, true, Duration::from_millis(200)).await;
    wait_then_vanish(&agent, &polled, false, Duration::from_millis(200)).await;
    // Its waiter comes back and stays.
    let back = {
        let agent = agent.clone();
        let kept = kept.clone();
        tokio::spawn(async move {
            agent
                .get(&format!("/api/v1/holds/{kept}/wait?timeout=1m&attend=true"))
                .await
        })
    };

    let withdrawn = resolved(&t, &abandoned).await;
    assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
    let outcome = &withdrawn["outcome"];
    assert_eq!(outcome["source"], "system", "{outcome}");
    let reason = outcome["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("nobody waited on it for 1s") && reason.contains("stopped waiting"),
        "{reason}"
    );

    // Two graces later the others are still pending.
    tokio::time::sleep(GRACE * 2).await;
    for id in [&kept, &polled] {
        let shown = t.api.get(&format!("/api/v1/holds/{id}")).await.expect(200);
        assert_eq!(shown["hold"]["status"], "pending", "{shown}");
    }
    super::answer(&t.api, &kept, "yes").await.expect(200);
    let waited = back.await.unwrap().expect(200);
    assert_eq!(waited["decided"], true);
}

#[tokio::test]
async fn after_a_restart_a_hold_is_withdrawn_unless_its_waiter_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let t = started(dir).await;
    t.world("lab").await;
    let token = t.token("gateway", "agent", None).await;
    let agent = t.api.as_token(&token);
    let gone = held(
        &raise(&agent, "lab", vec![question("Gone?", &["yes"])]).await,
        0,
    );
    let back = held(
        &raise(&agent, "lab", vec![question("Back?", &["yes"])]).await,
        0,
    );
    // Both are waited on when the server stops.
    let waits: Vec<_> = [&gone, &back]
        .into_iter()
        .map(|id| {
            let agent = agent.clone();
            let id = id.clone();
            tokio::spawn(async move {
                agent
                    .get(&format!("/api/v1/holds/{id}/wait?timeout=1m&attend=true"))
                    .await
            })
        })
        .collect();
    let admin = &t.api;
    holdpoint_test_support::eventually(|| async move {
        let text = admin.get("/metrics").await.text;
        match text
            .contains("holdpoint_http_requests_in_flight{route=\"/api/v1/holds/{hold}/wait\"} 2")
        {
            true => Ok(()),
            false => Err("the two long polls are not under way".to_owned()),
        }
    })
    .await;
    let TestServer {
        server,
        api,
        _dir: dir,
    } = t;
    server.stop().await.unwrap();
    for wait in waits {
        assert_eq!(wait.await.unwrap().expect(200)["decided"], false);
    }

    drop(api);
    let t = started(dir).await;
    let agent = Api::new(&t.server.url(), Some(&token));
    // One waiter comes back; the other never does.
    let returned = {
        let agent = agent.clone();
        let back = back.clone();
        tokio::spawn(async move {
            agent
                .get(&format!("/api/v1/holds/{back}/wait?timeout=1m&attend=true"))
                .await
        })
    };
    let withdrawn = resolved(&t, &gone).await;
    assert_eq!(withdrawn["status"], "canceled", "{withdrawn}");
    tokio::time::sleep(GRACE * 2).await;
    let shown = t
        .api
        .get(&format!("/api/v1/holds/{back}"))
        .await
        .expect(200);
    assert_eq!(shown["hold"]["status"], "pending", "{shown}");
    super::answer(&t.api, &back, "yes").await.expect(200);
    assert_eq!(returned.await.unwrap().expect(200)["decided"], true);
}
