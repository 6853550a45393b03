//! The hold page: one hold's card and history, kept current when someone else or the clock
//! decides it, and a click that loses the race showing the decision recorded.

use std::time::{Duration, Instant};

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::json;

use super::{Browser, PHONE};
use crate::suite::{Api, TestServer, approval, held, lab_chat, question, raise};

fn card(id: &str) -> String {
    format!("article.hold[data-hold='{id}']")
}

async fn lab(t: &TestServer) -> Api {
    t.world("lab").await;
    t.caller("deploy-bot", "agent", None).await
}

async fn raise_one(agent: &Api, command: &str) -> String {
    held(
        &raise(
            agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": command}))],
        )
        .await,
        0,
    )
}

#[tokio::test]
async fn a_hold_open_in_two_browsers_is_decided_in_one_and_the_other_follows() {
    let t = TestServer::start().await;
    let agent = lab(&t).await;
    let alice =
        Browser::signed_in(&t, "two-alice", &t.token("alice", "approver", None).await).await;
    let bob = Browser::signed_in(&t, "two-bob", &t.token("bob", "approver", None).await).await;

    let first = raise_one(&agent, "make deploy").await;
    let c = card(&first);
    for b in [&alice, &bob] {
        b.goto(&format!("/holds/{first}")).await;
        b.wait_for(&format!(
            "{c}[data-status=pending] [data-decision=approve_once]"
        ))
        .await;
    }
    bob.click(&format!("{c} [data-decision=deny]")).await;
    bob.wait_text(&format!("{c} .outcome"), "Denied by bob")
        .await;
    let decided = Instant::now();
    alice
        .wait_text(&format!("{c} .outcome"), "Denied by bob")
        .await;
    let took = decided.elapsed();
    alice
        .check(
            took < Duration::from_secs(1),
            &format!("the other browser followed in {took:?}, not within a second"),
        )
        .await;
    alice.wait_text(".history", "Denied by bob").await;

    // A page whose live stream has stopped still shows the hold pending; its click loses the
    // race and shows the decision recorded, not an error.
    let second = raise_one(&agent, "make release").await;
    let c = card(&second);
    for b in [&alice, &bob] {
        b.goto(&format!("/holds/{second}")).await;
        b.wait_for(&format!(
            "{c}[data-status=pending] [data-decision=approve_once]"
        ))
        .await;
    }
    // `window.stop()` closes the page's EventSource for good.
    alice.eval("window.stop(); return true").await;
    bob.click(&format!("{c} [data-decision=approve_once]"))
        .await;
    bob.wait_text(&format!("{c} .outcome"), "Approved once by bob")
        .await;
    alice
        .check(
            alice
                .eval(&format!(
                    "return document.querySelector(\"{c}\").dataset.status"
                ))
                .await
                == json!("pending"),
            "the stopped page still shows the hold pending",
        )
        .await;
    alice.click(&format!("{c} [data-decision=deny]")).await;
    alice
        .wait_text(&format!("{c} .outcome"), "Approved once by bob")
        .await;
    alice
        .wait_text(
            &format!("{c} .note"),
            "decided before your click reached Holdpoint",
        )
        .await;
    alice
        .check(
            alice
                .eval(&format!(
                    "return document.querySelector(\"{c} [data-error=card]\").textContent"
                ))
                .await
                == json!(""),
            "no error is shown for a lost race",
        )
        .await;
    assert_eq!(
        t.api
            .get(&format!("/api/v1/holds/{second}"))
            .await
            .expect(200)["hold"]["outcome"]["decided_by"],
        json!(["bob"])
    );
    alice.close().await;
    bob.close().await;
}

#[tokio::test]
async fn a_deadline_that_passes_while_the_page_is_open_shows_the_timeout_outcome() {
    let t = TestServer::start().await;
    let agent = lab(&t).await;
    let b = Browser::signed_in(&t, "deadline", &t.token("alice", "approver", None).await).await;
    let mut item = approval("shell_cmd", json!({"command": "sleep 1"}));
    item["deadline"] = json!("2s");
    let id = held(&raise(&agent, "lab", vec![item]).await, 0);
    let c = card(&id);
    b.goto(&format!("/holds/{id}")).await;
    b.wait_text(&format!("{c} .deadline"), "then it is denied")
        .await;
    b.wait_text(
        &format!("{c} .outcome"),
        "No one decided before the deadline: denied",
    )
    .await;
    b.wait_for(&format!("{c}[data-status=timed_out]")).await;
    b.wait_text(".history li[data-type='hold.expired']", "deadline")
        .await;
    b.close().await;
}

#[tokio::test]
async fn the_inbox_and_a_hold_page_fit_a_phone() {
    let t = TestServer::start().await;
    let agent = lab(&t).await;
    let long = "x".repeat(400);
    let created = raise(
        &agent,
        "lab",
        vec![
            approval(
                "shell_cmd",
                json!({"command": format!("echo {long}"), "env": {"A_VERY_LONG_NAME": long}}),
            ),
            question("Which way?", &["left", "right"]),
        ],
    )
    .await;
    let id = held(&created, 0);
    let b = Browser::sized(&t, "phone", PHONE).await;
    b.sign_in(&t.token("alice", "approver", None).await).await;
    let fits = "return document.documentElement.scrollWidth <= window.innerWidth";
    b.wait_for(&card(&id)).await;
    b.screenshot("inbox").await;
    b.wait_until(fits, "the inbox to fit 375 px").await;
    b.goto(&format!("/holds/{id}")).await;
    b.wait_for(&format!("{} details.edit", card(&id))).await;
    b.click(&format!("{} details.edit > summary", card(&id)))
        .await;
    b.screenshot("hold").await;
    b.wait_until(fits, "the hold page to fit 375 px").await;
    let small = b
        .eval(
            "return [...document.querySelectorAll('article.hold button')]\
             .filter(x => x.getBoundingClientRect().height < 44).length",
        )
        .await;
    assert_eq!(small, json!(0), "every button is at least 2.75rem tall");
    b.close().await;
}

#[tokio::test]
async fn the_page_of_a_chat_hold_shows_the_tools_result_once_it_ran() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo shipped-it"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let t = TestServer::start().await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let b = Browser::signed_in(&t, "chat-hold", &t.token("alice", "approver", None).await).await;
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Ship it"}),
        )
        .await
        .expect(202);
    let hold = b
        .wait_for("article.hold[data-status=pending]")
        .await
        .attr("data-hold")
        .await
        .unwrap()
        .unwrap();
    b.goto(&format!("/holds/{hold}")).await;
    b.click(&format!("{} [data-decision=approve_once]", card(&hold)))
        .await;
    b.wait_text("section.result", "The tool ran").await;
    b.wait_text("section.result", "shipped-it").await;
    b.wait_text(".history", "Approved once by alice").await;

    // Opened afterwards, the page finds the result in the chat.
    b.goto(&format!("/holds/{hold}")).await;
    b.wait_text("section.result", "shipped-it").await;
    b.close().await;
}

const TWO_PEOPLE: &str = r#"
mode = "manual"
[[rules]]
name = "two people deploy"
tools = ["deploy"]
action = "ask"
quorum = 2
"#;

#[tokio::test]
async fn a_quorum_shows_its_progress_and_the_rule_that_asked() {
    let t = TestServer::with(TWO_PEOPLE, |_| {}).await;
    let agent = lab(&t).await;
    let alice = Browser::signed_in(
        &t,
        "quorum-alice",
        &t.token("alice", "approver", None).await,
    )
    .await;

    // Approved for this chat: the grant is part of the hold's history.
    let created = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"chat": "ops", "items": [approval("shell_cmd", json!({"command": "uptime"}))]}),
        )
        .await
        .expect(201);
    let id = held(&created, 0);
    let c = card(&id);
    alice.goto(&format!("/holds/{id}")).await;
    alice
        .click(&format!("{c} [data-decision=approve_chat]"))
        .await;
    alice
        .wait_text(&format!("{c} .outcome"), "Approved for this chat by alice")
        .await;
    alice
        .wait_text(
            ".history",
            "Grant created by alice: these arguments are not asked again in this chat",
        )
        .await;

    let created = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"chat": "ops", "items": [approval("deploy", json!({"to": "prod"}))]}),
        )
        .await
        .expect(201);
    let id = held(&created, 0);
    let c = card(&id);
    alice.goto(&format!("/holds/{id}")).await;
    alice
        .wait_text(&format!("{c} .facts"), "Asked by rule “two people deploy”")
        .await;
    alice
        .wait_text(&format!("{c} .quorum"), "Approvals 0 of 2")
        .await;
    alice
        .click(&format!("{c} [data-decision=approve_once]"))
        .await;
    alice
        .wait_text(&format!("{c} .quorum"), "Approvals 1 of 2: alice")
        .await;
    alice
        .check(
            alice
                .eval(&format!(
                    "return document.querySelector(\"{c}\").dataset.status"
                ))
                .await
                == json!("pending"),
            "one approval of two leaves the hold pending",
        )
        .await;
    alice
        .wait_text(".history", "alice approved (1 of 2 needed)")
        .await;

    let bob = t.caller("bob", "approver", None).await;
    bob.post(
        &format!("/api/v1/holds/{id}/decision"),
        json!({"action": "approve"}),
    )
    .await
    .expect(200);
    alice
        .wait_text(&format!("{c} .outcome"), "Approved once by alice, bob")
        .await;
    alice.wait_gone(&format!("{c} .note")).await;
    alice.close().await;
}

#[tokio::test]
async fn a_withdrawn_hold_says_who_withdrew_it() {
    let t = TestServer::start().await;
    let agent = lab(&t).await;
    let b = Browser::signed_in(&t, "withdrawn", &t.token("alice", "approver", None).await).await;
    let id = raise_one(&agent, "make publish").await;
    let c = card(&id);
    b.goto(&format!("/holds/{id}")).await;
    b.wait_for(&format!("{c}[data-status=pending]")).await;
    agent
        .post(
            &format!("/api/v1/holds/{id}/withdraw"),
            json!({"reason": "no longer needed"}),
        )
        .await
        .expect(200);
    b.wait_text(
        &format!("{c} .outcome"),
        "Withdrawn by deploy-bot — “no longer needed”",
    )
    .await;
    b.wait_gone(&format!("{c} [data-decision]")).await;
    b.close().await;
}

#[tokio::test]
async fn what_an_agent_wrote_is_shown_as_text() {
    let t = TestServer::start().await;
    let agent = lab(&t).await;
    let evil =
        "<img src=x onerror=\"window.injected=1\"><script>window.injected=2</script></textarea>";
    let mut q = json!({
        "kind": "question",
        "question": format!("Q {evil}"),
        "options": [{"id": "a", "label": format!("A {evil}"), "description": evil}],
        "context": {"note": evil},
    });
    q["deadline"] = json!("10m");
    let mut a = approval("shell_cmd", json!({"command": evil, "other": {"x": evil}}));
    a["description"] = json!(evil);
    let created = raise(&agent, "lab", vec![q, a]).await;
    let b = Browser::signed_in(&t, "xss", &t.token("alice", "approver", None).await).await;
    for i in 0..2 {
        let id = held(&created, i);
        b.goto(&format!("/holds/{id}")).await;
        b.wait_text(&card(&id), "<img src=x onerror=").await;
        if i == 1 {
            // The editor holds the arguments as text too.
            b.click(&format!("{} details.edit > summary", card(&id)))
                .await;
            b.wait_until(
                &format!(
                    "return document.querySelector(\"{} textarea\").value.includes('</textarea>')",
                    card(&id)
                ),
                "the editor to hold the arguments",
            )
            .await;
        }
        let injected = b
            .eval(
                "return document.querySelectorAll('main img, main script').length + \
                 (window.injected ? 100 : 0)",
            )
            .await;
        assert_eq!(injected, json!(0), "hold {i}");
    }
    b.close().await;
}
