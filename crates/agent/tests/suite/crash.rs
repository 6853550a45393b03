//! Process death: a new process resumes a waiting turn once its hold is decided, and reports
//! a tool that was running as interrupted instead of running it again.
//!
//! The test binary runs itself as the child process (`child_process`, ignored unless asked
//! for); the parent hosts the scripted LLM, so the LLM outlives the child.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use holdpoint_core::Scope;
use holdpoint_core::clock::ManualClock;
use holdpoint_protocol::{
    ApproveScope, ChatId, Decision, HoldId, NewAgent, NewChat, NewWorld, TurnId, TurnStatus,
    WorldId,
};
use holdpoint_test_support::llm::{ScriptedLlm, Step, call};
use holdpoint_test_support::{START, approver};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{by, llm_settings, start, turn_end};

const DATA: &str = "HOLDPOINT_TEST_CHILD_DATA";
const POLICY: &str = "HOLDPOINT_TEST_CHILD_POLICY";
const IDS: &str = "HOLDPOINT_TEST_CHILD_IDS";
/// Starts each line the child says to the parent.
const MARK: &str = "holdpoint-child: ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the crash tests as their child process"]
async fn child_process() {
    let (Ok(data), Ok(policy), Ok(ids)) = (
        std::env::var(DATA),
        std::env::var(POLICY),
        std::env::var(IDS),
    ) else {
        return;
    };
    let (world, chat) = ids.split_once(' ').unwrap();
    let (world, chat): (WorldId, ChatId) = (world.parse().unwrap(), chat.parse().unwrap());
    let (rt, engine, _store) = start(
        std::path::Path::new(&data),
        &policy,
        ManualClock::new(START),
    )
    .await;
    let mut events = engine.events(None, Default::default()).await.unwrap();
    let turn = rt
        .send_message(&by(), world, chat, "do the thing")
        .await
        .unwrap();
    // Marked, because the test harness starts the line ("test … ... ") before the test runs;
    // and flushed, because output to a pipe is buffered.
    let say = |line: String| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{MARK}{line}");
        let _ = out.flush();
    };
    say(format!("turn {}", turn.id));
    loop {
        let e = events.next().await.unwrap();
        match (e.payload.type_name(), e.hold) {
            ("hold.created", Some(hold)) => say(format!("held {hold}")),
            ("turn.tool_started", _) => say("started".into()),
            _ => {}
        }
    }
}

/// Sets up a world in `dir` whose agent uses `llm`; returns the world and chat.
async fn prepare(dir: &std::path::Path, policy: &str, llm: &ScriptedLlm) -> (WorldId, ChatId) {
    let (rt, engine, store) = start(dir, policy, ManualClock::new(START)).await;
    let world = rt
        .create_world(
            &by(),
            NewWorld {
                name: "w".into(),
                description: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    rt.create_agent(
        &by(),
        world.id,
        NewAgent {
            name: "a".into(),
            llm: llm_settings(llm),
            system_prompt: String::new(),
            tools: None,
            max_steps: None,
        },
    )
    .await
    .unwrap();
    let chat = rt
        .create_chat(
            &by(),
            world.id,
            NewChat {
                agent: "a".into(),
                title: None,
            },
        )
        .await
        .unwrap();
    drop((rt, engine));
    store.close().await;
    (world.id, chat.id)
}

fn spawn(
    dir: &std::path::Path,
    policy: &str,
    world: WorldId,
    chat: ChatId,
) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::crash::child_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DATA, dir)
        .env(POLICY, policy)
        .env(IDS, format!("{world} {chat}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Reads the child's lines until one starts with `prefix`; returns the rest of it.
fn expect_line(lines: &mut impl Iterator<Item = std::io::Result<String>>, prefix: &str) -> String {
    for line in lines {
        let line = line.unwrap();
        let said = line.split_once(MARK).map(|(_, said)| said);
        if let Some(rest) = said.and_then(|s| s.strip_prefix(prefix)) {
            return rest.trim().to_owned();
        }
    }
    panic!("the child ended before printing {prefix:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_turn_resumes_in_a_new_process_after_its_decision() {
    resumes_after_its_decision(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_turn_resumes_behind_more_than_a_page_of_others() {
    // More turns under way than one page of records: the one to resume comes after them.
    resumes_after_its_decision(1_001).await;
}

/// Marks `n` turns as under way in chats of their own, in one transaction: turns that no
/// longer exist, which a start reports and leaves.
async fn mark_lost_turns(dir: &std::path::Path, n: usize) {
    use holdpoint_core::record::put;
    use holdpoint_core::store::{RecordKind, Store, Transaction};
    let store = holdpoint_store::SqliteStore::open(dir.join("holdpoint.db")).unwrap();
    let writes = (0..n)
        .map(|_| {
            let chat = ChatId::random().to_string();
            put(
                RecordKind::ActiveTurn,
                uuid::Uuid::now_v7(),
                None,
                Some(chat),
                1,
                &TurnId::random(),
            )
            .unwrap()
        })
        .collect();
    store
        .commit(Transaction {
            writes,
            events: vec![],
        })
        .await
        .unwrap();
    store.close().await;
}

async fn resumes_after_its_decision(others: usize) {
    let dir = tempfile::tempdir().unwrap();
    let policy = "mode = \"manual\"";
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo ran >> runs.txt"}),
        )]),
        Step::text("finished after the restart"),
    ])
    .await;
    let (world, chat) = prepare(dir.path(), policy, &llm).await;
    mark_lost_turns(dir.path(), others).await;
    let (mut child, mut lines) = spawn(dir.path(), policy, world, chat);
    let turn: TurnId = expect_line(&mut lines, "turn").parse().unwrap();
    let hold: HoldId = expect_line(&mut lines, "held").parse().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    let (rt, engine, _store) = start(dir.path(), policy, ManualClock::new(START)).await;
    let mut events = engine.events(None, Default::default()).await.unwrap();
    engine
        .decide(
            &approver("alice"),
            hold,
            Decision::Approve {
                scope: ApproveScope::Once,
                expires_in: None,
                digest: None,
                reason: None,
            },
            &Scope::any(),
            None,
        )
        .await
        .unwrap();
    let done = turn_end(&rt, &mut events, turn).await;
    assert_eq!(done.status, TurnStatus::Finished);
    let runs = std::fs::read_to_string(
        dir.path()
            .join("worlds")
            .join(world.to_string())
            .join("runs.txt"),
    )
    .unwrap();
    assert_eq!(runs, "ran\n", "ran once, by the new process");
    assert_eq!(
        llm.requests()[1].tool_result("c1").unwrap()["status"],
        "executed"
    );
    // The child may have died after raising the hold but before recording it in the turn:
    // the resumed turn asked again with the same idempotency key and got the same hold.
    let all = holdpoint_protocol::HoldQuery {
        status: holdpoint_protocol::StatusFilter::Any,
        ..Default::default()
    };
    let holds = engine.holds(&all).await.unwrap().items;
    assert_eq!(holds.iter().map(|h| h.id).collect::<Vec<_>>(), vec![hold]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_killed_mid_run_is_reported_as_interrupted_and_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "mode = \"auto_approve\"";
    let llm = ScriptedLlm::start(vec![
        Step::calls(vec![call(
            "c1",
            "shell_cmd",
            json!({"command": "echo ran >> runs.txt; sleep 20", "timeout_secs": 25}),
        )]),
        Step::text("noted"),
    ])
    .await;
    let (world, chat) = prepare(dir.path(), policy, &llm).await;
    let (mut child, mut lines) = spawn(dir.path(), policy, world, chat);
    let turn: TurnId = expect_line(&mut lines, "turn").parse().unwrap();
    expect_line(&mut lines, "started");
    let runs = dir
        .path()
        .join("worlds")
        .join(world.to_string())
        .join("runs.txt");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !runs.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let (rt, engine, _store) = start(dir.path(), policy, ManualClock::new(START)).await;
    let mut events = engine.events(Some(0), Default::default()).await.unwrap();
    let done = turn_end(&rt, &mut events, turn).await;
    assert_eq!(done.status, TurnStatus::Finished);
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "ran\n",
        "not run again"
    );
    let result = llm.requests()[1].tool_result("c1").unwrap();
    assert_eq!(result["status"], "interrupted", "{result}");
}
