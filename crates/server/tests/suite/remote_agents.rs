//! Remote A2A agents as tools of a world's agents, tried with a real outside framework: a
//! Google ADK agent (google-adk 2.13.0, `tests/a2a/adk_agent.py`, in `.venv-adk`) whose tool
//! needs confirmation. Holdpoint's agent calls it as `a2a__bank`; ADK's confirmation request
//! becomes a hold in Holdpoint's chat, decided through the API, and the decision goes back to
//! ADK: approved, its tool runs exactly once; denied, never. scripts/test installs the venv;
//! where it is missing the ADK tests are skipped, except under CI, where they fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{TestServer, lab_chat};

/// The bank may always be asked; everything else (ADK's confirmations included) asks a person.
pub(crate) const POLICY: &str = r#"mode = "manual"
[[rules]]
name = "the bank may be asked"
tools = ["a2a__bank"]
action = "allow"
"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The program at `path` (from the repository's root), which scripts/test installs with
/// `what`; else `None` with a line saying the test is skipped, or, under CI, a failure.
pub(crate) fn installed(path: &str, what: &str) -> Option<PathBuf> {
    let path = root().join(path);
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: scripts/test installs {what} there",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}, and under CI the tests that need it must run");
    }
    eprintln!("skipped: {why}");
    None
}

/// The Python with google-adk.
fn python() -> Option<PathBuf> {
    installed(".venv-adk/bin/python", "google-adk")
}

/// The ADK agent, running: the process (killed when dropped), its base URL, and the file each
/// run of its tool appends a line to.
struct Adk {
    _child: Child,
    url: String,
    runs: PathBuf,
    _dir: tempfile::TempDir,
}

impl Adk {
    async fn start(python: &Path) -> Adk {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs.txt");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/adk_agent.py");
        let mut child = Command::new(python)
            .arg(&script)
            .env("RUNS_FILE", &runs)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the ADK agent starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Importing ADK takes seconds, more on a busy machine.
        let port = tokio::time::timeout(3 * PATIENCE, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(port) = line.strip_prefix("PORT ") {
                    return port.trim().to_owned();
                }
            }
            panic!("the ADK agent ended without listening");
        })
        .await
        .expect("the ADK agent listens in time");
        let url = format!("http://127.0.0.1:{port}");
        let card = format!("{url}/.well-known/agent-card.json");
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(r) = http.get(&card).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the ADK agent's card is not served"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Adk {
            _child: child,
            url,
            runs,
            _dir: dir,
        }
    }

    /// How many times its tool ran.
    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.runs)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// A server whose world `lab` has the ADK agent as `bank`, and a chat whose agent calls it.
async fn lab_with_bank(adk: &Adk, llm: &ScriptedLlm, policy: &str) -> (TestServer, String) {
    let t = TestServer::with(policy, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let world = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"bank": {"url": adk.url, "headers": {"X-Trace": "secret"}, "timeout": "60s"}}}),
        )
        .await
        .expect(200);
    assert_eq!(
        world["a2a_agents"]["bank"],
        json!({"url": adk.url, "headers": {"X-Trace": "(hidden)"}, "timeout": "60s"})
    );
    (t, chat)
}

/// Sends "Send 5" in the chat and waits for ADK's confirmation as a hold there.
async fn until_confirmation(
    t: &TestServer,
    chat: &str,
) -> (holdpoint_test_support::http::Sse, Value) {
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Send 5"}),
        )
        .await
        .expect(202);
    let created = stream.next_of("hold.created").await;
    let hold = created.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "a2a__bank/transfer", "{hold}");
    assert_eq!(hold["spec"]["arguments"], json!({"amount": 5.0}), "{hold}");
    assert_eq!(hold["chat"], chat, "{hold}");
    (stream, hold)
}

fn steps() -> Vec<Step> {
    vec![
        Step::calls(vec![call("c1", "a2a__bank", json!({"message": "Send 5"}))]),
        Step::text("Done."),
    ]
}

#[tokio::test]
async fn an_adk_confirmation_is_a_hold_in_the_chat_and_its_approval_runs_the_tool_once() {
    let Some(python) = python() else { return };
    let adk = Adk::start(&python).await;
    let llm = ScriptedLlm::start(steps()).await;
    let (t, chat) = lab_with_bank(&adk, &llm, POLICY).await;
    let (mut stream, hold) = until_confirmation(&t, &chat).await;
    assert_eq!(adk.runs(), 0, "nothing runs before a person approves");

    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let said = t
        .api
        .get(&format!(
            "/api/v1/audit/events?world=lab&chat={chat}&type=turn.tool_text"
        ))
        .await
        .expect(200);
    // ADK's answer, shown once in the chat as it came.
    let said: Vec<&Value> = said["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["call"] == "c1")
        .collect();
    let text: String = said
        .iter()
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text.matches("Final: tool said").count(), 1, "{text}");
    assert_eq!(adk.runs(), 1, "the ADK tool runs exactly once");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    let text = result.to_string();
    assert!(
        text.contains("completed") && text.contains("transferred"),
        "{result}"
    );
}

#[tokio::test]
async fn a_denied_adk_confirmation_never_runs_the_tool() {
    let Some(python) = python() else { return };
    let adk = Adk::start(&python).await;
    let llm = ScriptedLlm::start(steps()).await;
    let (t, chat) = lab_with_bank(&adk, &llm, POLICY).await;
    let (mut stream, hold) = until_confirmation(&t, &chat).await;

    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "deny", "reason": "not today"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    assert_eq!(adk.runs(), 0, "a denied ADK tool never runs");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert!(result.to_string().contains("rejected"), "{result}");
}

#[tokio::test]
async fn an_adk_confirmation_nobody_decides_is_refused_at_its_deadline() {
    let Some(python) = python() else { return };
    let adk = Adk::start(&python).await;
    let llm = ScriptedLlm::start(steps()).await;
    let policy = format!("default_deadline = \"2s\"\n{POLICY}");
    let (t, chat) = lab_with_bank(&adk, &llm, &policy).await;
    let (mut stream, hold) = until_confirmation(&t, &chat).await;
    assert_eq!(hold["on_timeout"]["action"], "deny", "{hold}");
    stream.next_of("turn.finished").await;
    assert_eq!(adk.runs(), 0, "a confirmation nobody gave runs nothing");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert!(result.to_string().contains("rejected"), "{result}");
}

#[tokio::test]
async fn remote_agents_are_checked_and_their_headers_hidden() {
    let t = TestServer::start().await;
    t.world("lab").await;
    let (code, message) = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"bank": {"url": "ftp://bank"}}}),
        )
        .await
        .error(422);
    assert_eq!(code, "invalid_input");
    assert!(message.contains("a2a_agents.bank.url"), "{message}");
    let (_, message) = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"bank": {"url": "http://bank", "timeout": "a while"}}}),
        )
        .await
        .error(422);
    assert!(message.contains("a2a_agents.bank.timeout"), "{message}");
    let (_, message) = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"a__b": {"url": "http://bank"}}}),
        )
        .await
        .error(422);
    assert!(message.contains("a2a_agents.a__b"), "{message}");
    let world = t
        .api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"bank": {"url": "http://bank", "headers": {"Authorization": "Bearer s3cret"}}}}),
        )
        .await
        .expect(200);
    assert_eq!(
        world["a2a_agents"]["bank"]["headers"]["Authorization"],
        "(hidden)"
    );
    let shown = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert!(!shown.to_string().contains("s3cret"), "{shown}");
    let removed = t
        .api
        .patch("/api/v1/worlds/lab", json!({"a2a_agents": {"bank": null}}))
        .await
        .expect(200);
    assert!(removed.get("a2a_agents").is_none(), "{removed}");
}

/// How a fake remote agent answers `SendStreamingMessage`.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// A task that completes, saying what it heard and in which context.
    Echo,
    /// A task that starts, then nothing more.
    Hang,
    /// Something that is not JSON.
    Garbage,
    /// Input-required with words the first time; then, in that task, as `Echo`.
    Ask,
    /// As `Echo`, in A2A 0.3 (a card with a top-level `url`, `kind`ed events).
    Echo03,
    /// A task that says "first piece", waits until the test releases it, then says the
    /// rest and completes.
    Stream,
    /// A task that says "partial answer", then its connection breaks (the agent crashed).
    Crash,
    /// A task that starts, then sends something that is not JSON.
    GarbageLater,
    /// Input-required in kagent's shapes (ADK's requests marked `kagent_type`, one per
    /// call: `calls` of them, ids `call_1`…; or, with `summary`, the tool-approval summary in
    /// the update's metadata); then, in that task, completes saying what it got.
    Kagent { calls: usize, summary: bool },
    /// Input-required with an ADK confirmation; the answer's connection then breaks.
    AskThenCrash,
}

/// A remote A2A agent (1.0) on loopback, recording the JSON-RPC requests it gets.
pub(crate) struct Fake {
    pub(crate) url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    /// Lets a `Stream` task finish.
    pub(crate) release: std::sync::Arc<tokio::sync::Notify>,
}

impl Fake {
    pub(crate) async fn start(mode: Mode) -> Fake {
        use axum::routing::{get, post};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
        let card = if mode == Mode::Echo03 {
            json!({"name": "fake03", "description": "A 0.3 agent", "url": format!("{url}/rpc"),
                   "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC"})
        } else {
            json!({
                "name": "fake", "description": "A fake agent for tests",
                "supportedInterfaces": [{"url": format!("{url}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                "skills": [{"id": "echo", "name": "echo", "description": "says what it heard"}],
            })
        };
        let seen = requests.clone();
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let gate = release.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/agent-card.json",
                get(move || async move { axum::Json(card) }),
            )
            .route(
                "/rpc",
                post(move |axum::Json(body): axum::Json<Value>| {
                    let seen = seen.clone();
                    let gate = gate.clone();
                    async move { answer(mode, &seen, body, gate) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Fake {
            url,
            requests,
            release,
        }
    }

    fn requests(&self, method: &str) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == method)
            .cloned()
            .collect()
    }
}

fn answer(
    mode: Mode,
    seen: &std::sync::Mutex<Vec<Value>>,
    body: Value,
    release: std::sync::Arc<tokio::sync::Notify>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let id = body["id"].clone();
    let n = {
        let mut seen = seen.lock().unwrap();
        seen.push(body.clone());
        seen.len()
    };
    if body["method"] == "CancelTask" {
        let task = body["params"]["id"].clone();
        return axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "result": {"id": task, "status": {"state": "TASK_STATE_CANCELED"}}}))
        .into_response();
    }
    let message = &body["params"]["message"];
    let context = message["contextId"].as_str().unwrap_or("ctx-1").to_owned();
    let task = format!("task-{n}");
    let event = |result: Value| {
        format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        )
    };
    let started = event(json!({"task": {"id": task, "contextId": context,
        "status": {"state": "TASK_STATE_SUBMITTED"}}}));
    let sse =
        |body: axum::body::Body| ([("content-type", "text/event-stream")], body).into_response();
    let heard = message["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    match mode {
        Mode::Ask if message.get("taskId").is_none() => {
            let text = format!(
                "{started}{}",
                event(
                    json!({"statusUpdate": {"taskId": task, "contextId": context,
                    "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                        "message": {"role": "ROLE_AGENT", "parts": [{"text": "Which account?"}]}}}})
                ),
            );
            sse(axum::body::Body::from(text))
        }
        Mode::Echo03 => {
            let text = format!(
                "{}{}{}",
                event(
                    json!({"kind": "task", "id": task, "contextId": context, "status": {"state": "submitted"}})
                ),
                event(
                    json!({"kind": "artifact-update", "taskId": task, "contextId": context,
                    "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": format!("heard {heard} in {context}")}]}})
                ),
                event(
                    json!({"kind": "status-update", "taskId": task, "contextId": context, "final": true,
                    "status": {"state": "completed"}})
                ),
            );
            sse(axum::body::Body::from(text))
        }
        Mode::Echo | Mode::Ask => {
            let task = message["taskId"].as_str().map_or(task, str::to_owned);
            let text = format!(
                "{started}{}{}",
                event(
                    json!({"artifactUpdate": {"taskId": task, "contextId": context,
                    "artifact": {"artifactId": "a", "parts": [{"text": format!("heard {heard} in {context}")}]}}})
                ),
                event(
                    json!({"statusUpdate": {"taskId": task, "contextId": context,
                    "status": {"state": "TASK_STATE_COMPLETED"}}})
                ),
            );
            sse(axum::body::Body::from(text))
        }
        Mode::Hang => {
            use futures_util::StreamExt;
            let first = futures_util::stream::once(async move {
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(started))
            });
            sse(axum::body::Body::from_stream(
                first.chain(futures_util::stream::pending()),
            ))
        }
        Mode::Garbage => sse(axum::body::Body::from("data: this is not json\n\n")),
        Mode::GarbageLater => sse(axum::body::Body::from(format!(
            "{started}data: {{\"jsonrpc\": \"2.0\", \"result\": {{broken\n\n"
        ))),
        Mode::Stream => {
            use futures_util::StreamExt;
            let piece = |text: &str, append: bool| {
                event(
                    json!({"artifactUpdate": {"taskId": task, "contextId": context, "append": append,
                    "artifact": {"artifactId": "a", "parts": [{"text": text}]}}}),
                )
            };
            let first = format!("{started}{}", piece("first piece", false));
            let rest = format!(
                "{}{}",
                piece(" and the rest", true),
                event(
                    json!({"statusUpdate": {"taskId": task, "contextId": context,
                    "status": {"state": "TASK_STATE_COMPLETED"}}})
                )
            );
            let body = futures_util::stream::once(async move {
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(first))
            })
            .chain(futures_util::stream::once(async move {
                release.notified().await;
                Ok(axum::body::Bytes::from(rest))
            }));
            sse(axum::body::Body::from_stream(body))
        }
        Mode::Crash => crash(
            format!(
                "{started}{}",
                event(
                    json!({"artifactUpdate": {"taskId": task, "contextId": context,
                    "artifact": {"artifactId": "a", "parts": [{"text": "partial answer"}]}}})
                )
            ),
            Some(release),
        ),
        Mode::AskThenCrash if message.get("taskId").is_some() => crash(String::new(), None),
        Mode::AskThenCrash => sse(axum::body::Body::from(format!(
            "{started}{}",
            event(
                json!({"statusUpdate": {"taskId": task, "contextId": context,
                "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"role": "ROLE_AGENT", "parts": [
                    {"data": {"id": "adk-1", "name": "adk_request_confirmation",
                        "args": {"originalFunctionCall": {"id": "call_1", "name": "wipe", "args": {"disk": "d1"}}}},
                     "metadata": {"adk_type": "function_call", "adk_is_long_running": true}}]}}}})
            )
        ))),
        Mode::Kagent { .. } if message.get("taskId").is_some() => {
            let got: Vec<Value> = message["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p.get("data").cloned())
                .collect();
            let task = message["taskId"].as_str().unwrap();
            sse(axum::body::Body::from(format!(
                "{}{}",
                event(
                    json!({"artifactUpdate": {"taskId": task, "contextId": context,
                    "artifact": {"artifactId": "a", "parts": [{"text": format!("got {}", Value::Array(got))}]}}})
                ),
                event(
                    json!({"statusUpdate": {"taskId": task, "contextId": context,
                    "status": {"state": "TASK_STATE_COMPLETED"}}})
                ),
            )))
        }
        Mode::Kagent { calls, summary } => {
            let ids: Vec<String> = (1..=calls).map(|n| format!("call_{n}")).collect();
            let (parts, metadata) = if summary {
                let requests: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({"name": "delete_file", "args": {"path": format!("/tmp/{id}")}, "id": id}))
                    .collect();
                (
                    json!([{"text": "Approval needed"}]),
                    json!({"interrupt_type": "tool_approval", "action_requests": requests}),
                )
            } else {
                let parts: Vec<Value> = ids
                    .iter()
                    .enumerate()
                    .map(|(n, id)| json!({"data": {"id": format!("adk-{n}"), "name": "adk_request_confirmation",
                        "args": {"originalFunctionCall": {"id": id, "name": "delete_file", "args": {"path": format!("/tmp/{id}")}},
                                 "toolConfirmation": {"hint": "Delete it?", "confirmed": false}}},
                        "metadata": {"kagent_type": "function_call", "kagent_is_long_running": true}}))
                    .collect();
                (Value::Array(parts), json!({}))
            };
            sse(axum::body::Body::from(format!(
                "{started}{}",
                event(
                    json!({"statusUpdate": {"taskId": task, "contextId": context, "metadata": metadata,
                    "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"role": "ROLE_AGENT", "parts": parts}}}})
                )
            )))
        }
    }
}

/// An event stream that sends `first`, then breaks off, as a crashed agent's does: once
/// `after` is notified (when `first` was read), else at once (before the answer began).
fn crash(
    first: String,
    after: Option<std::sync::Arc<tokio::sync::Notify>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    let body = futures_util::stream::once(async move {
        Ok::<_, std::io::Error>(axum::body::Bytes::from(first))
    })
    .chain(futures_util::stream::once(async move {
        if let Some(after) = after {
            after.notified().await;
        }
        Err(std::io::Error::other("the agent crashed"))
    }));
    (
        [("content-type", "text/event-stream")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A server whose world `lab` has the fake agents, and a chat whose agent may call them all.
pub(crate) async fn lab_with(agents: Value, llm: &ScriptedLlm) -> (TestServer, String) {
    let policy = "mode = \"manual\"\n[[rules]]\nname = \"remote agents\"\ntools = [\"a2a__*\"]\naction = \"allow\"\n";
    let t = TestServer::with(policy, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    t.api
        .patch("/api/v1/worlds/lab", json!({ "a2a_agents": agents }))
        .await
        .expect(200);
    (t, chat)
}

pub(crate) async fn say(t: &TestServer, chat: &str, text: &str) -> String {
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({ "text": text }),
        )
        .await
        .expect(202)["turn"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_remote_conversation_goes_on_in_the_same_context_within_a_chat() {
    let echo = Fake::start(Mode::Echo).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__echo", json!({"message": "one"}))]),
        Step::text("Said one."),
        Step::calls(vec![call("c2", "a2a__echo", json!({"message": "two"}))]),
        Step::text("Said two."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"echo": {"url": echo.url}}), &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Say one").await;
    stream.next_of("turn.finished").await;
    say(&t, &chat, "Say two").await;
    stream.next_of("turn.finished").await;

    let tools = &llm.requests()[0].body["tools"];
    let echo_tool = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "a2a__echo")
        .unwrap_or_else(|| panic!("{tools}"));
    let description = echo_tool["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("A fake agent for tests")
            && description.contains("says what it heard"),
        "{description}"
    );
    let sent = echo.requests("SendStreamingMessage");
    assert_eq!(sent.len(), 2);
    assert!(sent[0]["params"]["message"].get("contextId").is_none());
    assert_eq!(sent[1]["params"]["message"]["contextId"], "ctx-1");
    let first = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(first["output"]["text"], "heard one in ctx-1", "{first}");
    let second = llm.requests()[3].tool_result("c2").unwrap();
    assert_eq!(second["output"]["text"], "heard two in ctx-1", "{second}");
}

#[tokio::test]
async fn a_remote_agent_that_hangs_or_sends_garbage_is_a_tool_error() {
    let slow = Fake::start(Mode::Hang).await;
    let junk = Fake::start(Mode::Garbage).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![
            call("c1", "a2a__slow", json!({"message": "hello"})),
            call("c2", "a2a__junk", json!({"message": "hello"})),
        ]),
        Step::text("Both failed."),
    ])
    .await;
    let agents = json!({"slow": {"url": slow.url, "timeout": "1s"}, "junk": {"url": junk.url}});
    let (t, chat) = lab_with(agents, &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Ask both").await;
    stream.next_of("turn.finished").await;

    let slow_result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(slow_result["status"], "failed", "{slow_result}");
    assert!(
        slow_result.to_string().contains("did not answer within 1s"),
        "{slow_result}"
    );
    // Nothing is left running over there.
    let canceled = slow.requests("CancelTask");
    assert_eq!(canceled.len(), 1, "{canceled:?}");
    assert_eq!(canceled[0]["params"]["id"], "task-1");
    let junk_result = llm.requests()[1].tool_result("c2").unwrap();
    assert_eq!(junk_result["status"], "failed", "{junk_result}");
    assert!(
        junk_result.to_string().contains("not JSON"),
        "{junk_result}"
    );
}

#[tokio::test]
async fn canceling_the_turn_cancels_the_remote_task() {
    let slow = Fake::start(Mode::Hang).await;
    let llm = ScriptedLlm::start(vec![Step::calls(vec![call(
        "c1",
        "a2a__slow",
        json!({"message": "take your time"}),
    )])])
    .await;
    let (t, chat) = lab_with(json!({"slow": {"url": slow.url}}), &llm).await;
    let turn = say(&t, &chat, "Go").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while slow.requests("SendStreamingMessage").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the message is never sent"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The task's first event is read before the cancel.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let canceled = t
        .api
        .post(
            &format!("/api/v1/worlds/lab/turns/{turn}/cancel"),
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(canceled["status"], "canceled");
    let cancels = slow.requests("CancelTask");
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(cancels[0]["params"]["id"], "task-1");
}

#[tokio::test]
async fn a_remote_question_in_words_is_shown_in_the_chat_and_the_persons_next_message_answers_it() {
    let ask = Fake::start(Mode::Ask).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__ask", json!({"message": "pay"}))]),
        // The LLM may not answer for the person.
        Step::calls(vec![call("c2", "a2a__ask", json!({"message": "savings"}))]),
        Step::text("It asks which account."),
        Step::calls(vec![call(
            "c3",
            "a2a__ask",
            json!({"message": "the answer"}),
        )]),
        Step::text("Paid."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"ask": {"url": ask.url}}), &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Pay").await;
    let shown = stream.next_of("turn.tool_text").await;
    assert_eq!(
        (
            &shown.data["payload"]["call"],
            &shown.data["payload"]["text"]
        ),
        (&json!("c1"), &json!("Which account?"))
    );
    stream.next_of("turn.finished").await;
    let first = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(first["output"]["state"], "input-required", "{first}");
    assert_eq!(first["output"]["text"], "Which account?", "{first}");
    let again = llm.requests()[2].tool_result("c2").unwrap();
    assert_eq!(again["output"]["state"], "input-required", "{again}");
    assert_eq!(ask.requests("SendStreamingMessage").len(), 1);

    say(&t, &chat, "From savings").await;
    stream.next_of("turn.finished").await;
    let sent = ask.requests("SendStreamingMessage");
    assert_eq!(sent.len(), 2);
    let answer = &sent[1]["params"]["message"];
    assert_eq!(answer["taskId"], "task-1");
    assert_eq!(answer["contextId"], "ctx-1");
    // The person's own words, not the LLM's.
    assert_eq!(answer["parts"], json!([{"text": "From savings"}]));
    let second = llm.requests()[4].tool_result("c3").unwrap();
    assert_eq!(second["output"]["state"], "completed", "{second}");
    assert_eq!(
        second["output"]["text"], "heard From savings in ctx-1",
        "{second}"
    );
}

#[tokio::test]
async fn a_remote_agent_of_a2a_0_3_is_spoken_to_in_0_3() {
    let old = Fake::start(Mode::Echo03).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__old", json!({"message": "hi"}))]),
        Step::text("Done."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"old": {"url": old.url}}), &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Say hi").await;
    stream.next_of("turn.finished").await;
    let sent = old.requests("message/stream");
    assert_eq!(sent.len(), 1, "{:?}", old.requests.lock().unwrap());
    assert_eq!(sent[0]["params"]["message"]["kind"], "message");
    assert_eq!(sent[0]["params"]["message"]["role"], "user");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["output"]["text"], "heard hi in ctx-1", "{result}");
}

/// No hold is left pending in the world.
async fn nothing_pending(t: &TestServer) {
    let pending = t.api.get("/api/v1/holds?world=lab").await.expect(200);
    assert_eq!(pending["items"], json!([]), "{pending}");
}

#[tokio::test]
async fn a_remote_agent_that_crashes_or_breaks_its_stream_is_a_tool_error_and_the_turn_goes_on() {
    let crashing = Fake::start(Mode::Crash).await;
    let broken = Fake::start(Mode::GarbageLater).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![
            call("c1", "a2a__crashing", json!({"message": "hello"})),
            call("c2", "a2a__broken", json!({"message": "hello"})),
        ]),
        Step::text("Both failed."),
    ])
    .await;
    let agents = json!({"crashing": {"url": crashing.url}, "broken": {"url": broken.url}});
    let (t, chat) = lab_with(agents, &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Ask both").await;
    // It crashes once what it said first has come.
    let said = stream.next_of("turn.tool_text").await;
    assert_eq!(said.data["payload"]["text"], "partial answer");
    crashing.release.notify_one();
    stream.next_of("turn.finished").await;

    let crashed = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(crashed["status"], "failed", "{crashed}");
    let error = crashed.to_string();
    // What it said before it crashed is kept, in the error and in the chat's events.
    assert!(
        error.contains("broke off its answer") && error.contains("partial answer"),
        "{crashed}"
    );
    let broke = llm.requests()[1].tool_result("c2").unwrap();
    assert_eq!(broke["status"], "failed", "{broke}");
    assert!(broke.to_string().contains("not JSON"), "{broke}");
    // Their tasks are canceled, in case they run on.
    assert_eq!(crashing.requests("CancelTask").len(), 1);
    assert_eq!(broken.requests("CancelTask").len(), 1);
    nothing_pending(&t).await;
    let events = t
        .api
        .get(&format!(
            "/api/v1/audit/events?world=lab&chat={chat}&type=turn.tool_text"
        ))
        .await
        .expect(200);
    let said: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["call"] == "c1")
        .collect();
    assert_eq!(said.len(), 1, "{events}");
    assert_eq!(said[0]["payload"]["text"], "partial answer");
}

#[tokio::test]
async fn a_remote_agent_that_crashes_after_a_confirmation_leaves_no_hold_and_the_turn_goes_on() {
    let agent = Fake::start(Mode::AskThenCrash).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "a2a__wiper",
            json!({"message": "wipe d1"}),
        )]),
        Step::text("It failed."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"wiper": {"url": agent.url}}), &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Wipe").await;
    let created = stream.next_of("hold.created").await;
    let hold = created.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "a2a__wiper/wipe", "{hold}");
    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .starts_with("the remote agent \"wiper\" failed: "),
        "{result}"
    );
    let sent = agent.requests("SendStreamingMessage");
    assert_eq!(
        sent[1]["params"]["message"]["parts"][0]["data"]["response"],
        json!({"confirmed": true})
    );
    nothing_pending(&t).await;
}

#[tokio::test]
async fn a_remote_agents_text_shows_in_the_chat_as_it_streams() {
    let agent = Fake::start(Mode::Stream).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__writer", json!({"message": "write"}))]),
        Step::text("Written."),
    ])
    .await;
    let (t, chat) = lab_with(json!({"writer": {"url": agent.url}}), &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Write").await;
    // The first piece is in the chat while the remote task still runs: it waits for the
    // release below.
    let first = stream.next_of("turn.tool_text").await;
    assert_eq!(first.data["payload"]["call"], "c1", "{:?}", first.data);
    assert_eq!(first.data["payload"]["text"], "first piece");
    assert_eq!(first.data["chat"], chat.as_str());
    agent.release.notify_one();
    let mut rest = String::new();
    loop {
        let e = stream.next().await;
        match e.event.as_str() {
            "turn.tool_text" => rest.push_str(e.data["payload"]["text"].as_str().unwrap()),
            "turn.tool_finished" => break,
            _ => {}
        }
    }
    assert_eq!(rest, " and the rest");
    stream.next_of("turn.finished").await;
    // The LLM gets the result whole, as before, and no piece of it as text of its own.
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(
        result["output"]["text"], "first piece and the rest",
        "{result}"
    );
}

#[tokio::test]
async fn kagents_confirmations_are_holds_and_the_decision_goes_back_in_kagents_shape() {
    let one = Fake::start(Mode::Kagent {
        calls: 1,
        summary: false,
    })
    .await;
    let two = Fake::start(Mode::Kagent {
        calls: 2,
        summary: true,
    })
    .await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__one", json!({"message": "clean"}))]),
        Step::calls(vec![call(
            "c2",
            "a2a__two",
            json!({"message": "clean more"}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let agents = json!({"one": {"url": one.url}, "two": {"url": two.url}});
    let (t, chat) = lab_with(agents, &llm).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Clean").await;

    // One call, marked kagent's: approved, kagent is told {"decision_type": "approve"}.
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "a2a__one/delete_file", "{hold}");
    assert_eq!(hold["spec"]["arguments"], json!({"path": "/tmp/call_1"}));
    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    // Two calls in the summary's shape: one batch of two holds; one approved, one denied.
    let first = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    let second = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(first["batch"], second["batch"]);
    let decide = |hold: &Value, body: Value| {
        let path = format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap());
        let api = &t.api;
        async move { api.post(&path, body).await.expect(200) }
    };
    let (approve, deny) = if first["spec"]["arguments"]["path"] == "/tmp/call_1" {
        (&first, &second)
    } else {
        (&second, &first)
    };
    decide(approve, json!({"action": "approve"})).await;
    decide(deny, json!({"action": "deny", "reason": "keep that one"})).await;
    stream.next_of("turn.finished").await;

    let sent = one.requests("SendStreamingMessage");
    assert_eq!(sent.len(), 2);
    let reply = &sent[1]["params"]["message"];
    assert_eq!(reply["taskId"], "task-1");
    assert_eq!(
        reply["parts"],
        json!([{"data": {"decision_type": "approve"}}])
    );
    let sent = two.requests("SendStreamingMessage");
    assert_eq!(
        sent[1]["params"]["message"]["parts"][0]["data"],
        json!({"decision_type": "batch", "decisions": {"call_1": "approve", "call_2": "reject"},
               "rejection_reasons": {"call_2": "keep that one"}})
    );
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["output"]["state"], "completed", "{result}");
    nothing_pending(&t).await;
}

#[tokio::test]
async fn a_remote_confirmation_nobody_decides_is_refused_in_its_shape_at_the_deadline() {
    let agent = Fake::start(Mode::Kagent {
        calls: 1,
        summary: true,
    })
    .await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "a2a__cleaner",
            json!({"message": "clean"}),
        )]),
        Step::text("Refused."),
    ])
    .await;
    let policy = "mode = \"manual\"\ndefault_deadline = \"1s\"\n[[rules]]\nname = \"remote agents\"\ntools = [\"a2a__*\"]\naction = \"allow\"\n";
    let t = TestServer::with(policy, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"cleaner": {"url": agent.url}}}),
        )
        .await
        .expect(200);
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Clean").await;
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(hold["on_timeout"]["action"], "deny", "{hold}");
    stream.next_of("hold.expired").await;
    stream.next_of("turn.finished").await;
    let sent = agent.requests("SendStreamingMessage");
    assert_eq!(
        sent[1]["params"]["message"]["parts"][0]["data"],
        json!({"decision_type": "reject", "rejection_reason": "nobody decided before the deadline"})
    );
    nothing_pending(&t).await;
}

#[tokio::test]
async fn the_configuration_files_remote_agents_are_offered_to_every_world_and_a_worlds_own_wins() {
    let files = Fake::start(Mode::Echo).await;
    let worlds = Fake::start(Mode::Echo03).await;
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call("c1", "a2a__echo", json!({"message": "one"}))]),
        Step::text("Said one."),
        Step::calls(vec![call("c2", "a2a__echo", json!({"message": "two"}))]),
        Step::text("Said two."),
    ])
    .await;
    let policy = "mode = \"manual\"\n[[rules]]\nname = \"remote agents\"\ntools = [\"a2a__*\"]\naction = \"allow\"\n";
    let url = files.url.clone();
    let t = TestServer::with(policy, move |s| {
        s.a2a.agents.insert(
            "echo".into(),
            holdpoint_protocol::RemoteAgentConfig {
                url: Some(url),
                ..Default::default()
            },
        );
    })
    .await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    say(&t, &chat, "Say one").await;
    stream.next_of("turn.finished").await;
    assert_eq!(files.requests("SendStreamingMessage").len(), 1);
    let first = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(first["output"]["text"], "heard one in ctx-1", "{first}");
    // The file's entry is not the world's: the world shows none of its own.
    let world = t.api.get("/api/v1/worlds/lab").await.expect(200);
    assert!(world.get("a2a_agents").is_none(), "{world}");

    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"echo": {"url": worlds.url}}}),
        )
        .await
        .expect(200);
    say(&t, &chat, "Say two").await;
    stream.next_of("turn.finished").await;
    let sent = worlds.requests("message/stream");
    assert_eq!(sent.len(), 1);
    // Another agent: the first one's context is not sent to it.
    assert!(
        sent[0]["params"]["message"].get("contextId").is_none(),
        "{sent:?}"
    );
    assert_eq!(files.requests("SendStreamingMessage").len(), 1);
}
