//! The inbox and the hold card in a browser: holds arriving live, deciding them with the mouse
//! and the keyboard, batches, questions with the confirm step, edited arguments, and what the
//! agent's wait gets back.

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Browser, card, lab, row};
use crate::suite::{Api, TestServer, approval, held, question, raise};

/// Selects `id`'s row with the mouse and waits for its card beside the list.
async fn open(b: &Browser, id: &str) {
    b.click(&row(id)).await;
    b.wait_for(&format!(".detail {}", card(id))).await;
}

/// What the agent's wait returns for `hold` (decided by now).
async fn waited(agent: &Api, hold: &str) -> Value {
    let result = agent
        .get(&format!("/api/v1/holds/{hold}/wait?timeout=10s"))
        .await
        .expect(200);
    assert_eq!(result["decided"], true, "{result}");
    result["hold"]["outcome"].clone()
}

async fn status_of(t: &TestServer, hold: &str) -> String {
    t.api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200)["hold"]["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Waits until the inbox's list shows exactly these holds, in this order.
async fn shows(b: &Browser, ids: &[&String]) {
    let expected = json!(ids).to_string();
    b.wait_until(
        &format!(
            "return JSON.stringify([...document.querySelectorAll('li.row')]\
             .map(a => a.dataset.hold)) === {}",
            json!(expected)
        ),
        &format!("the inbox to show {expected}"),
    )
    .await;
}

#[tokio::test]
async fn a_hold_raised_through_the_api_appears_without_reload_and_is_approved_with_the_mouse() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-mouse").await;
    b.wait_for(".empty:not([hidden])").await;

    let created = raise(
        &agent,
        "lab",
        vec![approval(
            "shell_cmd",
            json!({"command": "git push origin main"}),
        )],
    )
    .await;
    let id = held(&created, 0);
    let digest = created["results"][0]["hold"]["spec"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = card(&id);
    b.wait_text(&format!("{c} pre.command"), "git push origin main")
        .await;
    b.wait_text(&format!("{c} .digest"), &digest).await;
    b.wait_text(&format!("{c} .deadline"), "then it is denied")
        .await;
    b.wait_until(
        "return document.title === '(1) Holdpoint' && document.getElementById('pending-count').textContent === '1'",
        "the pending count in the title and the header",
    )
    .await;
    // Only decisions the hold offers (a hold of no chat offers no "for this chat").
    let offers = created["results"][0]["hold"]["offers"].clone();
    let offered = b
        .eval(&format!(
            "return [...document.querySelectorAll(\"{c} [data-decision]\")].map(b => b.dataset.decision)"
        ))
        .await;
    let offers = offers.as_array().unwrap();
    for kind in offered.as_array().unwrap() {
        assert!(offers.contains(kind), "{kind} is not among {offers:?}");
    }
    assert!(offers.contains(&json!("approve_once")));

    b.click(&format!("{c} [data-decision=approve_once]")).await;
    b.wait_text(&format!("{c} .outcome"), "Approved once by alice")
        .await;
    let outcome = waited(&agent, &id).await;
    assert_eq!(outcome["status"], "approved");
    assert_eq!(outcome["scope"], "once");
    assert_eq!(outcome["decided_by"], json!(["alice"]));
    b.wait_until("return document.title === 'Holdpoint'", "the count to drop")
        .await;
    // The decided hold leaves the inbox.
    b.wait_gone(&c).await;
    b.close().await;
}

/// Waits until `id`'s row is the current one, its card beside the list, and has the focus.
async fn current_is(b: &Browser, id: &str, what: &str) {
    b.wait_until(
        &format!(
            "return document.activeElement.matches(\"{}[aria-current=true]\") \
             && document.querySelector('.detail article.hold')?.dataset.hold === '{id}'",
            row(id)
        ),
        what,
    )
    .await;
}

#[tokio::test]
async fn the_keyboard_moves_between_holds_approves_denies_and_opens_a_hold() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-keys").await;
    let mut ids = Vec::new();
    for command in ["ls", "pwd", "whoami"] {
        let created = raise(
            &agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": command}))],
        )
        .await;
        ids.push(held(&created, 0));
    }
    b.goto("/").await;
    for id in &ids {
        b.wait_for(&row(id)).await;
    }
    // Newest first: whoami, pwd, ls. The first is selected; j moves to the next, k back.
    b.keys("j").await;
    current_is(&b, &ids[1], "j to move to the second hold").await;
    b.keys("k").await;
    current_is(&b, &ids[2], "k to move back to the first").await;
    b.keys("a").await;
    // Approved, and the next open hold is selected at once.
    current_is(&b, &ids[1], "a to approve and move on").await;
    b.wait_text(
        &format!("{} .outcome-mark", row(&ids[2])),
        "Approved once by alice",
    )
    .await;
    // d asks for a reason in the card; Enter denies with it.
    b.keys("d").await;
    b.wait_until(
        &format!(
            "return document.activeElement.matches(\"{} input[name=reason]\")",
            card(&ids[1])
        ),
        "d to go to the reason",
    )
    .await;
    b.keys("not today\u{E007}").await;
    current_is(&b, &ids[0], "Enter to deny and move on").await;
    assert_eq!(waited(&agent, &ids[2]).await["status"], "approved");
    let denied = waited(&agent, &ids[1]).await;
    assert_eq!(denied["status"], "denied");
    assert_eq!(denied["reason"], "not today");

    // Keys typed into a field are text, not commands.
    b.click("#filter-tool").await;
    b.keys("a").await;
    assert_eq!(status_of(&t, &ids[0]).await, "pending");

    b.client
        .execute(
            &format!("document.querySelector(\"{}\").focus()", row(&ids[0])),
            vec![],
        )
        .await
        .unwrap();
    b.keys("\u{E007}").await; // Enter
    b.wait_until(
        &format!("return location.pathname === '/holds/{}'", ids[0]),
        "Enter to open the hold's page",
    )
    .await;
    b.wait_for(&card(&ids[0])).await;
    b.close().await;
}

#[tokio::test]
async fn a_denial_carries_its_reason_to_the_waiting_agent() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-deny").await;
    let id = held(
        &raise(
            &agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": "rm -rf build"}))],
        )
        .await,
        0,
    );
    let c = card(&id);
    b.fill(&format!("{c} input[name=reason]"), "not on a Friday")
        .await;
    b.click(&format!("{c} [data-decision=deny]")).await;
    b.wait_text(
        &format!("{c} .outcome"),
        "Denied by alice — “not on a Friday”",
    )
    .await;
    let outcome = waited(&agent, &id).await;
    assert_eq!(outcome["status"], "denied");
    assert_eq!(outcome["reason"], "not on a Friday");
    assert_eq!(outcome["stop_turn"], Value::Null);
    b.close().await;
}

/// Raises three approvals in one request: one batch.
async fn batch_of_three(agent: &Api) -> (String, Vec<String>) {
    let created = raise(
        agent,
        "lab",
        vec![
            approval("shell_cmd", json!({"command": "make a"})),
            approval("shell_cmd", json!({"command": "make b"})),
            approval("shell_cmd", json!({"command": "make c"})),
        ],
    )
    .await;
    let ids = (0..3).map(|i| held(&created, i)).collect();
    (created["batch"].as_str().unwrap().to_owned(), ids)
}

#[tokio::test]
async fn a_batch_is_shown_together_one_is_decided_then_all_the_rest() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-batch").await;
    let (batch, ids) = batch_of_three(&agent).await;
    let group = format!("li.batch[data-batch='{batch}']");
    b.wait_until(
        &format!("return document.querySelectorAll(\"{group} li.row\").length === 3"),
        "the batch's three holds together",
    )
    .await;
    b.wait_text(&format!("{group} .batch-title"), "3 holds asked together")
        .await;

    open(&b, &ids[1]).await;
    b.click(&format!("{} [data-decision=approve_once]", card(&ids[1])))
        .await;
    b.wait_text(&format!("{} .outcome", card(&ids[1])), "Approved once")
        .await;
    b.wait_text(&format!("{group} .batch-title"), "2 still open")
        .await;
    b.click(&format!("{group} [data-batch-decision=deny]"))
        .await;
    for id in [&ids[0], &ids[2]] {
        b.wait_text(&format!("{} .outcome-mark", row(id)), "Denied by alice")
            .await;
        assert_eq!(waited(&agent, id).await["status"], "denied");
    }
    assert_eq!(waited(&agent, &ids[1]).await["status"], "approved");
    b.close().await;
}

#[tokio::test]
async fn deciding_a_batch_that_is_not_as_shown_is_refused_and_the_page_says_so() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-batch-refused").await;
    let (batch, ids) = batch_of_three(&agent).await;
    let group = format!("li.batch[data-batch='{batch}']");
    // Another person decides one of the batch's holds before the page is opened: the page
    // shows two of its three approvals, and "decide all" is bound to those two.
    let bob = t.caller("bob", "approver", None).await;
    bob.post(
        &format!("/api/v1/holds/{}/decision", ids[0]),
        json!({"action": "deny"}),
    )
    .await
    .expect(200);
    b.goto("/").await;
    b.wait_until(
        &format!("return document.querySelectorAll(\"{group} li.row\").length === 2"),
        "the two open holds of the batch",
    )
    .await;

    b.click(&format!("{group} [data-batch-decision=approve]"))
        .await;
    b.wait_text(
        &format!("{group} .batch-error"),
        "Holdpoint refused to decide this batch",
    )
    .await;
    b.wait_text(&format!("{group} .batch-error"), "Nothing was decided")
        .await;
    for id in [&ids[1], &ids[2]] {
        assert_eq!(status_of(&t, id).await, "pending");
    }
    // The whole batch is shown now, the hold bob denied with it; deciding again works.
    b.wait_text(&format!("{} .outcome-mark", row(&ids[0])), "Denied by bob")
        .await;
    b.click(&format!("{group} [data-batch-decision=approve]"))
        .await;
    for id in [&ids[1], &ids[2]] {
        b.wait_text(
            &format!("{} .outcome-mark", row(id)),
            "Approved once by alice",
        )
        .await;
        assert_eq!(waited(&agent, id).await["status"], "approved");
    }
    b.close().await;
}

#[tokio::test]
async fn a_multiple_choice_question_is_chosen_then_confirmed_or_canceled() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-question").await;
    let mut q = question("Which regions?", &["eu", "us", "ap"]);
    q["multiple"] = json!(true);
    q["confirm"] = json!(true);
    q["context"] = json!({"release": "v2.1", "risk": "low"});
    let created = raise(&agent, "lab", vec![q.clone(), q]).await;
    let (first, second) = (held(&created, 0), held(&created, 1));
    let c = card(&first);
    open(&b, &first).await;
    b.wait_text(&format!("{c} .args"), "v2.1").await;
    let kinds = b
        .eval(&format!(
            "return [...document.querySelectorAll(\"{c} input[name=option]\")].map(i => i.type + ':' + i.value)"
        ))
        .await;
    assert_eq!(kinds, json!(["checkbox:eu", "checkbox:us", "checkbox:ap"]));

    // Chosen, the choice is read back and nothing is sent until it is confirmed.
    b.click(&format!("{c} input[value=eu]")).await;
    b.click(&format!("{c} input[value=ap]")).await;
    b.click(&format!("{c} [data-decision=answer]")).await;
    b.wait_text(&format!("{c} .review"), "Confirm “eu, ap”?")
        .await;
    assert_eq!(status_of(&t, &first).await, "pending");
    b.click(&format!("{c} [data-decision=confirm]")).await;
    b.wait_text(&format!("{c} .outcome"), "Confirmed by alice: eu, ap")
        .await;
    let outcome = waited(&agent, &first).await;
    assert_eq!(outcome["status"], "confirmed");
    assert_eq!(
        outcome["options"],
        json!([{"id": "eu", "label": "eu"}, {"id": "ap", "label": "ap"}])
    );

    // Chosen, then "Back" at the confirm step: the question is still open, and can be
    // answered again.
    let c = card(&second);
    open(&b, &second).await;
    b.click(&format!("{c} input[value=us]")).await;
    b.click(&format!("{c} [data-decision=answer]")).await;
    b.wait_for(&format!("{c} .review")).await;
    b.click(&format!("{c} [data-step=back]")).await;
    b.wait_gone(&format!("{c} .review")).await;
    b.wait_for(&format!("{c}[data-status=pending] [data-decision=answer]"))
        .await;
    assert_eq!(status_of(&t, &second).await, "pending");
    // Answered elsewhere (the terminal, say), the card shows the server's confirm step;
    // cancelling there ends the question as canceled (the agent hears it was canceled,
    // never a success).
    t.api
        .post(
            &format!("/api/v1/holds/{second}/decision"),
            json!({"action": "answer", "options": ["us"]}),
        )
        .await
        .expect(200);
    b.wait_for(&format!("{c}[data-status=awaiting_confirm]"))
        .await;
    b.wait_text(&format!("{c} form.decide"), "admin chose “us”")
        .await;
    b.click(&format!("{c} [data-decision=cancel]")).await;
    b.wait_text(&format!("{c} .outcome"), "Canceled by alice")
        .await;
    assert_eq!(waited(&agent, &second).await["status"], "canceled");
    b.close().await;
}

#[tokio::test]
async fn only_the_options_a_question_offers_can_be_sent() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-options").await;
    let id = held(
        &raise(&agent, "lab", vec![question("Deploy?", &["yes", "no"])]).await,
        0,
    );
    let c = card(&id);
    b.wait_for(&format!("{c} input[value=yes]")).await;
    // An option the hold does not offer, added to the page, is never sent.
    b.eval(&format!(
        "const i = document.createElement('input'); i.type = 'radio'; i.name = 'option'; \
         i.value = 'launch'; i.checked = true; \
         document.querySelector(\"{c} fieldset\").append(i); return true"
    ))
    .await;
    b.click(&format!("{c} [data-decision=answer]")).await;
    b.wait_text(&format!("{c} [data-error=card]"), "Choose an option first")
        .await;
    assert_eq!(status_of(&t, &id).await, "pending");

    // An offered option whose value was altered in the page still sends the hold's own id.
    b.eval(&format!(
        "const i = document.querySelector(\"{c} input[value=no]\"); i.value = 'launch'; \
         i.checked = true; return true"
    ))
    .await;
    b.click(&format!("{c} [data-decision=answer]")).await;
    b.wait_text(&format!("{c} .outcome"), "Answered by alice: no")
        .await;
    let outcome = waited(&agent, &id).await;
    assert_eq!(outcome["options"], json!([{"id": "no", "label": "no"}]));
    b.close().await;
}

const NO_RM: &str = r#"
mode = "manual"
[[rules]]
name = "never rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
"#;

#[tokio::test]
async fn edited_arguments_are_checked_by_the_schema_and_the_policy_before_they_run() {
    let t = TestServer::with(NO_RM, |_| {}).await;
    let (agent, b) = lab(&t, "inbox-edit").await;
    let mut item = approval("shell_cmd", json!({"command": "ls /tmp"}));
    item["schema"] = json!({
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
        "additionalProperties": false
    });
    let id = held(&raise(&agent, "lab", vec![item]).await, 0);
    let c = card(&id);
    let editor = format!("{c} textarea[name=arguments]");
    let error = format!("{c} [data-error=edit]");
    b.click(&format!("{c} details.edit > summary")).await;
    let described = b
        .eval(&format!(
            "const a = document.querySelector(\"{editor}\"); \
             return document.getElementById(a.getAttribute('aria-describedby')).matches(\"{error}\")"
        ))
        .await;
    assert_eq!(
        described,
        json!(true),
        "the editor is described by its error"
    );

    b.fill(&editor, r#"{"cmd": "ls"}"#).await;
    b.click(&format!("{c} [data-decision=edit]")).await;
    b.wait_text(&error, "edited arguments").await;
    b.check(
        b.eval(&format!(
            "return document.querySelector(\"{editor}\").getAttribute('aria-invalid') === 'true'"
        ))
        .await
            == json!(true),
        "the editor is marked invalid",
    )
    .await;

    b.fill(&editor, r#"{"command": "rm -rf /"}"#).await;
    b.click(&format!("{c} [data-decision=edit]")).await;
    b.wait_text(&error, "denied by rule \"never rm\"").await;
    assert_eq!(status_of(&t, &id).await, "pending");

    b.fill(&editor, r#"{"command": "ls -la /tmp"}"#).await;
    b.click(&format!("{c} [data-decision=edit]")).await;
    b.wait_text(
        &format!("{c} .outcome"),
        "Approved with edited arguments by alice",
    )
    .await;
    let outcome = waited(&agent, &id).await;
    assert_eq!(outcome["edited"], true);
    assert_eq!(outcome["arguments"], json!({"command": "ls -la /tmp"}));
    b.close().await;
}

#[tokio::test]
async fn a_hold_decided_elsewhere_leaves_the_inbox_saying_who_decided_it() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-departure").await;
    let id = held(
        &raise(
            &agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": "make clean"}))],
        )
        .await,
        0,
    );
    let c = card(&id);
    b.wait_for(&format!("{c}[data-status=pending]")).await;
    let bob = t.caller("bob", "approver", None).await;
    bob.post(
        &format!("/api/v1/holds/{id}/decision"),
        json!({"action": "deny", "reason": "not now"}),
    )
    .await
    .expect(200);
    b.wait_text(".inbox-status", "make clean").await;
    b.wait_text(".inbox-status", "Denied by bob — “not now”")
        .await;
    b.wait_text(&format!("{c} .outcome"), "Denied by bob").await;
    b.wait_until("return document.title === 'Holdpoint'", "the count to drop")
        .await;
    b.wait_gone(&c).await;
    b.wait_for(".empty:not([hidden])").await;
    b.close().await;
}

#[tokio::test]
async fn filters_are_kept_in_the_address_and_apply_to_holds_arriving_live() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-filters").await;
    t.world("prod").await;
    let lab_question = held(
        &raise(&agent, "lab", vec![question("Lab?", &["y", "n"])]).await,
        0,
    );
    let prod_question = held(
        &raise(&agent, "prod", vec![question("Prod?", &["y", "n"])]).await,
        0,
    );
    let prod_approval = held(
        &raise(
            &agent,
            "prod",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );

    b.goto("/?world=prod&kind=question").await;
    b.wait_for(&row(&prod_question)).await;
    shows(&b, &[&prod_question]).await;
    b.check(
        b.eval("return document.getElementById('filter-world').value")
            .await
            == json!("prod"),
        "the world filter is read from the address",
    )
    .await;

    // Changing a filter changes the address and the list.
    b.eval(
        "const s = document.getElementById('filter-kind'); s.value = 'approval'; \
         s.dispatchEvent(new Event('change')); return true",
    )
    .await;
    b.wait_for(&row(&prod_approval)).await;
    b.wait_until(
        "return location.search === '?world=prod&kind=approval'",
        "the filters in the address",
    )
    .await;
    shows(&b, &[&prod_approval]).await;

    // Live: a hold that does not match stays out; one that does comes in.
    raise(
        &agent,
        "lab",
        vec![approval("shell_cmd", json!({"command": "lab"}))],
    )
    .await;
    let arrived = held(
        &raise(
            &agent,
            "prod",
            vec![approval("shell_cmd", json!({"command": "prod"}))],
        )
        .await,
        0,
    );
    b.wait_for(&row(&arrived)).await;
    shows(&b, &[&arrived, &prod_approval]).await;
    assert_eq!(status_of(&t, &lab_question).await, "pending");
    b.close().await;
}

#[tokio::test]
async fn the_inbox_reads_a_page_at_a_time() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-pages").await;
    for i in 0..55 {
        raise(
            &agent,
            "lab",
            vec![approval(
                "shell_cmd",
                json!({"command": format!("job {i}")}),
            )],
        )
        .await;
    }
    b.goto("/").await;
    b.wait_for("button.more:not([hidden])").await;
    let count = "return document.querySelectorAll('li.row').length";
    assert_eq!(b.eval(count).await, json!(50));
    // The count is the server's, not the rows read.
    b.wait_until(
        "return document.title === '(55) Holdpoint' \
         && document.getElementById('pending-count').textContent === '55'",
        "the true count before every page is read",
    )
    .await;
    b.click("button.more").await;
    b.wait_until(
        "return document.querySelectorAll('li.row').length === 55",
        "the next page",
    )
    .await;
    b.wait_for("button.more[hidden]").await;
    // Newest first across pages: job 54 … job 0.
    let first_last = b
        .eval(
            "const c = [...document.querySelectorAll('li.row .what .arg')]; \
             return [c[0].textContent, c[c.length - 1].textContent]",
        )
        .await;
    assert_eq!(first_last, json!(["job 54", "job 0"]));
    b.close().await;
}

#[tokio::test]
async fn a_new_hold_is_notified_only_when_asked_for_and_the_tab_is_hidden() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-notify").await;
    // A stand-in for the browser's permission prompt and notifications (headless Chromium
    // has neither); the tab is made hidden below.
    b.eval(
        "window.notes = []; window.asked = 0; \
         window.Notification = class { \
           constructor(title, options) { window.notes.push(options.body); } \
           static requestPermission() { window.asked += 1; this.permission = 'granted'; \
             return Promise.resolve('granted'); } }; \
         window.Notification.permission = 'default'; return true",
    )
    .await;
    let visible = held(
        &raise(
            &agent,
            "lab",
            vec![approval("shell_cmd", json!({"command": "a"}))],
        )
        .await,
        0,
    );
    b.wait_for(&row(&visible)).await;
    b.click("button.notify").await;
    b.wait_until("return window.asked === 1", "the permission to be asked")
        .await;
    b.wait_text("button.notify", "Notifications on").await;
    let shown = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    b.wait_for(&row(&shown)).await;
    b.eval(
        "Object.defineProperty(document, 'hidden', {value: true, configurable: true}); return true",
    )
    .await;
    let hidden = held(
        &raise(&agent, "lab", vec![question("Roll back?", &["yes", "no"])]).await,
        0,
    );
    b.wait_for(&row(&hidden)).await;
    assert_eq!(b.eval("return window.notes").await, json!(["Roll back?"]));
    b.close().await;
}

#[tokio::test]
async fn the_most_urgent_first_and_the_tool_filter() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "inbox-urgent").await;
    let with_deadline = |tool: &str, deadline: &str| {
        let mut item = approval(tool, json!({}));
        item["deadline"] = json!(deadline);
        item
    };
    let hour = held(
        &raise(&agent, "lab", vec![with_deadline("deploy", "1h")]).await,
        0,
    );
    let soon = held(
        &raise(&agent, "lab", vec![with_deadline("write_file", "5m")]).await,
        0,
    );
    let half = held(
        &raise(&agent, "lab", vec![with_deadline("write_file", "30m")]).await,
        0,
    );

    b.eval(
        "const s = document.getElementById('filter-order'); s.value = 'urgent'; \
         s.dispatchEvent(new Event('change')); return true",
    )
    .await;
    b.wait_until(
        "return location.search === '?order=urgent'",
        "the order in the address",
    )
    .await;
    shows(&b, &[&soon, &half, &hour]).await;
    // A hold arriving live takes its place by its deadline.
    let ten = held(
        &raise(&agent, "lab", vec![with_deadline("deploy", "10m")]).await,
        0,
    );
    b.wait_for(&row(&ten)).await;
    shows(&b, &[&soon, &ten, &half, &hour]).await;

    b.goto("/?tool=write_file&order=urgent").await;
    b.wait_for(&row(&half)).await;
    shows(&b, &[&soon, &half]).await;
    // Live arrivals keep to the filter.
    raise(&agent, "lab", vec![with_deadline("deploy", "2m")]).await;
    let more = held(
        &raise(&agent, "lab", vec![with_deadline("write_file", "2m")]).await,
        0,
    );
    b.wait_for(&row(&more)).await;
    shows(&b, &[&more, &soon, &half]).await;
    b.close().await;
}

#[tokio::test]
async fn the_agent_filter_lists_the_runtimes_agents_by_name() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo one"}),
        )]),
        Step::calls(vec![call(
            "c2",
            "shell_cmd",
            json!({"command": "echo two"}),
        )]),
    ])
    .await;
    let t = TestServer::start().await;
    t.world("lab").await;
    let mut chats = Vec::new();
    for name in ["builder", "tester"] {
        let created = t
            .api
            .post(
                "/api/v1/worlds/lab/agents",
                json!({"name": name, "llm": {"base_url": llm.base_url(), "model": "scripted"}}),
            )
            .await
            .expect(201);
        let chat = t
            .api
            .post("/api/v1/worlds/lab/chats", json!({"agent": name}))
            .await
            .expect(201);
        chats.push((
            created["id"].as_str().unwrap().to_owned(),
            chat["id"].as_str().unwrap().to_owned(),
        ));
    }
    let b = Browser::signed_in(
        &t,
        "inbox-agents",
        &t.token("alice", "approver", None).await,
    )
    .await;
    let mut holds = Vec::new();
    for (_, chat) in &chats {
        t.api
            .post(
                &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
                json!({"text": "go"}),
            )
            .await
            .expect(202);
        b.wait_until(
            &format!(
                "return document.querySelectorAll('li.row').length === {}",
                holds.len() + 1
            ),
            "the turn's hold",
        )
        .await;
        let ids = b
            .eval("return [...document.querySelectorAll('li.row')].map(a => a.dataset.hold)")
            .await;
        let new = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .find(|id| !holds.contains(id))
            .unwrap();
        holds.push(new);
    }
    let (tester, _) = &chats[1];
    b.wait_text(&format!("{} .who", row(&holds[1])), "tester")
        .await;
    b.wait_text("#filter-agent", "builder").await;
    b.eval(&format!(
        "const s = document.getElementById('filter-agent'); s.value = '{tester}'; \
         s.dispatchEvent(new Event('change')); return true"
    ))
    .await;
    b.wait_until(
        &format!("return location.search === '?agent={tester}'"),
        "the agent in the address",
    )
    .await;
    b.wait_gone(&row(&holds[0])).await;
    shows(&b, &[&holds[1]]).await;
    b.close().await;
}
