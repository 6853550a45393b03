//! Every view of the web UI passes axe-core, Deque's accessibility engine (from npm; scripts/test
//! installs it in `.npm-ui`), with no serious or critical violation, at a desktop's width and
//! at a phone's: the inbox empty and full, a hold, the worlds, a world, a chat, a world's
//! policy, every section of /manage, and the sign-in page. At a phone's width, no view
//! scrolls sideways either.

use std::path::Path;

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Browser, PHONE};
use crate::suite::{TestServer, approval, held, lab_chat, raise};

/// axe-core's source, as scripts/test installed it.
fn axe_source() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.npm-ui/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/test installs axe-core there)",
            path.display()
        )
    })
}

/// The serious and critical violations axe-core finds on the page `b` shows, each with the
/// elements at fault.
async fn serious(b: &Browser, axe: &str) -> Vec<Value> {
    // Loaded into the page by WebDriver, which the page's Content-Security-Policy does not
    // govern; once per page, since a navigation starts afresh.
    b.eval(&format!("{axe}\n;return true;")).await;
    let found = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, {resultTypes: ['violations']}).then(r => done(
               r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => ({id: v.id, impact: v.impact, help: v.help,
                             nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))}))
             ), e => done([{id: 'axe failed', help: String(e)}]));",
            vec![],
        )
        .await;
    match found {
        Ok(Value::Array(v)) => v,
        other => b.fail(&format!("axe-core did not run: {other:?}")).await,
    }
}

/// Opens each of `views` (a path, and what shows it is drawn) and checks it.
async fn check_views(b: &Browser, axe: &str, views: &[(String, &str)]) {
    let mut failures = Vec::new();
    for (path, drawn) in views {
        b.goto(path).await;
        b.wait_for(drawn).await;
        let found = serious(b, axe).await;
        if !found.is_empty() {
            failures.push(json!({"view": path, "violations": found}));
        }
        let sideways = b
            .eval("return document.documentElement.scrollWidth - window.innerWidth")
            .await;
        if sideways.as_i64().unwrap_or(0) > 0 {
            failures.push(json!({"view": path, "scrolls sideways by (px)": sideways}));
        }
    }
    b.check(
        failures.is_empty(),
        &format!(
            "serious accessibility violations, or views wider than the window: {}",
            serde_json::to_string_pretty(&failures).unwrap()
        ),
    )
    .await;
}

#[tokio::test]
async fn every_view_has_no_serious_accessibility_violation_on_a_desktop_or_a_phone() {
    let t = TestServer::start().await;
    let admin = t.server.admin_token().unwrap().to_owned();
    let axe = axe_source();
    let signin = Browser::open(&t, "axe-signin").await;
    check_views(&signin, &axe, &[("/signin".to_owned(), "form")]).await;
    signin.close().await;

    // The first-run inbox, before anything exists.
    let empty = Browser::signed_in(&t, "axe-empty", &admin).await;
    check_views(&empty, &axe, &[("/".to_owned(), "main#page")]).await;
    empty.close().await;

    let llm = ScriptedLlm::start(vec![Step::calls(vec![call(
        "c1",
        "write_file",
        json!({"path": "notes.txt", "content": "hello"}),
    )])])
    .await;
    let chat = lab_chat(&t, &llm.base_url(), Some("Deploys")).await;
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "write it"}),
        )
        .await
        .expect(202);
    let agent = t
        .api
        .as_token(&t.token("coder", "agent", Some("lab")).await);
    let raised = raise(
        &agent,
        "lab",
        vec![
            approval("shell_cmd", json!({"command": "rm -rf build"})),
            approval("deploy", json!({"env": "prod"})),
        ],
    )
    .await;
    let hold = held(&raised, 0);
    let views = [
        ("/".to_owned(), "[data-hold]"),
        (format!("/holds/{hold}"), "article.card.hold"),
        ("/worlds".to_owned(), "main#page h1"),
        ("/worlds/lab".to_owned(), "main#page h1"),
        (format!("/worlds/lab/chats/{chat}"), ".transcript"),
        ("/worlds/lab/policy".to_owned(), "main#page h1"),
        ("/manage/tokens".to_owned(), "form"),
        ("/manage/worlds".to_owned(), "form"),
        ("/manage/agents".to_owned(), "main#page h2"),
        ("/manage/chats".to_owned(), "main#page h2"),
        ("/manage/grants".to_owned(), "main#page h2"),
        ("/manage/webhooks".to_owned(), "form"),
        ("/manage/audit".to_owned(), ".audit-event"),
        ("/manage/policy".to_owned(), "main#page h2"),
    ];
    let desktop = Browser::signed_in(&t, "axe-desktop", &admin).await;
    check_views(&desktop, &axe, &views).await;
    desktop.close().await;
    let phone = Browser::sized(&t, "axe-phone", PHONE).await;
    phone.sign_in(&admin).await;
    check_views(&phone, &axe, &views).await;
    phone.close().await;
}
