//! `holdpoint mcp` in front of real MCP servers and of servers that fail: the reference
//! servers `@modelcontextprotocol/server-filesystem` and `server-everything` (installed from
//! npm into `.npm-mcp` by scripts/test), and `tests/mcp/fault.py`, which crashes, hangs and
//! answers with 5 MB on request. The client is the official Python SDK's (`tests/mcp/client.py`).

use std::path::{Path, PathBuf};

use holdpoint_test_support::eventually;
use holdpoint_test_support::llm::{self, Step};
use serde_json::{Value, json};

use super::lab::Lab;
use super::mcp::{Gateway, finished, python, result_of, script, text};

/// Reading is allowed, the open world denied, the fault server allowed; creating a
/// directory is asked with a deadline of a second; the rest is asked.
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "reading is fine"
tools = ["fs__*", "everything__*"]
action = "allow"
annotations = { read_only = true }

[[rules]]
name = "nothing from the open world"
tools = ["everything__*"]
action = "deny"
annotations = { open_world = true }

[[rules]]
name = "faults run"
tools = ["fault__*"]
action = "allow"

[[rules]]
name = "directories wait a second"
tools = ["fs__create_directory"]
action = "ask"
deadline = "1s"
"#;

/// A program of a reference server, installed by scripts/test.
fn reference_server(program: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.npm-mcp/node_modules/.bin")
        .join(program);
    assert!(
        path.exists(),
        "{} is missing: scripts/test installs the reference MCP servers into .npm-mcp",
        path.display()
    );
    path.display().to_string()
}

/// The fault server's section; `extra` is added to it.
fn fault_server(extra: &str) -> String {
    format!(
        "[mcp.servers.fault]\ncommand = {:?}\nargs = [{:?}]\ncall_timeout = \"2s\"\n{extra}\n",
        python().display().to_string(),
        script("fault.py").display().to_string(),
    )
}

/// The filesystem server on `dir`, with `write_file` under `require_approval`.
fn filesystem_server(dir: &Path) -> String {
    format!(
        "[mcp.servers.fs]\ncommand = {:?}\nargs = [{:?}]\nrequire_approval = [\"write_file\"]\n",
        reference_server("mcp-server-filesystem"),
        dir.display().to_string(),
    )
}

/// Runs `steps` in one session of the client; a result for each.
async fn session(gw: &Gateway, steps: Value) -> Vec<Value> {
    let child = gw.client(&["session", &steps.to_string()]).spawn().unwrap();
    let (mut lines, _) = finished(child).await;
    lines.remove(0); // the protocol version
    lines
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({"call": tool, "arguments": arguments})
}

#[tokio::test]
async fn the_filesystem_server_reads_freely_and_writes_only_what_a_person_approves() {
    let dir = tempfile::tempdir().unwrap();
    // Its allowed directory, as the server resolves it.
    let root: PathBuf = dir.path().canonicalize().unwrap();
    let gw = Gateway::with(POLICY, &filesystem_server(&root)).await;

    let lines = gw.run(&["list"]).await;
    let tools = lines[1]["tools"].as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).cloned();
    let read = tool("fs__read_text_file").expect("fs__read_text_file is offered");
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    let write = tool("fs__write_file").expect("fs__write_file is offered");
    assert_eq!(write["annotations"]["destructiveHint"], true);
    assert!(write["inputSchema"]["properties"]["content"].is_object());

    // Reading is allowed: forwarded at once, the text intact.
    let content = "first line\nzweite Zeile: äöü ✓\n\ttabbed \"quoted\"\n";
    std::fs::write(root.join("notes.txt"), content).unwrap();
    let path = root.join("notes.txt").display().to_string();
    let read = gw.call("fs__read_text_file", json!({"path": path})).await;
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(text(&read), content);

    // Writing needs a person: approved → written.
    let approved = root.join("approved.txt");
    let client = gw
        .client(&[
            "call",
            "fs__write_file",
            &json!({"path": approved, "content": "approved text"}).to_string(),
        ])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "fs__write_file");
    assert!(!approved.exists(), "written before approval");
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(std::fs::read_to_string(&approved).unwrap(), "approved text");

    // Denied → not written.
    let denied = root.join("denied.txt");
    let client = gw
        .client(&[
            "call",
            "fs__write_file",
            &json!({"path": denied, "content": "x"}).to_string(),
        ])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "deny", "reason": "not there"}))
        .await;
    let result = result_of(client).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(&result).contains("denied by alice: not there"),
        "{result}"
    );
    assert!(!denied.exists(), "a denied write was made");
}

#[tokio::test]
async fn an_asked_call_whose_deadline_passes_gets_the_timeout_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let gw = Gateway::with(POLICY, &filesystem_server(&root)).await;
    let sub = root.join("sub");
    let result = gw.call("fs__create_directory", json!({"path": sub})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("no one decided in time"), "{result}");
    let hold = gw.lab.first_hold().await;
    let hold = gw.resolved(hold["id"].as_str().unwrap()).await;
    assert_eq!(hold["status"], "timed_out", "{hold}");
    assert!(!sub.exists(), "the call ran after its hold timed out");
}

#[tokio::test]
async fn the_everything_server_keeps_images_and_annotations_and_its_annotations_reach_policy() {
    let config = format!(
        "[mcp.servers.everything]\ncommand = {:?}\n",
        reference_server("mcp-server-everything")
    );
    let gw = Gateway::with(POLICY, &config).await;
    let results = session(
        &gw,
        json!([
            call("everything__get-tiny-image", json!({})),
            call("everything__get-sum", json!({"a": 2, "b": 40})),
            call(
                "everything__get-annotated-message",
                json!({"messageType": "error", "includeImage": true})
            ),
            call("everything__gzip-file-as-resource", json!({})),
        ]),
    )
    .await;

    // The image, byte for byte as the server has it.
    let source = std::fs::read_to_string(
        Path::new(&reference_server("mcp-server-everything"))
            .parent()
            .unwrap()
            .join("../@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js"),
    )
    .unwrap();
    let image = &results[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image")
        .expect("an image content block")
        .clone();
    assert_eq!(image["mimeType"], "image/png");
    let data = image["data"].as_str().unwrap();
    assert!(data.len() > 100);
    assert!(
        source.contains(&format!("MCP_TINY_IMAGE = \"{data}\"")),
        "the image was changed on its way"
    );

    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert!(text(&results[1]).contains("42"), "{}", results[1]);

    // Content annotations kept.
    let annotated = &results[2]["content"];
    assert_eq!(annotated[0]["annotations"]["priority"], 1.0, "{annotated}");
    assert_eq!(
        annotated[0]["annotations"]["audience"],
        json!(["user", "assistant"])
    );
    assert!(
        annotated
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image"),
        "{annotated}"
    );

    // openWorldHint = true reached policy: denied by the rule that names it.
    let denied = &results[3];
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(
        text(denied).contains("nothing from the open world"),
        "{denied}"
    );
}

#[tokio::test]
async fn an_upstream_that_crashes_mid_call_fails_that_call_and_is_started_again_for_the_next() {
    let gw = Gateway::with(POLICY, &fault_server("")).await;
    let results = session(
        &gw,
        json!([
            call("fault__echo", json!({"text": "before"})),
            call("fault__crash", json!({})),
            call("fault__echo", json!({"text": "after"})),
        ]),
    )
    .await;
    assert_eq!(text(&results[0]), "echo: before");
    let crashed = &results[1];
    assert_eq!(crashed["isError"], true, "{crashed}");
    let said = text(crashed);
    assert!(
        said.contains("MCP server \"fault\"") && said.contains("exited") && said.contains("3"),
        "{said}"
    );
    assert_eq!(results[2]["isError"], false, "{}", results[2]);
    assert_eq!(text(&results[2]), "echo: after");
    let starts = gw
        .upstream_calls()
        .iter()
        .filter(|e| e.get("started").is_some())
        .count();
    assert_eq!(starts, 2, "{:?}", gw.upstream_calls());
}

#[tokio::test]
async fn an_upstream_that_cannot_be_started_again_is_retried_only_after_a_delay() {
    let gw = Gateway::with(POLICY, "").await;
    // The fault server starts once; each later start fails.
    let once = gw.lab.data().join("started-once");
    let config = fault_server(&format!(
        "env = {{ FAULT_START_ONCE = {:?} }}",
        once.display().to_string()
    ));
    std::fs::write(gw.lab.data().join("config.toml"), config).unwrap();
    let results = session(
        &gw,
        json!([
            call("fault__crash", json!({})),
            call("fault__echo", json!({"text": "a"})),
            call("fault__echo", json!({"text": "b"})),
        ]),
    )
    .await;
    assert_eq!(results[0]["isError"], true);
    let first = text(&results[1]);
    assert!(
        first.contains("MCP server \"fault\" could not be started")
            && first.contains("attempt 1 of 5"),
        "{first}"
    );
    let second = text(&results[2]);
    assert!(
        second.contains("MCP server \"fault\" is not running")
            && second.contains("it is started again in 1s"),
        "{second}"
    );
}

#[tokio::test]
async fn a_call_that_gets_no_answer_times_out_and_is_canceled_while_other_calls_are_served() {
    let gw = Gateway::with(POLICY, &fault_server("")).await;
    let results = session(
        &gw,
        // The session goes on after the timeout (one more call), so the cancellation reaches
        // the server before the session's end stops it.
        json!([
            {"parallel": [
                call("fault__hang", json!({})),
                call("fault__echo", json!({"text": "meanwhile"})),
            ]},
            call("fault__echo", json!({"text": "after"})),
        ]),
    )
    .await;
    let [hung, echoed] = results[0]["parallel"].as_array().unwrap().as_slice() else {
        panic!("{results:?}");
    };
    assert_eq!(hung["isError"], true, "{hung}");
    assert!(
        text(hung).contains("MCP server \"fault\" did not answer within 2s (its call_timeout); the call was canceled"),
        "{hung}"
    );
    assert_eq!(text(echoed), "echo: meanwhile");
    // The server was told: its call was canceled.
    eventually(|| async {
        let logged = gw.upstream_calls();
        if logged.contains(&json!({"tool": "hang", "canceled": true})) {
            Ok(())
        } else {
            Err(format!("the hung call was not canceled: {logged:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_result_past_max_message_size_is_refused_in_bounded_memory_and_the_gateway_serves_on() {
    let gw = Gateway::with(POLICY, &fault_server("")).await;
    let results = session(
        &gw,
        json!([
            call("fault__echo", json!({"text": "warm up"})),
            {"memory": true},
            call("fault__huge", json!({"megabytes": 5})),
            call("fault__huge", json!({"megabytes": 20})),
            {"memory": true},
            call("fault__echo", json!({"text": "still here"})),
        ]),
    )
    .await;
    for huge in &results[2..4] {
        let said = text(huge);
        assert_eq!(huge["isError"], true);
        assert!(
            said.contains("MCP server \"fault\"")
                && said.contains("larger than 1 MiB (its max_message_size)"),
            "{}",
            &said[..said.len().min(300)]
        );
    }
    // Refusing 25 MB raised the gateway's resident memory by less than the 20 MB of one of
    // them: no message was read whole (reading, parsing and forwarding even the 5 MB one
    // takes several times its size). What it does grow by (buffers, the allocator's pages)
    // has been seen at up to 17 MB on loaded cores.
    let resident = |i: usize| results[i]["VmHWM"].as_u64().unwrap();
    let grew = resident(4).saturating_sub(resident(1));
    assert!(
        grew < 20_000_000 / 1024,
        "the gateway's peak resident memory grew by {grew} KiB (from {} KiB)",
        resident(1)
    );
    assert_eq!(text(&results[5]), "echo: still here");
}

/// `tests/mcp/odd.py` as server `odd`, listing the tools named in `tools` (a JSON list);
/// `extra` is added to its section.
fn odd_server(tools: Value, extra: &str) -> String {
    odd_server_later(tools, json!([]), extra)
}

/// `tests/mcp/odd.py` as server `odd`, listing `tools`, and `later` once its tool `change`
/// has been called.
fn odd_server_later(tools: Value, later: Value, extra: &str) -> String {
    format!(
        "[mcp.servers.odd]\ncommand = {:?}\nargs = [{:?}]\n\
         env = {{ ODD_TOOLS = {:?}, ODD_TOOLS_LATER = {:?} }}\n{extra}\n",
        python().display().to_string(),
        script("odd.py").display().to_string(),
        tools.to_string(),
        later.to_string(),
    )
}

/// Every tool of `odd` runs, unless something else says it is asked.
const ODD_POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "odd tools run"
tools = ["odd__*"]
action = "allow"
"#;

/// What LLMs take as a function's name.
fn fits_an_llm(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[tokio::test]
async fn tools_listed_twice_are_offered_once_and_odd_names_under_safe_ones_that_reach_the_tool() {
    let long = "x".repeat(150);
    let listed = json!(["read.file", "echo", "echo", "say hi", "grüßen", long]);
    let gw = Gateway::with(ODD_POLICY, &odd_server(listed, "")).await;
    let (lines, stderr) = finished(gw.client(&["list"]).spawn().unwrap()).await;
    assert!(
        stderr.contains("MCP server \"odd\" lists the tool \"echo\" twice"),
        "{stderr}"
    );
    let names: Vec<String> = lines[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .filter(|n| n.starts_with("odd__"))
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(names.iter().filter(|n| *n == "odd__echo").count(), 1);
    assert!(names.iter().all(|n| fits_an_llm(n)), "{names:?}");
    let named = |start: &str| names.iter().find(|n| n.starts_with(start)).unwrap().clone();
    // A call of the name offered runs the tool under its own name.
    let dotted = named("odd__read_file_");
    let spaced = named("odd__say_hi_");
    assert_eq!(text(&gw.call(&dotted, json!({})).await), "ran read.file");
    assert_eq!(text(&gw.call(&spaced, json!({"a": 1})).await), "ran say hi");
    assert_eq!(
        gw.upstream_calls(),
        [
            json!({"tool": "read.file", "arguments": {}}),
            json!({"tool": "say hi", "arguments": {"a": 1}})
        ]
    );
}

#[tokio::test]
async fn a_require_approval_entry_naming_no_tool_of_its_server_makes_every_call_of_it_asked() {
    let gw = Gateway::with(
        ODD_POLICY,
        &odd_server(
            json!(["echo", "write_note"]),
            "require_approval = [\"wirte_note\"]",
        ),
    )
    .await;
    // Policy allows it, but the server's require_approval cannot be trusted: it is asked.
    let client = gw
        .client(&["call", "odd__write_note", "{}"])
        .spawn()
        .unwrap();
    let hold = gw.lab.pending_hold().await;
    assert_eq!(hold["spec"]["tool"], "odd__write_note");
    assert_eq!(gw.upstream_calls(), Vec::<Value>::new());
    gw.decide(&hold, json!({"action": "approve"})).await;
    let (lines, stderr) = finished(client).await;
    assert_eq!(text(lines.last().unwrap()), "ran write_note");
    assert!(
        stderr.contains("require_approval of MCP server \"odd\" names [\"wirte_note\"]"),
        "{stderr}"
    );
}

/// `holdpoint config check --mcp` with `config` as the configuration file.
fn config_check(config: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_holdpoint"))
        .args(["config", "check", "--mcp", "--config"])
        .arg(&file)
        .env("HOLDPOINT_DATA", dir.path())
        .env_remove("HOLDPOINT_CONFIG")
        .output()
        .unwrap()
}

#[tokio::test]
async fn config_check_with_mcp_starts_the_servers_and_says_what_does_not_fit_their_tools() {
    let typo = config_check(&odd_server(
        json!(["echo", "echo", "write_note"]),
        "require_approval = [\"wirte_note\"]",
    ));
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("require_approval of MCP server \"odd\" names [\"wirte_note\"]"),
        "{stderr}"
    );
    assert!(stderr.contains("lists the tool \"echo\" twice"), "{stderr}");

    let fine = config_check(&odd_server(
        json!(["echo", "read.file"]),
        "require_approval = [\"read.file\"]",
    ));
    let stdout = String::from_utf8_lossy(&fine.stdout);
    assert!(
        fine.status.success(),
        "{}",
        String::from_utf8_lossy(&fine.stderr)
    );
    assert!(stdout.contains("2 tools offered"), "{stdout}");
    assert!(
        stdout.contains("Tool \"read.file\" of MCP server \"odd\" is offered as odd__read_file_"),
        "{stdout}"
    );
}

#[tokio::test]
async fn an_agents_llm_is_offered_safe_names_and_its_calls_reach_the_tools_own_names() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("odd.log");
    let section = format!(
        "[mcp.servers.odd]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ ODD_TOOLS = {:?}, UPSTREAM_LOG = {:?} }}\n",
        python().display().to_string(),
        script("odd.py").display().to_string(),
        json!(["read.file", "say hi", "echo"]).to_string(),
        log.display().to_string(),
    );
    let table: toml::Table = toml::from_str(&section).unwrap();
    let settings = holdpoint_server::Settings {
        mcp: table["mcp"].clone().try_into().unwrap(),
        ..Default::default()
    };
    // The one mapping, as the LLM is to see it.
    let dotted = holdpoint_core::mcp::tool_name("odd", "read.file");
    let steps = vec![
        Step::calls(vec![llm::call("c1", &dotted, json!({"n": 1}))]),
        Step::text("Read."),
    ];
    let lab = Lab::with_settings(steps, Some(ODD_POLICY), settings).await;
    let chat = lab
        .admin
        .post("/api/v1/worlds/lab/chats", json!({"agent": "helper"}))
        .await
        .expect(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    lab.admin
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Read the file"}),
        )
        .await
        .expect(202);
    let requests = lab.llm.wait_for_requests(2).await;
    let names: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().all(|n| fits_an_llm(n)), "{names:?}");
    assert!(names.contains(&dotted.as_str()), "{names:?}");
    assert!(names.contains(&"odd__echo"), "{names:?}");
    let result = requests[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["output"]["content"][0]["text"], "ran read.file");
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        ran.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect::<Vec<Value>>(),
        [json!({"tool": "read.file", "arguments": {"n": 1}})]
    );
}

/// An allowed call's progress, as the upstream reports it, reaches the client under the
/// client's own progress token.
async fn progress_of_an_allowed_call_reaches_the_client(gw: &Gateway) {
    let result = gw.call("odd__echo", json!({"text": "x"})).await;
    assert_eq!(text(&result), "ran echo", "{result}");
    assert_eq!(
        result["progress"],
        json!(["step 1 of echo", "step 2 of echo"]),
        "{result}"
    );
}

#[tokio::test]
async fn over_stdio_the_progress_of_an_allowed_call_reaches_the_client() {
    let gw = Gateway::with(ODD_POLICY, &odd_server(json!(["echo"]), "")).await;
    progress_of_an_allowed_call_reaches_the_client(&gw).await;
}

#[tokio::test]
async fn over_http_the_progress_of_an_allowed_call_reaches_the_client() {
    let gw = Gateway::served_with(ODD_POLICY, &odd_server(json!(["echo"]), "")).await;
    progress_of_an_allowed_call_reaches_the_client(&gw).await;
}

/// An upstream that says its tools changed is listed again, and the client is told in turn.
async fn an_upstreams_own_tool_changes_reach_the_client(gw: &Gateway) {
    // The server's start may be announced before its own change is: what is waited for is
    // the tool it adds.
    let child = gw
        .client_script("tools_client.py", &["wait-for", "odd__change", "{}"])
        .env("WAIT_FOR_TOOL", "odd__added")
        .spawn()
        .unwrap();
    let (lines, stderr) = finished(child).await;
    let [first, early, told, again, late] = &lines[..] else {
        panic!("{lines:?} {stderr}");
    };
    let has = |v: &Value, name: &str| v["tools"].as_array().unwrap().iter().any(|n| n == name);
    assert!(!has(first, "odd__added"), "{first}");
    assert_eq!(text(&early["early"]), "ran change", "{early}");
    assert!(
        told["list_changed"].as_u64().unwrap() >= 1,
        "no notifications/tools/list_changed: {told} {stderr}"
    );
    assert!(has(again, "odd__added"), "{again}");
    assert_eq!(text(&late["late"]), "ran change", "{late}");
}

#[tokio::test]
async fn over_stdio_an_upstreams_own_tool_changes_reach_the_client() {
    let servers = odd_server_later(json!(["change"]), json!(["change", "added"]), "");
    let gw = Gateway::with(ODD_POLICY, &servers).await;
    an_upstreams_own_tool_changes_reach_the_client(&gw).await;
}

#[tokio::test]
async fn over_http_an_upstreams_own_tool_changes_reach_the_client() {
    let servers = odd_server_later(json!(["change"]), json!(["change", "added"]), "");
    let gw = Gateway::served_with(ODD_POLICY, &servers).await;
    an_upstreams_own_tool_changes_reach_the_client(&gw).await;
}
