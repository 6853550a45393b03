//! The hold page: one hold's card and history, kept current when someone else or the clock
//! decides it, and a click that loses the race showing the decision recorded.

use std::time::{Duration, Instant};

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::json;

use super::{Browser, PHONE, card};
use crate::suite::{Api, TestServer, approval, held, lab_chat, question, raise};

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
    // The page lets go of the live stream (tabs share one; a page being left lets go of it
    // this way), and hears of nothing more.
    alice
        .eval("window.dispatchEvent(new PageTransitionEvent('pagehide')); return true")
        .await;
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

const DECIDERS: &str = r#"
mode = "manual"
[[rules]]
name = "release managers"
tools = ["release"]
action = "ask"
approvers = ["alice", "bob"]
"#;

/// Whether the page is no wider than the window (nothing to scroll sideways).
const FITS: &str =
    "return document.documentElement.scrollWidth <= document.documentElement.clientWidth";

#[tokio::test]
async fn a_card_offers_once_and_deny_up_front_and_a_longer_approval_in_one_control() {
    let t = TestServer::with(DECIDERS, |_| {}).await;
    let agent = lab(&t).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "card-decisions", &alice).await;

    // Raised from outside with a chat of its own: no link to a chat page that does not exist,
    // no turn to stop, and the people who may decide named.
    let created = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({"chat": "ticket-4711", "items": [approval("release", json!({"version": "1.2.0"}))]}),
        )
        .await
        .expect(201);
    let id = held(&created, 0);
    let c = card(&id);
    b.goto(&format!("/holds/{id}")).await;
    b.wait_text(&format!("{c} .external-chat"), "ticket-4711")
        .await;
    b.wait_text(&format!("{c} .deciders"), "alice, bob").await;
    b.check(
        b.eval(&format!(
            "const c = document.querySelector({}); \
             return c.querySelector('a[href*=\"/chats/\"]') === null \
               && c.querySelector('[data-decision=deny_stop]') === null \
               && c.querySelector('.buttons.first [data-decision=approve_once]') !== null \
               && c.querySelector('.buttons.first [data-decision=deny]') !== null",
            json!(c)
        ))
        .await
            == json!(true),
        "a link to a chat that does not exist, or a turn to stop, or the first buttons missing",
    )
    .await;

    // The longer approval reads what it will do before it acts.
    let button = format!("{c} fieldset.scoped button.scoped-approve");
    b.wait_text(&button, "Approve for this chat, until revoked")
        .await;
    b.wait_for(&format!("{c} select[name=scope]"))
        .await
        .select_by_value("approve_always_args")
        .await
        .unwrap();
    b.wait_for(&format!("{c} select[name=expires_in]"))
        .await
        .select_by_value("1d")
        .await
        .unwrap();
    b.wait_text(&button, "Approve always (these arguments), for 1 day")
        .await;
    let phone = Browser::sized(&t, "card-decisions-phone", PHONE).await;
    phone.sign_in(&alice).await;
    phone.goto(&format!("/holds/{id}")).await;
    phone.wait_for(&format!("{c} fieldset.scoped")).await;
    phone
        .check(
            phone.eval(FITS).await == json!(true),
            "the card scrolls sideways at 375 px",
        )
        .await;
    phone.close().await;
    b.click(&format!("{c} [data-decision=approve_always_args]"))
        .await;
    b.wait_text(
        &format!("{c} .outcome"),
        "Approved always (these arguments) by alice",
    )
    .await;
    b.wait_text(
        ".history li[data-type='grant.created']",
        "not asked again in this world for 1 day (until",
    )
    .await;
    b.close().await;
}

#[tokio::test]
async fn an_edit_shows_before_and_after_and_a_write_its_difference_from_the_file_now() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let t = TestServer::on(dir, crate::suite::ASK_ALL, |_| {}).await;
    let world = t.world("lab").await["id"].as_str().unwrap().to_owned();
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "card-diffs", &alice).await;

    // An edit: the call as asked and as approved, line by line.
    let id = raise_one(&agent, "git push --force origin main").await;
    let c = card(&id);
    b.goto(&format!("/holds/{id}")).await;
    b.click(&format!("{c} details.edit summary")).await;
    let area = b.wait_for(&format!("{c} textarea[name=arguments]")).await;
    area.clear().await.unwrap();
    area.send_keys(r#"{"command": "git push origin main"}"#)
        .await
        .unwrap();
    b.click(&format!("{c} [data-decision=edit]")).await;
    b.wait_text(
        &format!("{c} .outcome"),
        "Approved with edited arguments by alice",
    )
    .await;
    b.wait_text(
        &format!("{c} .outcome .diff-line.del"),
        "command: git push --force origin main",
    )
    .await;
    b.wait_text(
        &format!("{c} .outcome .diff-line.add"),
        "command: git push origin main",
    )
    .await;

    // A write over a file that is there: the difference against it, the digest unchanged.
    let files = data.join("worlds").join(&world);
    std::fs::create_dir_all(files.join("conf")).unwrap();
    let before: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(files.join("conf/app.toml"), &before).unwrap();
    let after = before.replace("line 10\n", "line ten\n") + "line 21\n";
    let args = json!({"path": "conf/app.toml", "content": after});
    let created = raise(&agent, "lab", vec![approval("write_file", args.clone())]).await;
    let id = held(&created, 0);
    let digest = created["results"][0]["hold"]["spec"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = card(&id);
    b.goto(&format!("/holds/{id}")).await;
    b.wait_for(&format!("{c} .file-state[data-file='changed']"))
        .await;
    b.wait_for(&format!("{c} .diff[data-added='2'][data-removed='1']"))
        .await;
    b.wait_text(&format!("{c} .diff-line.del"), "line 10").await;
    b.wait_text(&format!("{c} .diff-line.add"), "line ten")
        .await;
    // Long unchanged runs are folded.
    b.wait_text(&format!("{c} .diff-line.fold"), "unchanged line")
        .await;
    b.wait_text(&format!("{c} .digest"), &digest).await;
    let phone = Browser::sized(&t, "card-diffs-phone", PHONE).await;
    phone.sign_in(&alice).await;
    phone.goto(&format!("/holds/{id}")).await;
    phone.wait_for(&format!("{c} .diff")).await;
    phone
        .check(
            phone.eval(FITS).await == json!(true),
            "the difference scrolls sideways at 375 px",
        )
        .await;
    phone.close().await;
    b.click(&format!("{c} [data-decision=approve_once]")).await;
    b.wait_text(&format!("{c} .outcome"), "Approved once by alice")
        .await;
    // What was approved is exactly the arguments as sent, by their digest.
    let decided = t.api.get(&format!("/api/v1/holds/{id}")).await.expect(200);
    assert_eq!(decided["hold"]["outcome"]["digest"], json!(digest));
    assert_eq!(decided["hold"]["outcome"]["arguments"], args);

    // A new file: nothing there now.
    let id = held(
        &raise(
            &agent,
            "lab",
            vec![approval(
                "write_file",
                json!({"path": "new/readme.md", "content": "hello\n"}),
            )],
        )
        .await,
        0,
    );
    b.goto(&format!("/holds/{id}")).await;
    b.wait_text(
        &format!("{} .file-state[data-file='new']", card(&id)),
        "New file",
    )
    .await;
    b.close().await;
}
