//! A world's agent as an A2A agent, tried with the official SDKs' clients as real processes:
//! the Python SDK's (`a2a-sdk` 1.3.0, `tests/a2a/client.py`, in `.venv-a2a`) streams a turn to
//! a held call and decides it (or fails to, with an agent's token), follows it with
//! SubscribeToTask while the REST API decides, and cancels it; the JavaScript SDK's
//! (`@a2a-js/sdk` 1.3.0, `tests/a2a/client.mjs`, in `.npm-a2a`) makes one round trip; and the
//! Python example in docs/a2a.md is run as written. scripts/test installs both SDKs; where they
//! are missing the tests are skipped, except under CI, where they fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{Api, TestServer, lab_chat};

/// How long a client may take: it starts Python or Node, on a machine running other tests.
const CLIENT_PATIENCE: Duration = Duration::from_secs(3 * PATIENCE.as_secs());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` if it exists; else `None` with a line saying the test is skipped, or, under CI
/// (where scripts/test installs it), a failure.
fn installed(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: scripts/test installs {what} there",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}, and under CI every A2A SDK test must run");
    }
    eprintln!("skipped: {why}");
    None
}

/// The Python with the official `a2a-sdk`.
fn python() -> Option<PathBuf> {
    installed(
        root().join(".venv-a2a/bin/python"),
        "the A2A Python SDK (a2a-sdk)",
    )
}

/// Where npm installed the official `@a2a-js/sdk`.
fn npm_prefix() -> Option<PathBuf> {
    installed(
        root().join(".npm-a2a/node_modules/@a2a-js/sdk/package.json"),
        "the A2A JavaScript SDK (@a2a-js/sdk)",
    )?;
    Some(root().join(".npm-a2a"))
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/a2a")
        .join(name)
}

/// A server whose world `lab` has the agent `helper` on `llm`, every call held; an approver
/// (alice) and an agent (bot), with their tokens.
struct Lab {
    t: TestServer,
    alice: Api,
    alice_token: String,
    bot_token: String,
}

impl Lab {
    async fn start(llm: &ScriptedLlm) -> Lab {
        let t = TestServer::start().await;
        lab_chat(&t, &llm.base_url(), None).await;
        let alice_token = t.token("alice", "approver", None).await;
        let bot_token = t.token("bot", "agent", None).await;
        Lab {
            alice: t.api.as_token(&alice_token),
            t,
            alice_token,
            bot_token,
        }
    }

    fn url(&self) -> String {
        format!("{}/a2a/lab/helper", self.t.server.url())
    }

    /// The Python client running `scenario`.
    fn python(&self, python: &Path, scenario: &str) -> Child {
        Command::new(python)
            .arg(script("client.py"))
            .arg(scenario)
            .arg(self.url())
            .env("HP_AGENT_TOKEN", &self.bot_token)
            .env("HP_APPROVER_TOKEN", &self.alice_token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    async fn hold(&self, id: &str) -> Value {
        self.alice
            .get(&format!("/api/v1/holds/{id}"))
            .await
            .expect(200)
    }
}

/// A turn that calls `shell_cmd` (held), then, once it may go on, answers `answer`.
async fn shell_llm(answer: &str) -> ScriptedLlm {
    ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo shipped"}),
        )]),
        Step::text(answer),
    ])
    .await
}

/// Waits for a client to end, which it must do well and in time; the JSON lines it printed.
async fn lines_of(child: Child) -> Vec<Value> {
    let out = tokio::time::timeout(CLIENT_PATIENCE, child.wait_with_output())
        .await
        .expect("the A2A client did not finish in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the A2A client failed ({}): {stderr}\nit printed:\n{stdout}",
        out.status
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The events the client printed at `step`.
fn events<'a>(lines: &'a [Value], step: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["step"] == step)
        .map(|l| &l["event"])
        .collect()
}

/// The first line of `step`.
fn line<'a>(lines: &'a [Value], step: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["step"] == step)
        .unwrap_or_else(|| panic!("no {step} among {lines:#?}"))
}

/// The state an event says the task is in, if it says.
fn state(event: &Value) -> Option<&str> {
    event["task"]["status"]["state"]
        .as_str()
        .or_else(|| event["statusUpdate"]["status"]["state"].as_str())
}

fn states(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| state(e))
        .map(str::to_owned)
        .collect()
}

/// The data parts of the events' status messages.
fn data_parts<'a>(events: &[&'a Value]) -> Vec<&'a Value> {
    events
        .iter()
        .filter_map(|e| e["statusUpdate"]["status"]["message"]["parts"].as_array())
        .flatten()
        .filter_map(|p| p.get("data"))
        .collect()
}

/// The text of the last artifact update that closes the answer.
fn final_answer(events: &[&Value]) -> Option<String> {
    events
        .iter()
        .rev()
        .find(|e| e["artifactUpdate"]["lastChunk"] == true)
        .map(|e| {
            e["artifactUpdate"]["artifact"]["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
}

/// What the first stream of every scenario shows: the task, working, then input-required with
/// the held call in ADK's shape and Holdpoint's.
fn assert_held(lines: &[Value]) {
    let card = &line(lines, "card")["card"];
    assert_eq!(card["name"], "helper");
    assert_eq!(card["capabilities"]["streaming"], true);
    let ask = events(lines, "ask");
    assert!(
        ask[0].get("task").is_some(),
        "the stream starts with the task: {ask:#?}"
    );
    assert_eq!(
        states(&ask).last().map(String::as_str),
        Some("TASK_STATE_INPUT_REQUIRED"),
        "{ask:#?}"
    );
    let last = ask.last().unwrap();
    let parts = last["statusUpdate"]["status"]["message"]["parts"]
        .as_array()
        .unwrap();
    let adk = parts
        .iter()
        .find(|p| p["data"]["name"] == "adk_request_confirmation")
        .unwrap_or_else(|| panic!("no ADK confirmation in {last:#}"));
    assert_eq!(adk["metadata"]["adk_type"], "function_call");
    assert_eq!(adk["metadata"]["adk_is_long_running"], true);
    let call = &adk["data"]["args"]["originalFunctionCall"];
    assert_eq!(call["name"], "shell_cmd");
    assert_eq!(call["args"]["command"], "echo shipped");
    let ours = parts
        .iter()
        .find_map(|p| p["data"].get("holdpoint"))
        .unwrap_or_else(|| panic!("no Holdpoint part in {last:#}"));
    assert_eq!(ours["holds"][0]["tool"], "shell_cmd");
    assert_eq!(
        adk["data"]["id"],
        format!("adk-{}", ours["holds"][0]["id"].as_str().unwrap())
    );
}

/// What a stream that ran the approved call shows: its result, the answer, completed.
fn assert_ran(events: &[&Value], answer: &str) {
    let result = data_parts(events)
        .into_iter()
        .find_map(|d| d.get("tool_result"))
        .unwrap_or_else(|| panic!("no tool result in {events:#?}"));
    assert_eq!(result["id"], "c1");
    assert!(
        result["result"].to_string().contains("shipped"),
        "the command's output is in its result: {result}"
    );
    assert_eq!(final_answer(events).as_deref(), Some(answer), "{events:#?}");
    assert_eq!(
        states(events).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{events:#?}"
    );
}

#[tokio::test]
async fn the_python_sdk_streams_a_held_call_and_approves_it_in_adks_shape() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Shipped.").await;
    let lab = Lab::start(&llm).await;
    let lines = lines_of(lab.python(&python, "approve_adk")).await;
    assert_held(&lines);
    assert_ran(&events(&lines, "reply"), "Shipped.");
    let got = &line(&lines, "get")["task"];
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Shipped.");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    assert_eq!(result["approved_by"], "person");
}

#[tokio::test]
async fn the_python_sdk_denies_with_a_reason_the_llm_is_told() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Not shipped, then.").await;
    let lab = Lab::start(&llm).await;
    let lines = lines_of(lab.python(&python, "deny")).await;
    assert_held(&lines);
    let reply = events(&lines, "reply");
    assert_eq!(
        states(&reply).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{reply:#?}"
    );
    assert_eq!(final_answer(&reply).as_deref(), Some("Not shipped, then."));
    let requests = llm.wait_for_requests(2).await;
    let result = requests[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "denied_by_person", "{result}");
    assert_eq!(result["reason"], "not on a Friday");
}

#[tokio::test]
async fn the_python_sdk_with_an_agents_token_is_refused_and_the_hold_waits() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Shipped.").await;
    let lab = Lab::start(&llm).await;
    let lines = lines_of(lab.python(&python, "agent_refused")).await;
    assert_held(&lines);
    let refused = line(&lines, "refused");
    // The SDK raises the error its code names, with the reason among its details.
    assert!(
        refused["sdk_data"]
            .to_string()
            .contains("agents_never_decide"),
        "the SDK does not see why: {refused:#}"
    );
    assert_eq!(refused["error"], "UnsupportedOperationError", "{refused:#}");
    assert_eq!(refused["wire"]["error"]["code"], -32004, "{refused:#}");
    assert_eq!(
        refused["wire"]["error"]["data"][0]["metadata"]["reason"], "agents_never_decide",
        "{refused:#}"
    );
    let got = &line(&lines, "get")["task"];
    assert_eq!(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let hold = lab
        .hold(line(&lines, "held")["hold"].as_str().unwrap())
        .await;
    assert_eq!(hold["hold"]["status"], "pending");
    assert_eq!(llm.requests().len(), 1, "the turn went on");
}

#[tokio::test]
async fn the_python_sdk_follows_a_task_the_rest_api_decides() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Shipped.").await;
    let lab = Lab::start(&llm).await;
    let mut child = lab.python(&python, "subscribe");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let reading = async {
        while let Some(l) = out.next_line().await.unwrap() {
            let l: Value = serde_json::from_str(&l).unwrap();
            let subscribed = l["step"] == "subscribed";
            lines.push(l);
            if subscribed {
                return true;
            }
        }
        false
    };
    let subscribed = tokio::time::timeout(CLIENT_PATIENCE, reading)
        .await
        .expect("the client did not subscribe in time");
    if !subscribed {
        let out = child.wait_with_output().await.unwrap();
        panic!(
            "the client ended before it subscribed: {}\n{lines:#?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_held(&lines);
    let snapshot = &line(&lines, "subscribed")["event"];
    assert_eq!(
        snapshot["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{snapshot:#}"
    );

    let hold = line(&lines, "held")["hold"].as_str().unwrap().to_owned();
    lab.alice
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    let rest = tokio::time::timeout(CLIENT_PATIENCE, async {
        let mut rest = Vec::new();
        while let Some(l) = out.next_line().await.unwrap() {
            rest.push(serde_json::from_str::<Value>(&l).unwrap());
        }
        rest
    })
    .await
    .expect("the subscription did not end in time");
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "the client failed: {}\n{rest:#?}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ran(&events(&rest, "follow"), "Shipped.");
    line(&rest, "ended");
}

#[tokio::test]
async fn the_python_sdk_cancels_a_held_task_and_its_hold_is_withdrawn() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Shipped.").await;
    let lab = Lab::start(&llm).await;
    let lines = lines_of(lab.python(&python, "cancel")).await;
    assert_held(&lines);
    assert_eq!(
        line(&lines, "canceled")["task"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    assert_eq!(
        line(&lines, "get")["task"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let hold = lab
        .hold(line(&lines, "held")["hold"].as_str().unwrap())
        .await;
    assert_eq!(hold["hold"]["status"], "canceled", "{hold:#}");
    assert_eq!(llm.requests().len(), 1, "the turn went on");
}

#[tokio::test]
async fn the_python_example_in_the_docs_runs_as_written() {
    let Some(python) = python() else { return };
    let llm = shell_llm("Shipped.").await;
    let lab = Lab::start(&llm).await;
    let docs = std::fs::read_to_string(root().join("docs/a2a.md")).unwrap();
    let example = docs
        .split("## Example with the Python SDK")
        .nth(1)
        .and_then(|s| s.split("```python\n").nth(1))
        .and_then(|s| s.split("\n```").next())
        .expect("docs/a2a.md has a Python example");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.py");
    std::fs::write(&file, example).unwrap();
    let child = Command::new(&python)
        .arg(&file)
        .env("HOLDPOINT_A2A_URL", lab.url())
        .env("HOLDPOINT_TOKEN", &lab.alice_token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = lines_of(child).await;
    let all: Vec<&Value> = lines.iter().collect();
    assert!(all[0].get("task").is_some(), "{all:#?}");
    assert!(
        states(&all).contains(&"TASK_STATE_INPUT_REQUIRED".to_owned()),
        "{all:#?}"
    );
    assert_ran(&all, "Shipped.");
    let decided = lab
        .alice
        .get("/api/v1/holds?status=resolved")
        .await
        .expect(200);
    assert_eq!(
        decided["items"][0]["outcome"]["decided_by"],
        json!(["alice"]),
        "{decided:#}"
    );
}

#[tokio::test]
async fn the_javascript_sdk_makes_a_round_trip() {
    let Some(prefix) = npm_prefix() else { return };
    let llm = ScriptedLlm::start(vec![Step::text("Hello from helper.")]).await;
    let lab = Lab::start(&llm).await;
    let child = Command::new("node")
        .arg(script("client.mjs"))
        .arg(&prefix)
        .arg(lab.url())
        .arg("Say hello")
        .env("HP_TOKEN", &lab.bot_token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = lines_of(child).await;
    let task = &lines[0];
    assert_eq!(task["state"], "TASK_STATE_COMPLETED", "{task:#}");
    assert_eq!(task["answer"], "Hello from helper.");
    let sent = llm.requests()[0].messages();
    assert_eq!(sent.last().unwrap()["content"], "Say hello");
}
