//! The live stream in a browser: many tabs of one browser share one stream (a browser gives a
//! server six connections), a decision is never left waiting unsent, a request that gets no
//! answer says so next to its control, and notifications go only to who may decide.

use serde_json::json;

use super::{Browser, card, lab, row};
use crate::suite::{TestServer, approval, held, live_streams, raise, streams_become};

/// The outcome of `hold` as the API has it (`pending` while it is).
async fn status_of(t: &TestServer, hold: &str) -> String {
    t.api
        .get(&format!("/api/v1/holds/{hold}"))
        .await
        .expect(200)["hold"]["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Opens the inbox in a new tab of `b`'s browser and waits until it shows `hold`.
async fn another_tab(b: &Browser, hold: &str) -> fantoccini::wd::WindowHandle {
    let tab = b.client.new_window(true).await.unwrap().handle;
    b.client.switch_to_window(tab.clone()).await.unwrap();
    b.goto("/").await;
    b.wait_for(&card(hold)).await;
    tab
}

#[tokio::test]
async fn eight_tabs_of_one_browser_share_one_stream_and_each_sees_a_decision_made_in_one() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "live-tabs").await;
    let id = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    b.wait_for(&card(&id)).await;
    let first = b.client.window().await.unwrap();
    let mut tabs = vec![first.clone()];
    // Six tabs (as many connections as a browser gives a server), then eight: each draws.
    while tabs.len() < 8 {
        tabs.push(another_tab(&b, &id).await);
        if tabs.len() == 6 {
            assert_eq!(live_streams(&t).await, 1, "six tabs, one stream");
        }
    }
    assert_eq!(live_streams(&t).await, 1, "eight tabs, one stream");

    // A decision in the first tab is sent at once, and every tab sees it.
    b.client.switch_to_window(first).await.unwrap();
    b.click(&format!("{} [data-decision=approve_once]", card(&id)))
        .await;
    holdpoint_test_support::eventually(|| {
        let (t, id) = (&t, &id);
        async move {
            match status_of(t, id).await.as_str() {
                "approved" => Ok(()),
                other => Err(format!("the hold is {other}")),
            }
        }
    })
    .await;
    for tab in &tabs[1..] {
        b.client.switch_to_window(tab.clone()).await.unwrap();
        b.wait_until(
            &format!(
                "const el = document.querySelector({}); \
                 return el === null || el.textContent.includes('Approved once by alice')",
                json!(card(&id))
            ),
            "the hold to show as approved, or to leave",
        )
        .await;
    }

    // The stream is no tab's own: closing every tab but one, the first (that opened it)
    // included, leaves it to the one left; it ends with the last.
    let kept = tabs[1].clone();
    for tab in tabs.iter().filter(|tab| **tab != kept) {
        b.client.switch_to_window(tab.clone()).await.unwrap();
        b.client.close_window().await.unwrap();
    }
    b.client.switch_to_window(kept).await.unwrap();
    let next = held(
        &raise(&agent, "lab", vec![approval("rollback", json!({}))]).await,
        0,
    );
    b.wait_for(&row(&next)).await;
    streams_become(&t, 1).await;
    close_the_last_tab(&b).await;
    streams_become(&t, 0).await;
    b.close().await;
}

/// Closes the current tab, the last of Holdpoint's, leaving a blank one so that the browser
/// stays open. (Closed, not navigated away from: a page the browser keeps in its back/forward
/// cache keeps the worker too — see the next test.)
async fn close_the_last_tab(b: &Browser) {
    let blank = b.client.new_window(true).await.unwrap().handle;
    b.client.close_window().await.unwrap();
    b.client.switch_to_window(blank).await.unwrap();
}

/// A page left for another and shown again with Back (from the browser's back/forward cache,
/// where Chromium keeps the inbox, frozen, with the worker it shares the stream through) has
/// its stream back, one of it, and shows what was raised while it was away.
#[tokio::test]
async fn an_inbox_shown_again_with_back_has_its_stream_and_what_came_meanwhile() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "live-back").await;
    let first = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    b.wait_for(&card(&first)).await;
    streams_become(&t, 1).await;

    b.goto("/signin").await;
    let meanwhile = held(
        &raise(&agent, "lab", vec![approval("rollback", json!({}))]).await,
        0,
    );
    b.client.back().await.unwrap();
    b.wait_for(&row(&meanwhile)).await;
    b.wait_for(&row(&first)).await;
    streams_become(&t, 1).await;
    // And it is live: what comes next shows without a reload.
    let next = held(
        &raise(&agent, "lab", vec![approval("restart", json!({}))]).await,
        0,
    );
    b.wait_for(&row(&next)).await;
    close_the_last_tab(&b).await;
    streams_become(&t, 0).await;
    b.close().await;
}

#[tokio::test]
async fn a_decision_that_cannot_be_sent_says_so_and_can_be_sent_again() {
    let t = TestServer::start().await;
    let (agent, b) = lab(&t, "live-unsent").await;
    let id = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    let c = card(&id);
    b.wait_for(&c).await;
    let button = format!("{c} [data-decision=approve_once]");

    // The network is gone: the request fails at once.
    b.eval(
        "window.realFetch = window.fetch; \
         window.fetch = () => Promise.reject(new TypeError('Failed to fetch')); return true",
    )
    .await;
    b.click(&button).await;
    b.wait_text(&format!("{c} [data-error=card]"), "cannot be reached")
        .await;
    b.wait_for(&format!("{button}:not([disabled])")).await;
    assert_eq!(status_of(&t, &id).await, "pending");

    // No answer in time (the browser's timer, made to fire at once).
    b.eval(
        "window.fetch = window.realFetch; \
         window.realTimeout = AbortSignal.timeout; \
         AbortSignal.timeout = () => AbortSignal.abort(new DOMException('late', 'TimeoutError')); \
         return true",
    )
    .await;
    b.click(&button).await;
    b.wait_text(&format!("{c} [data-error=card]"), "did not answer within")
        .await;
    b.wait_for(&format!("{button}:not([disabled])")).await;

    // The control works again once the request can be sent.
    b.eval("AbortSignal.timeout = window.realTimeout; return true")
        .await;
    b.click(&button).await;
    b.wait_text(&format!("{c} .outcome"), "Approved once by alice")
        .await;
    assert_eq!(status_of(&t, &id).await, "approved");
    b.close().await;
}

/// A stand-in for the browser's notifications, permission granted, and the tab hidden
/// (headless Chromium has no notifications).
async fn notifications_on(b: &Browser) {
    b.eval(
        "window.notes = []; \
         window.Notification = class { \
           constructor(title, options) { window.notes.push(options.body); } \
           static requestPermission() { return Promise.resolve('granted'); } }; \
         window.Notification.permission = 'granted'; \
         Object.defineProperty(document, 'hidden', {value: true, configurable: true}); \
         return true",
    )
    .await;
}

/// A hold that names who may decide it notifies them, and not the other approvers and admins
/// who see it (they could not decide it).
#[tokio::test]
async fn a_hold_only_carol_may_decide_notifies_only_carol() {
    let policy = r#"mode = "manual"

[[rules]]
name = "deploys"
tools = ["deploy"]
action = "ask"
approvers = ["carol"]
"#;
    let t = TestServer::with(policy, |_| {}).await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let carol = t.token("carol", "approver", None).await;
    let admin = t.server.admin_token().unwrap().to_owned();

    let b = Browser::open(&t, "live-notify").await;
    let mut seen = Vec::new();
    for (who, token, expected) in [
        ("alice", &alice, vec!["Approve rollback?"]),
        ("an admin", &admin, vec!["Approve rollback?"]),
        (
            "carol",
            &carol,
            vec!["Approve deploy?", "Approve rollback?"],
        ),
    ] {
        b.sign_in(token).await;
        b.wait_for("form.filters").await;
        notifications_on(&b).await;
        // Carol's hold first: by the time the next one is notified, it was passed over.
        let deploy = held(
            &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
            0,
        );
        let rollback = held(
            &raise(&agent, "lab", vec![approval("rollback", json!({}))]).await,
            0,
        );
        // In the list (as a row or a card, whichever the inbox shows).
        b.wait_for(&format!("[data-hold='{deploy}']")).await;
        b.wait_for(&format!("[data-hold='{rollback}']")).await;
        b.wait_until(
            "return window.notes.includes('Approve rollback?')",
            "the hold anyone may decide to be notified",
        )
        .await;
        assert_eq!(
            b.eval("return window.notes").await,
            json!(expected),
            "{who}"
        );
        seen.extend([deploy, rollback]);
        b.click("#sign-out").await;
        b.wait_for("form[action='/signin']").await;
    }
    // And carol may decide it, as the notification said.
    let carol_api = t.api.as_token(&carol);
    carol_api
        .post(
            &format!("/api/v1/holds/{}/decision", seen[4]),
            json!({"action": "approve", "scope": "once"}),
        )
        .await
        .expect(200);
    b.close().await;
}

/// Signing out in one tab ends the session's stream, which the others shared; signing in
/// again in that tab opens it again for every tab, and a tab left open meanwhile reads again
/// what it missed.
#[tokio::test]
async fn the_shared_stream_comes_back_for_every_tab_after_signing_in_again() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("deploy-bot", "agent", None).await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::signed_in(&t, "live-again", &alice).await;
    b.wait_for("form.filters").await;
    let first = b.client.window().await.unwrap();
    let before = held(
        &raise(&agent, "lab", vec![approval("deploy", json!({}))]).await,
        0,
    );
    let second = another_tab(&b, &before).await;
    streams_become(&t, 1).await;

    b.client.switch_to_window(first.clone()).await.unwrap();
    b.click("#sign-out").await;
    b.wait_for("form[action='/signin']").await;
    streams_become(&t, 0).await;
    // Raised while no stream was open: the tab left open learns of it by reading again.
    let missed = held(
        &raise(&agent, "lab", vec![approval("rollback", json!({}))]).await,
        0,
    );
    b.sign_in(&alice).await;
    b.wait_for(&format!("[data-hold='{missed}']")).await;
    streams_become(&t, 1).await;

    b.client.switch_to_window(second).await.unwrap();
    b.wait_for(&format!("[data-hold='{missed}']")).await;
    let live = held(
        &raise(&agent, "lab", vec![approval("restart", json!({}))]).await,
        0,
    );
    b.wait_for(&format!("[data-hold='{live}']")).await;
    assert_eq!(live_streams(&t).await, 1, "still one stream");
    b.close().await;
}
