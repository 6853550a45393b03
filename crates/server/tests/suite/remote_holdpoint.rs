//! One Holdpoint calling another's agent over A2A: the remote agent's held call comes in
//! Holdpoint's own shape, becomes a hold in the calling chat, and the person's decision there
//! goes back as Holdpoint's decision, bound to the digest shown, with the credential the
//! remote entry's headers carry. That credential must be allowed to decide (an approver's
//! token): an agent's token never decides, over A2A or anywhere.

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{TestServer, lab_chat};

/// The remote side: world `shop`, whose agent `clerk` wants to run a command, which its
/// policy holds for a person; and a token of the role given for the calling side.
async fn shop(llm: &ScriptedLlm, role: &str) -> (TestServer, String) {
    let b = TestServer::start().await;
    b.world("shop").await;
    b.api
        .post(
            "/api/v1/worlds/shop/agents",
            json!({"name": "clerk", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
        )
        .await
        .expect(201);
    let token = b.token("lab-caller", role, Some("shop")).await;
    (b, token)
}

fn clerk_steps() -> Vec<Step> {
    vec![
        Step::calls(vec![call(
            "s1",
            "shell_cmd",
            json!({"command": "echo shipped"}),
        )]),
        Step::text("Shipped."),
    ]
}

/// The calling side: world `lab`, whose agent calls the shop's clerk as `a2a__shop` with
/// `token` in its headers.
async fn lab(b: &TestServer, token: &str, llm: &ScriptedLlm) -> (TestServer, String) {
    let policy = "mode = \"manual\"\n[[rules]]\nname = \"the shop may be asked\"\ntools = [\"a2a__shop\"]\naction = \"allow\"\n";
    let a = TestServer::with(policy, |_| {}).await;
    let chat = lab_chat(&a, &llm.base_url(), None).await;
    let url = format!("{}/a2a/shop/clerk", b.server.url());
    a.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"shop": {"url": url, "headers": {"Authorization": format!("Bearer {token}")}}}}),
        )
        .await
        .expect(200);
    (a, chat)
}

fn lab_steps() -> Vec<Step> {
    vec![
        Step::calls(vec![call("c1", "a2a__shop", json!({"message": "Ship it"}))]),
        Step::text("Done."),
    ]
}

/// Sends a message in the lab's chat; waits for the shop's held call as a hold there.
async fn until_held(a: &TestServer, chat: &str) -> (holdpoint_test_support::http::Sse, Value) {
    let mut stream = a.api.events(&format!("?world=lab&chat={chat}"), None).await;
    a.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Ship it"}),
        )
        .await
        .expect(202);
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "a2a__shop/shell_cmd", "{hold}");
    assert_eq!(
        hold["spec"]["arguments"],
        json!({"command": "echo shipped"}),
        "{hold}"
    );
    (stream, hold)
}

/// The shop's one hold.
async fn shops_hold(b: &TestServer) -> Value {
    let all = b
        .api
        .get("/api/v1/holds?world=shop&status=any")
        .await
        .expect(200);
    let items = all["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{all}");
    items[0].clone()
}

#[tokio::test]
async fn a_remote_holdpoints_held_call_is_decided_in_the_calling_chat_and_goes_back_bound_to_its_digest()
 {
    let clerk = ScriptedLlm::start(clerk_steps()).await;
    let (b, token) = shop(&clerk, "approver").await;
    let helper = ScriptedLlm::start(lab_steps()).await;
    let (a, chat) = lab(&b, &token, &helper).await;
    let (mut stream, hold) = until_held(&a, &chat).await;
    assert_eq!(shops_hold(&b).await["status"], "pending");

    a.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let theirs = shops_hold(&b).await;
    assert_eq!(theirs["status"], "approved", "{theirs}");
    assert_eq!(
        theirs["outcome"]["decided_by"],
        json!(["lab-caller"]),
        "{theirs}"
    );
    assert_eq!(theirs["outcome"]["digest"], theirs["spec"]["digest"]);
    let ran = clerk.requests()[1].tool_result("s1").unwrap();
    assert!(ran.to_string().contains("shipped"), "{ran}");
    let result = helper.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["output"]["state"], "completed", "{result}");
    assert_eq!(result["output"]["text"], "Shipped.", "{result}");
}

#[tokio::test]
async fn a_denial_in_the_calling_chat_denies_the_remote_call_with_its_reason() {
    let clerk = ScriptedLlm::start(clerk_steps()).await;
    let (b, token) = shop(&clerk, "approver").await;
    let helper = ScriptedLlm::start(lab_steps()).await;
    let (a, chat) = lab(&b, &token, &helper).await;
    let (mut stream, hold) = until_held(&a, &chat).await;
    a.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "deny", "reason": "not before Monday"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let theirs = shops_hold(&b).await;
    assert_eq!(theirs["status"], "denied", "{theirs}");
    assert_eq!(theirs["outcome"]["reason"], "not before Monday", "{theirs}");
    let told = clerk.requests()[1].tool_result("s1").unwrap();
    assert!(told.to_string().contains("not before Monday"), "{told}");
}

#[tokio::test]
async fn an_agent_token_in_the_remote_entry_never_decides_the_remote_hold() {
    let clerk = ScriptedLlm::start(clerk_steps()).await;
    let (b, token) = shop(&clerk, "agent").await;
    let helper = ScriptedLlm::start(lab_steps()).await;
    let (a, chat) = lab(&b, &token, &helper).await;
    let (mut stream, hold) = until_held(&a, &chat).await;
    a.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let result = helper.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result.to_string().contains("agents never decide"),
        "{result}"
    );
    // Nothing ran there; the remote task was canceled, which withdrew its hold.
    assert_eq!(clerk.requests().len(), 1);
    let theirs = shops_hold(&b).await;
    assert_eq!(theirs["status"], "canceled", "{theirs}");
}

#[tokio::test]
async fn a_remote_holdpoints_question_is_a_question_in_the_calling_chat_and_its_answer_goes_back() {
    let clerk = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "s1",
            "ask_human",
            json!({"question": "Which shipping?", "options": [{"id": "fast", "label": "Fast"}, {"id": "slow", "label": "Slow"}]}),
        )]),
        Step::text("Fast it is."),
    ])
    .await;
    let (b, token) = shop(&clerk, "approver").await;
    let helper = ScriptedLlm::start(lab_steps()).await;
    let (a, chat) = lab(&b, &token, &helper).await;
    let mut stream = a.api.events(&format!("?world=lab&chat={chat}"), None).await;
    a.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Ship it"}),
        )
        .await
        .expect(202);
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["kind"], "question", "{hold}");
    assert_eq!(
        hold["spec"]["question"],
        "The remote A2A agent \"shop\" asks: Which shipping?"
    );
    assert_eq!(hold["spec"]["options"][0]["id"], "fast", "{hold}");
    a.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "answer", "options": ["fast"]}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let theirs = shops_hold(&b).await;
    assert_eq!(theirs["status"], "answered", "{theirs}");
    assert_eq!(theirs["outcome"]["options"][0]["id"], "fast", "{theirs}");
    assert_eq!(theirs["outcome"]["decided_by"], json!(["lab-caller"]));
    let result = helper.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["output"]["text"], "Fast it is.", "{result}");
}
