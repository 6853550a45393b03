//! Notices after the first, against a real SMTP server (`channels.rs` starts it): escalation
//! to the next groups while nobody decides, none once somebody did, a reminder at the hold's
//! reminder time with links of its own, the last notice saying what the deadline will do, and
//! routes that match by policy rule and name groups. Delays are a second or two; every wait
//! is on a mail's arrival, with a deadline.

use holdpoint_server::Settings;
use holdpoint_server::channels::route::{Groups, Member, NamedMember, Route};
use holdpoint_test_support::smtp::{Sink, python};
use serde_json::{Value, json};

use super::channels::{PUBLIC_URL, confirm, csrf, lab, link, mail_to, notices, open, status};
use super::{ASK_ALL, TestServer, approval, held, raise};

/// Email to the SMTP server on `port` along `routes`, with groups `oncall` (carol, deciding
/// as carol) and `leads` (dave, as his address).
fn routed(port: u16, routes: Vec<Route>) -> impl FnOnce(&mut Settings) {
    move |s: &mut Settings| {
        mail_to(port)(s);
        s.channels.routes = routes;
        let mut groups = Groups::new();
        groups.insert(
            "oncall".into(),
            vec![Member::Named(NamedMember {
                address: "carol@example.com".into(),
                decides_as: "carol".into(),
            })],
        );
        groups.insert(
            "leads".into(),
            vec![Member::Address("dave@example.com".into())],
        );
        s.channels.groups = groups;
    }
}

/// Shell commands of world `lab` go to alice (deciding as alice).
fn alice() -> Route {
    Route {
        world: Some("lab".into()),
        tool: Some("shell_*".into()),
        to: vec!["alice@example.com".into()],
        decides_as: Some("alice".into()),
        ..Route::default()
    }
}

fn shell(command: &str) -> Value {
    approval("shell_cmd", json!({ "command": command }))
}

/// The hold a mail's links decide.
fn hold_of(mail: &Value) -> String {
    let text = mail["text"].as_str().unwrap();
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix(PUBLIC_URL))
        .unwrap_or_else(|| panic!("no link in {mail}"));
    let token = path.strip_prefix("/d/").unwrap();
    let body = token.split_once('.').unwrap().0;
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, body).unwrap(),
    )
    .unwrap();
    claims["hold"].as_str().unwrap().to_owned()
}

fn millis(t: &Value) -> i64 {
    let text = t.as_str().unwrap();
    let at: holdpoint_protocol::Timestamp = text.parse().unwrap();
    at.as_millis()
}

#[tokio::test]
async fn nobody_deciding_escalates_to_the_next_groups_in_turn() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let route = Route {
        escalate_after: Some("1s".into()),
        escalate_to: vec!["oncall".into(), "leads".into()],
        ..alice()
    };
    let t = TestServer::with(ASK_ALL, routed(sink.port, vec![route])).await;
    let bot = lab(&t).await;
    let raised = raise(&bot, "lab", vec![shell("make deploy")]).await;
    let hold = held(&raised, 0);
    let created = millis(&raised["results"][0]["hold"]["created_at"]);

    let first = sink.nth(1).await;
    assert_eq!(first["rcpt_tos"], json!(["alice@example.com"]));
    let second = sink.nth(2).await;
    assert_eq!(second["rcpt_tos"], json!(["carol@example.com"]));
    assert!(
        second["subject"].as_str().unwrap().contains("Escalated"),
        "{second}"
    );
    assert!(
        second["text"]
            .as_str()
            .unwrap()
            .contains("Escalated to you: nobody has decided"),
        "{second}"
    );
    let third = sink.nth(3).await;
    assert_eq!(third["rcpt_tos"], json!(["dave@example.com"]));

    // Listed with their purpose and step, each at its delay after the hold's creation.
    let listed = notices(&t, &hold).await;
    let shape: Vec<(String, String, u64)> = listed
        .iter()
        .map(|n| {
            (
                n["recipient"].as_str().unwrap().to_owned(),
                n["purpose"].as_str().unwrap().to_owned(),
                n["round"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("alice@example.com".to_owned(), "first".to_owned(), 0),
            ("carol@example.com".to_owned(), "escalation".to_owned(), 1),
            ("dave@example.com".to_owned(), "escalation".to_owned(), 2),
        ]
    );
    assert!(
        millis(&listed[1]["created_at"]) >= created + 1000,
        "{listed:?}"
    );
    assert!(
        millis(&listed[2]["created_at"]) >= created + 2000,
        "{listed:?}"
    );
    assert_eq!(listed[1]["decides_as"], "carol");

    // The escalated person's link decides, as the name their group gives them.
    let approve = link(&second, "Approve once");
    let (code, page) = open(&t.api, &approve).await;
    assert_eq!(code, 200, "{page}");
    let (code, page) = confirm(&t.api, &approve, &csrf(&page)).await;
    assert_eq!(code, 200, "{page}");
    let detail = t
        .api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200);
    assert_eq!(detail["hold"]["status"], "approved");
    assert_eq!(detail["hold"]["outcome"]["decided_by"], json!(["carol"]));
}

#[tokio::test]
async fn a_hold_decided_before_the_delay_is_not_escalated() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let route = Route {
        escalate_after: Some("2s".into()),
        escalate_to: vec!["oncall".into()],
        ..alice()
    };
    let t = TestServer::with(ASK_ALL, routed(sink.port, vec![route])).await;
    let bot = lab(&t).await;
    let decided = held(&raise(&bot, "lab", vec![shell("ls")]).await, 0);
    sink.nth(1).await;
    t.api
        .post(
            &format!("/api/v1/holds/{decided}/decision"),
            json!({"action": "deny"}),
        )
        .await
        .expect(200);
    // A second hold, raised later and left alone, escalates later than the first would
    // have: once its escalation is mailed, the first's would have been recorded.
    let open_one = held(&raise(&bot, "lab", vec![shell("pwd")]).await, 0);
    let escalated = sink.nth(3).await;
    assert_eq!(escalated["rcpt_tos"], json!(["carol@example.com"]));
    assert_eq!(hold_of(&escalated), open_one);
    let purposes: Vec<Value> = notices(&t, &decided)
        .await
        .iter()
        .map(|n| n["purpose"].clone())
        .collect();
    assert_eq!(purposes, [json!("first")]);
    assert_eq!(sink.messages().len(), 3);
}

#[tokio::test]
async fn a_reminder_is_mailed_at_the_reminder_time_with_links_of_its_own() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    // Reminded a second after it is raised.
    let policy = "mode = \"manual\"\ndefault_deadline = \"60s\"\nremind_before = \"59s\"\n";
    let t = TestServer::with(policy, routed(sink.port, vec![alice()])).await;
    let bot = lab(&t).await;
    let raised = raise(&bot, "lab", vec![shell("make release")]).await;
    let hold = held(&raised, 0);
    let remind_at = millis(&raised["results"][0]["hold"]["remind_at"]);

    let first = sink.nth(1).await;
    let reminder = sink.nth(2).await;
    assert_eq!(reminder["rcpt_tos"], json!(["alice@example.com"]));
    assert!(
        reminder["subject"].as_str().unwrap().contains("Reminder"),
        "{reminder}"
    );
    let listed = notices(&t, &hold).await;
    assert_eq!(listed[1]["purpose"], "reminder", "{listed:?}");
    assert!(millis(&listed[1]["created_at"]) >= remind_at, "{listed:?}");

    // Fresh links, which work; the first mail's then say who decided.
    let approve = link(&reminder, "Approve once");
    assert_ne!(approve, link(&first, "Approve once"));
    let (code, page) = open(&t.api, &approve).await;
    assert_eq!(code, 200, "{page}");
    let (code, page) = confirm(&t.api, &approve, &csrf(&page)).await;
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("recorded as alice via email"), "{page}");
    assert_eq!(status(&t, &hold).await, "approved");
    let (code, page) = open(&t.api, &link(&first, "Deny")).await;
    assert_eq!(code, 409);
    assert!(page.contains("already decided"), "{page}");
}

#[tokio::test]
async fn the_last_notice_says_what_the_deadline_will_do_and_when() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let policy = "mode = \"manual\"\ndefault_deadline = \"60s\"\n";
    let route = Route {
        last_notice: Some("59s".into()),
        ..alice()
    };
    let t = TestServer::with(policy, routed(sink.port, vec![route])).await;
    let bot = lab(&t).await;
    let raised = raise(&bot, "lab", vec![shell("make release")]).await;
    let hold = held(&raised, 0);
    // `2026-11-27T01:40:00.123Z` as `2026-11-27 01:40:00 UTC`.
    let deadline = raised["results"][0]["hold"]["deadline"].as_str().unwrap();
    let at = format!("{} UTC", &deadline[..19].replacen('T', " ", 1));

    sink.nth(1).await;
    let last = sink.nth(2).await;
    assert!(
        last["subject"].as_str().unwrap().contains("Last notice"),
        "{last}"
    );
    let text = last["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "If nobody decides by {at}, this call will be denied."
        )),
        "{text}"
    );
    assert!(last["html"].as_str().unwrap().contains(&at), "{last}");
    let listed = notices(&t, &hold).await;
    assert_eq!(listed[1]["purpose"], "last", "{listed:?}");
    assert_eq!(status(&t, &hold).await, "pending");
}

#[tokio::test]
async fn routes_match_by_the_rule_that_asked_and_name_groups() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let policy = "mode = \"manual\"\n\n[[rules]]\nname = \"deploys\"\ntools = [\"deploy\"]\naction = \"ask\"\n";
    let by_rule = Route {
        rule: Some("deploys".into()),
        groups: vec!["oncall".into()],
        ..Route::default()
    };
    let t = TestServer::with(policy, routed(sink.port, vec![by_rule, alice()])).await;
    let bot = lab(&t).await;
    // Asked by the mode, not the rule: alice's route only.
    let shell_hold = held(&raise(&bot, "lab", vec![shell("ls")]).await, 0);
    let mail = sink.nth(1).await;
    assert_eq!(mail["rcpt_tos"], json!(["alice@example.com"]));
    assert_eq!(hold_of(&mail), shell_hold);
    // Asked by rule "deploys": the oncall group's carol, deciding as carol.
    let deploy = held(
        &raise(&bot, "lab", vec![approval("deploy", json!({"to": "prod"}))]).await,
        0,
    );
    let mail = sink.nth(2).await;
    assert_eq!(mail["rcpt_tos"], json!(["carol@example.com"]));
    assert_eq!(hold_of(&mail), deploy);
    let listed = notices(&t, &deploy).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["decides_as"], "carol");
}
