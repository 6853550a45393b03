//! A world's agent as an A2A agent, over raw JSON-RPC: a turn that stops at a hold is an
//! input-required task carrying it; an agent's reply decides nothing; a person's decides.
//! (The official SDKs' clients are tried in `crates/server/tests/a2a/`.)

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Api, TestServer, lab_chat};

async fn rpc(api: &Api, method: &str, params: Value) -> Value {
    let reply = api
        .send(
            api.request(reqwest::Method::POST, "/a2a/lab/helper")
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["id"], 7);
    reply.body
}

fn message(text: Option<&str>, data: Option<Value>, task: Option<&Value>) -> Value {
    let mut parts = Vec::new();
    if let Some(t) = text {
        parts.push(json!({"text": t}));
    }
    if let Some(d) = data {
        parts.push(json!({"data": d}));
    }
    let mut m =
        json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": parts});
    if let Some(task) = task {
        m["taskId"] = task["id"].clone();
        m["contextId"] = task["contextId"].clone();
    }
    json!({"message": m})
}

#[tokio::test]
async fn a_held_call_is_input_required_an_agent_cannot_approve_it_and_a_person_can() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo shipped"}),
        )]),
        Step::text("Shipped."),
    ])
    .await;
    let t = TestServer::start().await;
    lab_chat(&t, &llm.base_url(), None).await;
    let alice = t.caller("alice", "approver", None).await;
    let bot = t.caller("bot", "agent", None).await;

    let card = alice
        .get("/a2a/lab/helper/.well-known/agent-card.json")
        .await
        .expect(200);
    assert_eq!(card["name"], "helper");
    assert!(
        card["supportedInterfaces"][0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/a2a/lab/helper")
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert!(
        card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "shell_cmd")
    );

    let sent = rpc(&bot, "SendMessage", message(Some("Ship it"), None, None)).await;
    let task = sent["result"]["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    let parts = task["status"]["message"]["parts"].as_array().unwrap();
    let adk = parts
        .iter()
        .find(|p| p["data"]["name"] == "adk_request_confirmation")
        .unwrap();
    assert_eq!(
        adk["data"]["args"]["originalFunctionCall"]["args"]["command"],
        "echo shipped"
    );
    let ours = parts
        .iter()
        .find_map(|p| p["data"].get("holdpoint"))
        .unwrap();
    let hold = ours["holds"][0]["id"].as_str().unwrap().to_owned();

    // The agent that asked may not approve its own call: refused, and the hold waits.
    let refused = rpc(
        &bot,
        "SendMessage",
        message(None, Some(json!({"decision_type": "approve"})), Some(&task)),
    )
    .await;
    assert_eq!(
        refused["error"]["data"][0]["metadata"]["reason"], "agents_never_decide",
        "{refused}"
    );
    let still = alice
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(still["hold"]["status"], "pending");

    // Another agent's token does not even see the task.
    let other = t.caller("other", "agent", None).await;
    let unknown = rpc(&other, "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(unknown["error"]["code"], -32001);

    // A reply naming no decision, or a wrong one, is refused by field.
    let vague = rpc(
        &alice,
        "SendMessage",
        message(Some("hmm?"), None, Some(&task)),
    )
    .await;
    assert_eq!(vague["error"]["code"], -32602);
    let wrong = rpc(
        &alice,
        "SendMessage",
        message(None, Some(json!({"decision_type": "perhaps"})), Some(&task)),
    )
    .await;
    assert_eq!(
        wrong["error"]["data"][0]["metadata"]["field"],
        "message.parts[0].data.decision_type"
    );

    let done = rpc(
        &alice,
        "SendMessage",
        message(None, Some(json!({"decision_type": "approve"})), Some(&task)),
    )
    .await;
    let done = &done["result"]["task"];
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Shipped.");
    let decided = alice
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(decided["hold"]["outcome"]["decided_by"], json!(["alice"]));
    let via = decided["history"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["actor"]["via"].as_str());
    assert_eq!(
        via,
        Some("A2A"),
        "the decision is recorded as made over A2A"
    );

    let again = rpc(
        &alice,
        "SendMessage",
        message(None, Some(json!({"decision_type": "approve"})), Some(&task)),
    )
    .await;
    assert_eq!(again["error"]["code"], -32004);
    let got = rpc(&bot, "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn malformed_requests_get_json_rpc_errors_not_http_ones() {
    let llm = ScriptedLlm::start(vec![]).await;
    let t = TestServer::start().await;
    lab_chat(&t, &llm.base_url(), None).await;
    let alice = t.caller("alice", "approver", None).await;
    let raw = |body: &'static str| {
        let alice = alice.clone();
        async move {
            alice
                .send(
                    alice
                        .request(reqwest::Method::POST, "/a2a/lab/helper")
                        .header("content-type", "application/json")
                        .body(body),
                )
                .await
        }
    };
    assert_eq!(raw("{").await.body["error"]["code"], -32700);
    assert_eq!(
        raw(r#"{"jsonrpc":"2.0","id":1,"method":"Launch","params":{}}"#)
            .await
            .body["error"]["code"],
        -32601
    );
    assert_eq!(
        raw(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}"#)
            .await
            .body["error"]["code"],
        -32001
    );
    let bad = raw(r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[]}}}"#).await;
    assert_eq!(bad.body["error"]["code"], -32602, "{}", bad.text);
    alice
        .get("/a2a/lab/nobody/.well-known/agent-card.json")
        .await
        .error(404);
}
