//! The management pages in a browser: worlds, agents and chats, tokens, grants, the audit log,
//! webhooks and the policy, each checked through the API afterwards; and what an approver may
//! not reach.

use serde_json::json;

use super::{Browser, PHONE};
use crate::suite::{TestServer, approval, held, raise};

/// The form labelled `label` (`New world`, `Change agent helper`).
fn form(label: &str) -> String {
    format!("form[aria-label={}]", json!(label))
}

/// Types `text` into the field for the API's `field` in the form labelled `label`.
async fn fill(b: &Browser, label: &str, field: &str, text: &str) {
    b.fill(
        &format!("{} [data-field={}]", form(label), json!(field)),
        text,
    )
    .await;
}

async fn submit(b: &Browser, label: &str) {
    b.click(&format!("{} button[type='submit']", form(label)))
        .await;
}

/// Picks the option whose text is `text` in the select matching `css`.
async fn choose(b: &Browser, css: &str, text: &str) {
    b.wait_for(css).await;
    let script = format!(
        "const s = document.querySelector({css}); const o = [...s.options].find(o => o.text === {text});
         if (!o) return false; s.value = o.value; s.dispatchEvent(new Event('change', {{bubbles: true}})); return true;",
        css = json!(css),
        text = json!(text)
    );
    let picked = b.eval(&script).await;
    b.check(picked == json!(true), &format!("{css} offers {text:?}"))
        .await;
}

/// Waits until the field for `field` in the form labelled `label` shows an error containing
/// `text`, tied to the field (`aria-describedby`, `aria-invalid`), and returns it.
async fn field_error(b: &Browser, label: &str, field: &str, text: &str) -> String {
    let script = format!(
        "const input = document.querySelector({} + ' [data-field=' + JSON.stringify({}) + ']');
         if (!input || input.getAttribute('aria-invalid') !== 'true') return false;
         const ids = (input.getAttribute('aria-describedby') || '').split(' ');
         return ids.map(id => document.getElementById(id))
           .some(e => e && e.classList.contains('field-error') && !e.hidden && e.textContent.includes({}));",
        json!(form(label)),
        json!(field),
        json!(text)
    );
    b.wait_until(&script, &format!("an error on {field} saying {text:?}"))
        .await;
    let read = format!(
        "const input = document.querySelector({} + ' [data-field=' + JSON.stringify({}) + ']');
         return document.getElementById(input.id + '-error').textContent;",
        json!(form(label)),
        json!(field)
    );
    b.eval(&read).await.as_str().unwrap_or_default().to_owned()
}

/// The positions of the audit log's events on the page, in the order shown.
async fn audit_seqs(b: &Browser) -> Vec<u64> {
    let seqs = b
        .eval(
            "return [...document.querySelectorAll('.audit-event')].map(e => Number(e.dataset.seq))",
        )
        .await;
    serde_json::from_value(seqs).unwrap()
}

/// Clicks the button `action` of the list entry matching `item`, then its confirmation.
async fn confirm(b: &Browser, item: &str, action: &str) {
    b.click(&format!("{item} button[data-action='{action}']"))
        .await;
    b.click(&format!("{item} button[data-confirm='{action}']"))
        .await;
}

fn admin(t: &TestServer) -> String {
    t.server.admin_token().unwrap().to_owned()
}

#[tokio::test]
async fn an_admin_creates_changes_and_deletes_worlds_agents_and_chats() {
    let t = TestServer::start().await;
    let b = Browser::signed_in(&t, "manage-catalog", &admin(&t)).await;

    b.click("#nav-manage").await;
    b.click(".manage-overview a[href='/manage/worlds']").await;
    fill(&b, "New world", "name", "bad name!").await;
    submit(&b, "New world").await;
    let error = field_error(&b, "New world", "name", "not a valid name").await;
    assert!(error.contains("name"), "{error}");
    fill(&b, "New world", "name", "lab").await;
    fill(&b, "New world", "description", "Where agents try things").await;
    submit(&b, "New world").await;
    b.wait_for("li[data-name='lab']").await;
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(world["description"], "Where agents try things");

    b.click("li[data-name='lab'] button[data-action='edit']")
        .await;
    fill(&b, "Change world lab", "description", "Renamed place").await;
    submit(&b, "Change world lab").await;
    b.wait_text("li[data-name='lab']", "Renamed place").await;
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(world["description"], "Renamed place");

    // An agent: the server's error lands next to the field it names.
    b.click(".manage-nav a[href='/manage/agents']").await;
    fill(&b, "New agent", "name", "helper").await;
    fill(&b, "New agent", "llm.base_url", "ftp://models.example").await;
    fill(&b, "New agent", "llm.model", "small-1").await;
    submit(&b, "New agent").await;
    field_error(&b, "New agent", "llm.base_url", "must start with http://").await;
    fill(&b, "New agent", "llm.base_url", "http://127.0.0.1:9/v1").await;
    fill(&b, "New agent", "llm.api_key_env", "MODEL_KEY").await;
    fill(&b, "New agent", "llm.temperature", "0.5").await;
    fill(&b, "New agent", "tools", "fs__read\nshell_cmd").await;
    fill(&b, "New agent", "system_prompt", "Be brief.").await;
    fill(&b, "New agent", "max_steps", "7").await;
    submit(&b, "New agent").await;
    b.wait_for("li[data-name='helper']").await;
    let agent = t
        .api
        .get("/api/v1/worlds/lab/agents/helper")
        .await
        .expect(200);
    assert_eq!(
        agent["llm"],
        json!({"base_url": "http://127.0.0.1:9/v1", "model": "small-1", "api_key_env": "MODEL_KEY", "temperature": 0.5})
    );
    assert_eq!(agent["tools"], json!(["fs__read", "shell_cmd"]));
    assert_eq!(
        (&agent["system_prompt"], &agent["max_steps"]),
        (&json!("Be brief."), &json!(7))
    );

    b.click("li[data-name='helper'] button[data-action='edit']")
        .await;
    fill(&b, "Change agent helper", "llm.temperature", "3").await;
    submit(&b, "Change agent helper").await;
    field_error(
        &b,
        "Change agent helper",
        "llm.temperature",
        "between 0 and 2",
    )
    .await;
    fill(&b, "Change agent helper", "llm.temperature", "1").await;
    fill(&b, "Change agent helper", "max_steps", "9").await;
    submit(&b, "Change agent helper").await;
    b.wait_text(".manage-status", "Agent helper saved").await;
    let agent = t
        .api
        .get("/api/v1/worlds/lab/agents/helper")
        .await
        .expect(200);
    assert_eq!(
        (&agent["llm"]["temperature"], &agent["max_steps"]),
        (&json!(1.0), &json!(9))
    );
    assert_eq!(agent["llm"]["api_key_env"], "MODEL_KEY", "unchanged");

    // A chat, changed, then deleted after the inline confirmation.
    b.click(".manage-nav a[href='/manage/chats']").await;
    fill(&b, "New chat", "title", "first try").await;
    submit(&b, "New chat").await;
    b.wait_for("li[data-title='first try']").await;
    let chats = t.api.get("/api/v1/worlds/lab/chats").await.expect(200);
    assert_eq!(chats[0]["title"], "first try");
    assert_eq!(chats[0]["agent"], agent["id"]);
    b.click("li[data-title='first try'] button[data-action='edit']")
        .await;
    fill(&b, "Change chat first try", "title", "second try").await;
    submit(&b, "Change chat first try").await;
    b.wait_for("li[data-title='second try']").await;
    b.click("li[data-title='second try'] button[data-action='delete']")
        .await;
    // The first click only asks; nothing is gone yet.
    b.wait_for("li[data-title='second try'] button[data-confirm='delete']")
        .await;
    let chats = t.api.get("/api/v1/worlds/lab/chats").await.expect(200);
    assert_eq!(chats.as_array().unwrap().len(), 1);
    b.click("li[data-title='second try'] button[data-confirm='delete']")
        .await;
    b.wait_gone("li[data-title='second try']").await;
    assert_eq!(
        t.api.get("/api/v1/worlds/lab/chats").await.expect(200),
        json!([])
    );

    // A world deleted the same way.
    t.world("scratch").await;
    b.click(".manage-nav a[href='/manage/worlds']").await;
    confirm(&b, "li[data-name='scratch']", "delete").await;
    b.wait_gone("li[data-name='scratch']").await;
    t.api.get("/api/v1/worlds/scratch").await.error(404);
    b.close().await;
}

#[tokio::test]
async fn a_new_tokens_secret_is_shown_once_and_the_token_can_be_revoked() {
    let t = TestServer::start().await;
    let lab = t.world("lab").await;
    let b = Browser::signed_in(&t, "manage-tokens", &admin(&t)).await;
    b.goto("/manage/tokens").await;
    fill(&b, "New token", "name", "carol").await;
    choose(
        &b,
        &format!("{} select[name='role']", form("New token")),
        "admin: everything",
    )
    .await;
    choose(
        &b,
        &format!("{} select[name='world']", form("New token")),
        "lab",
    )
    .await;
    submit(&b, "New token").await;
    field_error(&b, "New token", "world", "admins are not limited").await;
    choose(
        &b,
        &format!("{} select[name='role']", form("New token")),
        "agent: a program that asks",
    )
    .await;
    choose(
        &b,
        &format!("{} select[name='world']", form("New token")),
        "lab",
    )
    .await;
    submit(&b, "New token").await;
    b.wait_text("#token-secret", "you will not see it again")
        .await;
    let secret = b
        .eval("return document.querySelector('#token-secret .secret').textContent")
        .await
        .as_str()
        .unwrap()
        .to_owned();
    assert!(secret.starts_with("hp_"), "{secret}");
    b.wait_for("#token-secret button").await;
    let carol = t.api.as_token(&secret);
    let me = carol.get("/api/v1/session").await.expect(200);
    assert_eq!(
        (&me["name"], &me["role"], &me["world"]),
        (&json!("carol"), &json!("agent"), &lab["id"])
    );

    b.goto("/manage/tokens").await;
    b.wait_for("li[data-name='carol']").await;
    let shown = b
        .eval(&format!(
            "return document.body.textContent.includes({})",
            json!(secret)
        ))
        .await;
    b.check(shown == json!(false), "the secret is gone after a reload")
        .await;

    confirm(&b, "li[data-name='carol']", "revoke").await;
    b.wait_gone("li[data-name='carol']").await;
    carol.get("/api/v1/session").await.error(401);
    b.close().await;
}

#[tokio::test]
async fn a_grant_is_revoked_and_the_audit_log_is_browsed_and_verified() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let hold = held(
        &raise(
            &agent,
            "lab",
            vec![approval("deploy", json!({"env": "staging"}))],
        )
        .await,
        0,
    );
    t.api
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve", "scope": "always_args"}),
        )
        .await
        .expect(200);
    // Enough events for more than one page of the log.
    for i in 0..50 {
        t.world(&format!("w{i}")).await;
    }

    let b = Browser::signed_in(&t, "manage-grants-audit", &admin(&t)).await;
    b.goto("/manage/grants").await;
    choose(&b, "#manage-world", "lab").await;
    b.wait_text(
        "li[data-tool='deploy']",
        "these arguments, anywhere in the world",
    )
    .await;
    confirm(&b, "li[data-tool='deploy']", "revoke").await;
    b.wait_gone("li[data-tool='deploy']").await;
    assert_eq!(
        t.api.get("/api/v1/worlds/lab/grants").await.expect(200),
        json!([])
    );

    b.click(".manage-nav a[href='/manage/audit']").await;
    b.wait_for(".audit-event[data-type='grant.revoked']").await;
    // Newest first: the revocation is the newest event of all.
    let first = audit_seqs(&b).await;
    assert_eq!(first.len(), 50, "{first:?}");
    assert!(first.windows(2).all(|w| w[0] > w[1]), "{first:?}");
    let head = t.api.get("/api/v1/audit/verify").await.expect(200)["head_seq"]
        .as_u64()
        .unwrap();
    assert_eq!(first[0], head);
    b.click("#audit-older").await;
    b.wait_gone(".audit-event[data-type='grant.revoked']").await;
    let second = audit_seqs(&b).await;
    assert!(second[0] < *first.last().unwrap(), "{second:?}");
    b.click("#audit-newer").await;
    b.wait_for(".audit-event[data-type='grant.revoked']").await;
    // Any place in the log, not only the next page or the one before.
    b.fill("#audit-at", "1").await;
    b.click("#audit-go").await;
    b.wait_for(".audit-event[data-seq='1']").await;
    assert_eq!(audit_seqs(&b).await, vec![1]);
    b.check(
        b.eval("return location.search").await == json!("?before=2"),
        "the page is kept in the address",
    )
    .await;
    b.click("#audit-newest").await;
    b.wait_for(".audit-event[data-type='grant.revoked']").await;

    // By type, by person, by hold.
    b.wait_for("#audit-type")
        .await
        .select_by_value("grant.created")
        .await
        .unwrap();
    b.wait_until(
        "const e = [...document.querySelectorAll('.audit-event')]; \
         return e.length === 1 && e[0].dataset.type === 'grant.created'",
        "only the grant's creation",
    )
    .await;
    b.wait_for("#audit-type")
        .await
        .select_by_value("")
        .await
        .unwrap();
    b.fill("#audit-actor", "bot").await;
    b.click("#audit-show").await;
    b.wait_until(
        "const e = [...document.querySelectorAll('.audit-event')]; \
         return e.length === 1 && e[0].dataset.type === 'hold.created'",
        "only what bot did",
    )
    .await;
    b.fill("#audit-actor", "").await;
    b.fill("#audit-hold", &hold).await;
    b.click("#audit-show").await;
    b.wait_until(
        &format!(
            "const e = [...document.querySelectorAll('.audit-event')]; \
             const types = e.map(x => x.dataset.type); \
             return e.length >= 2 && e.every(x => x.querySelector('a[href=\"/holds/{hold}\"]')) \
               && types[types.length - 1] === 'hold.created' && types.includes('hold.decided')"
        ),
        "the hold's events, newest first",
    )
    .await;
    b.check(
        b.eval("return location.search").await == json!(format!("?hold={hold}")),
        "the filter is kept in the address",
    )
    .await;
    b.fill("#audit-hold", "").await;
    b.click("#audit-show").await;
    b.wait_for(".audit-event[data-type='grant.revoked']").await;

    b.click("#audit-verify").await;
    b.wait_text("#audit-result", "Intact").await;
    let report = t.api.get("/api/v1/audit/verify").await.expect(200);
    let said = b
        .eval("return document.getElementById('audit-result').textContent")
        .await;
    let said = said.as_str().unwrap();
    assert!(
        said.contains(&format!("all {} events", report["events"])),
        "{said}"
    );
    b.close().await;
}

#[tokio::test]
async fn a_webhook_is_created_listed_with_its_deliveries_and_deleted() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let b = Browser::signed_in(&t, "manage-webhooks", &admin(&t)).await;
    b.goto("/manage/webhooks").await;
    fill(&b, "New webhook", "url", "not a url").await;
    submit(&b, "New webhook").await;
    field_error(&b, "New webhook", "url", "not a URL").await;
    // No event chosen: the error is on the list of events.
    b.eval("document.querySelectorAll(\"input[name='events']\").forEach(c => { c.checked = false }); return true")
        .await;
    fill(&b, "New webhook", "url", "http://127.0.0.1:9/hook").await;
    submit(&b, "New webhook").await;
    field_error(&b, "New webhook", "events", "at least one").await;
    b.click("input[name='events'][value='hold.decided']").await;
    submit(&b, "New webhook").await;
    b.wait_text("#webhook-secret", "you will not see it again")
        .await;
    b.wait_text("#webhook-secret .secret", "whsec_").await;
    let item = "li[data-url='http://127.0.0.1:9/hook']";
    b.wait_text(item, "hold.decided").await;
    let hooks = t.api.get("/api/v1/worlds/lab/webhooks").await.expect(200);
    assert_eq!(hooks[0]["url"], "http://127.0.0.1:9/hook");
    assert_eq!(hooks[0]["events"], json!(["hold.decided"]));

    b.click(&format!("{item} button[data-action='deliveries']"))
        .await;
    b.wait_text(&format!("{item} .deliveries"), "No deliveries yet")
        .await;
    confirm(&b, item, "delete").await;
    b.wait_gone(item).await;
    assert_eq!(
        t.api.get("/api/v1/worlds/lab/webhooks").await.expect(200),
        json!([])
    );
    b.close().await;
}

const POLICY: &str = r#"mode = "manual"

[[rules]]
name = "production-deploys"
tools = ["deploy"]
action = "ask"
args = [{ pointer = "/env", equals = "production" }]
quorum = 1

[[rules]]
name = "no-rm"
tools = ["shell_cmd"]
action = "deny"
command = { program = "rm" }
"#;

#[tokio::test]
async fn the_policy_page_shows_the_rules_and_explains_a_call() {
    let t = TestServer::with(POLICY, |_| {}).await;
    t.world("lab").await;
    let b = Browser::signed_in(&t, "manage-policy", &admin(&t)).await;
    b.goto("/manage/policy").await;
    b.wait_text(
        "li[data-rule='production-deploys']",
        "/env equals \"production\"",
    )
    .await;
    b.wait_text("li[data-rule='no-rm'][data-action='deny']", "rm")
        .await;
    b.wait_text(".policy-source pre", "name = \"no-rm\"").await;

    fill(&b, "Explain a call", "tool", "shell_cmd").await;
    fill(&b, "Explain a call", "arguments", "{\"command\": ").await;
    submit(&b, "Explain a call").await;
    field_error(&b, "Explain a call", "arguments", "not JSON").await;
    fill(
        &b,
        "Explain a call",
        "arguments",
        "{\"command\": \"rm -rf /tmp/x\"}",
    )
    .await;
    submit(&b, "Explain a call").await;
    b.wait_text(
        "#explain-result .explanation[data-decision='deny']",
        "rule no-rm",
    )
    .await;

    fill(&b, "Explain a call", "tool", "deploy").await;
    fill(&b, "Explain a call", "arguments", "{\"env\": \"staging\"}").await;
    submit(&b, "Explain a call").await;
    b.wait_text("#explain-result .explanation[data-decision='ask']", "mode")
        .await;
    b.close().await;
}

#[tokio::test]
async fn an_approver_reads_what_people_may_and_is_told_the_rest_is_for_admins() {
    let t = TestServer::with(POLICY, |_| {}).await;
    t.world("lab").await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "manage-approver", &alice).await;
    let link_shown = b
        .eval("const a = document.getElementById('nav-manage'); return !a.hidden && a.offsetParent !== null")
        .await;
    b.check(link_shown == json!(false), "no Manage link for an approver")
        .await;

    b.goto("/manage").await;
    b.wait_for(".manage-overview a[href='/manage/policy']")
        .await;
    let offered = b
        .eval("return [...document.querySelectorAll('.manage-nav a')].map(a => a.getAttribute('href'))")
        .await;
    assert_eq!(
        offered,
        json!([
            "/manage/chats",
            "/manage/grants",
            "/manage/audit",
            "/manage/policy"
        ])
    );
    for section in ["tokens", "worlds", "agents", "webhooks"] {
        b.goto(&format!("/manage/{section}")).await;
        b.wait_text("#manage-refused", "Only admins may manage")
            .await;
        b.check(
            b.eval("return document.querySelector('form') === null")
                .await
                == json!(true),
            &format!("no form on {section}"),
        )
        .await;
    }
    b.goto("/manage/policy").await;
    b.wait_for("li[data-rule='no-rm']").await;
    b.goto("/manage/audit").await;
    b.wait_for(".audit-event").await;
    b.check(
        b.eval("return document.getElementById('audit-verify') === null")
            .await
            == json!(true),
        "verifying the chain is for admins",
    )
    .await;
    b.close().await;
}

#[tokio::test]
async fn every_section_fits_a_phone_and_a_form_works_from_the_keyboard() {
    let t = TestServer::with(POLICY, |_| {}).await;
    t.world("a-world-with-a-rather-long-name-that-must-wrap")
        .await;
    let b = Browser::sized(&t, "manage-phone", PHONE).await;
    b.sign_in(&admin(&t)).await;
    for section in [
        "",
        "/worlds",
        "/agents",
        "/chats",
        "/grants",
        "/audit",
        "/tokens",
        "/webhooks",
        "/policy",
    ] {
        b.goto(&format!("/manage{section}")).await;
        b.wait_for(if section.is_empty() {
            ".manage-overview"
        } else {
            "section.manage:not([aria-busy])"
        })
        .await;
        b.wait_gone("main .error:not([hidden]):not(:empty)").await;
        let wide = b
            .eval("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
            .await;
        b.check(
            wide == json!(0),
            &format!("/manage{section} scrolls sideways by {wide}"),
        )
        .await;
    }

    // Keyboard only: focus the name, type, Tab on, Enter in a text field submits.
    b.goto("/manage/worlds").await;
    b.click(&format!("{} [data-field='name']", form("New world")))
        .await;
    b.keys("typed-by-keys\u{e004}described\u{e004}\u{e007}")
        .await;
    b.wait_for("li[data-name='typed-by-keys']").await;
    t.api.get("/api/v1/worlds/typed-by-keys").await.expect(200);
    b.close().await;
}

/// Waits (polling the API, with a deadline) until every grant of `world` says `expired`.
async fn grants_expire(t: &TestServer, world: &str) {
    let deadline = std::time::Instant::now() + super::PATIENCE;
    loop {
        let grants = t
            .api
            .get(&format!("/api/v1/worlds/{world}/grants"))
            .await
            .expect(200);
        let all = grants.as_array().unwrap();
        if !all.is_empty() && all.iter().all(|g| g["expired"] == json!(true)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the grants never expired: {grants}"
        );
        // Polling is the wait: the expiry is the clock's, with no event to wait on.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_grant_shows_when_it_expires_and_an_expired_one_is_marked_expired() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("bot", "agent", None).await;
    let decide = |hold: String, expires_in: &'static str| {
        let api = &t.api;
        async move {
            api.post(
                &format!("/api/v1/holds/{hold}/decision"),
                json!({"action": "approve", "scope": "always_args", "expires_in": expires_in}),
            )
            .await
            .expect(200);
        }
    };
    let short = held(
        &raise(
            &agent,
            "lab",
            vec![approval("deploy", json!({"env": "staging"}))],
        )
        .await,
        0,
    );
    decide(short.clone(), "1s").await;
    grants_expire(&t, "lab").await;
    let long = held(
        &raise(
            &agent,
            "lab",
            vec![approval("restart", json!({"service": "web"}))],
        )
        .await,
        0,
    );
    decide(long.clone(), "8h").await;

    let b = Browser::signed_in(&t, "manage-grant-expiry", &admin(&t)).await;
    b.goto("/manage/grants").await;
    choose(&b, "#manage-world", "lab").await;
    b.wait_text("li[data-tool='deploy'][data-expired='true'] h3", "expired")
        .await;
    b.wait_text("li[data-tool='deploy'] .grant-expiry.expired", "Expired")
        .await;
    b.wait_text(
        "li[data-tool='restart'][data-expired='false'] .grant-expiry",
        "lasts 8 hours",
    )
    .await;
    let live = b
        .eval("return document.querySelector(\"li[data-tool='restart']\").textContent")
        .await;
    b.check(
        !live.as_str().unwrap().contains("xpired"),
        &format!("a grant in force reads as expired: {live}"),
    )
    .await;

    // The hold page says how long its grant lasts.
    b.goto(&format!("/holds/{long}")).await;
    b.wait_text(
        ".history li[data-type='grant.created']",
        "not asked again in this world for 8 hours (until",
    )
    .await;

    let phone = Browser::sized(&t, "manage-grant-expiry-phone", PHONE).await;
    phone.sign_in(&admin(&t)).await;
    phone.goto("/manage/grants").await;
    choose(&phone, "#manage-world", "lab").await;
    phone
        .wait_for("li[data-tool='deploy'][data-expired='true']")
        .await;
    let wide = phone
        .eval("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        .await;
    phone
        .check(
            wide == json!(0),
            &format!("the grants scroll sideways by {wide}"),
        )
        .await;
    phone.close().await;
    b.close().await;
}

const WORLD_RULE: &str = "mode = \"manual\"\n\n[[rules]]\nname = \"lab deploys\"\ntools = [\"deploy\"]\naction = \"deny\"\n";

#[tokio::test]
async fn the_pages_say_a_deleted_world_a_worlds_own_rule_and_durations_in_words() {
    let t = TestServer::with(
        "mode = \"manual\"\ndefault_deadline = \"1d\"\n\n[[rules]]\nname = \"no-rm\"\ntools = [\"shell_cmd\"]\naction = \"deny\"\ncommand = { program = \"rm\" }\n",
        |_| {},
    )
    .await;
    t.world("lab").await;
    t.world("gone").await;
    t.token("dana", "approver", Some("gone")).await;
    t.api.delete("/api/v1/worlds/gone").await.expect(204);
    t.api
        .put("/api/v1/worlds/lab/policy", json!({ "text": WORLD_RULE }))
        .await
        .expect(200);
    let b = Browser::signed_in(&t, "manage-words", &admin(&t)).await;

    // The overview: nothing but the sections.
    b.goto("/manage").await;
    b.wait_for(".manage-overview").await;
    let text = b
        .eval("return document.querySelector('main').textContent")
        .await;
    let text = text.as_str().unwrap();
    b.check(
        !text.contains("null") && !text.contains("undefined"),
        &format!("stray words on /manage: {text}"),
    )
    .await;

    b.goto("/manage/tokens").await;
    b.wait_text("li[data-name='dana'] .world-deleted", "a deleted world")
        .await;

    b.goto("/manage/policy").await;
    b.wait_text(".facts", "1 day").await;
    let facts = b
        .eval("return document.querySelector('section.manage .facts').textContent")
        .await;
    b.check(
        !facts.as_str().unwrap().contains("1day"),
        &format!("a duration unspelt: {facts}"),
    )
    .await;
    choose(
        &b,
        &format!("{} select[name='world']", form("Explain a call")),
        "lab",
    )
    .await;
    fill(&b, "Explain a call", "tool", "deploy").await;
    fill(&b, "Explain a call", "arguments", "{}").await;
    submit(&b, "Explain a call").await;
    b.wait_text(
        "#explain-result .explanation[data-decision='deny']",
        "rule lab deploys of this world's own policy",
    )
    .await;
    let said = b
        .eval("return document.getElementById('explain-result').textContent")
        .await;
    b.check(
        !said.as_str().unwrap().contains("in the file"),
        &format!("a world's rule numbered in the file: {said}"),
    )
    .await;
    b.close().await;
}

#[tokio::test]
async fn an_admin_edits_a_worlds_notice_routes_as_json_and_sees_the_field_at_fault() {
    // Email configured (nothing is raised, so nothing is sent) and a group `oncall`.
    let t = TestServer::with(crate::suite::ASK_ALL, |s| {
        crate::suite::channels::mail_to(holdpoint_test_support::smtp::free_port())(s);
        s.channels.groups.insert(
            "oncall".into(),
            vec![holdpoint_server::channels::route::Member::Address(
                "carol@example.com".into(),
            )],
        );
    })
    .await;
    t.world("lab").await;
    let b = Browser::signed_in(&t, "manage-routes", &admin(&t)).await;
    b.click("#nav-manage").await;
    b.click(".manage-overview a[href='/manage/worlds']").await;
    b.wait_text("li[data-name='lab']", "only the configuration file's")
        .await;
    b.click("li[data-name='lab'] button[data-action='notice routes']")
        .await;
    let label = "Notice routes of world lab";
    fill(&b, label, "notice_routes", "[{\"to\": [").await;
    submit(&b, label).await;
    field_error(&b, label, "notice_routes", "not JSON").await;
    fill(
        &b,
        label,
        "notice_routes",
        r#"[{"to": ["dana@example.com"]}, {"to": ["nope"], "groups": ["oncall"]}]"#,
    )
    .await;
    submit(&b, label).await;
    let error = field_error(&b, label, "notice_routes", "not an email address").await;
    assert!(error.contains("notice_routes[1].to[0]"), "{error}");
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert!(world.get("notice_routes").is_none(), "{world}");

    fill(
        &b,
        label,
        "notice_routes",
        r#"[{"tool": "deploy_*", "to": ["dana@example.com"], "as": "dana", "groups": ["oncall"]}]"#,
    )
    .await;
    submit(&b, label).await;
    b.wait_text(".manage-status", "1 notice route saved").await;
    b.wait_text("li[data-name='lab']", "1 of its own").await;
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(
        world["notice_routes"],
        json!([{"tool": "deploy_*", "to": ["dana@example.com"], "as": "dana", "groups": ["oncall"]}])
    );

    // Emptied, the world's own are removed.
    b.click("li[data-name='lab'] button[data-action='notice routes']")
        .await;
    fill(&b, label, "notice_routes", "").await;
    submit(&b, label).await;
    b.wait_text(".manage-status", "its own notice routes removed")
        .await;
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert!(world.get("notice_routes").is_none(), "{world}");
    b.close().await;
}
