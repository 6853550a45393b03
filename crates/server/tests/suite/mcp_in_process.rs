//! The engine in this process as an MCP gateway's agent (`mcp_in_process`: what
//! `holdpoint mcp` asks through when it runs Holdpoint itself): it raises as the holder of
//! the token, which must be one that may raise through the API, and is checked at each call.

use holdpoint_mcp::HoldpointError;
use holdpoint_protocol::{GateResult, NewHolds};
use holdpoint_server::mcp_in_process;
use serde_json::json;

use super::{TestServer, approval, audit_after, last_seq};

const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "echo is fine"
tools = ["echo"]
action = "allow"
"#;

fn echo() -> NewHolds {
    serde_json::from_value(json!({"items": [approval("echo", json!({"text": "hi"}))]})).unwrap()
}

#[tokio::test]
async fn an_agents_token_raises_as_that_agent_until_it_is_revoked() {
    let t = TestServer::with(POLICY, |_| {}).await;
    t.world("lab").await;
    let created = t
        .api
        .post(
            "/api/v1/tokens",
            json!({"name": "coder", "role": "agent", "world": "lab"}),
        )
        .await
        .expect(201);
    let token = created["token"].as_str().unwrap();
    let id = created["info"]["id"].as_str().unwrap();
    let holdpoint = mcp_in_process(t.server.app(), token).await.unwrap();
    let from = last_seq(&t).await;

    let answer = holdpoint.raise("lab", echo(), "first").await.unwrap();
    assert!(
        matches!(answer.results[..], [GateResult::Allowed { .. }]),
        "{answer:?}"
    );
    let events = audit_after(&t, from).await;
    let recorded: Vec<_> = events
        .iter()
        .map(|e| (e["payload"]["type"].clone(), e["payload"]["tool"].clone()))
        .collect();
    assert_eq!(recorded, [(json!("call.allowed"), json!("echo"))]);
    // What is asked is asked as the token's agent.
    let write: NewHolds =
        serde_json::from_value(json!({"items": [approval("write", json!({}))]})).unwrap();
    let answer = holdpoint.raise("lab", write, "asked").await.unwrap();
    match &answer.results[..] {
        [GateResult::Held { hold }] => assert_eq!(hold.requested_by, "coder"),
        other => panic!("not held: {other:?}"),
    }

    t.api
        .delete(&format!("/api/v1/tokens/{id}"))
        .await
        .expect(204);
    let from = last_seq(&t).await;
    match holdpoint.raise("lab", echo(), "second").await {
        Err(HoldpointError::Failed { message, .. }) => {
            assert!(message.contains("revoked"), "{message}")
        }
        other => panic!("a revoked token raised: {other:?}"),
    }
    assert_eq!(audit_after(&t, from).await, Vec::<serde_json::Value>::new());
}

#[tokio::test]
async fn only_a_token_that_may_raise_through_the_api_is_taken() {
    let t = TestServer::with(POLICY, |_| {}).await;
    let approver = t.token("alice", "approver", None).await;
    let refused = mcp_in_process(t.server.app(), &approver)
        .await
        .err()
        .unwrap();
    assert_eq!(refused.code, "forbidden", "{}", refused.message);
    let unknown = mcp_in_process(t.server.app(), "hp_nonsense")
        .await
        .err()
        .unwrap();
    assert_eq!(unknown.code, "unauthorized", "{}", unknown.message);
}
