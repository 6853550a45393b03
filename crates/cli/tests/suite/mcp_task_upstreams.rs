//! Upstream tools that must be called as tasks (MCP 2025-11-25's `execution.taskSupport:
//! "required"`), from the other client's side: `tests/mcp/tasking.py` requires them for its
//! `slow_write`, over stdio and over streamable HTTP (JSON answers, and server-sent events),
//! and the official Python SDK's client (`tests/mcp/task_client.py`) calls it through
//! `holdpoint mcp` and through the server's `/mcp/lab`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use holdpoint_test_support::eventually;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Child;

use super::mcp::{Gateway, finished, python, script, text};
use super::mcp_elicit::{NOTE, printed, stdout};

/// Echoing is fine; writing is asked (manual mode).
const POLICY: &str = r#"
mode = "manual"

[[rules]]
name = "echoing is fine"
tools = ["tk__echo"]
action = "allow"
"#;

/// What the upstream logged (see the script).
fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The calls of `slow_write` the upstream ran.
fn ran(log: &Path) -> Vec<Value> {
    logged(log)
        .into_iter()
        .filter(|e| e["tool"] == "slow_write")
        .collect()
}

/// `tasking.py` as server `tk` on stdio, logging to `log`.
fn stdio_section(log: &Path) -> String {
    format!(
        "[mcp.servers.tk]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ UPSTREAM_LOG = {:?} }}\n",
        python().display().to_string(),
        script("tasking.py").display().to_string(),
        log.display().to_string(),
    )
}

/// `tasking.py` serving streamable HTTP, logging to `log` (answering with server-sent events
/// when `events`); the process (killed when dropped) and its section.
async fn http_upstream(dir: &Path, log: &Path, events: bool) -> (Child, String) {
    let port_file = dir.join("port");
    let mut command = tokio::process::Command::new(python());
    command
        .arg(script("tasking.py"))
        .arg("--http")
        .arg(&port_file)
        .env("UPSTREAM_LOG", log)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if events {
        command.env("TASKING_SSE", "1");
    }
    let child = command.spawn().unwrap();
    let port =
        eventually(|| async { std::fs::read_to_string(&port_file).map_err(|e| e.to_string()) })
            .await;
    let section = format!("[mcp.servers.tk]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    (child, section)
}

fn client(gw: &Gateway, args: &[&str]) -> Child {
    gw.client_script("task_client.py", args)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Everything a client sees of `tk__slow_write`, in one gateway whose upstream logs to `log`.
async fn required_tools_are_listed_so_and_run_as_tasks(gw: &Gateway, log: &Path) {
    // Listed truthfully: slow_write only as a task; echo (a plain tool upstream) either way,
    // since Holdpoint runs its own tasks.
    let (lines, _) = finished(client(gw, &["list"])).await;
    let execution = &lines[0]["execution"];
    assert_eq!(
        execution["tk__slow_write"],
        json!({"taskSupport": "required"})
    );
    assert_eq!(execution["tk__echo"], json!({"taskSupport": "optional"}));

    // A plain call is refused as the revision says, before anything is asked or run.
    let (lines, _) = finished(client(gw, &["call", "tk__slow_write", NOTE])).await;
    let error = &lines[0]["error"];
    assert_eq!(error["code"], -32601, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("tk__slow_write must be called as a task"),
        "{error}"
    );
    let holds = gw
        .lab
        .admin
        .get("/api/v1/holds?status=any")
        .await
        .expect(200);
    assert_eq!(holds["items"], json!([]), "{holds}");
    assert_eq!(ran(log), Vec::<Value>::new());
    // A plain tool of the same server is called plainly.
    let (lines, _) = finished(client(gw, &["call", "tk__echo", r#"{"text": "hi"}"#])).await;
    assert_eq!(text(&lines[0]["result"]), "echo: hi", "{lines:?}");

    // As a task: held, approved, then run once as the upstream's task, whose result is the
    // result of Holdpoint's.
    let mut child = client(gw, &["task", "tk__slow_write", NOTE]);
    let mut out = stdout(&mut child);
    let created = printed(&mut out, "created").await;
    assert_eq!(created["task"]["status"], "working", "{created}");
    let hold = gw.lab.pending_hold().await;
    assert_eq!(
        hold["spec"]["mcp"],
        json!({"server": "tk", "tool": "slow_write"})
    );
    assert_eq!(
        ran(log),
        Vec::<Value>::new(),
        "nothing runs before approval"
    );
    gw.decide(&hold, json!({"action": "approve"})).await;
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(text(&result), "wrote a: hello");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        created["task"]["taskId"],
        "{result}"
    );
    assert_eq!(printed(&mut out, "task").await["status"], "completed");
    assert_eq!(
        ran(log),
        [json!({"tool": "slow_write", "arguments": {"name": "a", "text": "hello"}})]
    );
    let requests: Vec<Value> = logged(log)
        .into_iter()
        .filter_map(|e| e.get("request").cloned())
        .collect();
    assert!(requests.contains(&json!("tasks/get")), "{requests:?}");
    assert_eq!(
        requests.last(),
        Some(&json!("tasks/result")),
        "{requests:?}"
    );

    // Denied: the upstream never hears of it.
    let before = logged(log).len();
    let mut child = client(gw, &["task", "tk__slow_write", NOTE]);
    let mut out = stdout(&mut child);
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "deny", "reason": "not now"}))
        .await;
    let result = printed(&mut out, "result").await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("not now"), "{result}");
    assert_eq!(printed(&mut out, "task").await["status"], "failed");
    assert_eq!(logged(log).len(), before, "{:?}", logged(log));

    // Canceled while the upstream's task runs: that task is canceled too.
    let forever = r#"{"name": "b", "text": "forever"}"#;
    let mut child = client(gw, &["task-cancel", "tk__slow_write", forever]);
    let mut out = stdout(&mut child);
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "approve"})).await;
    eventually(|| async {
        let running = ran(log).len() == 2;
        running
            .then_some(())
            .ok_or_else(|| format!("{:?}", logged(log)))
    })
    .await;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"cancel\n").await.unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(printed(&mut out, "canceled").await["status"], "cancelled");
    assert_eq!(printed(&mut out, "task").await["status"], "cancelled");
    eventually(|| async {
        let canceled = logged(log).iter().any(|e| e.get("canceled").is_some());
        canceled
            .then_some(())
            .ok_or_else(|| format!("{:?}", logged(log)))
    })
    .await;
    assert_eq!(ran(log).len(), 2, "{:?}", logged(log));
}

fn log_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("upstream.log")
}

#[tokio::test]
async fn a_stdio_upstream_s_required_tool_is_listed_so_and_called_as_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(&dir);
    let gw = Gateway::with(POLICY, &stdio_section(&log)).await;
    required_tools_are_listed_so_and_run_as_tasks(&gw, &log).await;
}

#[tokio::test]
async fn over_http_an_http_upstream_s_required_tool_is_listed_so_and_called_as_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(&dir);
    let (_upstream, section) = http_upstream(dir.path(), &log, false).await;
    let gw = Gateway::served_with(POLICY, &section).await;
    required_tools_are_listed_so_and_run_as_tasks(&gw, &log).await;
}

#[tokio::test]
async fn an_http_upstream_answering_with_events_has_its_required_tool_called_as_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(&dir);
    let (_upstream, section) = http_upstream(dir.path(), &log, true).await;
    let gw = Gateway::with(POLICY, &section).await;
    required_tools_are_listed_so_and_run_as_tasks(&gw, &log).await;
}
