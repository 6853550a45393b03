//! The hold card of an MCP tool's call says which server and which tool it is, with the hints
//! the server declares.

use serde_json::json;

use super::{Browser, PHONE};
use crate::suite::{TestServer, held, raise};

#[tokio::test]
async fn an_mcp_tools_hold_card_names_the_server_and_the_tool() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("gateway", "agent", None).await;
    let item = json!({
        "kind": "approval",
        "tool": "fs__write_file",
        "arguments": {"path": "/srv/lab/out.txt", "content": "hello"},
        "annotations": {"destructive": true},
        "mcp": {"server": "fs", "tool": "write_file"},
    });
    let id = held(&raise(&agent, "lab", vec![item]).await, 0);
    let b = Browser::signed_in(&t, "mcp-card", &t.token("alice", "approver", None).await).await;
    b.goto(&format!("/holds/{id}")).await;
    let card = format!("article.hold[data-hold='{id}']");
    b.wait_text(&format!("{card} .mcp .mcp-server"), "fs").await;
    b.wait_text(&format!("{card} .mcp .mcp-tool"), "write_file")
        .await;
    b.wait_text(&format!("{card} .mcp"), "the server says: destructive")
        .await;
    b.close().await;
}

/// What alice's MCP client is called when she answers in it.
const VIA: &str = "MCP elicitation in claude-code 2.1.0";

/// alice approves `id` through her MCP client (as the gateway decides what she answers in an
/// elicitation: her token, the client's name as `Holdpoint-Via`).
async fn approve_in_the_client(alice: &holdpoint_test_support::http::Api, id: &str) {
    let request = alice
        .request(
            reqwest::Method::POST,
            &format!("/api/v1/holds/{id}/decision"),
        )
        .header("Holdpoint-Via", VIA)
        .json(&json!({"action": "approve", "reason": "looks right"}));
    alice.send(request).await.expect(200);
}

#[tokio::test]
async fn a_decision_made_in_an_mcp_client_shows_the_client_on_the_decided_card() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let agent = t.caller("gateway", "agent", None).await;
    let item = json!({
        "kind": "approval",
        "tool": "fs__write_file",
        "arguments": {"path": "/srv/lab/a-rather-long-directory-name/out.txt", "content": "hello"},
        "annotations": {"destructive": true},
        "mcp": {"server": "fs", "tool": "write_file"},
    });
    let id = held(&raise(&agent, "lab", vec![item]).await, 0);
    let token = t.token("alice", "approver", None).await;
    let alice = t.api.as_token(&token);
    let card = format!("article.hold[data-hold='{id}']");

    // Open while pending: the card follows the decision made elsewhere, and names the client.
    let b = Browser::signed_in(&t, "mcp-via", &token).await;
    b.goto(&format!("/holds/{id}")).await;
    b.wait_for(&format!(
        "{card}[data-status='pending'] [data-decision='approve_once']"
    ))
    .await;
    b.screenshot("pending-desktop").await;
    approve_in_the_client(&alice, &id).await;
    b.wait_text(
        &format!("{card}[data-status='approved'] .outcome .via-client"),
        VIA,
    )
    .await;
    b.wait_text(&format!("{card} .outcome"), "Approved once by alice")
        .await;
    b.wait_text(&format!("{card} .mcp .mcp-server"), "fs").await;
    // The history names the person once, and the client they answered in.
    b.wait_text("ol.history", &format!("(via {VIA})")).await;
    let history = b
        .eval("return document.querySelector('ol.history').textContent")
        .await;
    let history = history.as_str().unwrap();
    assert_eq!(history.matches("alice").count(), 1, "{history}");
    b.screenshot("decided-desktop").await;
    b.close().await;

    // Opened once decided, on a phone: the same, without sideways scrolling.
    let phone = Browser::sized(&t, "mcp-via-phone", PHONE).await;
    phone.sign_in(&token).await;
    phone.goto(&format!("/holds/{id}")).await;
    phone
        .wait_text(&format!("{card} .outcome .via-client"), VIA)
        .await;
    phone
        .wait_text(&format!("{card} .mcp .mcp-tool"), "write_file")
        .await;
    let wide = phone
        .eval("return document.documentElement.scrollWidth > document.documentElement.clientWidth")
        .await;
    assert_eq!(wide, json!(false), "the page scrolls sideways at 375 px");
    phone.screenshot("decided-phone").await;
    phone
        .eval("document.querySelector('article.hold .outcome').scrollIntoView(); return true")
        .await;
    phone.screenshot("decided-phone-outcome").await;
    phone.close().await;
}
