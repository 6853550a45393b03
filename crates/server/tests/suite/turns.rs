//! Chats over HTTP: a message starts a turn, its holds are decided through the API, and a
//! chat with a pending hold refuses new messages.

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Api, TestServer, audit_after, lab_chat, last_seq};

async fn send(api: &Api, chat: &str, text: &str) -> holdpoint_test_support::http::Reply {
    api.post(
        &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
        json!({"text": text}),
    )
    .await
}

#[tokio::test]
async fn a_turn_stops_at_a_hold_refuses_messages_and_resumes_when_approved() {
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
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let alice = t.caller("alice", "approver", None).await;
    let mut stream = alice.events(&format!("?world=lab&chat={chat}"), None).await;

    let started = send(&alice, &chat, "Ship it").await.expect(202);
    let turn = started["turn"].as_str().unwrap().to_owned();
    let created = stream.next_of("hold.created").await;
    let hold = created.data["payload"]["hold"].clone();
    assert_eq!(
        hold["spec"]["arguments"],
        json!({"command": "echo shipped"})
    );

    let (code, message) = send(&alice, &chat, "Are you there?").await.error(409);
    assert_eq!(code, "chat_locked", "{message}");

    alice
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    let finished = stream.next_of("turn.finished").await;
    assert_eq!(finished.data["payload"]["turn"], turn.as_str());
    let stored = alice
        .get(&format!("/api/v1/worlds/lab/turns/{turn}"))
        .await
        .expect(200);
    assert_eq!(stored["status"], "finished");

    let messages = alice
        .get(&format!("/api/v1/worlds/lab/chats/{chat}/messages"))
        .await
        .expect(200);
    let texts: Vec<Value> = messages["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("user"),
            json!("assistant"),
            json!("tool"),
            json!("assistant")
        ]
    );
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert!(result.to_string().contains("shipped"), "{result}");
    // The chat takes messages again.
    llm.push(Step::text("Hello."));
    send(&alice, &chat, "Thanks").await.expect(202);
}

#[tokio::test]
async fn a_turn_can_be_canceled_through_the_api() {
    let llm = ScriptedLlm::start(vec![Step::calls(vec![call(
        "c1",
        "shell_cmd",
        json!({"command": "sleep 1"}),
    )])])
    .await;
    let t = TestServer::start().await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let mut stream = t.api.events("?world=lab", None).await;
    let turn = send(&t.api, &chat, "go").await.expect(202)["turn"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = stream.next_of("hold.created").await;
    let canceled = t
        .api
        .post(
            &format!("/api/v1/worlds/lab/turns/{turn}/cancel"),
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(canceled["status"], "canceled");
    let hold = created.data["hold"].as_str().unwrap();
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(detail["hold"]["status"], "canceled");
    t.api
        .post(
            &format!("/api/v1/worlds/lab/turns/{turn}/cancel"),
            json!({}),
        )
        .await
        .error(409);
}

/// The actors of the events of type `kind` among `events`, in log order.
fn actors(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["payload"]["type"] == kind)
        .map(|e| e["actor"].clone())
        .collect()
}

#[tokio::test]
async fn who_sent_a_message_and_who_canceled_its_turn_are_logged() {
    let llm = ScriptedLlm::start(vec![Step::calls(vec![call(
        "c1",
        "shell_cmd",
        json!({"command": "true"}),
    )])])
    .await;
    let t = TestServer::start().await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    // Chats are people's: an agent's token may not send to one.
    let bot = t.caller("bot", "agent", Some("lab")).await;
    send(&bot, &chat, "go").await.error(403);
    let bob = t.caller("bob", "approver", Some("lab")).await;
    let alice = t.caller("alice", "approver", None).await;
    let mut stream = t.api.events("?world=lab", None).await;
    let from = last_seq(&t).await;
    let turn = send(&bob, &chat, "go").await.expect(202)["turn"]
        .as_str()
        .unwrap()
        .to_owned();
    let hold = stream.next_of("hold.created").await.data["hold"]
        .as_str()
        .unwrap()
        .to_owned();
    alice
        .post(
            &format!("/api/v1/worlds/lab/turns/{turn}/cancel"),
            json!({}),
        )
        .await
        .expect(200);

    let events = audit_after(&t, from).await;
    let bob_actor = json!({"source": "person", "name": "bob", "role": "approver"});
    let system = json!({"source": "system"});
    // The user's message is the sender's; the agent's answer and the tool result recorded
    // as the turn ends are Holdpoint's.
    let messages = actors(&events, "message.created");
    assert_eq!(messages[0], bob_actor);
    assert!(
        messages.len() > 1 && messages[1..].iter().all(|a| *a == system),
        "{messages:?}"
    );
    assert_eq!(actors(&events, "turn.started"), [bob_actor]);
    assert_eq!(actors(&events, "turn.tool_call"), [system]);
    let canceler = [json!({"source": "person", "name": "alice", "role": "approver"})];
    assert_eq!(actors(&events, "hold.withdrawn"), canceler);
    assert_eq!(actors(&events, "turn.canceled"), canceler);
    let outcome = &t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200)["hold"]["outcome"];
    assert_eq!(
        (&outcome["source"], &outcome["decided_by"]),
        (&json!("person"), &json!(["alice"]))
    );
}

#[tokio::test]
async fn an_agent_without_a_reachable_llm_fails_with_what_to_configure() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = TestServer::with(super::ASK_ALL, |s| s.llm.retries = 0).await;
    let chat = lab_chat(&t, &format!("http://127.0.0.1:{port}/v1"), None).await;
    let mut stream = t.api.events("?world=lab", None).await;
    let turn = send(&t.api, &chat, "hello?").await.expect(202)["turn"]
        .as_str()
        .unwrap()
        .to_owned();
    let failed = stream.next_of("turn.failed").await;
    let error = failed.data["payload"]["error"].as_str().unwrap();
    assert!(
        error.contains("cannot reach the LLM") && error.contains("base URL"),
        "{error}"
    );
    // Nobody ended the turn: the log says Holdpoint did.
    assert_eq!(failed.data["actor"], json!({"source": "system"}));
    let stored = t
        .api
        .get(&format!("/api/v1/worlds/lab/turns/{turn}"))
        .await
        .expect(200);
    assert_eq!(stored["status"], "failed");
}

#[tokio::test]
async fn a_refused_api_key_is_reported_in_the_chat() {
    let llm = ScriptedLlm::start(vec![Step::Status(401, "invalid key".into())]).await;
    let t = TestServer::start().await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let mut stream = t.api.events("?world=lab", None).await;
    send(&t.api, &chat, "hello?").await.expect(202);
    let failed = stream.next_of("turn.failed").await;
    let error = failed.data["payload"]["error"].as_str().unwrap();
    assert!(
        error.contains("refused the API key") && error.contains("api_key_env"),
        "{error}"
    );
}
