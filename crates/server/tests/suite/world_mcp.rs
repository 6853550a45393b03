//! A world's own MCP servers: set through the API (checked like the configuration file's,
//! their secrets never shown back), and used by the world's agents next to the built-in tools,
//! through policy (annotations included), grants and holds. The upstream is the real
//! `@modelcontextprotocol/server-filesystem`, which scripts/test installs in `.npm-mcp`.

use std::path::{Path, PathBuf};

use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};

use super::{Api, TestServer, audit_after, lab_chat};

/// Reading tools run at once; destructive ones wait for a person; the rest is asked too.
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "reading is fine"
tools = ["fs__*"]
action = "allow"
annotations = { read_only = true }

[[rules]]
name = "writes need a person"
tools = ["fs__*"]
action = "ask"
annotations = { destructive = true }
"#;

/// The filesystem server's program.
fn filesystem_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.npm-mcp/node_modules/.bin/mcp-server-filesystem");
    assert!(
        path.exists(),
        "{} is missing: scripts/test installs @modelcontextprotocol/server-filesystem there",
        path.display()
    );
    path
}

/// The filesystem server, allowed `root` only.
fn fs_server(root: &Path) -> Value {
    json!({
        "command": filesystem_server(),
        "args": [root],
        "env": {"FS_TOKEN": "s3cret-value"},
        "tools": ["read_text_file", "write_file", "list_directory"],
    })
}

async fn send(api: &Api, chat: &str, text: &str) -> Value {
    api.post(
        &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
        json!({"text": text}),
    )
    .await
    .expect(202)
}

async fn decide(api: &Api, hold: &Value, decision: Value) {
    api.post(
        &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
        decision,
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn an_agent_uses_the_worlds_filesystem_server_through_policy_and_holds() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("notes.txt"), "the notes").unwrap();
    let notes = root_path.join("notes.txt");
    let written = root_path.join("out.txt");
    let refused = root_path.join("refused.txt");
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "fs__read_text_file",
            json!({"path": notes}),
        )]),
        Step::calls(vec![call(
            "c2",
            "fs__write_file",
            json!({"path": written, "content": "approved text"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let t = TestServer::with(POLICY, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"mcp_servers": {"fs": fs_server(&root_path)}}),
        )
        .await
        .expect(200);
    let alice = t.caller("alice", "approver", None).await;
    let mut stream = alice.events(&format!("?world=lab&chat={chat}"), None).await;

    send(&alice, &chat, "Copy the notes").await;
    // The LLM is offered the server's tools (those `tools` names) with their schemas, next
    // to the built-in ones.
    let first = llm.wait_for_requests(1).await;
    let offered: Vec<Value> = first[0].body["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = offered
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"shell_cmd"), "{names:?}");
    assert!(names.contains(&"fs__write_file"), "{names:?}");
    assert!(!names.contains(&"fs__move_file"), "{names:?}");
    let read = offered
        .iter()
        .find(|t| t["function"]["name"] == "fs__read_text_file")
        .unwrap();
    assert_eq!(
        read["function"]["parameters"]["properties"]["path"]["type"],
        "string"
    );

    // Reading is read-only: allowed by the rule, run at once, the server's result given back.
    let created = stream.next_of("hold.created").await;
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["approved_by"], "policy");
    assert_eq!(result["output"]["isError"], false);
    assert_eq!(
        result["output"]["content"],
        json!([{"type": "text", "text": "the notes"}])
    );

    // Writing is destructive: a hold that says which server and tool.
    let hold = created.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "fs__write_file");
    assert_eq!(
        hold["spec"]["mcp"],
        json!({"server": "fs", "tool": "write_file"})
    );
    assert_eq!(hold["spec"]["annotations"]["destructive"], true);
    assert_eq!(hold["rule"]["name"], "writes need a person");
    assert!(!written.exists(), "written before anyone approved");
    decide(&alice, &hold, json!({"action": "approve"})).await;
    stream.next_of("turn.finished").await;
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "approved text");
    let result = llm.requests()[2].tool_result("c2").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["approved_by"], "person");
    assert_eq!(result["output"]["isError"], false);

    // Denied: the server is never called.
    llm.push(Step::calls(vec![call(
        "c3",
        "fs__write_file",
        json!({"path": refused, "content": "no"}),
    )]));
    llm.push(Step::text("Understood."));
    send(&alice, &chat, "Write another").await;
    let created = stream.next_of("hold.created").await;
    decide(
        &alice,
        &created.data["payload"]["hold"],
        json!({"action": "deny", "reason": "not that one"}),
    )
    .await;
    stream.next_of("turn.finished").await;
    assert!(!refused.exists(), "a denied call ran");
    let result = llm.requests()[4].tool_result("c3").unwrap();
    assert_eq!(result["status"], "denied_by_person", "{result}");
    assert_eq!(result["reason"], "not that one");

    // Outside the server's root: the server's own error, with isError kept.
    llm.push(Step::calls(vec![call(
        "c4",
        "fs__read_text_file",
        json!({"path": "/etc/hostname"}),
    )]));
    llm.push(Step::text("It cannot."));
    send(&alice, &chat, "Read outside").await;
    stream.next_of("turn.finished").await;
    let result = llm.requests()[6].tool_result("c4").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["output"]["isError"], true, "{result}");
    assert!(
        result["output"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied"),
        "{result}"
    );

    // The server removed: its tools are no longer offered.
    t.api
        .patch("/api/v1/worlds/lab", json!({"mcp_servers": {"fs": null}}))
        .await
        .expect(200);
    llm.push(Step::text("Fine."));
    send(&alice, &chat, "What can you do?").await;
    stream.next_of("turn.finished").await;
    let last = llm.requests().pop().unwrap();
    let names: Vec<String> = last.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("fs__")), "{names:?}");
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
}

#[tokio::test]
async fn an_agents_tools_list_restricts_the_mcp_tools_and_require_approval_asks() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("a.txt"), "a").unwrap();
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![
            call("c1", "fs__list_directory", json!({"path": root_path})),
            call(
                "c2",
                "fs__read_text_file",
                json!({"path": root_path.join("a.txt")}),
            ),
        ]),
        Step::text("Listed."),
    ])
    .await;
    let t = TestServer::with(POLICY, |_| {}).await;
    t.api
        .post(
            "/api/v1/worlds",
            json!({"name": "lab", "mcp_servers": {"fs": {
                "command": filesystem_server(),
                "args": [root_path],
                "tools": ["list_directory", "read_text_file"],
                "require_approval": ["list_directory"],
            }}}),
        )
        .await
        .expect(201);
    t.api
        .post(
            "/api/v1/worlds/lab/agents",
            json!({"name": "helper", "llm": {"base_url": llm.base_url(), "model": "m"},
                   "tools": ["fs__list_*", "read_file"]}),
        )
        .await
        .expect(201);
    let chat = t
        .api
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    send(&t.api, &chat, "List").await;
    // list_directory is read-only, but `require_approval` names it: a person is asked.
    let created = stream.next_of("hold.created").await;
    let hold = created.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "fs__list_directory");
    let offers = hold["offers"].to_string();
    assert!(
        !offers.contains("approve_always") && !offers.contains("approve_chat"),
        "a call that always needs a person offers no grants: {offers}"
    );
    decide(&t.api, &hold, json!({"action": "approve"})).await;
    stream.next_of("turn.finished").await;
    let requests = llm.requests();
    let request = &requests[1];
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "fs__list_directory"]);
    let listed = request.tool_result("c1").unwrap();
    assert!(
        listed["output"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("a.txt"),
        "{listed}"
    );
    // The agent may not call a tool its list leaves out.
    let other = request.tool_result("c2").unwrap();
    assert_eq!(other["status"], "invalid_arguments", "{other}");
    assert!(
        other["error"]
            .as_str()
            .unwrap()
            .contains("no tool named \"fs__read_text_file\""),
        "{other}"
    );
}

#[tokio::test]
async fn a_worlds_servers_are_checked_and_their_secrets_never_shown() {
    let t = TestServer::start().await;
    let after = super::last_seq(&t).await;
    let bad = json!({"name": "lab", "mcp_servers": {"fs": {
        "command": "mcp-fs",
        "tools": ["read_file"],
        "require_approval": ["write_file"],
    }}});
    let reply = t.api.post("/api/v1/worlds", bad).await;
    let body = reply.expect(422);
    assert_eq!(
        body["error"]["details"]["field"],
        "mcp_servers.fs.require_approval"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"write_file\""), "{message}");

    let created = t
        .api
        .post(
            "/api/v1/worlds",
            json!({"name": "lab", "mcp_servers": {"gh": {
                "command": "github-mcp-server",
                "env": {"GITHUB_TOKEN": "ghp_secret"},
            }}}),
        )
        .await
        .expect(201);
    assert_eq!(
        created["mcp_servers"]["gh"]["env"]["GITHUB_TOKEN"],
        "(hidden)"
    );
    for (patch, field) in [
        (
            json!({"fs": {"command": "x", "tools": ["a"], "require_approval": ["b"]}}),
            "mcp_servers.fs.require_approval",
        ),
        (json!({"a__b": {"command": "x"}}), "mcp_servers.a__b"),
        (
            json!({"web": {"url": "http://h/mcp", "args": ["x"]}}),
            "mcp_servers.web.args",
        ),
        (json!({"none": {}}), "mcp_servers.none.command"),
    ] {
        let body = t
            .api
            .patch("/api/v1/worlds/lab", json!({"mcp_servers": patch}))
            .await
            .expect(422);
        assert_eq!(body["error"]["details"]["field"], field, "{body}");
    }
    let changed = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"mcp_servers": {"web": {
                "url": "https://mcp.example/",
                "headers": {"Authorization": "Bearer s3cret"},
            }}}),
        )
        .await
        .expect(200);
    // Adding one server keeps the others, with their secrets.
    assert_eq!(
        changed["mcp_servers"],
        json!({
            "gh": {"command": "github-mcp-server", "env": {"GITHUB_TOKEN": "(hidden)"}},
            "web": {"url": "https://mcp.example/", "headers": {"Authorization": "(hidden)"}},
        })
    );
    let listed = t.api.get("/api/v1/worlds").await.expect(200);
    assert!(!listed.to_string().contains("s3cret"), "{listed}");
    let shown = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert!(!shown.to_string().contains("ghp_secret"), "{shown}");
    // The log, the live stream and webhooks carry the world as the API shows it.
    let events = audit_after(&t, after).await;
    assert!(
        events
            .iter()
            .any(|e| e["payload"]["type"] == "world.updated")
    );
    let log = serde_json::to_string(&events).unwrap();
    assert!(
        !log.contains("s3cret") && !log.contains("ghp_secret"),
        "{log}"
    );

    // Only an admin reads them whole; an agent's credential is never handed a secret, and
    // other people do not read them at all.
    let servers = t
        .api
        .get("/api/v1/worlds/lab/mcp-servers")
        .await
        .expect(200);
    assert_eq!(servers["gh"]["env"]["GITHUB_TOKEN"], "ghp_secret");
    assert_eq!(servers["web"]["headers"]["Authorization"], "Bearer s3cret");
    let agent = t.caller("gateway", "agent", Some("lab")).await;
    let servers = agent
        .get("/api/v1/worlds/lab/mcp-servers")
        .await
        .expect(200);
    assert_eq!(servers["gh"]["env"]["GITHUB_TOKEN"], "(hidden)");
    assert_eq!(servers["web"]["headers"]["Authorization"], "(hidden)");
    assert!(!servers.to_string().contains("s3cret") && !servers.to_string().contains("ghp_"));
    let approver = t.caller("alice", "approver", None).await;
    approver
        .get("/api/v1/worlds/lab/mcp-servers")
        .await
        .expect(403);

    // Removing one leaves the other.
    let removed = t
        .api
        .patch("/api/v1/worlds/lab", json!({"mcp_servers": {"gh": null}}))
        .await
        .expect(200);
    assert_eq!(
        removed["mcp_servers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["web"]
    );
}

/// Deleting a world stops everything of its servers: one that cannot start is not tried
/// again (each attempt appends a line to `starts`).
#[tokio::test]
async fn deleting_a_world_stops_the_attempts_to_start_its_servers() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestServer::with(POLICY, |_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let broken = dir.path().join("broken.sh");
    std::fs::write(&broken, "#!/bin/sh\necho start >> \"$STARTS\"\nexit 1\n").unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    t.api
        .post(
            "/api/v1/worlds",
            json!({"name": "lab", "mcp_servers": {"broken": {"command": broken, "env": {"STARTS": starts}}}}),
        )
        .await
        .expect(201);
    // A gateway session is the world's first use of its servers: they are started.
    let agent = t.token("coder", "agent", Some("lab")).await;
    let as_agent = t.api.as_token(&agent);
    let opened = as_agent
        .send(
            as_agent
                .request("POST".parse().unwrap(), "/mcp/lab")
                .header("accept", "application/json, text/event-stream")
                .json(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}}),
                ),
        )
        .await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let count = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // The first start, and the retry a second later.
    holdpoint_test_support::eventually(|| async {
        if count() >= 2 {
            Ok(())
        } else {
            Err(format!("{} starts so far", count()))
        }
    })
    .await;

    t.api.delete("/api/v1/worlds/lab").await.expect(204);
    let at_deletion = count();
    // Deleted just after a start, so none was under way. The next attempt was due at most
    // 4s later (delays double: 1s, 2s, 4s): waiting longer than that shows there is none.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(
        count(),
        at_deletion,
        "started again after the world was deleted"
    );
}
