//! A world's policy in the web interface: approving for a while from a hold's card, the
//! world's policy page (in force, versions, an editor whose refusals name every problem and
//! whose replay shows what a text would change before it applies), and a rule suggested from
//! a decided hold added to the world's policy in one step.

use std::time::Duration;

use holdpoint_protocol::Grant;
use serde_json::{Value, json};

use super::{Browser, PHONE, card};
use crate::suite::{Api, TestServer, approval, held, raise};

const BASE: &str = r#"
mode = "manual"
mode_floor = "manual"

[[rules]]
name = "no rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
locked = true

[[rules]]
name = "echo is fine"
tools = ["shell_cmd"]
action = "allow"
command = { program = "echo" }
"#;

const CAT: &str = "[[rules]]\nname = \"cat is fine\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"cat\" }\n";

fn shell(command: &str) -> Value {
    approval("shell_cmd", json!({ "command": command }))
}

/// Whether the page is no wider than the window (nothing to scroll sideways).
const FITS: &str =
    "return document.documentElement.scrollWidth <= document.documentElement.clientWidth";

/// A server over the base policy with a world `lab` whose own policy allows `cat`, and an
/// agent of it.
async fn lab_allowing_cat() -> (TestServer, Api) {
    let t = TestServer::with(BASE, |_| {}).await;
    t.world("lab").await;
    t.api
        .put("/api/v1/worlds/lab/policy", json!({ "text": CAT }))
        .await
        .expect(200);
    let agent = t.caller("deploy-bot", "agent", None).await;
    (t, agent)
}

async fn version_in_force(t: &TestServer) -> u64 {
    let state = t.api.get("/api/v1/worlds/lab/policy").await.expect(200);
    state["current"]["version"].as_u64().unwrap_or(0)
}

/// Scrolls the element matching `css` into view, for a screenshot of it.
async fn show(b: &Browser, css: &str) {
    let script = format!(
        "document.querySelector({}).scrollIntoView({{block: 'start'}}); return true",
        json!(css)
    );
    b.eval(&script).await;
}

/// Sets the editor's text (typing a whole policy key by key would only test the driver).
async fn write_policy(b: &Browser, text: &str) {
    let script = format!(
        "const a = document.querySelector('#policy-text'); a.value = {}; a.dispatchEvent(new Event('input')); return true",
        json!(text)
    );
    b.eval(&script).await;
}

#[tokio::test]
async fn approving_for_an_hour_from_the_card_makes_a_grant_that_expires() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let token = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "policy-grant", &token).await;
    let phone = Browser::sized(&t, "policy-grant-phone", PHONE).await;
    phone.sign_in(&token).await;

    let id = held(&raise(&agent, "lab", vec![shell("make deploy")]).await, 0);
    let c = card(&id);
    for x in [&b, &phone] {
        x.goto(&format!("/holds/{id}")).await;
        x.wait_for(&format!("{c}[data-status=pending] select[name=expires_in]"))
            .await;
    }
    b.screenshot("card-desktop").await;
    phone
        .eval("document.querySelector('select[name=expires_in]').scrollIntoView({block: 'center'}); return true")
        .await;
    phone.screenshot("card-phone").await;
    phone
        .check(
            phone.eval(FITS).await == json!(true),
            "the card scrolls sideways at 375 px",
        )
        .await;
    phone.close().await;

    // By keyboard: the duration is a labelled select next to the grants.
    let select = b.wait_for(&format!("{c} select[name=expires_in]")).await;
    let label = b
        .eval("const s = document.querySelector('select[name=expires_in]'); return s.labels[0].textContent")
        .await;
    b.check(
        label
            .as_str()
            .unwrap_or_default()
            .starts_with("Remember the approval for"),
        &format!("label {label}"),
    )
    .await;
    select.select_by_value("1h").await.unwrap();
    b.wait_for(&format!("{c} select[name=scope]"))
        .await
        .select_by_value("approve_always_args")
        .await
        .unwrap();
    b.click(&format!("{c} [data-decision=approve_always_args]"))
        .await;
    b.wait_text(
        &format!("{c} .outcome"),
        "Approved always (these arguments) by alice",
    )
    .await;

    // The grant the API lists expires an hour after it was made.
    let grants = t.api.get("/api/v1/worlds/lab/grants").await.expect(200);
    let grants: Vec<Grant> = serde_json::from_value(grants).unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    let end = grants[0].expires_at.expect("the grant has an end");
    assert_eq!(
        end.duration_since(grants[0].created_at),
        Duration::from_secs(3600)
    );
    assert!(!grants[0].expired);

    // Once (no grant) sends no duration, whatever the select says.
    let second = held(&raise(&agent, "lab", vec![shell("make release")]).await, 0);
    let c = card(&second);
    b.goto(&format!("/holds/{second}")).await;
    let select = b.wait_for(&format!("{c} select[name=expires_in]")).await;
    select.select_by_value("10m").await.unwrap();
    b.click(&format!("{c} [data-decision=approve_once]")).await;
    b.wait_text(&format!("{c} .outcome"), "Approved once by alice")
        .await;
    let grants = t.api.get("/api/v1/worlds/lab/grants").await.expect(200);
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants}");
    b.close().await;
}

#[tokio::test]
async fn a_worlds_policy_is_edited_replayed_and_applied_from_its_page() {
    let (t, agent) = lab_allowing_cat().await;
    // Recorded calls: one the policy in force allows, one it asks for.
    let reply = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({ "items": [shell("cat notes")] }),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    held(&raise(&agent, "lab", vec![shell("ls -la")]).await, 0);

    let token = t.token("root", "admin", None).await;
    let b = Browser::signed_in(&t, "policy-page", &token).await;
    b.goto("/worlds/lab").await;
    b.click("a[data-link=policy]").await;
    b.wait_text(".policy-in-force .layer-summary", "version 1")
        .await;
    b.wait_text(".policy-in-force li[data-locked=true]", "no rm")
        .await;
    b.wait_text(".policy-in-force pre.policy-text", "cat is fine")
        .await;
    b.wait_for(".versions li[data-version='1']").await;
    b.screenshot("in-force-desktop").await;
    // The base's unlocked rule is not in force in a world with a policy of its own.
    b.check(
        b.eval("return document.querySelector(\".policy-in-force li[data-rule='echo is fine']\") === null")
            .await
            == json!(true),
        "an unlocked base rule is shown as in force",
    )
    .await;

    // An invalid text: every problem named, the version in force stays.
    let invalid = "[[rules]]\nname = \"bad\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\nlocked = true\nargs = [{ pointer = \"/command\", equals = \"x\" }]\n\n[[checks]]\ntool = \"shell_cmd\"\nargs = { command = \"rm -rf build\" }\nexpect = \"allow\"\n";
    write_policy(&b, invalid).await;
    b.click("button[data-action=apply]").await;
    b.wait_for(".problem-list li[data-path='rules[0].locked']")
        .await;
    b.wait_text(".problem-list li[data-path='checks[0].expect']", "no rm")
        .await;
    b.wait_text(".problems", "The version in force stays").await;
    let invalid_flag = b
        .eval("return document.querySelector('#policy-text').getAttribute('aria-invalid')")
        .await;
    b.check(
        invalid_flag == json!("true"),
        "the editor is not marked invalid",
    )
    .await;
    b.screenshot("problems-desktop").await;
    assert_eq!(version_in_force(&t).await, 1);

    // A valid text, replayed before it applies: `cat` would now ask, the pending `ls` would
    // be allowed.
    let valid = "[[rules]]\nname = \"ls is fine\"\ntools = [\"shell_cmd\"]\naction = \"allow\"\ncommand = { program = \"ls\" }\n";
    write_policy(&b, valid).await;
    b.click("button[data-action=replay]").await;
    b.wait_text(
        ".replay .replay-summary",
        "2 recorded calls replayed: 0 decided the same, 2 differently",
    )
    .await;
    b.wait_text(
        ".replay li[data-before=allowed][data-after=ask]",
        "cat notes",
    )
    .await;
    b.wait_text(
        ".replay li[data-before=pending][data-after=allow]",
        "ls -la",
    )
    .await;
    show(&b, ".replay").await;
    b.screenshot("replay-desktop").await;
    // Replaying applied nothing.
    assert_eq!(version_in_force(&t).await, 1);

    b.click("button[data-action=apply]").await;
    b.wait_text(".policy-editor .saved", "Version 2 is in force")
        .await;
    b.wait_for(".versions li[data-version='2']").await;
    b.wait_text(".policy-in-force .layer-summary", "version 2")
        .await;
    assert_eq!(version_in_force(&t).await, 2);
    let r = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({ "items": [shell("ls")] }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    let phone = Browser::sized(&t, "policy-page-phone", PHONE).await;
    phone.sign_in(&token).await;
    phone.goto("/worlds/lab/policy").await;
    phone.wait_for(".versions li[data-version='2']").await;
    write_policy(&phone, valid).await;
    phone.click("button[data-action=replay]").await;
    phone.wait_for(".replay .replay-summary").await;
    show(&phone, ".replay").await;
    phone.screenshot("replay-phone").await;
    show(&phone, "h1").await;
    phone.screenshot("page-phone").await;
    phone
        .check(
            phone.eval(FITS).await == json!(true),
            "the policy page scrolls sideways at 375 px",
        )
        .await;
    phone.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_rule_suggested_from_a_decided_hold_is_added_to_the_worlds_policy() {
    let (t, agent) = lab_allowing_cat().await;
    let alice: Api = t.caller("alice", "approver", None).await;
    let id = held(
        &raise(&agent, "lab", vec![shell("git push origin main")]).await,
        0,
    );

    let token = t.token("root", "admin", None).await;
    let b = Browser::signed_in(&t, "policy-suggest", &token).await;
    b.goto(&format!("/holds/{id}")).await;
    b.wait_for(&format!("{}[data-status=pending]", card(&id)))
        .await;
    // Nothing to suggest from until it is decided.
    b.check(
        b.eval("return document.querySelector('a[data-link=suggest-rule]') === null")
            .await
            == json!(true),
        "a pending hold offers a rule",
    )
    .await;
    alice
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({ "action": "approve", "scope": "once" }),
        )
        .await
        .expect(200);
    b.click("a[data-link=suggest-rule]").await;
    b.wait_text(".policy-editor .suggested", "(allow)").await;
    let text = b
        .eval("return document.querySelector('#policy-text').value")
        .await;
    let text = text.as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with(CAT.trim_end()), "{text}");
    let example = text
        .lines()
        .find(|l| l.starts_with("must_match"))
        .unwrap_or_default();
    assert!(
        example.contains("\"shell_cmd\"") && example.contains("\"git push origin main\""),
        "{text}"
    );
    let focused = b
        .eval("return document.activeElement && document.activeElement.id")
        .await;
    b.check(focused == json!("policy-text"), "the editor has the focus")
        .await;
    b.screenshot("suggested-desktop").await;

    b.click("button[data-action=replay]").await;
    b.wait_text(
        ".replay li[data-before=approved][data-after=allow]",
        "git push origin main",
    )
    .await;
    b.click("button[data-action=apply]").await;
    b.wait_text(".policy-editor .saved", "Version 2 is in force")
        .await;
    assert_eq!(version_in_force(&t).await, 2);
    // The same call is now allowed; its neighbour still asks.
    let r = agent
        .post(
            "/api/v1/worlds/lab/holds",
            json!({ "items": [shell("git push origin main")] }),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = raise(&agent, "lab", vec![shell("git push --force origin main")]).await;
    assert_eq!(r["results"][0]["result"], "held", "{r}");
    b.close().await;
}

#[tokio::test]
async fn a_rule_suggested_from_an_edited_approval_is_made_from_the_arguments_approved() {
    let (t, agent) = lab_allowing_cat().await;
    let alice: Api = t.caller("alice", "approver", None).await;
    let id = held(
        &raise(&agent, "lab", vec![shell("git push --force origin main")]).await,
        0,
    );
    alice
        .post(
            &format!("/api/v1/holds/{id}/decision"),
            json!({ "action": "edit", "arguments": { "command": "git push origin main" } }),
        )
        .await
        .expect(200);

    let token = t.token("root", "admin", None).await;
    let b = Browser::signed_in(&t, "policy-suggest-edited", &token).await;
    b.goto(&format!("/holds/{id}")).await;
    b.click("a[data-link=suggest-rule]").await;
    b.wait_text(".policy-editor .suggested", "(allow)").await;
    let text = b
        .eval("return document.querySelector('#policy-text').value")
        .await;
    let text = text.as_str().unwrap_or_default().to_owned();
    let suggested = &text[CAT.trim_end().len()..];
    assert!(!suggested.contains("--force"), "{text}");
    assert!(suggested.contains("\"git push origin main\""), "{text}");
    b.close().await;
}
