//! Several `holdpoint serve` nodes on one PostgreSQL database, and nodes that die: a turn
//! whose node was killed is taken over by another once its lease ends, and its tool runs once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use holdpoint_test_support::PATIENCE;
use holdpoint_test_support::http::Api;
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::pg::TempSchema;
use serde_json::{Value, json};

use super::serve::{Served, admin, held_turn};

/// The nodes' turn lease: short, so that a takeover comes soon.
const LEASE: Duration = Duration::from_secs(1);

/// Nodes sharing one data directory (the admin token, the worlds' directories, as a shared
/// volume would) and one database schema.
struct Nodes {
    data: PathBuf,
    args: Vec<String>,
}

impl Nodes {
    fn new(dir: &Path, schema: &TempSchema) -> Nodes {
        let config = dir.join("holdpoint.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nturn_lease = \"{}s\"\n[log]\nlevel = \"warn\"\n",
                LEASE.as_secs()
            ),
        )
        .unwrap();
        let args = vec![
            "--database-url".to_owned(),
            schema.url.clone(),
            "--config".to_owned(),
            config.display().to_string(),
        ];
        Nodes {
            data: dir.join("data"),
            args,
        }
    }

    /// A node, started and listening; its URL.
    async fn start(&self) -> (Served, String) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut node = Served::spawn(&self.data, &args);
        let url = node.url().await;
        (node, url)
    }

    fn admin(&self, url: &str) -> Api {
        admin(&self.data, url)
    }
}

/// Waits until the turn has ended, reading it on `api`; the turn as it ended.
async fn ended_turn(api: &Api, turn: &str) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let t = api
            .get(&format!("/api/v1/worlds/lab/turns/{turn}"))
            .await
            .expect(200);
        if !matches!(t["status"].as_str(), Some("running" | "waiting")) {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end: {t}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_node_was_killed_finishes_on_another_node_and_its_tool_runs_once() {
    let Some(schema) = TempSchema::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let effect = dir.path().join("effect");
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": format!("echo x >> {}", effect.display())}),
        )]),
        Step::text("Done."),
    ])
    .await;
    let nodes = Nodes::new(dir.path(), &schema);
    // The first node alone makes the admin token; then the others join.
    let (a, url_a) = nodes.start().await;
    let (b, url_b) = nodes.start().await;
    let (c, url_c) = nodes.start().await;
    let (turn, hold) = held_turn(&nodes.admin(&url_a), &llm, "run it").await;

    // The node driving the turn dies while the turn waits; the hold is decided elsewhere.
    a.kill().await;
    let on_b = nodes.admin(&url_b);
    let decided = Instant::now();
    let decision = on_b
        .post(
            &format!("/api/v1/holds/{hold}/decision"),
            json!({"action": "approve"}),
        )
        .await
        .expect(200);
    assert_eq!(decision["hold"]["status"], "approved", "{decision}");

    // A surviving node takes the turn over once the lease ended, runs the call, and asks
    // the LLM again with its result.
    let requests = llm.wait_for_requests(2).await;
    let took = decided.elapsed();
    assert!(
        took < LEASE + Duration::from_secs(5),
        "the turn went on {took:?} after the decision"
    );
    let result = requests[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "executed", "{result}");
    let ended = ended_turn(&nodes.admin(&url_c), &turn).await;
    assert_eq!(ended["status"], "finished", "{ended}");
    // The tool ran once, and the LLM was asked exactly twice.
    assert_eq!(std::fs::read_to_string(&effect).unwrap(), "x\n");
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(llm.remaining(), 0);
    for node in [b, c] {
        assert!(node.terminate().await.success());
    }
}
