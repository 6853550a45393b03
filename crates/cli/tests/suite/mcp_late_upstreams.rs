//! An upstream MCP server that is down when the gateway starts: it is tried again in the
//! background until it starts, a call of its tools meanwhile is an `isError` result that
//! names it and says why, and once it is up its tools are offered and the connected client
//! is told (`notifications/tools/list_changed`). Over stdio (`holdpoint mcp`) and HTTP
//! (`/mcp/{world}`), with `tests/mcp/fault.py` failing its first starts and the official
//! Python SDK's client (`tests/mcp/tools_client.py`).

use std::path::Path;

use serde_json::Value;
use tokio::io::BufReader;

use super::mcp::{Gateway, finished, python, script, text, until_printed};

const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "faults run"
tools = ["fault__*"]
action = "allow"
"#;

/// The fault server, failing its first `failing` starts (counted in `dir`), logging to `dir`.
fn late_server(dir: &Path, failing: u32) -> String {
    format!(
        "[mcp.servers.fault]\ncommand = {:?}\nargs = [{:?}]\n\
         env = {{ FAULT_FAIL_STARTS = \"{failing}\", FAULT_STARTS = {:?}, UPSTREAM_LOG = {:?} }}\n",
        python().display().to_string(),
        script("fault.py").display().to_string(),
        dir.join("starts").display().to_string(),
        dir.join("fault.log").display().to_string(),
    )
}

/// Runs `tools_client.py wait-for fault__echo` to its end; the lines it printed.
async fn wait_for_echo(gw: &Gateway) -> Vec<Value> {
    let child = gw
        .client_script(
            "tools_client.py",
            &["wait-for", "fault__echo", r#"{"text": "late"}"#],
        )
        .spawn()
        .unwrap();
    finished(child).await.0
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// What every transport must show: not offered and a clear error at first, then offered,
/// told, and served.
fn assert_came_up_late(lines: &[Value], dir: &Path) {
    let [first, early, told, again, late] = lines else {
        panic!("{lines:?}");
    };
    let names = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        !names(first).iter().any(|n| n.starts_with("fault__")),
        "{first}"
    );
    assert!(names(first).contains(&"ask_human".to_owned()), "{first}");
    let early = &early["early"];
    assert_eq!(early["isError"], true, "{early}");
    let said = text(early);
    assert!(
        said.contains("fault__echo was not called")
            && said.contains("MCP server \"fault\" is not running"),
        "{said}"
    );
    assert!(
        told["list_changed"].as_u64().unwrap() >= 1,
        "no notifications/tools/list_changed: {told}"
    );
    assert!(names(again).contains(&"fault__echo".to_owned()), "{again}");
    assert_eq!(late["late"]["isError"], false, "{late}");
    assert_eq!(text(&late["late"]), "echo: late");
    assert_eq!(starts(dir), 3, "two failed starts, then one that came up");
}

#[tokio::test]
async fn over_stdio_an_upstream_down_at_start_is_retried_and_its_tools_appear_once_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::with(POLICY, &late_server(dir.path(), 2)).await;
    let lines = wait_for_echo(&gw).await;
    assert_came_up_late(&lines, dir.path());
}

#[tokio::test]
async fn over_http_an_upstream_down_at_start_is_retried_and_its_tools_appear_once_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::served_with(POLICY, &late_server(dir.path(), 2)).await;
    let lines = wait_for_echo(&gw).await;
    assert_came_up_late(&lines, dir.path());
}

/// A quick server, and `slow`, which answers nothing until the file `go` in `dir` exists.
fn quick_and_slow(dir: &Path) -> String {
    let server = |name: &str, env: String| {
        format!(
            "[mcp.servers.{name}]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ UPSTREAM_LOG = {:?}{env} }}\n",
            python().display().to_string(),
            script("fault.py").display().to_string(),
            dir.join(format!("{name}.log")).display().to_string(),
        )
    };
    let go = dir.join("go").display().to_string();
    server("quick", String::new()) + &server("slow", format!(", FAULT_START_WHEN = {go:?}"))
}

/// A server slow to start delays neither the handshake nor the others: the client connects
/// and lists the quick server's tools while `slow` has not even answered `initialize`; a call
/// of a `slow` tool waits for its start; and its tools are announced once it is up.
async fn a_slow_server_delays_no_one(gw: &Gateway, dir: &Path) {
    let mut child = gw
        .client_script(
            "tools_client.py",
            &["wait-for", "slow__echo", r#"{"text": "late"}"#],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let first: Value = serde_json::from_str(&until_printed(&mut stdout, "tools").await).unwrap();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(names.contains(&"quick__echo"), "{first}");
    assert!(!names.contains(&"slow__echo"), "{first}");
    assert!(
        !dir.join("slow.log").exists(),
        "slow has not started: it waits for the file go"
    );

    std::fs::write(dir.join("go"), "").unwrap();
    let early: Value = serde_json::from_str(&until_printed(&mut stdout, "early").await).unwrap();
    assert_eq!(early["early"]["isError"], false, "{early}");
    assert_eq!(text(&early["early"]), "echo: late");
    let told: Value =
        serde_json::from_str(&until_printed(&mut stdout, "list_changed").await).unwrap();
    assert!(told["list_changed"].as_u64().unwrap() >= 1, "{told}");
    let again: Value = serde_json::from_str(&until_printed(&mut stdout, "tools").await).unwrap();
    assert!(
        again["tools"]
            .as_array()
            .unwrap()
            .contains(&Value::from("slow__echo")),
        "{again}"
    );
    let late: Value = serde_json::from_str(&until_printed(&mut stdout, "late").await).unwrap();
    assert_eq!(late["late"]["isError"], false, "{late}");
    assert!(child.wait().await.unwrap().success());
}

#[tokio::test]
async fn over_stdio_a_server_slow_to_start_delays_neither_the_handshake_nor_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::with(POLICY_QUICK_AND_SLOW, &quick_and_slow(dir.path())).await;
    a_slow_server_delays_no_one(&gw, dir.path()).await;
}

#[tokio::test]
async fn over_http_a_server_slow_to_start_delays_neither_the_handshake_nor_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::served_with(POLICY_QUICK_AND_SLOW, &quick_and_slow(dir.path())).await;
    a_slow_server_delays_no_one(&gw, dir.path()).await;
}

const POLICY_QUICK_AND_SLOW: &str = r#"
mode = "manual"

[[rules]]
name = "echoes run"
tools = ["quick__echo", "slow__echo"]
action = "allow"
"#;
