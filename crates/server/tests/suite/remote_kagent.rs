//! Remote A2A agents, tried with kagent itself: `kagent-adk run bank --local` (kagent-adk
//! 0.10.4, in `.venv-kagent`) serves `tests/a2a/kagent/bank`, whose tool needs confirmation.
//! kagent asks in ADK's shape marked as its own and reads only its own answer
//! (`decision_type`): approved in Holdpoint's chat, its tool runs exactly once; denied, never.
//! scripts/test installs the venv; where it is missing the tests are skipped, except under CI,
//! where they fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::remote_agents::{POLICY, installed};
use super::{TestServer, lab_chat};

/// `kagent-adk`, which scripts/test installs.
fn kagent() -> Option<PathBuf> {
    installed(".venv-kagent/bin/kagent-adk", "kagent-adk")
}

/// The kagent agent, running: the process (killed when dropped), its base URL, and the file
/// each run of its tool appends a line to.
struct Kagent {
    _child: Child,
    url: String,
    runs: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kagent {
    async fn start(kagent: &Path) -> Kagent {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("bank");
        std::fs::create_dir(&package).unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/kagent/bank");
        for file in ["__init__.py", "agent.py"] {
            std::fs::copy(source.join(file), package.join(file)).unwrap();
        }
        // `kagent-adk run` takes its port and its card, whose url must name that port, from
        // outside: a port free a moment ago.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let card = json!({
            "name": "bank", "description": "Moves money after confirmation", "url": format!("{url}/"),
            "version": "0.1.0", "protocolVersion": "0.3.0", "capabilities": {"streaming": true},
            "defaultInputModes": ["text"], "defaultOutputModes": ["text"],
            "skills": [{"id": "transfer", "name": "transfer", "description": "Transfer money", "tags": ["money"]}],
        });
        std::fs::write(package.join("agent-card.json"), card.to_string()).unwrap();
        let runs = dir.path().join("runs.txt");
        let mut child = Command::new(kagent)
            .args(["run", "bank", "--local", "--port", &port.to_string()])
            .arg("--working-dir")
            .arg(dir.path())
            .current_dir(dir.path())
            .env("RUNS_FILE", &runs)
            // Read by kagent's configuration, and not used in --local mode.
            .env("KAGENT_URL", "http://127.0.0.1:9")
            .env("KAGENT_NAME", "bank")
            .env("KAGENT_NAMESPACE", "test")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("kagent-adk starts");
        // Importing kagent and ADK takes seconds, more on a busy machine.
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + 3 * PATIENCE;
        loop {
            if let Ok(r) = http
                .get(format!("{url}/.well-known/agent-card.json"))
                .send()
                .await
                && r.status().is_success()
            {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("kagent-adk ended ({status}) without serving");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "kagent's card is not served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Kagent {
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

/// Sends "Send 5" in a chat whose agent calls kagent's bank; waits for its confirmation as a
/// hold there.
async fn until_confirmation(
    kagent: &Kagent,
    llm: &ScriptedLlm,
) -> (TestServer, holdpoint_test_support::http::Sse, Value) {
    let t = TestServer::with(POLICY, |_| {}).await;
    let chat = lab_chat(&t, &llm.base_url(), None).await;
    t.api
        .patch(
            "/api/v1/worlds/lab",
            json!({"a2a_agents": {"bank": {"url": kagent.url, "timeout": "60s"}}}),
        )
        .await
        .expect(200);
    let mut stream = t.api.events(&format!("?world=lab&chat={chat}"), None).await;
    t.api
        .post(
            &format!("/api/v1/worlds/lab/chats/{chat}/messages"),
            json!({"text": "Send 5"}),
        )
        .await
        .expect(202);
    let hold = stream.next_of("hold.created").await.data["payload"]["hold"].clone();
    assert_eq!(hold["spec"]["tool"], "a2a__bank/transfer", "{hold}");
    assert_eq!(hold["spec"]["arguments"], json!({"amount": 5}), "{hold}");
    (t, stream, hold)
}

fn steps() -> Vec<Step> {
    vec![
        Step::calls(vec![call("c1", "a2a__bank", json!({"message": "Send 5"}))]),
        Step::text("Done."),
    ]
}

#[tokio::test]
async fn a_kagent_confirmation_is_a_hold_in_the_chat_and_its_approval_runs_the_tool_once() {
    let Some(kagent) = kagent() else { return };
    let bank = Kagent::start(&kagent).await;
    let llm = ScriptedLlm::start(steps()).await;
    let (t, mut stream, hold) = until_confirmation(&bank, &llm).await;
    assert_eq!(bank.runs(), 0, "nothing runs before a person approves");
    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    assert_eq!(bank.runs(), 1, "kagent's tool runs exactly once");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    // kagent's answer once its tool ran. (kagent's OpenAI model hands its LLM the tool's
    // result as empty text, so the answer cannot quote it.)
    assert_eq!(result["output"]["state"], "completed", "{result}");
    assert!(
        result["output"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Final: tool said"),
        "{result}"
    );
}

#[tokio::test]
async fn a_denied_kagent_confirmation_never_runs_the_tool() {
    let Some(kagent) = kagent() else { return };
    let bank = Kagent::start(&kagent).await;
    let llm = ScriptedLlm::start(steps()).await;
    let (t, mut stream, hold) = until_confirmation(&bank, &llm).await;
    t.api
        .post(
            &format!("/api/v1/holds/{}/decision", hold["id"].as_str().unwrap()),
            json!({"action": "deny", "reason": "not today"}),
        )
        .await
        .expect(200);
    stream.next_of("turn.finished").await;
    assert_eq!(bank.runs(), 0, "a denied kagent tool never runs");
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["output"]["state"], "completed", "{result}");
}
