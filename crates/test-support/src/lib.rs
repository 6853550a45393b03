//! Helpers for Holdpoint's tests. Never part of the binary.
//!
//! Tests use real SQLite files in temporary directories and wait on events with a deadline;
//! time moves only when a test moves its [`ManualClock`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod chaos;
pub mod chromium;
pub mod contract;
pub mod http;
pub mod llm;
pub mod pg;
pub mod serve;
pub mod smtp;
pub mod tmpfs;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdpoint_core::clock::ManualClock;
use holdpoint_core::policy::Policy;
use holdpoint_core::store::{EventFilter, Store};
use holdpoint_core::{Engine, EventStream, HumanChannel};
use holdpoint_protocol::{
    ApprovalRequest, Event, GateRequest, HoldRequest, Principal, QuestionOption, QuestionRequest,
    Role, Timestamp,
};
use holdpoint_store::SqliteStore;
use serde_json::Value;
use tempfile::TempDir;

/// How long a test waits for something that should happen promptly: generous, because the
/// whole suite shares two cores with the MCP peers and browsers it starts, and a wait on an
/// event ends as soon as the event comes.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `check` until it answers `Ok`, for up to [`PATIENCE`], and returns that answer;
/// past it, fails with the last `Err` (what was awaited, and what was seen instead).
///
/// For state with no event to wait on: a file another process writes, `/readyz` while a
/// database comes back, a node's view while nodes are killed and started, a server's
/// counters. Where the server streams an event for what a test awaits, the test waits on
/// the stream instead.
pub async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(seen) if tokio::time::Instant::now() >= deadline => {
                panic!("not within {PATIENCE:?}: {seen}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The time a test's manual clock starts at.
pub const START: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// A SQLite store in a temporary directory, removed when dropped.
pub struct TempStore {
    pub store: Arc<SqliteStore>,
    pub dir: TempDir,
}

impl TempStore {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(SqliteStore::open(dir.path().join(holdpoint_store::DATABASE_FILE)).unwrap());
        TempStore { store, dir }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path().join(holdpoint_store::DATABASE_FILE)
    }

    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

impl Default for TempStore {
    fn default() -> Self {
        Self::new()
    }
}

/// A human channel that records what it was told.
#[derive(Default)]
pub struct RecordingChannel {
    pub events: Mutex<Vec<Arc<Event>>>,
}

impl HumanChannel for RecordingChannel {
    fn name(&self) -> &str {
        "recording"
    }

    fn notify(&self, event: &Arc<Event>) {
        self.events.lock().unwrap().push(event.clone());
    }
}

/// An engine on a temporary SQLite store and a manual clock.
pub struct TestEngine {
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
    pub channel: Arc<RecordingChannel>,
    pub temp: TempStore,
}

impl TestEngine {
    pub async fn new(policy: Policy) -> Self {
        Self::on(TempStore::new(), policy, ManualClock::new(START)).await
    }

    pub async fn on(temp: TempStore, policy: Policy, clock: Arc<ManualClock>) -> Self {
        let channel = Arc::new(RecordingChannel::default());
        let engine = Engine::builder(temp.dyn_store())
            .policy(policy)
            .clock(clock.clone())
            .channel(channel.clone())
            .start()
            .await
            .unwrap();
        TestEngine {
            engine,
            clock,
            channel,
            temp,
        }
    }

    /// Stops the engine and closes the store, keeping the files; returns them for reopening.
    pub async fn shut_down(self) -> (TempDir, Arc<ManualClock>) {
        let TestEngine {
            engine,
            clock,
            temp,
            ..
        } = self;
        drop(engine);
        temp.store.close().await;
        (temp.dir, clock)
    }

    /// A live stream of everything committed from now on.
    pub async fn stream(&self) -> EventStream {
        self.engine
            .events(None, EventFilter::default())
            .await
            .unwrap()
    }
}

/// The next event of `stream` for which `pred` holds, or a panic after [`PATIENCE`].
pub async fn next_matching(
    stream: &mut EventStream,
    what: &str,
    mut pred: impl FnMut(&Event) -> bool,
) -> Arc<Event> {
    let wait = async {
        loop {
            let e = stream.next().await.unwrap();
            if pred(&e) {
                return e;
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}"))
}

pub fn admin(name: &str) -> Principal {
    Principal::new(name, Role::Admin)
}

pub fn approver(name: &str) -> Principal {
    Principal::new(name, Role::Approver)
}

pub fn agent(name: &str) -> Principal {
    Principal::new(name, Role::Agent)
}

pub fn approval(tool: &str, arguments: Value) -> HoldRequest {
    HoldRequest::Approval(ApprovalRequest {
        tool_call_id: None,
        tool: tool.into(),
        arguments,
        schema: None,
        annotations: None,
        description: None,
        deadline: None,
        always_ask: false,
        mcp: None,
        offers: None,
    })
}

pub fn question(text: &str, options: &[&str]) -> QuestionRequest {
    QuestionRequest {
        tool_call_id: None,
        question: text.into(),
        options: options
            .iter()
            .map(|id| QuestionOption {
                id: (*id).into(),
                label: format!("Option {id}"),
                description: None,
            })
            .collect(),
        multiple: false,
        confirm: false,
        default_option: None,
        context: None,
        deadline: None,
    }
}

pub fn gate(world: &str, chat: Option<&str>, items: Vec<HoldRequest>) -> GateRequest {
    GateRequest {
        world: world.into(),
        chat: chat.map(Into::into),
        agent: Some("agent-1".into()),
        items,
        idempotency_key: None,
    }
}
