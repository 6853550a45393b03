//! The engine: the one entry point for raising, deciding, listing and following holds.
//!
//! Writes go through [`Store::commit`] with the version of the hold they were computed from;
//! when another writer got there first, the engine re-reads and recomputes (a decision that
//! lost the race then reports "already decided"). Everything that reacts to a change —
//! waiters, deadline timers, the grant index, human channels — follows the store's committed
//! event stream, so it works the same whether the change was made here or on another node.

mod cursor;
mod decide;
mod follower;
mod gate;
mod open;
mod policies;
mod progress;
mod queries;
mod recent;
mod retention;
mod stream;
mod timer_loop;
mod verify;
mod waiting;

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_protocol::{Event, Hold, HoldId, Outcome};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

pub(crate) use crate::policy::GrantIndex;
pub use gate::AgentAsking;
pub use open::{PendingLimit, PendingLimits};
pub use stream::EventStream;
pub use verify::verify;

use crate::clock::{Clock, SystemClock};
use crate::limits::Limits;
use crate::policy::{Layers, Policy};
use crate::store::{CommitError, Store, StoreError, Synced, Transaction, Write, each_page};

/// A way to reach a person: the web inbox, a terminal, a chat bot, an MCP client. The engine
/// refuses to start a policy that can ask when no channel is registered, so a hold can never
/// wait on nobody.
pub trait HumanChannel: Send + Sync + 'static {
    fn name(&self) -> &str;

    /// Called, in log order, for each committed event about a hold (created, reminded, voted,
    /// awaiting confirm, decided, expired, withdrawn). Must return quickly; spawn any I/O.
    fn notify(&self, event: &Arc<Event>) {
        let _ = event;
    }
}

/// Why an engine did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "the policy can ask a person (mode {mode}), but no way to reach one is configured: \
         register a human channel, or use mode auto_approve / auto_deny without ask rules"
    )]
    NoHumanChannel { mode: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Limits a caller to one world (and chat), and an agent's credential to the holds raised
/// under its name. Holds outside it look like holds that do not exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    pub world: Option<String>,
    pub chat: Option<String>,
    /// Only holds whose `requested_by` is this.
    pub raised_by: Option<String>,
}

impl Scope {
    pub fn any() -> Self {
        Scope::default()
    }

    pub fn world(world: impl Into<String>) -> Self {
        Scope {
            world: Some(world.into()),
            ..Scope::default()
        }
    }

    pub(crate) fn admits(&self, hold: &Hold) -> bool {
        self.world.as_ref().is_none_or(|w| *w == hold.world)
            && self
                .chat
                .as_ref()
                .is_none_or(|c| Some(c) == hold.chat.as_ref())
            && self
                .raised_by
                .as_ref()
                .is_none_or(|r| *r == hold.requested_by)
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    policy: Policy,
    channels: Vec<Arc<dyn HumanChannel>>,
    limits: Limits,
    pending: PendingLimits,
}

impl EngineBuilder {
    pub fn new(store: Arc<dyn Store>) -> Self {
        EngineBuilder {
            store,
            clock: Arc::new(SystemClock),
            policy: Policy::default(),
            channels: Vec::new(),
            limits: Limits::default(),
            pending: PendingLimits::default(),
        }
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    pub fn channel(mut self, channel: Arc<dyn HumanChannel>) -> Self {
        self.channels.push(channel);
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Caps on the holds a raise through the API may leave open (none by default).
    pub fn pending_limits(mut self, pending: PendingLimits) -> Self {
        self.pending = pending;
        self
    }

    /// Starts the engine: loads grants and the deadlines of open holds, applies the timeout
    /// outcome to holds whose deadline passed while nothing ran, and follows the store's
    /// events. Must run inside a Tokio runtime.
    pub async fn start(self) -> Result<Engine, StartError> {
        check_reachable(&self.policy, &self.channels)?;
        // Subscribe before reading state, so nothing committed in between is missed.
        let events = self.store.subscribe();
        let head = self.store.audit_head().await?.map_or(0, |h| h.seq);
        let layers = policies::load(&*self.store, Layers::new(self.policy)).await?;
        for (_, w) in layers.worlds() {
            check_reachable(&w.effective, &self.channels)?;
        }
        let mut grant_index = GrantIndex::default();
        for g in self.store.grants(None).await? {
            grant_index.insert(g);
        }
        let open = open_holds(&self.store).await?;
        let inner = Arc::new(Inner {
            store: self.store,
            clock: self.clock,
            policy: RwLock::new(Arc::new(layers)),
            channels: self.channels,
            limits: self.limits,
            pending: self.pending,
            grants: RwLock::new(grant_index),
            open: Mutex::new(open),
            timers_changed: Arc::new(Notify::new()),
            waiters: Mutex::new(HashMap::new()),
            recent: Mutex::new(recent::RecentHolds::new(RECENT_HOLDS)),
            progress: progress::Progress::new(head),
            tasks: Mutex::new(Vec::new()),
        });
        let follower = tokio::spawn(follower::run(Arc::downgrade(&inner), events, head));
        let timer = tokio::spawn(timer_loop::run(Arc::downgrade(&inner)));
        inner.tasks.lock().extend([follower, timer]);
        Ok(Engine { inner })
    }
}

/// The open holds, read once from the index that carries their marks: in `MARK_READERS`
/// parts of their positions at once, each a page at a time, taken in as the pages come. With
/// millions open, start is bound by reading (decoding the rows; from a cold cache, the disk's
/// latency, which parts read at once overlap), not by taking them in.
async fn open_holds(store: &Arc<dyn Store>) -> Result<open::OpenHolds, StoreError> {
    let mut open = open::OpenHolds::loading();
    let Some(span) = store.open_span().await? else {
        return Ok(open.done());
    };
    let (first, last) = span.into_inner();
    store.reading_open_marks(MARK_READERS as usize);
    let step = (last - first) / MARK_READERS + 1;
    // Unbounded: a page is taken in (counted, pushed) far faster than it is read.
    let (pages, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let mut parts = Vec::new();
    for part in 0..MARK_READERS {
        let from = first.saturating_add(part * step);
        if from > last {
            break;
        }
        let until = from.saturating_add(step - 1).min(last);
        let (store, pages) = (store.clone(), pages.clone());
        parts.push(tokio::spawn(async move {
            let read = |after: Option<u64>, limit| {
                let store = store.clone();
                let from = after.map_or(from, |a| a.saturating_add(1));
                async move { store.open_marks(from..=until, limit).await }
            };
            // A send fails only once start gave up (another part failed): nothing to do.
            let read = each_page(MARKS_PAGE, read, |page| drop(pages.send(Ok(page)))).await;
            if let Err(e) = read {
                drop(pages.send(Err(e)));
            }
        }));
    }
    drop(pages);
    while let Some(page) = arrived.recv().await {
        open.add_page(page?.iter().map(|m| &m.item));
    }
    // A part that ended without reading to its end (it panicked) sent no error: its holds
    // would be missing, their deadlines never armed. Start fails instead.
    for part in parts {
        part.await
            .map_err(|e| StoreError::new(format!("reading the open holds failed: {e}")))?;
    }
    Ok(open.done())
}

fn check_reachable(policy: &Policy, channels: &[Arc<dyn HumanChannel>]) -> Result<(), StartError> {
    if policy.can_ask() && channels.is_empty() {
        return Err(StartError::NoHumanChannel {
            mode: policy.mode().as_str(),
        });
    }
    Ok(())
}

/// When a commit is answered: once durable, or once written where a crash of the process
/// cannot lose it, with its sync still owed ([`crate::store::Store::commit_written`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    Durable,
    /// Only for records nothing in memory follows from (allowed calls): the follower's
    /// application of them is not waited for.
    Written,
}

/// The engine handle. Cheap to clone; the engine stops when the last clone is dropped.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// The base policy and every world's own.
    policy: RwLock<Arc<Layers>>,
    channels: Vec<Arc<dyn HumanChannel>>,
    limits: Limits,
    pending: PendingLimits,
    grants: RwLock<GrantIndex>,
    /// Holds not yet resolved: counted per world and raiser (for metrics and caps), and their
    /// timers.
    open: Mutex<open::OpenHolds>,
    timers_changed: Arc<Notify>,
    waiters: Mutex<HashMap<HoldId, Vec<oneshot::Sender<Outcome>>>>,
    recent: Mutex<recent::RecentHolds>,
    /// How far the follower has applied the log to the views above.
    progress: progress::Progress,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

/// How often an optimistic change is retried against concurrent changes to the same hold.
const MAX_ATTEMPTS: usize = 32;
/// Holds kept in memory after this node wrote them (a few MiB at most).
const RECENT_HOLDS: usize = 4096;
/// Open holds' marks read at start per query: about 300 KB, which the allocator reuses.
const MARKS_PAGE: usize = 4_096;
/// Parts of the open holds' positions read at once at start (`open_holds`).
const MARK_READERS: u64 = 4;

impl Engine {
    pub fn builder(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder::new(store)
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The base policy (the server's policy file).
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.policy.read().base().clone()
    }

    /// The base policy and every world's own.
    pub fn layers(&self) -> Arc<Layers> {
        self.inner.policy.read().clone()
    }

    /// The policy in force for a world (the world's own over the base, or the base), and the
    /// versions it is made of.
    pub fn policy_for(&self, world: &str) -> (Arc<Policy>, holdpoint_protocol::PolicyVersion) {
        self.inner.policy.read().for_world(world)
    }

    /// Replaces the base policy (a reload), rebuilding every world's policy in force on it.
    /// Holds already raised keep their settings.
    pub fn set_policy(&self, policy: Policy) -> Result<(), StartError> {
        let mut layers = self.inner.policy.write();
        let next = layers.with_base(policy);
        check_reachable(next.base(), &self.inner.channels)?;
        for (_, w) in next.worlds() {
            check_reachable(&w.effective, &self.inner.channels)?;
        }
        *layers = Arc::new(next);
        Ok(())
    }

    pub(crate) fn now(&self) -> holdpoint_protocol::Timestamp {
        self.inner.clock.now()
    }

    /// A read barrier: on a store other nodes write too, waits until this node's follower has
    /// applied everything committed anywhere before the call (one round trip to read the
    /// log's head, and a read of the log when this node has not published up to it yet).
    /// What is decided from memory afterwards (grants) is as exact as a read of the database.
    /// On a store with no other writer it returns at once.
    pub async fn catch_up(&self) -> Result<(), StoreError> {
        if let Some(head) = self.inner.store.catch_up().await? {
            self.inner.progress.reached(head).await;
        }
        Ok(())
    }

    /// Commits, then waits until the follower has applied the committed events, so that what
    /// a caller did is in force for its next call (a grant allows the next gate, say). The
    /// holds written are remembered for the hot path.
    pub(crate) async fn commit(&self, tx: Transaction) -> Result<Vec<Arc<Event>>, CommitError> {
        let (events, _done) = self.commit_as(tx, Answered::Durable).await?;
        Ok(events)
    }

    /// Commits, answering as `answered` says. Once written, what is owed (the sync, then the
    /// follower applying the events, as [`Engine::commit`] waits for them) is in the
    /// [`Synced`] returned; once durable, nothing is.
    pub(crate) async fn commit_as(
        &self,
        tx: Transaction,
        answered: Answered,
    ) -> Result<(Vec<Arc<Event>>, Synced), CommitError> {
        let written: Vec<Arc<Hold>> = tx
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::InsertHold(h) | Write::UpdateHold(h) => Some(h.clone()),
                _ => None,
            })
            .collect();
        // Resolved versions become facts for the follower once it applies their events,
        // which may come before this task runs again (recent.rs).
        let committing = recent::Committing::new(&self.inner.recent, &written);
        let (events, synced) = match answered {
            Answered::Durable => (self.inner.store.commit(tx).await?, Synced::done()),
            Answered::Written => self.inner.store.commit_written(tx).await?,
        };
        {
            let mut recent = self.inner.recent.lock();
            for h in &written {
                recent.put(h.clone());
            }
        }
        drop(committing);
        let Some(last) = events.last().map(|e| e.seq) else {
            return Ok((events, synced));
        };
        match answered {
            Answered::Durable => {
                self.inner.progress.reached(last).await;
                Ok((events, synced))
            }
            // Only calls' records are answered written (`gate_all_written`): nothing in memory
            // follows from them, so what is owed is the sync alone, not the follower's
            // application too (a wake-up of another task, on the gateway's path).
            Answered::Written => Ok((events, synced)),
        }
    }
}

/// The result of an optimistic update.
pub(crate) enum Updated<R> {
    /// The transition was committed; the hold as it now is.
    Applied(Hold, R),
    /// The function chose to change nothing; the hold as read.
    Unchanged(Hold),
}
