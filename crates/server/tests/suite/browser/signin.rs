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
