//! Agents calling agents, in a browser: a sub-agent's hold shown in the caller's chat and in
//! the inbox with the agents it came through, and withdrawn when a person cancels the caller's
//! turn from its chat; a remote agent's text shown in its call's card as it streams, also
//! when the text comes before the card.

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::Browser;
use crate::suite::{Api, TestServer, lab_chat};

/// The next open hold of world `lab` other than `seen`, read until it is there.
async fn next_hold(api: &Api, seen: &[String]) -> Value {
    let mut stream = api.events("?world=lab", None).await;
    loop {
        let open = api.get("/api/v1/holds?world=lab").await.expect(200);
        if let Some(hold) = open["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| !seen.contains(&h["id"].as_str().unwrap().to_owned()))
        {
            return hold.clone();
        }
        stream.next_of("hold.created").await;
    }
}

#[tokio::test]
async fn a_sub_agents_hold_shows_in_the_callers_chat_and_the_inbox_and_goes_with_the_caller() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "p1",
            "a2a__research",
            json!({"message": "what is on the host?"}),
        )]),
        Step::calls(vec![call("s1", "shell_cmd", json!({"command": "ls /"}))]),
    ])
    .await;
    let t = TestServer::start().await;
    let chat = lab_chat(&t, &llm.base_url(), Some("Inventory")).await;
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            json!({"name": "researcher", "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
        )
        .await
        .expect(201);
    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"research": {"agent": "researcher"}}}),
        )
        .await
        .expect(200);
    let alice = t.caller("alice", "approver", None).await;
    alice
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "What is on the host?"}),
        )
        .await
        .expect(202);

    // The helper's call of its sub-agent asks first (every call asks in this world).
    let call_hold = next_hold(&alice, &[]).await;
    assert_eq!(call_hold["spec"]["tool"], "a2a__research");
    assert_eq!(
        call_hold["spec"]["description"],
        "A message to \"researcher\", an agent of this world (as \"research\")"
    );
    let call_id = call_hold["id"].as_str().unwrap().to_owned();
    alice
        .post(
            &format!("/api/v1/holds/{call_id}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    // Then the researcher's own call, raised in the helper's chat, through both agents.
    let hold = next_hold(&alice, &[call_id]).await;
    assert_eq!(hold["spec"]["tool"], "shell_cmd");
    assert_eq!(hold["chat"], chat.as_str());
    let names: Vec<&str> = hold["lineage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["helper", "researcher"]);
    let id = hold["id"].as_str().unwrap();

    let token = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "nested", &token).await;
    // The inbox names who asks through whom.
    b.wait_text(
        &format!("li.row[data-hold='{id}'] .who"),
        "helper → researcher",
    )
    .await;
    // The helper's chat shows the hold, naming the agents with links to their chats.
    b.goto(&format!("/worlds/lab/chats/{chat}")).await;
    let card = format!(".chat-holds article.card.hold[data-hold='{id}'][data-status='pending']");
    b.wait_text(&format!("{card} .lineage"), "helper → researcher")
        .await;
    // Asked by the sub-agent, named, though the page is the helper's chat.
    b.wait_text(&format!("{card} .meta"), "asked by agent researcher")
        .await;
    let sub_chat = hold["lineage"][1]["chat"].as_str().unwrap();
    b.wait_for(&format!("{card} .lineage a[href$='/chats/{sub_chat}']"))
        .await;

    // Canceling the helper's turn withdraws the researcher's hold.
    b.click(".cancel-turn").await;
    b.wait_text(".turn-end", "canceled").await;
    let withdrawn = t.api.get(&format!("/api/v1/holds/{id}")).await.expect(200);
    assert_eq!(withdrawn["hold"]["status"], "canceled", "{withdrawn}");
    b.wait_gone(&card).await;
    b.close().await;
}

#[tokio::test]
async fn a_remote_agents_text_shows_in_its_calls_card_as_it_streams() {
    remote_text_shows(Reads::AsTheyCome).await;
}

/// The text can overtake the read that shows the call's card (a loaded machine, a slow
/// network): the page keeps it for the card.
#[tokio::test]
async fn a_remote_agents_text_that_comes_before_its_calls_card_is_shown_with_the_card() {
    remote_text_shows(Reads::Late).await;
}

enum Reads {
    AsTheyCome,
    /// Every request of the page answered a second and a half late.
    Late,
}

async fn remote_text_shows(reads: Reads) {
    use crate::suite::remote_agents::{Fake, Mode, lab_with, say};
    let agent = Fake::start(Mode::Stream).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__writer", json!({"message": "write"}))]),
        Step::text("Written."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"writer": {"url": agent.url}}), &llm).await;
    let token = t.token("alice", "approver", None).await;
    let name = match reads {
        Reads::AsTheyCome => "remote-stream",
        Reads::Late => "remote-stream-late",
    };
    let b = Browser::signed_in(&t, name, &token).await;
    b.goto(&format!("/worlds/lab/chats/{chat}")).await;
    b.wait_for("#message").await;
    if let Reads::Late = reads {
        b.eval(
            "const fetchNow = window.fetch; \
             window.fetch = (...args) => \
               new Promise((wait) => setTimeout(wait, 1500)).then(() => fetchNow(...args)); \
             return true",
        )
        .await;
    }
    say(&t, &chat, "Write").await;
    // The remote agent said its first piece and waits: the call runs, its text is shown.
    let call = ".call[data-call='c1'][data-status='running']";
    b.wait_text(&format!("{call} .call-stream"), "first piece")
        .await;
    agent.release.notify_one();
    // Once the result is final it shows whole, and the streamed text gives way to it.
    b.wait_for(".call[data-call='c1'][data-status='executed']")
        .await;
    b.wait_text(
        ".call[data-call='c1'] .call-detail",
        "first piece and the rest",
    )
    .await;
    b.check(
        b.eval("return document.querySelector(\".call[data-call='c1'] .call-stream\").hidden")
            .await
            == Value::Bool(true),
        "the streamed text gives way to the result",
    )
    .await;
    b.close().await;
}
