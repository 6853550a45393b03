mod catalog;
mod crash;
mod failures;
mod holds;
mod nested;
mod questions;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use holdpoint_agent::{Runtime, RuntimeConfig};
use holdpoint_core::clock::ManualClock;
use holdpoint_core::policy::Policy;
use holdpoint_core::roles;
use holdpoint_core::store::EventFilter;
use holdpoint_core::{Engine, EventStream, Scope};
use holdpoint_llm::{LlmClient, Timeouts};
use holdpoint_protocol::{
    Actor, Agent, Chat, Decision, Event, EventPayload, Hold, LlmSettings, NewAgent, NewChat,
    NewWorld, Turn, TurnId, World,
};
use holdpoint_store::SqliteStore;
use holdpoint_test_support::llm::{ScriptedLlm, Step};
use holdpoint_test_support::{PATIENCE, RecordingChannel, START, admin, approver, next_matching};
use tempfile::TempDir;

/// The admin who changes the catalog in these tests, as the audit log records them.
pub fn by() -> Actor {
    roles::actor_of(&admin("root"))
}

pub fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_millis(500),
        retries: 1,
        backoff: Duration::from_millis(10),
    }
}

pub fn llm_settings(llm: &ScriptedLlm) -> LlmSettings {
    LlmSettings {
        base_url: llm.base_url(),
        model: "scripted".into(),
        api_key_env: None,
        headers: Default::default(),
        temperature: None,
    }
}

/// A runtime on a temporary data directory, with a world, an agent and a chat.
pub struct Harness {
    pub rt: Runtime,
    pub engine: Engine,
    pub llm: ScriptedLlm,
    pub clock: Arc<ManualClock>,
    pub world: World,
    pub agent: Agent,
    pub chat: Chat,
    pub dir: TempDir,
}

impl Harness {
    pub async fn new(policy: &str, steps: Vec<Step>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let llm = ScriptedLlm::start(steps).await;
        let clock = ManualClock::new(START);
        let (rt, engine, _store) = start(dir.path(), policy, clock.clone()).await;
        let world = rt
            .create_world(
                &by(),
                NewWorld {
                    name: "lab".into(),
                    description: None,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let agent = rt
            .create_agent(
                &by(),
                world.id,
                NewAgent {
                    name: "helper".into(),
                    llm: llm_settings(&llm),
                    system_prompt: "You help.".into(),
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
                    agent: "helper".into(),
                    title: None,
                },
            )
            .await
            .unwrap();
        Harness {
            rt,
            engine,
            llm,
            clock,
            world,
            agent,
            chat,
            dir,
        }
    }

    pub fn world_dir(&self) -> std::path::PathBuf {
        self.dir
            .path()
            .join("worlds")
            .join(self.world.id.to_string())
    }

    pub async fn events(&self) -> EventStream {
        self.engine
            .events(None, EventFilter::default())
            .await
            .unwrap()
    }

    /// Sends a message in the harness's chat.
    pub async fn send(&self, text: &str) -> Turn {
        self.rt
            .send_message(&by(), self.world.id, self.chat.id, text)
            .await
            .unwrap()
    }

    pub async fn new_chat(&self) -> Chat {
        self.rt
            .create_chat(
                &by(),
                self.world.id,
                NewChat {
                    agent: "helper".into(),
                    title: None,
                },
            )
            .await
            .unwrap()
    }

    pub async fn decide(&self, hold: &Hold, decision: Decision) {
        self.engine
            .decide(&approver("alice"), hold.id, decision, &Scope::any(), None)
            .await
            .unwrap();
    }
}

/// Starts an engine and runtime on `dir`.
pub async fn start(
    dir: &std::path::Path,
    policy: &str,
    clock: Arc<ManualClock>,
) -> (Runtime, Engine, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(dir.join("holdpoint.db")).unwrap());
    let engine = Engine::builder(store.clone())
        .policy(Policy::from_toml(policy).unwrap())
        .clock(clock)
        .channel(Arc::new(RecordingChannel::default()))
        .start()
        .await
        .unwrap();
    let mut config = RuntimeConfig::new(dir.join("worlds"));
    config.text_flush = Duration::from_millis(20);
    let rt = Runtime::start(engine.clone(), LlmClient::new(timeouts()).unwrap(), config)
        .await
        .unwrap();
    (rt, engine, store)
}

/// The next hold raised.
pub async fn next_hold(events: &mut EventStream) -> Hold {
    let e = next_matching(events, "a hold", |e| {
        e.payload.type_name() == "hold.created"
    })
    .await;
    match &e.payload {
        EventPayload::HoldCreated { hold } => (**hold).clone(),
        _ => unreachable!(),
    }
}

/// Waits for the turn's end event and returns the turn as stored.
pub async fn turn_end(rt: &Runtime, events: &mut EventStream, turn: TurnId) -> Turn {
    let ends = [
        "turn.finished",
        "turn.failed",
        "turn.canceled",
        "turn.stopped",
    ];
    next_matching(events, "the turn's end", |e: &Event| {
        ends.contains(&e.payload.type_name())
            && matches!(&e.payload,
                EventPayload::TurnFinished { turn: t } | EventPayload::TurnFailed { turn: t, .. }
                | EventPayload::TurnCanceled { turn: t } | EventPayload::TurnStopped { turn: t } if *t == turn)
    })
    .await;
    tokio::time::timeout(PATIENCE, rt.turn(turn))
        .await
        .unwrap()
        .unwrap()
}
