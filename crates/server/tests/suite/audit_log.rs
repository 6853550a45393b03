//! `GET /api/v1/audit/events`: the log oldest or newest first, by world, hold, type and actor,
//! a page saying where the next starts even when a filter leaves it short.

use serde_json::{Value, json};

use super::{Api, TestServer, approval, held, raise};

fn seqs(page: &Value) -> Vec<u64> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

/// Every event the filter `query` gives, newest first, following `next` to the start.
async fn all_newest(api: &Api, query: &str) -> (Vec<u64>, usize) {
    let mut out = Vec::new();
    let mut before = 0;
    let mut requests = 0;
    loop {
        let at = if before > 0 {
            format!("&before={before}")
        } else {
            String::new()
        };
        let page = api
            .get(&format!("/api/v1/audit/events?order=newest{query}{at}"))
            .await
            .expect(200);
        requests += 1;
        out.extend(seqs(&page));
        before = page["next"].as_u64().unwrap();
        if before == 0 {
            return (out, requests);
        }
    }
}

#[tokio::test]
async fn the_log_reads_newest_first_by_type_actor_and_hold_to_its_start() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("deploy", json!({"env": "staging"}))],
        )
        .await,
        0,
    );
    alice
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve", "scope": "always_args"}),
        )
        .await
        .expect(200);
    for i in 0..40 {
        t.world(&format!("w{i}")).await;
    }
    let head = t.api.get("/api/v1/audit/verify").await.expect(200)["head_seq"]
        .as_u64()
        .unwrap();

    // Newest first, a page at a time, each going on before the last.
    let page = t
        .api
        .get("/api/v1/audit/events?order=newest&limit=10")
        .await
        .expect(200);
    let first = seqs(&page);
    assert_eq!(first, ((head - 9)..=head).rev().collect::<Vec<_>>());
    let next = page["next"].as_u64().unwrap();
    assert_eq!(next, head - 9);
    let page = alice
        .get(&format!(
            "/api/v1/audit/events?order=newest&limit=10&before={next}"
        ))
        .await
        .expect(200);
    assert_eq!(seqs(&page)[0], head - 10);
    // (An approver is not shown token events: the admin reads all of it.)
    let (every, _) = all_newest(&t.api, "&limit=1000").await;
    assert_eq!(every, (1..=head).rev().collect::<Vec<_>>());

    // A type the store has no index for: short pages that say where to go on, to the start.
    let (granted, requests) = all_newest(&alice, "&limit=2&type=grant.created").await;
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert!(
        requests > 1,
        "a page read the whole log ({requests} requests)"
    );
    let page = alice
        .get(&format!(
            "/api/v1/audit/events?order=newest&before={}",
            granted[0] + 1
        ))
        .await
        .expect(200);
    assert_eq!(page["events"][0]["payload"]["type"], "grant.created");

    // By actor, and by hold (both ways round).
    let (by_bot, _) = all_newest(&alice, "&actor=bot").await;
    assert_eq!(by_bot.len(), 1, "{by_bot:?}");
    let (of_hold, _) = all_newest(&alice, &format!("&hold={hold}")).await;
    let oldest = alice
        .get(&format!("/api/v1/audit/events?hold={hold}"))
        .await
        .expect(200);
    let mut forward = seqs(&oldest);
    forward.reverse();
    assert_eq!(of_hold, forward);
    assert!(of_hold.len() >= 2, "{of_hold:?}");

    // Each position goes with its order.
    alice
        .get("/api/v1/audit/events?order=urgent")
        .await
        .error(400);
    alice.get("/api/v1/audit/events?before=5").await.error(400);
    alice
        .get("/api/v1/audit/events?order=newest&after=5")
        .await
        .error(400);
}
