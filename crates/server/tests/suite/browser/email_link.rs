//! A decision link from an email, opened in Chromium at a phone's width: the card fits, and
//! confirming decides the hold as the link's recipient.

use holdpoint_test_support::smtp::{Sink, python};
use serde_json::json;

use super::{Browser, PHONE};
use crate::suite::channels::{lab, link, mail_to, status};
use crate::suite::{ASK_ALL, TestServer, approval, held, raise};

#[tokio::test]
async fn a_link_opened_on_a_phone_shows_the_card_and_decides_when_confirmed() {
    let Some(python) = python() else { return };
    let sink = Sink::start(&python, 0).await;
    let t = TestServer::with(ASK_ALL, mail_to(sink.port)).await;
    let bot = lab(&t).await;
    let long = "x".repeat(300);
    let hold = held(
        &raise(
            &bot,
            "lab",
            vec![approval(
                "shell_cmd",
                json!({"command": format!("echo <script>alert(1)</script> {long}")}),
            )],
        )
        .await,
        0,
    );
    let approve = link(&sink.nth(1).await, "Approve once");

    let b = Browser::sized(&t, "email-link", PHONE).await;
    b.goto(&approve).await;
    b.wait_text("pre", "echo <script>alert(1)</script>").await;
    b.wait_text("main", "You decide as alice").await;
    b.check(
        b.eval("return document.documentElement.scrollWidth <= window.innerWidth")
            .await
            == json!(true),
        "the page fits a phone's width",
    )
    .await;
    b.check(
        b.eval("return document.querySelectorAll('script').length")
            .await
            == json!(0),
        "the arguments' markup is text",
    )
    .await;
    b.check(
        status(&t, &hold).await == "pending",
        "opening the link decides nothing",
    )
    .await;

    b.click("form button[type=submit]").await;
    b.wait_text("main", "recorded as alice via email").await;
    b.check(status(&t, &hold).await == "approved", "confirming approves")
        .await;

    // Back to the link: it was used.
    b.goto(&approve).await;
    b.wait_text("main", "already used").await;
    b.close().await;
}
