//! The runtime: what it holds, how it starts (resuming turns), and how it commits.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::Engine;
use holdpoint_core::audit::EventDraft;
use holdpoint_core::lease::Node;
use holdpoint_core::record::Records;
use holdpoint_core::store::{CommitError, Store, Write};
use holdpoint_llm::LlmClient;
use holdpoint_protocol::{
    Actor, Agent, EventPayload, Principal, RemoteAgentConfig, Role, Source, Timestamp, TurnId,
};
use parking_lot::Mutex;

use crate::error::RuntimeError;
pub use crate::tools::ShellLimits;
use crate::tools::{ExternalTools, Host};
use crate::turn::Driving;

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Each world's working directory is `worlds_dir/<world id>`.
    pub worlds_dir: PathBuf,
    pub shell: ShellLimits,
    /// Streamed text is recorded in pieces at most this often.
    pub text_flush: Duration,
    /// Bytes a file tool reads or writes at most.
    pub max_file: usize,
    /// Where the worlds' MCP tools come from (none: agents have the built-in tools only).
    pub external_tools: Option<Arc<dyn ExternalTools>>,
    /// This process among the nodes sharing the store, and the length of its turn leases.
    pub node: Node,
    /// The configuration file's remote A2A agents (`[a2a.agents.NAME]`), offered to every
    /// world's agents as `a2a__NAME`; a world's own entry of the same name wins.
    pub a2a_agents: BTreeMap<String, RemoteAgentConfig>,
}

/// The default length of a turn's lease: a turn whose node died is taken over this long
/// after the node's last renewal.
pub const TURN_LEASE: Duration = Duration::from_secs(5);

impl RuntimeConfig {
    pub fn new(worlds_dir: PathBuf) -> Self {
        RuntimeConfig {
            worlds_dir,
            shell: ShellLimits::default(),
            text_flush: Duration::from_millis(100),
            max_file: 256 * 1024,
            external_tools: None,
            node: Node::new(TURN_LEASE, true),
            a2a_agents: BTreeMap::new(),
        }
    }
}

/// The agent runtime. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("worlds_dir", &self.inner.config.worlds_dir)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) engine: Engine,
    pub(crate) records: Records,
    pub(crate) llm: LlmClient,
    pub(crate) config: RuntimeConfig,
    /// Turns driven by this process, to cancel them and to renew their leases.
    pub(crate) running: Mutex<HashMap<TurnId, Driving>>,
    /// Who asked to cancel a turn, until the turn's end is recorded in their name.
    pub(crate) cancelers: Mutex<HashMap<TurnId, Actor>>,
    /// Remote A2A agents: the client, and the cards read lately.
    pub(crate) remote: crate::tools::remote::Remotes,
}

/// Who an agent of the runtime is when it acts (gates, creates agents). Named by id, stable
/// across renames: gate idempotency keys belong to the principal.
pub(crate) fn agent_principal(agent: &Agent) -> Principal {
    Principal::new(format!("agent:{}", agent.id), Role::Agent)
}

impl Runtime {
    /// Starts the runtime and resumes the turns that were under way when the last process
    /// stopped (on a store shared by several nodes: those whose lease ended): waiting turns
    /// wait again for their holds; a tool that was running is reported to the LLM as
    /// interrupted, never run again. From then on it renews the leases of the turns it drives
    /// and takes over those of nodes that stopped renewing theirs.
    pub async fn start(
        engine: Engine,
        llm: LlmClient,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        std::fs::create_dir_all(&config.worlds_dir).map_err(|e| {
            RuntimeError::invalid(
                "worlds_dir",
                format!("cannot create {}: {e}", config.worlds_dir.display()),
            )
        })?;
        let records = Records::new(engine.store().clone());
        let remote = crate::tools::remote::Remotes::new(config.a2a_agents.clone());
        let runtime = Runtime {
            inner: Arc::new(Inner {
                engine,
                records,
                llm,
                config,
                running: Mutex::new(HashMap::new()),
                cancelers: Mutex::new(HashMap::new()),
                remote,
            }),
        };
        runtime.take_over_turns().await?;
        // A store no other node uses has no one to take a turn from, nor to lose one to:
        // the turns found at start are all this node's, and renewing their leases would be
        // one write per turn under way, every few seconds, for nothing.
        if !runtime.inner.config.node.sole {
            tokio::spawn(crate::turn::keep_leases(
                Arc::downgrade(&runtime.inner),
                runtime.inner.config.node.renew_every(),
            ));
        }
        Ok(runtime)
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// This process among the nodes sharing the store.
    pub fn node(&self) -> Node {
        self.inner.config.node
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        self.inner.engine.store()
    }

    /// The typed records of the runtime's store: what the runtime keeps (worlds, agents,
    /// chats, turns) and what the server keeps (tokens, sessions, webhooks) go through it.
    pub fn records(&self) -> &Records {
        &self.inner.records
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.inner.engine.clock().now()
    }

    /// Commits writes and the events that record them.
    pub(crate) async fn commit(
        &self,
        writes: Vec<Write>,
        events: Vec<EventDraft>,
    ) -> Result<(), CommitError> {
        self.records().commit(writes, events).await
    }

    /// An event of the runtime's own, about a world (and chat).
    pub(crate) fn event(
        &self,
        world: impl ToString,
        chat: Option<String>,
        payload: EventPayload,
    ) -> EventDraft {
        self.event_by(&Actor::of(Source::System), world, chat, payload)
    }

    /// An event about a world (and chat) that `by` caused. The server records what it keeps
    /// of a world (webhook subscriptions) with it too.
    pub fn event_by(
        &self,
        by: &Actor,
        world: impl ToString,
        chat: Option<String>,
        payload: EventPayload,
    ) -> EventDraft {
        EventDraft {
            at: self.now(),
            world: Some(world.to_string()),
            chat,
            hold: None,
            actor: by.clone(),
            payload,
        }
    }

    /// Notes that `by` asked to cancel turn `id`, so that the turn's end names them.
    pub(crate) fn note_canceler(&self, id: TurnId, by: &Actor) {
        self.inner.cancelers.lock().insert(id, by.clone());
    }

    /// Who asked to cancel turn `id`, forgotten once read; Holdpoint itself when nobody did.
    pub(crate) fn take_canceler(&self, id: TurnId) -> Actor {
        self.inner
            .cancelers
            .lock()
            .remove(&id)
            .unwrap_or(Actor::of(Source::System))
    }

    pub(crate) fn world_dir(&self, world: holdpoint_protocol::WorldId) -> PathBuf {
        self.inner.config.worlds_dir.join(world.to_string())
    }

    /// The file `path` of `world`'s working directory as it is now, resolved as the file
    /// tools resolve it (never outside the directory), read up to the file tools' limit
    /// (`max_file`): what a `write_file` call would replace. An error says why the path
    /// cannot be read (outside the directory, a directory, …).
    pub fn file_now(
        &self,
        world: holdpoint_protocol::WorldId,
        path: &str,
    ) -> Result<crate::tools::FileNow, String> {
        crate::tools::fs::file_now(&self.world_dir(world), path, self.inner.config.max_file)
    }
}

/// What the tools ask of the runtime they run in.
#[async_trait::async_trait]
impl Host for Runtime {
    fn max_file(&self) -> usize {
        self.inner.config.max_file
    }

    fn shell(&self) -> &ShellLimits {
        &self.inner.config.shell
    }

    fn external_tools(&self) -> Option<&Arc<dyn ExternalTools>> {
        self.inner.config.external_tools.as_ref()
    }

    fn remotes(&self) -> &crate::tools::remote::Remotes {
        &self.inner.remote
    }

    async fn world(
        &self,
        id: holdpoint_protocol::WorldId,
    ) -> Result<holdpoint_protocol::World, RuntimeError> {
        Runtime::world(self, id).await
    }

    async fn find_agent(
        &self,
        world: holdpoint_protocol::WorldId,
        id_or_name: &str,
    ) -> Result<Agent, RuntimeError> {
        Runtime::find_agent(self, world, id_or_name).await
    }

    async fn create_agent(
        &self,
        parent: &Agent,
        new: holdpoint_protocol::NewAgent,
    ) -> Result<Agent, RuntimeError> {
        let by = holdpoint_core::roles::actor_of(&agent_principal(parent));
        Runtime::create_agent(self, &by, parent.world, new).await
    }
}
