//! The hold card of an MCP tool's call says which server and which tool it is, with the hints
//! the server declares.

use serde_json::json;

use super::Browser;
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
