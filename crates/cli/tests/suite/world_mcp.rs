//! A world's own MCP servers from the terminal (`holdpoint worlds mcp`), and `holdpoint mcp
//! --world` serving them with their secrets, though nothing shows those.

use serde_json::Value;

use super::catalog::run;
use super::lab::Lab;
use super::mcp::{Client, finished, python, script};

/// Reading is allowed; the rest is asked.
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "reading is fine"
tools = ["own__*"]
action = "allow"
annotations = { read_only = true }
"#;

/// `client.py ARGS` as an agent, against `holdpoint mcp --world lab` (with no configuration
/// file: the servers are the world's own), or over `http` against the server's `/mcp/lab`.
/// The JSON lines it printed.
async fn client(lab: &Lab, token: &str, http: bool, args: &[&str]) -> Vec<Value> {
    client_said(lab, token, http, args).await.0
}

/// What the client printed, and its standard error (where `holdpoint mcp` warns).
async fn client_said(lab: &Lab, token: &str, http: bool, args: &[&str]) -> (Vec<Value>, String) {
    let child = Client {
        server: Some(&lab.server.url()),
        http,
        token,
        config: &lab.data().join("no-config.toml"),
        data: &lab.data().join("elsewhere"),
        upstream_log: None,
    }
    .command("client.py", args)
    .spawn()
    .unwrap();
    finished(child).await
}

/// The tool names a `list` step printed.
fn tool_names(lines: &[Value]) -> Vec<String> {
    lines[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_worlds_mcp_servers_are_managed_from_the_terminal_and_served_with_their_secrets() {
    let lab = Lab::with_policy(vec![], Some(POLICY)).await;
    std::fs::write(lab.data().join("no-config.toml"), "").unwrap();
    // The upstream logs its calls to $UPSTREAM_LOG: a value only the world's settings hold.
    let log = lab.data().join("own-upstream.log");
    let python = python().display().to_string();
    let upstream = script("upstream.py").display().to_string();
    let log_env = format!("UPSTREAM_LOG={}", log.display());
    let add = [
        "worlds",
        "mcp",
        "add",
        "lab",
        "own",
        "--command",
        &python,
        "--arg",
        &upstream,
        "--env",
        &log_env,
        "--tool",
        "echo",
        "--tool",
        "write_note",
        "--require-approval",
        "write_note",
    ];
    let (code, out, err) = run(&lab, &lab.token, &add).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("own  "), "{out}");
    assert!(out.contains("env: UPSTREAM_LOG=(hidden)"), "{out}");
    assert!(out.contains("tools: echo, write_note"), "{out}");
    assert!(out.contains("require approval: write_note"), "{out}");
    assert!(!out.contains("own-upstream.log"), "{out}");

    let (code, listed, _) = run(&lab, &lab.token, &["worlds", "mcp", "list", "lab"]).await;
    assert_eq!((code, listed.clone()), (0, out.clone()));
    let (code, listed, _) = run(
        &lab,
        &lab.token,
        &["worlds", "mcp", "list", "lab", "--json"],
    )
    .await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["own"]["env"]["UPSTREAM_LOG"], "(hidden)");

    // A bad server is refused naming the field and the tool.
    let (code, _, err) = run(
        &lab,
        &lab.token,
        &[
            "worlds",
            "mcp",
            "add",
            "lab",
            "bad",
            "--command",
            "x",
            "--tool",
            "echo",
            "--require-approval",
            "delete_all",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("mcp_servers.bad.require_approval") && err.contains("\"delete_all\""),
        "{err}"
    );

    // An agent's token is never handed the secret: `holdpoint mcp --world lab` run with one
    // does not start the server that needs it, and says where to reach it.
    let agent = lab.token("coder", "agent").await;
    let (lines, warned) = client_said(&lab, &agent, false, &["list"]).await;
    let names = tool_names(&lines);
    assert!(names.iter().all(|n| !n.starts_with("own__")), "{names:?}");
    assert!(
        warned.contains("own") && warned.contains("/mcp/lab") && !warned.contains("own-upstream"),
        "{warned}"
    );
    // An admin's `holdpoint mcp --world lab` serves it, started with its real variables.
    let names = tool_names(&client(&lab, &lab.token, false, &["list"]).await);
    assert!(names.contains(&"own__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"own__write_note".to_owned()), "{names:?}");
    assert!(!names.contains(&"own__delete_all".to_owned()), "{names:?}");
    let lines = client(
        &lab,
        &lab.token,
        false,
        &["call", "own__echo", r#"{"text": "hi"}"#],
    )
    .await;
    let result = lines.last().unwrap();
    assert_eq!(result["content"][0]["text"], "echo: hi", "{result}");
    let ran = std::fs::read_to_string(&log).unwrap();
    assert!(ran.contains("\"echo\""), "{ran}");
    // The server's /mcp/lab serves it to the agent: the server starts it.
    let over_http = tool_names(&client(&lab, &agent, true, &["list"]).await);
    assert!(over_http.contains(&"own__echo".to_owned()), "{over_http:?}");

    let (code, out, err) = run(&lab, &lab.token, &["worlds", "mcp", "remove", "lab", "own"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Deleted MCP server own of world lab."),
        "{out}"
    );
    let (_, listed, _) = run(&lab, &lab.token, &["worlds", "mcp", "list", "lab"]).await;
    assert_eq!(listed.trim(), "No MCP servers of its own.");
    // The server's set for the world is rebuilt without it.
    let over_http = tool_names(&client(&lab, &agent, true, &["list"]).await);
    assert!(
        over_http.iter().all(|n| !n.starts_with("own__")),
        "{over_http:?}"
    );
    assert!(over_http.contains(&"ask_human".to_owned()), "{over_http:?}");
    let (code, _, err) = run(&lab, &lab.token, &["worlds", "mcp", "remove", "lab", "own"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("has no MCP server \"own\""), "{err}");
}

#[tokio::test]
async fn holds_show_names_the_mcp_server_and_tool() {
    let lab = Lab::start(vec![]).await;
    let agent = lab.admin.as_token(&lab.token("gateway", "agent").await);
    let raised = agent
        .post(
            "/api/v1/worlds/lab/holds",
            serde_json::json!({"items": [{
                "kind": "approval",
                "tool": "fs__write_file",
                "arguments": {"path": "out.txt", "content": "x"},
                "mcp": {"server": "fs", "tool": "write_file"},
            }]}),
        )
        .await
        .expect(201);
    let id = raised["results"][0]["hold"]["id"].as_str().unwrap();
    let (code, out, err) = run(&lab, &lab.token, &["holds", "show", id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Approval needed: fs__write_file"), "{out}");
    assert!(out.contains("MCP server: fs, tool: write_file"), "{out}");
}
