//! A world's own notice routes (`notice_routes`), set through the API: they mail the people
//! they name of that world's holds only, beside the configuration file's routes; routes the
//! server's `[channels]` cannot serve are refused naming the field, and nothing is saved.

use holdpoint_server::channels::route::Member;
use holdpoint_test_support::smtp::{Sink, python};
use serde_json::{Value, json};

use super::channels::{mail_to, notices};
use super::{ASK_ALL, TestServer, approval, held, raise};

/// A PATCH of `world`'s `notice_routes` that must be refused: the field the 422 names.
async fn refused(t: &TestServer, world: &str, routes: Value) -> String {
    let body = t
        .api
        .patch(
            &format!("/api/v1/worlds/{world}"),
            json!({ "notice_routes": routes }),
        )
        .await
        .expect(422);
    body["error"]["details"]["field"]
        .as_str()
        .unwrap_or_else(|| panic!("no field named in {body}"))
        .to_owned()
}

#[tokio::test]
async fn a_worlds_own_routes_mail_its_holds_only_and_bad_ones_are_refused_naming_the_field() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    // Email configured, a group, and no routes in the file: only the worlds' own send.
    let t = TestServer::with(ASK_ALL, |s| {
        mail_to(sink.port)(s);
        s.channels.routes.clear();
        s.channels.groups.insert(
            "oncall".into(),
            vec![Member::Address("carol@example.com".into())],
        );
    })
    .await;
    t.world("lab").await;
    t.world("other").await;
    let bot = t.caller("bot", "agent", None).await;

    let routes = json!([{
        "tool": "deploy_*", "to": ["dana@example.com"], "as": "dana", "groups": ["oncall"]
    }]);
    let w = t
        .api
        .patch("/api/v1/worlds/lab", json!({ "notice_routes": routes }))
        .await
        .expect(200);
    assert_eq!(w["notice_routes"], routes);

    // Refused, naming the field; what was saved stays.
    let two = json!([{"to": ["dana@example.com"]}, {"to": ["nope"]}]);
    assert_eq!(refused(&t, "lab", two).await, "notice_routes[1].to[0]");
    let elsewhere = json!([{"world": "other", "to": ["dana@example.com"]}]);
    assert_eq!(
        refused(&t, "lab", elsewhere).await,
        "notice_routes[0].world"
    );
    let no_group = json!([{"groups": ["oncall", "nobody"]}]);
    assert_eq!(
        refused(&t, "lab", no_group).await,
        "notice_routes[0].groups[1]"
    );
    let no_slack = json!([{"slack": ["C024BE91L"]}]);
    assert_eq!(refused(&t, "lab", no_slack).await, "notice_routes[0].slack");
    let bad_glob = json!([{"tool": "[", "to": ["dana@example.com"]}]);
    assert_eq!(refused(&t, "lab", bad_glob).await, "notice_routes[0].tool");
    let nobody = json!([{"tool": "x"}]);
    assert_eq!(refused(&t, "lab", nobody).await, "notice_routes[0].to");
    let soon = json!([{"to": ["dana@example.com"], "last_notice": "soon"}]);
    assert_eq!(
        refused(&t, "lab", soon).await,
        "notice_routes[0].last_notice"
    );
    let unknown = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"notice_routes": [{"too": ["dana@example.com"]}]}),
        )
        .await
        .expect(422);
    assert!(unknown.to_string().contains("too"), "{unknown}");
    let lab = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert_eq!(
        lab["notice_routes"], routes,
        "a refused change saved nothing"
    );
    // A new world's routes are checked the same way, and a refused one is not made.
    let body = t
        .api
        .post(
            "/api/v1/worlds",
            json!({"name": "third", "notice_routes": [{"groups": ["nobody"]}]}),
        )
        .await
        .expect(422);
    assert_eq!(
        body["error"]["details"]["field"],
        "notice_routes[0].groups[0]"
    );
    t.api.get("/api/v1/worlds/third").await.expect(404);

    // A hold of the other world first, then one of lab: the sender follows the log in order,
    // so once lab's mail is here, the other's hold was looked at and noticed nobody.
    let other = held(
        &raise(&bot, "other", vec![approval("deploy_prod", json!({}))]).await,
        0,
    );
    let hold = held(
        &raise(&bot, "lab", vec![approval("deploy_prod", json!({}))]).await,
        0,
    );
    let mut to: Vec<String> = Vec::new();
    for n in 1..=2 {
        let mail = sink.nth(n).await;
        assert!(
            mail["text"].as_str().unwrap().contains("deploy_prod"),
            "{mail}"
        );
        to.push(mail["to"].as_str().unwrap().to_owned());
    }
    to.sort();
    assert_eq!(to, ["carol@example.com", "dana@example.com"]);
    let sent = notices(&t, &hold).await;
    let dana = sent
        .iter()
        .find(|n| n["recipient"] == "dana@example.com")
        .unwrap();
    assert_eq!(dana["decides_as"], "dana");
    assert!(notices(&t, &other).await.is_empty());

    // Cleared, lab's holds reach nobody; the other world's own routes now mail its holds.
    let w = t
        .api
        .patch("/api/v1/worlds/lab", json!({"notice_routes": []}))
        .await
        .expect(200);
    assert!(w.get("notice_routes").is_none(), "{w}");
    t.api
        .patch(
            "/api/v1/worlds/other",
            json!({"notice_routes": [{"to": ["erin@example.com"]}]}),
        )
        .await
        .expect(200);
    let quiet = held(
        &raise(&bot, "lab", vec![approval("deploy_prod", json!({}))]).await,
        0,
    );
    let loud = held(
        &raise(&bot, "other", vec![approval("deploy_prod", json!({}))]).await,
        0,
    );
    let mail = sink.nth(3).await;
    assert_eq!(mail["to"], "erin@example.com");
    assert_eq!(notices(&t, &loud).await.len(), 1);
    assert!(notices(&t, &quiet).await.is_empty());
    assert_eq!(sink.messages().len(), 3);
}

#[tokio::test]
async fn routes_that_mail_need_the_servers_email() {
    // No [channels] at all: a route naming an address has nothing to send it with.
    let t = TestServer::start().await;
    t.world("lab").await;
    let body = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"notice_routes": [{"to": ["dana@example.com"]}]}),
        )
        .await
        .expect(422);
    assert_eq!(body["error"]["details"]["field"], "notice_routes[0].to");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[channels.email]"),
        "{body}"
    );
}

#[tokio::test]
async fn a_worlds_own_route_escalates_to_the_files_groups_while_nobody_decides() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let t = TestServer::with(ASK_ALL, |s| {
        mail_to(sink.port)(s);
        s.channels.routes.clear();
        s.channels.groups.insert(
            "oncall".into(),
            vec![Member::Address("carol@example.com".into())],
        );
    })
    .await;
    t.world("lab").await;
    let bot = t.caller("bot", "agent", None).await;
    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"notice_routes": [{
                "to": ["dana@example.com"], "escalate_after": "1s", "escalate_to": "oncall"
            }]}),
        )
        .await
        .expect(200);
    let hold = held(
        &raise(&bot, "lab", vec![approval("deploy_prod", json!({}))]).await,
        0,
    );
    assert_eq!(sink.nth(1).await["to"], "dana@example.com");
    let escalated = sink.nth(2).await;
    assert_eq!(escalated["to"], "carol@example.com");
    assert!(
        escalated["subject"].as_str().unwrap().contains("Escalated"),
        "{escalated}"
    );
    let purposes: Vec<Value> = notices(&t, &hold)
        .await
        .iter()
        .map(|n| n["purpose"].clone())
        .collect();
    assert_eq!(purposes, [json!("first"), json!("escalation")]);
}
