//! `Holdpoint-Via`: the client a person decides through, recorded on the decision's actor.

use reqwest::Method;
use serde_json::{Value, json};

use super::{TestServer, approval, held, raise};

/// A pending approval in world `lab`, and alice, an approver.
async fn pending(t: &TestServer) -> (String, super::Api) {
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let raised = raise(
        &agent,
        "lab",
        vec![approval("deploy", json!({"env": "prod"}))],
    )
    .await;
    (held(&raised, 0), t.caller("alice", "approver", None).await)
}

async fn decide_via(alice: &super::Api, hold: &str, via: &str) -> super::Reply {
    let request = alice
        .request(Method::POST, &format!("/api/v1/holds/{hold}/decision"))
        .header("Holdpoint-Via", via)
        .json(&json!({"action": "approve"}));
    alice.send(request).await
}

#[tokio::test]
async fn a_decision_records_the_client_it_was_made_through() {
    let t = TestServer::start().await;
    let (hold, alice) = pending(&t).await;
    decide_via(&alice, &hold, "MCP elicitation in editor 1.0")
        .await
        .expect(200);
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    let decided: Vec<&Value> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["type"] == "hold.decided")
        .collect();
    assert_eq!(
        decided[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver",
               "via": "MCP elicitation in editor 1.0"})
    );
    // The raising event names no client.
    assert_eq!(detail["history"][0]["actor"].get("via"), None);
}

#[tokio::test]
async fn a_via_that_is_empty_too_long_or_not_one_line_is_refused_naming_the_header() {
    let t = TestServer::start().await;
    let (hold, alice) = pending(&t).await;
    for bad in [" ", &"x".repeat(201), "two\tparts"] {
        let (code, message) = decide_via(&alice, &hold, bad).await.error(422);
        assert_eq!(code, "invalid_input");
        assert!(message.contains("Holdpoint-Via"), "{message}");
    }
    let still = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(still["hold"]["status"], "pending");
    decide_via(&alice, &hold, &"x".repeat(200))
        .await
        .expect(200);
}
