//! Email notices of holds against a real SMTP server (aiosmtpd, `tests/channels/smtp_sink.py`,
//! in `.venv-smtp`, which scripts/test installs): the mail and its card, decision links that
//! decide only when confirmed, once, as their recipient via email; altered links refused;
//! retries while the mail server is down, and after a restart.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use holdpoint_protocol::HoldKind;
use holdpoint_server::Settings;
use holdpoint_server::channels::ChannelSettings;
use holdpoint_server::channels::email::{EmailSettings, Security};
use holdpoint_server::channels::route::Route;
use holdpoint_test_support::smtp::{Sink, free_port, python};
use holdpoint_test_support::{PATIENCE, eventually};
use reqwest::Method;
use serde_json::{Value, json};

use super::{ASK_ALL, Api, TestServer, approval, held, question, raise};

/// Where links point; the tests open their paths on the test server.
pub(super) const PUBLIC_URL: &str = "https://holdpoint.example.com";

/// Email to the SMTP server on `port`; holds of world `lab` go to alice.
pub(super) fn mail_to(port: u16) -> impl FnOnce(&mut Settings) {
    move |s: &mut Settings| {
        s.channels = ChannelSettings {
            email: Some(EmailSettings {
                host: "127.0.0.1".into(),
                port: Some(port),
                security: Security::None,
                from: "Holdpoint <holdpoint@example.com>".into(),
                username_env: None,
                password_env: None,
                public_url: PUBLIC_URL.into(),
                link_lifetime: Duration::from_secs(3600),
                attempts: 50,
                backoff: Duration::from_millis(100),
                timeout: Duration::from_secs(5),
            }),
            routes: vec![
                Route {
                    world: Some("lab".into()),
                    tool: Some("shell_*".into()),
                    kind: None,
                    to: vec!["alice@example.com".into()],
                    decides_as: Some("alice".into()),
                    ..Route::default()
                },
                Route {
                    world: None,
                    tool: None,
                    kind: Some(HoldKind::Question),
                    to: vec!["bob@example.com".into()],
                    decides_as: None,
                    ..Route::default()
                },
            ],
            ..ChannelSettings::default()
        };
    }
}

/// A world `lab`, and an agent's client there.
pub(super) async fn lab(t: &TestServer) -> Api {
    t.world("lab").await;
    t.caller("bot", "agent", None).await
}

/// The paths (`/d/…`) of the links in a mail's text, by their label.
fn links(mail: &Value) -> Vec<(String, String)> {
    let text = mail["text"].as_str().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter_map(|w| {
            let path = w[1].strip_prefix(PUBLIC_URL)?;
            Some((w[0].trim_end_matches(':').to_owned(), path.to_owned()))
        })
        .collect()
}

pub(super) fn link(mail: &Value, label: &str) -> String {
    links(mail)
        .into_iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("no {label:?} link in {mail}"))
        .1
}

/// A page's status and HTML.
pub(super) async fn open(api: &Api, path: &str) -> (u16, String) {
    let r = api
        .anonymous()
        .request(Method::GET, path)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The confirm form's CSRF token on a link's page.
pub(super) fn csrf(page: &str) -> String {
    let (_, rest) = page
        .split_once("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no confirm form in {page}"));
    rest.split('"').next().unwrap().to_owned()
}

pub(super) async fn confirm(api: &Api, path: &str, csrf: &str) -> (u16, String) {
    let r = api
        .anonymous()
        .request(Method::POST, path)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            form_urlencoded::Serializer::new(String::new())
                .append_pair("csrf", csrf)
                .finish(),
        )
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

pub(super) async fn status(t: &TestServer, hold: &str) -> Value {
    t.api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200)["hold"]["status"]
        .clone()
}

pub(super) async fn notices(t: &TestServer, hold: &str) -> Vec<Value> {
    t.api
        .get(&format!("/api/v1/holds/{hold}/notices"))
        .await
        .expect(200)["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// `path`'s token with its claims changed by `change`, under the original signature.
fn altered(path: &str, change: impl FnOnce(&mut Value)) -> String {
    let token = path.strip_prefix("/d/").unwrap();
    let (body, signature) = token.split_once('.').unwrap();
    let mut claims: Value = serde_json::from_slice(&B64.decode(body).unwrap()).unwrap();
    change(&mut claims);
    let body = B64.encode(serde_json::to_vec(&claims).unwrap());
    format!("/d/{body}.{signature}")
}

#[tokio::test]
async fn a_hold_is_mailed_with_links_that_decide_only_when_confirmed_and_once() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let t = TestServer::with(ASK_ALL, mail_to(sink.port)).await;
    let bot = lab(&t).await;
    let raised = raise(
        &bot,
        "lab",
        vec![approval(
            "shell_cmd",
            json!({"command": "echo '<b>hi</b>' && rm -rf build"}),
        )],
    )
    .await;
    let hold = held(&raised, 0);

    let mail = sink.nth(1).await;
    assert_eq!(mail["rcpt_tos"], json!(["alice@example.com"]));
    assert_eq!(mail["to"], "alice@example.com");
    assert!(
        mail["subject"].as_str().unwrap().contains("shell_cmd"),
        "{mail}"
    );
    let text = mail["text"].as_str().unwrap();
    assert!(text.contains("Tool: shell_cmd"), "{text}");
    assert!(text.contains("echo '<b>hi</b>' && rm -rf build"), "{text}");
    let html = mail["html"].as_str().unwrap();
    assert!(html.contains("&lt;b&gt;hi&lt;/b&gt;"), "{html}");
    assert!(!html.contains("<b>hi</b>"), "{html}");
    let approve = link(&mail, "Approve once");
    let deny = link(&mail, "Deny");
    assert!(html.contains(&format!("{PUBLIC_URL}{approve}")), "{html}");

    // Opening the link (a scanner, a preview, the person) decides nothing.
    let (code, page) = open(&t.api, &approve).await;
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains("shell_cmd") && page.contains("&lt;b&gt;hi"),
        "{page}"
    );
    assert!(page.contains("alice"), "{page}");
    assert_eq!(status(&t, &hold).await, "pending");
    let token = csrf(&page);

    // A POST without the page's CSRF token decides nothing.
    let (code, _) = confirm(&t.api, &approve, "AAAA").await;
    assert_eq!(code, 403);
    let (code, _) = confirm(&t.api, &approve, &csrf(&open(&t.api, &deny).await.1)).await;
    assert_eq!(code, 403);
    assert_eq!(status(&t, &hold).await, "pending");

    // The agent waits while the person confirms.
    let waiting = {
        let bot = bot.clone();
        let hold = hold.clone();
        tokio::spawn(async move {
            bot.get(&format!("/api/v1/holds/{hold}/wait?timeout=30s"))
                .await
                .expect(200)
        })
    };
    let (code, page) = confirm(&t.api, &approve, &token).await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("recorded as alice via email"), "{page}");
    let waited = tokio::time::timeout(PATIENCE, waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited["hold"]["status"], "approved", "{waited}");
    assert_eq!(waited["hold"]["outcome"]["decided_by"], json!(["alice"]));

    // Recorded as alice via email in the audit log.
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    let decided: Vec<&Value> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["type"] == "hold.decided")
        .collect();
    assert_eq!(
        decided[0]["actor"],
        json!({"source": "person", "name": "alice", "role": "approver", "via": "email"})
    );

    // The same link again: already used; the other link: already decided, by alice.
    let (code, page) = open(&t.api, &approve).await;
    assert_eq!(code, 409);
    assert!(page.contains("already used"), "{page}");
    let (code, page) = confirm(&t.api, &approve, &token).await;
    assert_eq!(code, 409);
    assert!(page.contains("already used"), "{page}");
    let (code, page) = open(&t.api, &deny).await;
    assert_eq!(code, 409);
    assert!(
        page.contains("already decided") && page.contains("alice"),
        "{page}"
    );

    // The notice is listed: to whom, over what, delivered once.
    let listed = notices(&t, &hold).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["channel"], "email");
    assert_eq!(listed[0]["recipient"], "alice@example.com");
    assert_eq!(listed[0]["decides_as"], "alice");
    assert_eq!(listed[0]["status"], "delivered");
    assert_eq!(listed[0]["attempts"], 1);
    assert_eq!(listed[0]["used"], "approve_once");
    // Agents read no notices.
    bot.get(&format!("/api/v1/holds/{hold}/notices"))
        .await
        .expect(403);
    assert_eq!(sink.messages().len(), 1);
}

#[tokio::test]
async fn altered_links_are_refused_and_decide_nothing() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let t = TestServer::with(ASK_ALL, mail_to(sink.port)).await;
    let bot = lab(&t).await;
    let first = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );
    let second = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "pwd"}))],
        )
        .await,
        0,
    );
    // Not mailed: no route matches another tool.
    raise(
        &bot,
        "lab",
        vec![approval("write_file", json!({"path": "a", "content": "b"}))],
    )
    .await;
    sink.nth(2).await;
    // Which mail is which hold's: the link's claims say.
    let claims = |path: &str| -> Value {
        let body = path.strip_prefix("/d/").unwrap().split_once('.').unwrap().0;
        serde_json::from_slice(&B64.decode(body).unwrap()).unwrap()
    };
    let approve_first = sink
        .messages()
        .iter()
        .map(|m| link(m, "Approve once"))
        .find(|p| claims(p)["hold"] == first.as_str())
        .unwrap();

    let mut signature_changed = approve_first.clone();
    let last = signature_changed.pop().unwrap();
    signature_changed.push(if last == 'A' { 'B' } else { 'A' });
    let other_hold = altered(&approve_first, |c| c["hold"] = json!(second));
    let other_digest = altered(&approve_first, |c| c["digest"] = json!("0".repeat(64)));
    let other_recipient = altered(&approve_first, |c| c["to"] = json!("mallory@example.com"));
    let other_name = altered(&approve_first, |c| c["decides_as"] = json!("admin"));
    let other_decision = altered(&approve_first, |c| c["decision"] = json!("deny"));
    for path in [
        &signature_changed,
        &other_hold,
        &other_digest,
        &other_recipient,
        &other_name,
        &other_decision,
        &"/d/nonsense".to_owned(),
    ] {
        let (code, page) = open(&t.api, path).await;
        assert_eq!(code, 403, "{path}: {page}");
        assert!(
            page.contains("not valid") && page.contains("Nothing was decided"),
            "{page}"
        );
        // Even with the real link's CSRF token.
        let real = csrf(&open(&t.api, &approve_first).await.1);
        let (code, _) = confirm(&t.api, path, &real).await;
        assert_eq!(code, 403, "{path}");
    }
    assert_eq!(status(&t, &first).await, "pending");
    assert_eq!(status(&t, &second).await, "pending");
    assert_eq!(sink.messages().len(), 2);
}

#[tokio::test]
async fn notices_are_retried_while_the_mail_server_is_down_and_after_a_restart() {
    let Some(python) = python() else { return };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let t = TestServer::on(dir, ASK_ALL, mail_to(port)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval("shell_cmd", json!({"command": "ls"}))],
        )
        .await,
        0,
    );
    // The failures are listed as they happen.
    let failing = eventually(|| async {
        let n = notices(&t, &hold).await;
        (n.len() == 1 && n[0]["attempts"].as_u64() >= Some(2))
            .then(|| n[0].clone())
            .ok_or_else(|| format!("no failed attempts yet: {n:?}"))
    })
    .await;
    assert_eq!(failing["status"], "pending", "{failing}");
    assert!(
        failing["last_error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{failing}"
    );

    // Stopped while the notice is pending, started again: it is sent then, once.
    let TestServer {
        server, _dir: dir, ..
    } = t;
    server.stop().await.unwrap();
    let sink = Sink::start(&python, port).await;
    assert!(data.exists());
    let t = TestServer::on(dir, ASK_ALL, mail_to(port)).await;
    let mail = sink.nth(1).await;
    assert_eq!(mail["rcpt_tos"], json!(["alice@example.com"]));
    let delivered = eventually(|| async {
        let n = notices(&t, &hold).await;
        (n[0]["status"] == "delivered")
            .then(|| n[0].clone())
            .ok_or_else(|| format!("not delivered yet: {n:?}"))
    })
    .await;
    assert!(delivered["sent_at"].is_string(), "{delivered}");
    assert_eq!(delivered.get("last_error"), None);
    // And not again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.messages().len(), 1);
}

#[tokio::test]
async fn a_question_is_answered_from_its_mail() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let t = TestServer::with(ASK_ALL, mail_to(sink.port)).await;
    let bot = lab(&t).await;
    let hold = held(
        &raise(&bot, "lab", vec![question("Deploy now?", &["yes", "no"])]).await,
        0,
    );
    let mail = sink.nth(1).await;
    // The question's route, not the shell commands' one: bob, deciding as his address.
    assert_eq!(mail["rcpt_tos"], json!(["bob@example.com"]));
    assert!(
        mail["text"]
            .as_str()
            .unwrap()
            .contains("Question: Deploy now?")
    );
    let labels: Vec<String> = links(&mail).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["Answer: yes", "Answer: no"]);
    let yes = link(&mail, "Answer: yes");
    let (code, page) = open(&t.api, &yes).await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(status(&t, &hold).await, "pending");
    let (code, page) = confirm(&t.api, &yes, &csrf(&page)).await;
    assert_eq!(code, 200, "{page}");
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(detail["hold"]["status"], "answered");
    assert_eq!(
        detail["hold"]["outcome"]["decided_by"],
        json!(["bob@example.com"])
    );
    assert_eq!(
        detail["hold"]["outcome"]["options"],
        json!([{"id": "yes", "label": "yes"}])
    );
}
