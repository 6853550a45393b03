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
