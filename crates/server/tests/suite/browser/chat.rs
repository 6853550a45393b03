//! Worlds, a world's page and a chat in a browser, with the scripted LLM: streamed text, tool
//! calls as cards with their hold card inline, the locked composer, cancelling a turn, safe
//! Markdown, and a reload that shows exactly the state on the server.

use holdpoint_client::Client;
use holdpoint_protocol::{MarkdownNode, PageParams};
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Browser, PHONE};
use crate::suite::{TestServer, lab_chat};

/// Types `text` into the composer and sends it.
async fn send(b: &Browser, text: &str) {
    b.wait_until(
        "return !document.querySelector('#message').disabled",
        "the composer to be open",
    )
    .await;
    b.fill("#message", text).await;
    b.click(".composer button[type=submit]").await;
}

/// Waits until the composer is locked for `why` (`hold` or `turn`), or open (`""`).
async fn composer(b: &Browser, why: &str) {
    let script = format!(
        "const s = document.querySelector('#composer-status'); \
         return !!s && s.dataset.lock === {why} && document.querySelector('#message').disabled === {locked} \
           && document.querySelector('.composer button[type=submit]').disabled === {locked}",
        why = json!(why),
        locked = !why.is_empty(),
    );
    b.wait_until(&script, &format!("the composer locked for {why:?}"))
        .await;
}

const HOLD: &str = ".call[data-call='c1'] .call-hold article.card.hold[data-hold]";

#[tokio::test]
async fn a_tool_call_holds_the_chat_until_approved_inline_and_a_reload_shows_the_same() {
    let llm = ScriptedLlm::start(vec![
        Step::Calls {
            text: Some("Let me check the host.".into()),
            calls: vec![call("c1", "shell_cmd", json!({"command": "echo hi"}))],
            fragments: 3,
        },
        Step::text("It says hi. Next:\n\n- one\n- *two*\n\n```sh\necho hi\n```\n"),
    ])
    .await;
    let t = TestServer::start().await;
    let id = lab_chat(&t, &llm.base_url(), Some("Deploys")).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "chat-hold", &alice).await;

    // Worlds → world → chat, by the links.
    b.goto("/worlds").await;
    b.click("a[href='/worlds/lab']").await;
    b.wait_text(".entries.agents", "helper").await;
    b.click(&format!("a[href='/worlds/lab/chats/{id}']")).await;
    b.wait_text("h1", "Deploys").await;
    composer(&b, "").await;

    send(&b, "Check the host").await;
    b.wait_text(".msg.user", "Check the host").await;
    b.wait_text(".msg.assistant", "Let me check the host.")
        .await;
    b.wait_text(".call[data-call='c1'] .args", "$ echo hi")
        .await;
    let hold = b.wait_for(HOLD).await.attr("data-hold").await.unwrap();
    let hold = hold.expect("the card names its hold");
    b.wait_for(".call[data-call='c1'][data-status='held']")
        .await;
    composer(&b, "hold").await;
    b.wait_text("#composer-status", "waits for a decision")
        .await;
    b.check(
        b.eval("return !document.querySelector('.cancel-turn').hidden")
            .await
            == Value::Bool(true),
        "a running turn can be cancelled",
    )
    .await;

    // A reload shows the same: the card in place, pending, and the composer locked.
    b.client.refresh().await.unwrap();
    b.wait_for(&format!(
        ".call[data-call='c1'] .call-hold article.card.hold[data-hold='{hold}'][data-status='pending']"
    ))
    .await;
    b.wait_text(".msg.assistant", "Let me check the host.")
        .await;
    composer(&b, "hold").await;

    b.click(&format!("{HOLD} button[data-decision='approve_once']"))
        .await;
    b.wait_for(".call[data-call='c1'][data-status='executed']")
        .await;
    b.wait_text(".call[data-call='c1'] details.output pre", "hi")
        .await;
    b.wait_text(".call[data-call='c1'] .call-status", "Executed")
        .await;
    // The final answer is rendered Markdown: a list and a code block.
    b.wait_text(".msg.assistant .md ul li em", "two").await;
    b.wait_text(
        ".msg.assistant .md pre.code[data-language='sh'] code",
        "echo hi",
    )
    .await;
    composer(&b, "").await;
    b.check(
        b.eval("return document.querySelector('.cancel-turn').hidden")
            .await
            == Value::Bool(true),
        "no turn to cancel",
    )
    .await;
    b.wait_gone(".msg.streaming").await;
    b.close().await;
}

#[tokio::test]
async fn a_question_is_answered_inline_and_its_answer_shown_on_the_call() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "q1",
            "ask_human",
            json!({"question": "Which colour?", "options": [
                {"id": "blue", "label": "Blue"}, {"id": "red", "label": "Red"}
            ]}),
        )]),
        Step::text("Blue it is."),
    ])
    .await;
    let t = TestServer::start().await;
    let id = lab_chat(&t, &llm.base_url(), Some("Deploys")).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "chat-question", &alice).await;
    b.goto(&format!("/worlds/lab/chats/{id}")).await;
    send(&b, "Paint it").await;
    let card = ".call[data-call='q1'] .call-hold article.card.hold[data-status='pending']";
    b.wait_for(card).await;
    composer(&b, "hold").await;
    b.click(&format!("{card} input[name='option'][value='blue']"))
        .await;
    b.click(&format!("{card} button[data-decision='answer']"))
        .await;
    b.wait_for(".call[data-call='q1'][data-status='answer']")
        .await;
    b.wait_text(".call[data-call='q1'] .call-status", "Blue")
        .await;
    b.wait_text(".msg.assistant .md", "Blue it is.").await;
    composer(&b, "").await;
    b.close().await;
}

#[tokio::test]
async fn a_running_turn_streams_its_text_and_can_be_cancelled() {
    let llm = ScriptedLlm::start(vec![Step::Stall]).await;
    let t = TestServer::start().await;
    let first = lab_chat(&t, &llm.base_url(), Some("Deploys")).await;
    let token = t.server.admin_token().unwrap();
    let b = Browser::signed_in(&t, "chat-cancel", token).await;
    // A new chat from the world's page, with its agent.
    b.goto("/worlds/lab").await;
    b.click(".entries.agents button[aria-label='New chat with helper']")
        .await;
    b.wait_until(
        &format!(
            "return location.pathname.startsWith('/worlds/lab/chats/') && !location.pathname.endsWith({})",
            json!(first)
        ),
        "the new chat's page",
    )
    .await;
    let path = b.path().await;
    let id = path.rsplit('/').next().unwrap();
    b.wait_text(".composer label", "Your message").await;
    send(&b, "Think hard").await;
    // The LLM sent a first piece and went quiet: it shows as it arrived, as plain text.
    b.wait_for(".msg.streaming .plain:not(:empty)").await;
    composer(&b, "turn").await;
    b.wait_text("#composer-status", "is working").await;

    b.click(".cancel-turn").await;
    b.wait_text(".turn-end", "canceled").await;
    composer(&b, "").await;
    b.wait_gone(".msg.streaming").await;
    let turns = t
        .api
        .get(&format!("/api/v1/worlds/lab/chats/{id}/messages"))
        .await
        .expect(200);
    let turn = turns["items"][0]["message"]["turn"].as_str().unwrap();
    let turn = t
        .api
        .get(&format!("/api/v1/worlds/lab/turns/{turn}"))
        .await
        .expect(200);
    assert_eq!(turn["status"], "canceled");
    b.close().await;
}

/// What an LLM might write to break out of text.
const HOSTILE: &str = "Hi <img src=x onerror=\"window.__hp=1;alert(1)\"> and \
    <script>window.__hp=2;alert(2)</script> and [click me](javascript:window.__hp=3) \
    and </textarea><b id=injected>bold</b> and **strong**";

#[tokio::test]
async fn markdown_from_the_llm_is_shown_safely_and_fits_a_phone() {
    let llm = ScriptedLlm::start(vec![Step::text(HOSTILE)]).await;
    let t = TestServer::start().await;
    let id = lab_chat(&t, &llm.base_url(), Some("Deploys")).await;
    let token = t.server.admin_token().unwrap();
    let title = "<img src=x onerror=alert(5)></textarea>";
    t.api
        .patch("/api/v1/worlds/lab", json!({"description": HOSTILE}))
        .await
        .expect(200);
    t.api
        .patch(
            &format!("/api/v1/worlds/lab/chats/{id}"),
            json!({"title": title}),
        )
        .await
        .expect(200);
    let b = Browser::sized(&t, "chat-xss", PHONE).await;
    b.sign_in(token).await;
    // The world's description and the chat's title are text on the world's page.
    b.goto("/worlds/lab").await;
    b.wait_text("main p", "<script>window.__hp=2").await;
    b.wait_text(".entries.chats a", title).await;
    assert_nothing_injected(&b, "the world's page").await;
    b.goto(&format!("/worlds/lab/chats/{id}")).await;
    b.wait_text("h1", title).await;
    send(&b, "<img src=x onerror=alert(9)> </textarea>").await;
    b.wait_text(
        ".msg.user .plain",
        "<img src=x onerror=alert(9)> </textarea>",
    )
    .await;
    b.wait_text(".msg.assistant .md strong", "strong").await;
    composer(&b, "").await;
    let md = b
        .eval("return document.querySelector('.msg.assistant .md').textContent")
        .await;
    let md = md.as_str().unwrap();
    for shown in [
        "<img src=x onerror=",
        "<script>window.__hp=2",
        "</textarea><b id=injected>",
        "click me",
    ] {
        assert!(md.contains(shown), "{shown:?} is shown as text in {md:?}");
    }
    assert_nothing_injected(&b, "the chat").await;
    b.check(b.client.get_alert_text().await.is_err(), "no dialog opened")
        .await;

    // The typed client reads the same rendered form: nodes, the HTML among their text.
    let client = Client::new(&t.server.url(), token.to_owned()).unwrap();
    let page = client
        .messages("lab", &id, &PageParams::default())
        .await
        .unwrap();
    let rendered: Vec<Value> = page
        .items
        .iter()
        .map(|m| serde_json::to_value(&m.rendered).unwrap())
        .collect();
    assert_eq!(
        rendered[0],
        Value::Null,
        "a person's message is not Markdown"
    );
    let [MarkdownNode::Paragraph { children }] = page.items[1].rendered.as_deref().unwrap() else {
        panic!("one paragraph: {:?}", rendered[1]);
    };
    assert!(
        matches!(&children[0], MarkdownNode::Text { text } if text.starts_with("Hi <img src=x onerror=")),
        "{children:?}"
    );
    assert!(
        children
            .iter()
            .any(|c| matches!(c, MarkdownNode::Strong { .. })),
        "{children:?}"
    );
    assert!(!rendered[1].to_string().contains("href"), "{}", rendered[1]);
    b.screenshot("phone").await;
    b.close().await;
}

/// No element came from the hostile text, no link leads off this server, no payload ran, and
/// the page does not scroll sideways.
async fn assert_nothing_injected(b: &Browser, page: &str) {
    let found = b
        .eval(
            "return { \
               elements: document.querySelectorAll('main img, main script, #injected, main b').length, \
               links: [...document.querySelectorAll('main a')].filter(a => !a.href.startsWith(location.origin)).length, \
               ran: window.__hp === undefined ? null : window.__hp, \
               wide: document.documentElement.scrollWidth - document.documentElement.clientWidth }",
        )
        .await;
    assert_eq!(
        found,
        json!({"elements": 0, "links": 0, "ran": null, "wide": 0}),
        "{page}: nothing injected, nothing ran, no sideways scrolling"
    );
}

/// The visible elements under `css` whose own text includes `text`, counted.
async fn visible_with(b: &Browser, css: &str, text: &str) -> u64 {
    let script = format!(
        "return [...document.querySelectorAll({})].filter(e => e.checkVisibility() && e.textContent.includes({})).length",
        json!(css),
        json!(text)
    );
    b.eval(&script).await.as_u64().unwrap_or(0)
}

#[tokio::test]
async fn each_calls_card_shows_it_once_a_write_as_its_difference_and_survives_a_reload() {
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "shell_cmd", json!({"command": "echo hi"}))]),
        Step::text("It said hi."),
        Step::calls(vec![call(
            "c2",
            "write_file",
            json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
        )]),
        Step::text("Written."),
        Step::calls(vec![call(
            "c3",
            "write_file",
            json!({"path": "notes.txt", "content": "one\nTWO\nthree\n"}),
        )]),
        Step::text("Left as it is."),
    ])
    .await;
    let t = TestServer::start().await;
    let id = lab_chat(&t, &llm.base_url(), Some("Notes")).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "chat-cards", &alice).await;
    b.goto(&format!("/worlds/lab/chats/{id}")).await;

    // The command once: not on the call, again on its card and again among the arguments.
    send(&b, "Say hi").await;
    let c1 = ".call[data-call='c1'] .call-hold article.card.hold[data-status='pending']";
    b.wait_for(c1).await;
    let shown = visible_with(
        &b,
        ".call[data-call='c1'] pre, .call[data-call='c1'] dd",
        "echo hi",
    )
    .await;
    b.check(shown == 1, &format!("the command is shown {shown} times"))
        .await;
    // The digest is behind a disclosure; approve once and deny are up front.
    b.check(
        b.eval(&format!(
            "const c = document.querySelector({}); const d = c.querySelector('.digest'); \
             return !d.checkVisibility() && !!d.closest('details') \
               && c.querySelector('.buttons.first [data-decision=approve_once]') !== null \
               && c.querySelector('.buttons.first [data-decision=deny]') !== null \
               && c.querySelector('[data-decision=deny_stop]') !== null",
            json!(c1)
        ))
        .await
            == json!(true),
        "the digest is folded, approve once and deny up front, and the turn can be stopped",
    )
    .await;
    b.click(&format!("{c1} button[data-decision='approve_once']"))
        .await;
    b.wait_for(".call[data-call='c1'][data-status='executed']")
        .await;
    composer(&b, "").await;

    // A new file: nothing is there, so all of it is added.
    send(&b, "Write the notes").await;
    let c2 = ".call[data-call='c2'] .call-hold article.card.hold[data-status='pending']";
    b.wait_text(&format!("{c2} .file-state[data-file='new']"), "New file")
        .await;
    b.wait_for(&format!("{c2} .diff[data-added='3'][data-removed='0']"))
        .await;
    b.click(&format!("{c2} button[data-decision='approve_once']"))
        .await;
    b.wait_for(".call[data-call='c2'][data-status='executed']")
        .await;
    composer(&b, "").await;

    // Over the file as it is now: one line changed.
    send(&b, "Shout the second line").await;
    let c3 = ".call[data-call='c3'] .call-hold article.card.hold[data-status='pending']";
    b.wait_for(&format!("{c3} .file-state[data-file='changed']"))
        .await;
    b.wait_for(&format!("{c3} .diff[data-added='1'][data-removed='1']"))
        .await;
    b.wait_text(&format!("{c3} .diff-line.del"), "two").await;
    b.wait_text(&format!("{c3} .diff-line.add"), "TWO").await;
    b.fill(&format!("{c3} input[name=reason]"), "keep it lowercase")
        .await;
    b.click(&format!("{c3} button[data-decision='deny']")).await;
    b.wait_for(".call[data-call='c3'][data-status='denied_by_person']")
        .await;
    composer(&b, "").await;

    // A reload keeps every call's card: who decided, when and why.
    b.client.refresh().await.unwrap();
    b.wait_text(
        ".call[data-call='c1'] .call-hold article.card.hold .outcome",
        "Approved once by alice",
    )
    .await;
    b.wait_text(
        ".call[data-call='c2'] .call-hold article.card.hold .outcome",
        "Approved once by alice",
    )
    .await;
    b.wait_text(
        ".call[data-call='c3'] .call-hold article.card.hold .outcome",
        "Denied by alice — “keep it lowercase”",
    )
    .await;
    b.wait_for(".call[data-call='c1'] .call-hold .outcome time")
        .await;
    b.close().await;
}
