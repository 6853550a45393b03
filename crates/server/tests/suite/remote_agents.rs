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
const POLICY: &str = r#"mode = "manual"
[[rules]]
name = "the bank may be asked"
tools = ["a2a__bank"]
action = "allow"
"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with google-adk; else `None` with a line saying the test is skipped, or,
/// under CI (where scripts/test installs it), a failure.
fn python() -> Option<PathBuf> {
    let path = root().join(".venv-adk/bin/python");
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{} is missing: scripts/test installs google-adk there",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}, and under CI the ADK tests must run");
    }
    eprintln!("skipped: {why}");
    None
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
async fn lab_with_bank(adk: &Adk, llm: &ScriptedLlm) -> (TestServer, String) {
    let t = TestServer::with(POLICY, |_| {}).await;
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
    let (t, chat) = lab_with_bank(&adk, &llm).await;
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
    let (t, chat) = lab_with_bank(&adk, &llm).await;
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
