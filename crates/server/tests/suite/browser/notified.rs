//! The hold page's "Notified" list: who was notified, why (first notice, escalation), over
//! what, and how the delivery went, failures with their reason.

use holdpoint_server::channels::route::{Groups, Member, NamedMember};
use holdpoint_test_support::eventually;
use holdpoint_test_support::smtp::{Sink, free_port, python};
use serde_json::json;

use super::Browser;
use crate::suite::channels::{lab, mail_to};
use crate::suite::{ASK_ALL, TestServer, approval, held, raise};

#[tokio::test]
async fn the_hold_page_lists_who_was_notified_and_how_it_went() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let port = sink.port;
    let t = TestServer::with(ASK_ALL, move |s| {
        mail_to(port)(s);
        s.channels.routes[0].escalate_after = Some("1s".into());
        s.channels.routes[0].escalate_to = vec!["oncall".into()];
        let mut groups = Groups::new();
        groups.insert(
            "oncall".into(),
            vec![Member::Named(NamedMember {
                address: "carol@example.com".into(),
                decides_as: "carol".into(),
            })],
        );
        s.channels.groups = groups;
    })
    .await;
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
    sink.nth(2).await;
    let t = &t;
    let hold = &hold;
    eventually(|| async move {
        let n = t
            .api
            .get(&format!("/api/v1/holds/{hold}/notices"))
            .await
            .expect(200);
        (n["items"][1]["status"] == "delivered")
            .then_some(())
            .ok_or_else(|| format!("not delivered yet: {n}"))
    })
    .await;

    let b = Browser::signed_in(t, "notified", &t.token("alice", "approver", None).await).await;
    b.goto(&format!("/holds/{hold}")).await;
    b.wait_text(
        ".notices-section li[data-purpose=first]",
        "Notified alice@example.com (deciding as alice) by email: delivered",
    )
    .await;
    b.wait_text(
        ".notices-section li[data-purpose=escalation]",
        "Escalated to (step 1) carol@example.com (deciding as carol) by email: delivered",
    )
    .await;
    b.close().await;
}

#[tokio::test]
async fn a_notice_that_cannot_be_delivered_shows_why() {
    let Some(_) = python() else { return };
    // Nothing listens there: every attempt fails.
    let t = TestServer::with(ASK_ALL, mail_to(free_port())).await;
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
    let t = &t;
    let hold = &hold;
    eventually(|| async move {
        let n = t
            .api
            .get(&format!("/api/v1/holds/{hold}/notices"))
            .await
            .expect(200);
        (n["items"][0]["attempts"].as_u64() >= Some(1))
            .then_some(())
            .ok_or_else(|| format!("no attempt yet: {n}"))
    })
    .await;
    let b = Browser::signed_in(
        t,
        "notice-failed",
        &t.token("alice", "approver", None).await,
    )
    .await;
    b.goto(&format!("/holds/{hold}")).await;
    b.wait_text(
        ".notices-section li[data-status=pending]",
        "not delivered yet",
    )
    .await;
    b.wait_for(".notices-section li[data-status=pending] .notice-error")
        .await;
    b.close().await;
}
