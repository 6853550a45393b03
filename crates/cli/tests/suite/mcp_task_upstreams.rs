//! Upstream tools that must be called as tasks (MCP 2025-11-25's `execution.taskSupport:
//! "required"`), from the other client's side: `tests/mcp/tasking.py` requires them for its
//! `slow_write`, over stdio and over streamable HTTP (JSON answers, and server-sent events),
//! and the official Python SDK's client (`tests/mcp/task_client.py`) calls it through
//! `holdpoint mcp` and through the server's `/mcp/lab`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use holdpoint_test_support::{PATIENCE, eventually};
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

/// Where the upstream that logs to `log` writes the messages it read and wrote
/// (`$UPSTREAM_TRAFFIC`).
fn traffic_of(log: &Path) -> PathBuf {
    log.with_extension("traffic")
}

/// What the upstream logged and every message it read and wrote, in order, for a failure's
/// message: where a call or its task got lost is seen there.
fn story(log: &Path) -> String {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("({e})\n"));
    format!(
        "\nthe upstream logged ({}):\n{}the upstream's messages ({}):\n{}",
        log.display(),
        read(log),
        traffic_of(log).display(),
        read(&traffic_of(log)),
    )
}

/// Tells the upstream's [`story`] when the test fails while it is held, whichever assertion
/// or wait failed (the test's output is shown with its failure).
struct Telling<'a>(&'a Path);

impl Drop for Telling<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", story(self.0));
        }
    }
}

/// Waits until the upstream logged what `done` looks for; fails telling its story.
async fn until_logged(log: &Path, what: &str, done: impl Fn(&[Value]) -> bool) {
    eventually(|| async {
        done(&logged(log))
            .then_some(())
            .ok_or_else(|| format!("the upstream did not log {what}: {}", story(log)))
    })
    .await;
}

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
    ran_in(&logged(log)).into_iter().cloned().collect()
}

/// The calls of `slow_write` among what the upstream logged.
fn ran_in(logged: &[Value]) -> Vec<&Value> {
    logged
        .iter()
        .filter(|e| e["tool"] == "slow_write")
        .collect()
}

/// `tasking.py` as server `tk` on stdio, logging to `log`, with `env` besides.
fn stdio_section(log: &Path, env: &[(&str, &str)]) -> String {
    let mut vars = vec![
        ("UPSTREAM_LOG".to_owned(), log.display().to_string()),
        (
            "UPSTREAM_TRAFFIC".to_owned(),
            traffic_of(log).display().to_string(),
        ),
    ];
    vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let vars: Vec<String> = vars.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    format!(
        "[mcp.servers.tk]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ {} }}\n",
        python().display().to_string(),
        script("tasking.py").display().to_string(),
        vars.join(", "),
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
        .env("UPSTREAM_TRAFFIC", traffic_of(log))
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
    let _telling = Telling(log);
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
    let out = stdout(&mut child);
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "approve"})).await;
    until_logged(log, "the call forever", |l| ran_in(l).len() == 2).await;
    canceled_as_the_client_leaves(child, out, log).await;
}

/// The client `child` (`task-cancel`, whose task at the upstream has started) cancels its task
/// and leaves, ending `holdpoint mcp` when it is the gateway: the upstream's task is canceled
/// too, and nothing else runs.
async fn canceled_as_the_client_leaves(mut child: Child, mut out: Lines, log: &Path) {
    let ran_before = ran(log).len();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"cancel\n").await.unwrap();
    stdin.flush().await.unwrap();
    assert_eq!(printed(&mut out, "canceled").await["status"], "cancelled");
    assert_eq!(printed(&mut out, "task").await["status"], "cancelled");
    until_logged(log, "the task canceled", |l| {
        l.iter().any(|e| e.get("canceled").is_some())
    })
    .await;
    assert_eq!(ran(log).len(), ran_before);
    let left = tokio::time::timeout(PATIENCE, child.wait()).await;
    assert!(matches!(left, Ok(Ok(s)) if s.success()), "{left:?}");
}

type Lines = tokio::io::BufReader<tokio::process::ChildStdout>;

fn log_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("upstream.log")
}

#[tokio::test]
async fn a_stdio_upstream_s_required_tool_is_listed_so_and_called_as_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(&dir);
    let gw = Gateway::with(POLICY, &stdio_section(&log, &[])).await;
    required_tools_are_listed_so_and_run_as_tasks(&gw, &log).await;
}

/// The race once seen under load, made certain: the client cancels its task while the
/// upstream's answer creating its own is on the way, and leaves at once, which ends
/// `holdpoint mcp`. The gateway learns the task's id only from that answer: closing the
/// upstream before it came left the task running (and the stdio upstream was stopped without
/// hearing of it). The answer comes a moment after the task started, and well within the time
/// an MCP client gives a server to exit.
#[tokio::test]
async fn a_stdio_upstream_s_task_is_canceled_when_the_client_leaves_before_its_creation_is_answered()
 {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(&dir);
    let section = stdio_section(&log, &[("TASKING_CREATE_DELAY_MS", "700")]);
    let gw = Gateway::with(POLICY, &section).await;
    let _telling = Telling(&log);
    let forever = r#"{"name": "b", "text": "forever"}"#;
    let mut child = client(&gw, &["task-cancel", "tk__slow_write", forever]);
    let out = stdout(&mut child);
    let hold = gw.lab.pending_hold().await;
    gw.decide(&hold, json!({"action": "approve"})).await;
    until_logged(&log, "the call forever", |l| ran_in(l).len() == 1).await;
    canceled_as_the_client_leaves(child, out, &log).await;
    let requests: Vec<Value> = logged(&log)
        .into_iter()
        .filter_map(|e| e.get("request").cloned())
        .collect();
    // Nothing but canceling it after the answer came (a poll or two first, on a slow day).
    assert!(!requests.contains(&json!("tasks/result")), "{requests:?}");
    assert_eq!(
        requests.last(),
        Some(&json!("tasks/cancel")),
        "{requests:?}"
    );
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
