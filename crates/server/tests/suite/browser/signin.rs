//! Signing in and out in a browser.

use super::Browser;
use crate::suite::TestServer;

#[tokio::test]
async fn a_sign_in_link_opens_the_inbox_and_sign_out_ends_the_session() {
    let t = TestServer::start().await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::open(&t, "sign-in-link").await;

    b.goto("/holds/anything").await;
    b.wait_for("form[action='/signin']").await;
    b.check(
        b.path().await == "/signin",
        "a page without a session goes to sign-in",
    )
    .await;

    b.sign_in(&alice).await;
    b.check(b.path().await == "/", "the sign-in link lands on the inbox")
        .await;
    b.wait_text("#who", "alice (approver)").await;

    b.click("#sign-out").await;
    b.wait_for("form[action='/signin']").await;
    b.goto("/").await;
    b.wait_for("form[action='/signin']").await;
    b.close().await;
}

/// The sign-in link is usually followed from another site (a chat message, a mail). The
/// session cookie is `SameSite=Strict`, which a browser withholds for the whole of a
/// navigation another site started: the link must still land signed in.
#[tokio::test]
async fn a_sign_in_link_followed_from_another_site_lands_signed_in() {
    let t = TestServer::start().await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::open(&t, "sign-in-cross-site").await;
    // A page of no site at all (an opaque origin) with the link on it.
    let link = format!("{}/login?token={alice}", b.base);
    b.client
        .goto(&format!(
            "data:text/html,<a id=go href='{link}'>sign in</a>"
        ))
        .await
        .unwrap();
    b.click("#go").await;
    b.wait_text("#who", "alice (approver)").await;
    b.check(b.path().await == "/", "lands on the inbox").await;
    // The token is not in the address, nor in the history's entry for this page.
    let url = b.client.current_url().await.unwrap();
    b.check(url.query().is_none(), "no token in the address")
        .await;
    b.close().await;
}

/// Types `token` into the sign-in page's form and sends it.
async fn paste(b: &Browser, token: &str) {
    b.goto("/signin").await;
    b.fill("input[name=token]", token).await;
    b.click("form[action='/signin'] button[type=submit]").await;
}

#[tokio::test]
async fn a_pasted_token_signs_in_and_again_after_signing_out() {
    let t = TestServer::start().await;
    let alice = t.token("alice", "approver", None).await;
    let b = Browser::open(&t, "sign-in-paste").await;

    paste(&b, &alice).await;
    b.wait_text("#who", "alice (approver)").await;
    b.check(b.path().await == "/", "a pasted token lands on the inbox")
        .await;
    b.wait_for("form.filters").await;

    b.click("#sign-out").await;
    b.wait_for("form[action='/signin']").await;
    paste(&b, &alice).await;
    b.wait_text("#who", "alice (approver)").await;
    b.check(b.path().await == "/", "and again after signing out")
        .await;
    b.close().await;
}

/// Waits for the sign-in page saying `says`, with its form to try again.
async fn refused(b: &Browser, says: &str) {
    b.wait_text("p.error[role=alert]", says).await;
    b.wait_for("form[action='/signin'] input[name=token]").await;
    let json = b
        .eval("return document.body.innerText.trim().startsWith('{')")
        .await;
    b.check(json == serde_json::Value::Bool(false), "a page, not JSON")
        .await;
}

#[tokio::test]
async fn every_sign_in_that_does_not_work_is_a_page_saying_why() {
    let t = TestServer::start().await;
    let alice = t.token("alice", "approver", None).await;
    let bot = t.token("bot", "agent", None).await;
    let old = t.token("old", "approver", None).await;
    let tokens = t.api.get("/api/v1/tokens").await.expect(200);
    let id = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "old")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    t.api
        .delete(&format!("/api/v1/tokens/{id}"))
        .await
        .expect(204);
    let b = Browser::open(&t, "sign-in-refused").await;

    // A wrong token, then an agent's, pasted.
    paste(&b, &format!("{alice}x")).await;
    refused(&b, "unknown or has been revoked").await;
    paste(&b, &bot).await;
    refused(&b, "Agent tokens cannot sign in").await;
    // An old link, whose token was revoked; then an agent's link.
    b.goto(&format!("/login?token={old}")).await;
    refused(&b, "unknown or has been revoked").await;
    b.goto(&format!("/login?token={bot}")).await;
    refused(&b, "Agent tokens cannot sign in").await;
    // The form of a page of no origin (`data:`), as a login CSRF would send it: refused.
    b.client
        .goto(&format!(
            "data:text/html,<form method=post action='{}/signin'>\
             <input name=token value='{alice}'><button id=go>go</button></form>",
            b.base
        ))
        .await
        .unwrap();
    b.click("#go").await;
    refused(&b, "Signing in was refused").await;
    b.goto("/api/v1/session").await;
    b.wait_text("body", "unauthorized").await;

    // The page it lands on is a way back in.
    b.goto(&format!("/login?token={old}")).await;
    refused(&b, "unknown or has been revoked").await;
    b.fill("input[name=token]", &alice).await;
    b.click("form[action='/signin'] button[type=submit]").await;
    b.wait_text("#who", "alice (approver)").await;
    b.close().await;
}
