//! The storage contract.
//!
//! The engine decides *what* changes; a store makes a [`Transaction`] durable atomically, checks
//! its preconditions (a hold's version, an idempotency key not yet used), appends its events to
//! the audit chain (sealed with [`crate::audit::seal`]), and only then publishes the committed
//! events, in log order, to [`Store::subscribe`]rs. Nothing here assumes SQL, let alone SQLite:
//! a store on several nodes publishes every node's events to each node's subscribers.

use std::future::Future;
use std::ops::RangeInclusive;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use holdpoint_protocol::{
    BatchId, Event, Grant, GrantId, Hold, HoldCount, HoldId, HoldKind, HoldStatus, Order, Timestamp,
};
use serde_json::Value;
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::audit::{AuditHead, EventDraft, RawEvent};

/// A storage failure (I/O, corruption, a server that went away), or a write refused because
/// the store is short of space ([`StoreError::space_short`]). Nothing of the failed
/// transaction was applied.
#[derive(Debug, Clone)]
pub struct StoreError {
    message: String,
    short: Option<SpaceShort>,
}

impl StoreError {
    pub fn new(e: impl std::fmt::Display) -> Self {
        StoreError {
            message: e.to_string(),
            short: None,
        }
    }

    /// A write refused because the store is short of space: only the writes that serve the
    /// holds already raised are taken until it has room again.
    pub fn short_of_space(short: SpaceShort) -> Self {
        StoreError {
            message: short.to_string(),
            short: Some(short),
        }
    }

    /// What went wrong, without the "storage failure" before it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Set when the write was refused for want of space (and nothing failed): how much is
    /// free and how much is needed.
    pub fn space_short(&self) -> Option<SpaceShort> {
        self.short
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.short {
            Some(short) => short.fmt(f),
            None => write!(f, "storage failure: {}", self.message),
        }
    }
}

impl std::error::Error for StoreError {}

/// A store short of space: its disk filled up, and it now writes only what serves the holds
/// already raised ([`Transaction::allowed_short_of_space`]) until `needed` bytes are free on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceShort {
    /// Bytes free on the store's disk for an unprivileged writer, when last measured.
    pub free: u64,
    /// Bytes that must be free before every write is taken again.
    pub needed: u64,
}

impl std::fmt::Display for SpaceShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the disk holding Holdpoint's data is short of space: {} free, {} needed before \
             writes other than decisions, withdrawals and timeouts of holds already raised are \
             taken again (those still are, and everything can still be read)",
            mebibytes(self.free),
            mebibytes(self.needed),
        )
    }
}

/// Bytes as MiB with one decimal, "11.0 MiB".
fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// One atomic change: all writes and events apply, or none does.
#[derive(Debug, Default)]
pub struct Transaction {
    pub writes: Vec<Write>,
    pub events: Vec<PreparedEvent>,
}

impl Transaction {
    /// Whether a store short of space still writes this transaction: one that only changes
    /// holds already raised — a decision or a vote, a withdrawal, a timeout, a reminder — with
    /// the grants and the idempotency record that come with such a change (what a person or a
    /// deadline needs to resolve the holds there are); or one that only puts leases and
    /// cursors, without events (who does the timers' and deliveries' work, how far a follower
    /// got: one small record each, replaced in place, so they use up nothing, and a server
    /// must take its leases to start at all). Anything else (a new hold, a call recorded in
    /// the log, any other record) is refused then.
    pub fn allowed_short_of_space(&self) -> bool {
        let (mut holds, mut others) = (false, false);
        for write in &self.writes {
            match write {
                Write::UpdateHold(_) => holds = true,
                Write::InsertGrant(_) | Write::PutIdempotent { .. } => others = true,
                Write::PutRecord(r) if bookkeeping(r.kind) => {}
                _ => return false,
            }
        }
        // Leases and cursors alone: no event, and nothing else.
        let bookkeeping_only = !holds && !others && !self.writes.is_empty();
        holds || (bookkeeping_only && self.events.is_empty())
    }
}

/// Records that replace themselves in place and carry no event: leases and cursors.
fn bookkeeping(kind: RecordKind) -> bool {
    matches!(kind, RecordKind::Lease | RecordKind::Cursor)
}

/// An event draft with its canonical JSON computed by the caller, so the store's serial write
/// path only seals and stores it.
#[derive(Debug)]
pub struct PreparedEvent {
    pub draft: EventDraft,
    pub canonical: String,
}

impl From<EventDraft> for PreparedEvent {
    fn from(draft: EventDraft) -> Self {
        let canonical = draft.canonical();
        PreparedEvent { draft, canonical }
    }
}

#[derive(Debug, Clone)]
pub enum Write {
    /// A new hold at version 1. Fails with [`Conflict::HoldExists`] if the id is taken.
    InsertHold(Arc<Hold>),
    /// Replaces a hold's state. Applies only if the stored version is `hold.version - 1`,
    /// otherwise fails with [`Conflict::StaleHold`]: this is what makes decisions exactly-once.
    UpdateHold(Arc<Hold>),
    InsertGrant(Box<Grant>),
    /// Marks a grant revoked. Fails with [`Conflict::NoSuchGrant`] if it is unknown or revoked.
    RevokeGrant {
        id: GrantId,
        at: Timestamp,
    },
    /// Records the response to an idempotent request. Fails with [`Conflict::KeyTaken`] if
    /// the key was recorded before.
    PutIdempotent {
        key: String,
        fingerprint: String,
        response: Value,
        at: Timestamp,
    },
    /// Forgets the response recorded under `key` if it was recorded before `before` (and does
    /// nothing otherwise): a retry with that key is then a new request.
    ForgetIdempotent {
        key: String,
        before: Timestamp,
    },
    /// Creates a record (version 1; fails with [`Conflict::RecordExists`] if its id or its
    /// key is taken) or replaces version `n - 1` with version `n` (fails with
    /// [`Conflict::StaleRecord`] otherwise, or [`Conflict::RecordExists`] if a new key is
    /// taken).
    PutRecord(Box<Record>),
    /// Removes a record, if it exists.
    DeleteRecord {
        kind: RecordKind,
        id: Uuid,
    },
    /// Removes every record of `kind` under `parent`.
    DeleteRecords {
        kind: RecordKind,
        parent: Uuid,
    },
}

/// The runtime's entities, as the store keeps them: opaque JSON under a kind. The kind's name
/// (`active_turn`) is what the stores write in their `kind` column: renaming a variant renames
/// stored data, so the names are pinned by a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum RecordKind {
    World,
    Agent,
    Chat,
    /// Under a chat, in the order they were added.
    Message,
    /// Under a chat.
    Turn,
    /// One per chat with a turn under way (keyed by the chat): marks the chat busy, and lists
    /// the turns to resume after a restart.
    ActiveTurn,
    /// A skill a person allowed for the rest of a chat (keyed by skill, under the chat).
    SkillSession,
    /// An API credential, keyed by the SHA-256 of its secret.
    Token,
    /// A browser session, keyed by the SHA-256 of its cookie.
    Session,
    /// A webhook subscription, under its world.
    Webhook,
    /// One event's delivery to a webhook, under the webhook.
    WebhookDelivery,
    /// How far a follower of the log has got, keyed by the follower's name.
    Cursor,
    /// Which node does a piece of work that one node at a time must do, and until when
    /// (`lease::Lease`), keyed by the work's name.
    Lease,
    /// A world's policy in force (keyed by the world; its record version is the policy's).
    WorldPolicy,
    /// Every version a world's policy has had, under the world, keyed by the version.
    PolicyHistory,
    /// The holds a node's clients wait on, one record per node (keyed by the node's id), for
    /// the other nodes to see: a hold nobody waits on any more is withdrawn.
    Attendance,
    /// The marker of the worlds directory every node must share (one record).
    Workspace,
    /// Where a chat's conversation with a remote A2A agent stands (its context, and a task
    /// waiting for input), keyed by the remote agent's name, under the chat: a second call of
    /// `a2a__NAME` in the chat goes on with it.
    A2aContext,
    /// A hold's notice to a person over a channel (email) and its delivery, under the hold.
    Notice,
}

impl RecordKind {
    /// The kind's name, as stored.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the engine keeps in memory of an open hold: who raised it where (the pending limits'
/// counts) and its timers (the deadline, and the reminder while it is due).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenMark {
    pub id: HoldId,
    /// Shared with the marks read before it that name the same world ([`MarkNames`]).
    pub world: Arc<str>,
    pub requested_by: Arc<str>,
    pub deadline: Option<Timestamp>,
    /// The reminder's time, unless the reminder was sent.
    pub remind_at: Option<Timestamp>,
}

impl OpenMark {
    /// The mark of an open hold, as a store reads it from the hold's columns.
    pub fn of(hold: &Hold) -> OpenMark {
        OpenMark {
            id: hold.id,
            world: Arc::from(hold.world.as_str()),
            requested_by: Arc::from(hold.requested_by.as_str()),
            deadline: hold.deadline,
            remind_at: hold.remind_at.filter(|_| !hold.reminded),
        }
    }
}

/// The names of marks as a store reads them: holds come in runs of one world and raiser (a
/// batch each), so a name equal to the last one read is shared rather than allocated again;
/// with millions open, start would otherwise allocate two strings a hold.
#[derive(Default)]
pub struct MarkNames {
    world: Option<Arc<str>>,
    raiser: Option<Arc<str>>,
}

impl MarkNames {
    pub fn world(&mut self, name: &str) -> Arc<str> {
        Self::shared(&mut self.world, name)
    }

    pub fn raiser(&mut self, name: &str) -> Arc<str> {
        Self::shared(&mut self.raiser, name)
    }

    fn shared(last: &mut Option<Arc<str>>, name: &str) -> Arc<str> {
        match last {
            Some(kept) if **kept == *name => kept.clone(),
            _ => last.insert(Arc::from(name)).clone(),
        }
    }
}

/// One stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub kind: RecordKind,
    pub id: Uuid,
    pub parent: Option<Uuid>,
    /// Unique among the records of this kind under this parent (a name, say).
    pub key: Option<String>,
    pub version: u64,
    pub data: Value,
}

/// A precondition that did not hold. Nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    #[error("hold {0} exists")]
    HoldExists(HoldId),
    #[error("hold {0} changed since it was read")]
    StaleHold(HoldId),
    #[error("grant {0} does not exist or is revoked")]
    NoSuchGrant(GrantId),
    #[error("idempotency key {0:?} was used before")]
    KeyTaken(String),
    #[error("a {kind} named {name:?} exists")]
    RecordExists { kind: &'static str, name: String },
    #[error("the {kind} {id} changed since it was read")]
    StaleRecord { kind: &'static str, id: Uuid },
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    Conflict(#[from] Conflict),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The response recorded for an idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotentRecord {
    /// Digest of the request that first used the key.
    pub fingerprint: String,
    pub response: Value,
}

/// Which holds to list. Every combination must be served by an index, never by a scan of all
/// holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldFilter {
    pub world: Option<String>,
    /// Only together with `world`.
    pub chat: Option<String>,
    pub status: StatusSet,
    pub kind: Option<HoldKind>,
    pub batch: Option<BatchId>,
    /// Holds whose `agent` is exactly this.
    pub agent: Option<String>,
    /// Approvals of exactly this tool; a question never matches.
    pub tool: Option<String>,
    /// `Order::Urgent` lists open holds only: by deadline, those without one last, then by
    /// position.
    pub order: Order,
    /// Continue after the hold at this position (newest first: before it).
    pub after: Option<u64>,
    /// In the urgent order, the deadline of the hold at `after` (`None`: it has none).
    pub after_deadline: Option<Timestamp>,
    pub limit: usize,
}

/// Statuses to list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StatusSet {
    #[default]
    Open,
    Resolved,
    Any,
    Is(HoldStatus),
}

impl StatusSet {
    /// Whether only open holds can be in this set.
    pub fn open_only(self) -> bool {
        match self {
            StatusSet::Open => true,
            StatusSet::Is(s) => s.is_open(),
            StatusSet::Resolved | StatusSet::Any => false,
        }
    }
}

/// A hold's columns that listings, lookups and version checks filter on, kept beside its JSON:
/// the one definition of what each holds, which stores write and `audit verify` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldColumns {
    pub id: HoldId,
    pub batch: BatchId,
    pub world: String,
    /// Who raised it (`requested_by`): read at start for the caps on open holds per raiser.
    pub raiser: String,
    pub chat: Option<String>,
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub kind: String,
    pub status: String,
    pub open: bool,
    /// Milliseconds since the epoch.
    pub deadline: Option<i64>,
    /// Milliseconds since the epoch; none once the reminder was sent.
    pub remind_at: Option<i64>,
    pub version: u64,
}

impl HoldColumns {
    /// The columns of `hold`, as a store writes them.
    pub fn of(hold: &Hold) -> HoldColumns {
        HoldColumns {
            id: hold.id,
            batch: hold.batch,
            world: hold.world.clone(),
            raiser: hold.requested_by.clone(),
            chat: hold.chat.clone(),
            agent: hold.agent.clone(),
            tool: hold.tool().map(str::to_owned),
            kind: hold.kind().as_str().to_owned(),
            status: hold.status.as_str().to_owned(),
            open: hold.is_open(),
            deadline: hold.deadline.map(|t| t.as_millis()),
            remind_at: hold
                .remind_at
                .filter(|_| !hold.reminded)
                .map(|t| t.as_millis()),
            version: hold.version,
        }
    }

    /// Each column that differs from `want`'s: its name, what is stored, what should be.
    pub fn differ(&self, want: &HoldColumns) -> Vec<(&'static str, String, String)> {
        fn text<T: std::fmt::Debug>(v: &T) -> String {
            format!("{v:?}")
        }
        let mut out = Vec::new();
        let mut check = |name, stored: String, wanted: String| {
            if stored != wanted {
                out.push((name, stored, wanted));
            }
        };
        check("id", self.id.to_string(), want.id.to_string());
        check("batch", self.batch.to_string(), want.batch.to_string());
        check("world", text(&self.world), text(&want.world));
        check("raiser", text(&self.raiser), text(&want.raiser));
        check("chat", text(&self.chat), text(&want.chat));
        check("agent", text(&self.agent), text(&want.agent));
        check("tool", text(&self.tool), text(&want.tool));
        check("kind", text(&self.kind), text(&want.kind));
        check("status", text(&self.status), text(&want.status));
        check("open", text(&self.open), text(&want.open));
        check("deadline", text(&self.deadline), text(&want.deadline));
        check("remind_at", text(&self.remind_at), text(&want.remind_at));
        check("version", text(&self.version), text(&want.version));
        out
    }
}

/// A hold's stored row: its columns as stored, and its JSON as read back.
#[derive(Debug, Clone)]
pub struct StoredHold {
    pub columns: HoldColumns,
    pub hold: Hold,
}

/// A hold with its position in creation order (for cursors).
#[derive(Debug, Clone, PartialEq)]
pub struct Positioned<T> {
    pub position: u64,
    pub item: T,
}

/// Which events to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub world: Option<String>,
    pub chat: Option<String>,
    pub hold: Option<HoldId>,
}

impl EventFilter {
    pub fn matches(&self, e: &Event) -> bool {
        (self.world.is_none() || self.world == e.world)
            && (self.chat.is_none() || self.chat == e.chat)
            && (self.hold.is_none() || self.hold == e.hold)
    }
}

/// A page of events and how far the log was considered: every event with `seq <= scanned_to`
/// either is in `events` or does not match the filter.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPage {
    pub events: Vec<Arc<Event>>,
    pub scanned_to: u64,
}

/// Rows read a page at a time.
pub const PAGE: usize = 1000;

/// Reads a listing ordered by position a page at a time (`page` rows; [`PAGE`] unless rows
/// are small and many), to its end as it is now, handing each page to `visit`: the one
/// definition of paging by position, so that whatever walks holds or records stops at the
/// end of the listing and never at the end of a page. `read` is asked for the rows after a
/// position (none: from the start).
pub async fn each_page<T, F>(
    page: usize,
    mut read: impl FnMut(Option<u64>, usize) -> F,
    mut visit: impl FnMut(Vec<Positioned<T>>),
) -> Result<(), StoreError>
where
    F: std::future::Future<Output = Result<Vec<Positioned<T>>, StoreError>>,
{
    let size = page;
    let mut after = None;
    loop {
        let page = read(after, size).await?;
        let full = page.len() == size;
        after = page.last().map(|p| p.position);
        visit(page);
        if !full {
            return Ok(());
        }
    }
}

/// The sync still owed by a commit answered once written ([`Store::commit_written`]): resolves
/// once the commit is durable, or with why it could not be made durable (the store then
/// refuses further writes).
#[must_use = "a commit answered once written is durable only once its sync is awaited"]
pub struct Synced(Option<SyncWait>);

type SyncWait = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

impl Synced {
    /// Nothing left to wait for: the commit was durable when it was answered.
    pub fn done() -> Synced {
        Synced(None)
    }

    /// The sync that `until` waits for.
    pub fn until(until: impl Future<Output = Result<(), StoreError>> + Send + 'static) -> Synced {
        Synced(Some(Box::pin(until)))
    }

    /// Waits until the commit is durable.
    pub async fn wait(self) -> Result<(), StoreError> {
        match self.0 {
            Some(until) => until.await,
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Synced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Synced(pending)"
        } else {
            "Synced(done)"
        })
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies `tx` atomically and durably, then publishes its events. Returns them committed.
    async fn commit(&self, tx: Transaction) -> Result<Vec<Arc<Event>>, CommitError>;

    /// Like [`Store::commit`], but answers as soon as `tx` is written where a crash of this
    /// process cannot lose it (SQLite's WAL, in the operating system's hands), before it is
    /// durable against a crash of the machine: the [`Synced`] returned resolves once it is,
    /// and only then are its events published. Readers see it at once, and commits after it
    /// follow it in the log. For a caller with work to overlap with the fsync (the MCP
    /// gateway forwards an allowed call meanwhile). A store without that distinction commits
    /// durably and owes nothing (PostgreSQL: its commit with `synchronous_commit = on`).
    async fn commit_written(
        &self,
        tx: Transaction,
    ) -> Result<(Vec<Arc<Event>>, Synced), CommitError> {
        Ok((self.commit(tx).await?, Synced::done()))
    }

    async fn hold(&self, id: HoldId) -> Result<Option<Hold>, StoreError>;
    async fn holds(&self, filter: &HoldFilter) -> Result<Vec<Positioned<Hold>>, StoreError>;
    async fn batch(&self, id: BatchId) -> Result<Vec<Hold>, StoreError>;
    /// How many holds are open, by world and kind (of one world, or of all): one counting
    /// query over the open holds' index, not a read of the holds. Ordered by world, then kind;
    /// only the pairs with an open hold.
    async fn open_hold_counts(&self, world: Option<&str>) -> Result<Vec<HoldCount>, StoreError>;
    /// Whether the chat has an open hold (the composer lock).
    async fn chat_has_open_hold(&self, world: &str, chat: &str) -> Result<bool, StoreError>;
    /// What the engine keeps in memory of the open holds, read once at start from an index
    /// that carries the columns it needs (no hold is read or parsed): the first `limit` of
    /// those at `positions`, in position order.
    async fn open_marks(
        &self,
        positions: RangeInclusive<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<OpenMark>>, StoreError>;
    /// The first and the last open hold's positions (none open: `None`), from the same index:
    /// start reads the marks between them in parts at once.
    async fn open_span(&self) -> Result<Option<RangeInclusive<u64>>, StoreError>;
    /// A hint, given just before start reads every open mark in `parts` equal parts of their
    /// span at once: a store whose reads wait on a disk may have the marks' pages read ahead
    /// meanwhile, in the background. Nothing waits on it, or depends on what it does.
    fn reading_open_marks(&self, parts: usize) {
        let _ = parts;
    }

    /// Grants not revoked, of one world or of all.
    async fn grants(&self, world: Option<&str>) -> Result<Vec<Grant>, StoreError>;
    async fn grant(&self, id: GrantId) -> Result<Option<Grant>, StoreError>;

    async fn idempotent(&self, key: &str) -> Result<Option<IdempotentRecord>, StoreError>;
    /// Keys of the idempotency records made before `before`, oldest first, at most `limit`.
    async fn idempotent_keys_before(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    async fn record(&self, kind: RecordKind, id: Uuid) -> Result<Option<Record>, StoreError>;
    async fn record_by_key(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
        key: &str,
    ) -> Result<Option<Record>, StoreError>;
    /// Records of `kind` under `parent`, in the order they were created, after `after`.
    async fn records(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<Record>>, StoreError>;

    /// Every record of `kind` under `parent`, in the order they were created, read a page at
    /// a time: whatever acts on all of them (deleting a world, resending deliveries, expiring
    /// sessions) must not stop at the end of a page.
    async fn all_records(
        &self,
        kind: RecordKind,
        parent: Option<Uuid>,
    ) -> Result<Vec<Record>, StoreError> {
        let mut out = Vec::new();
        each_page(
            PAGE,
            |after, limit| self.records(kind, parent, after, limit),
            |page| out.extend(page.into_iter().map(|p| p.item)),
        )
        .await?;
        Ok(out)
    }

    /// Every event that matches `filter`, oldest first, read a page at a time to the end of
    /// the log as it is now.
    async fn all_events(&self, filter: &EventFilter) -> Result<Vec<Arc<Event>>, StoreError> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = self.events(after, filter, PAGE).await?;
            let full = page.events.len() == PAGE;
            after = page.scanned_to;
            out.extend(page.events);
            if !full {
                return Ok(out);
            }
        }
    }

    /// Events with `seq > after`, oldest first, at most `limit`.
    async fn events(
        &self,
        after: u64,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError>;
    /// Events with `seq < before` (every event when `None`), newest first, at most `limit`:
    /// the audit log as people read it. `scanned_to` is the lowest position considered
    /// (every event below `before` and from it either is in `events` or does not match the
    /// filter); 0 once the start of the log was reached.
    async fn events_before(
        &self,
        before: Option<u64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError>;
    /// Stored rows with `seq > after`, for verification.
    async fn raw_events(&self, after: u64, limit: usize) -> Result<Vec<RawEvent>, StoreError>;
    async fn audit_head(&self) -> Result<Option<AuditHead>, StoreError>;

    /// Committed events, in log order, from now on. A receiver that falls behind gets
    /// `Lagged` and must read what it missed with [`Store::events`].
    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>>;

    /// A read barrier for a store that other processes (nodes) write too: reads the log's
    /// head and returns it once every event up to it is published to this process's
    /// subscribers, so what a subscriber keeps in memory can be brought up to everything
    /// committed anywhere before the call. A store with no other writer returns `None` at
    /// once, at no cost: every commit of its own is published before the commit returns.
    async fn catch_up(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// Every hold's stored row by position, after `after`, at most `limit`: its columns as
    /// stored, beside its JSON, so that `audit verify` finds a column edited behind
    /// Holdpoint's back (a decided hold listed as pending, say).
    async fn stored_holds(
        &self,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<StoredHold>>, StoreError>;

    /// `Some` while the store's disk is full and it writes into the space it set aside for
    /// that: it then refuses every transaction but those that serve the holds already raised
    /// ([`Transaction::allowed_short_of_space`]), with [`StoreError::space_short`] set, so that
    /// the space left serves deciding, expiring and withdrawing them. A store that sets no
    /// space aside (or whose database sees to its own disk) is never short.
    fn short_of_space(&self) -> Option<SpaceShort> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored data names its kind: a name may be added, never changed.
    #[test]
    fn record_kinds_keep_their_stored_names() {
        use strum::VariantArray;
        let names: Vec<&str> = RecordKind::VARIANTS.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "world",
                "agent",
                "chat",
                "message",
                "turn",
                "active_turn",
                "skill_session",
                "token",
                "session",
                "webhook",
                "webhook_delivery",
                "cursor",
                "lease",
                "world_policy",
                "policy_history",
                "attendance",
                "workspace",
                "a2a_context",
                "notice",
            ]
        );
    }

    fn record(kind: RecordKind) -> Write {
        Write::PutRecord(Box::new(Record {
            kind,
            id: Uuid::nil(),
            parent: None,
            key: None,
            version: 1,
            data: Value::Null,
        }))
    }

    fn marker() -> PreparedEvent {
        EventDraft {
            at: Timestamp::from_millis(1),
            world: None,
            chat: None,
            hold: None,
            actor: holdpoint_protocol::Actor::of(holdpoint_protocol::Source::System),
            payload: holdpoint_protocol::EventPayload::GrantRevoked {
                grant: GrantId::from_uuid(Uuid::nil()),
            },
        }
        .into()
    }

    #[test]
    fn short_of_space_only_leases_and_cursors_alone_are_written_besides_hold_changes() {
        let tx = |writes: Vec<Write>, events: Vec<PreparedEvent>| Transaction { writes, events };
        // (Hold changes are covered by the stores' disk-full tests, which make real holds.)
        assert!(tx(vec![record(RecordKind::Lease)], vec![]).allowed_short_of_space());
        assert!(tx(vec![record(RecordKind::Cursor)], vec![]).allowed_short_of_space());
        let refused = [
            tx(vec![], vec![]),
            tx(vec![], vec![marker()]),
            tx(vec![record(RecordKind::Lease)], vec![marker()]),
            tx(vec![record(RecordKind::World)], vec![]),
            tx(vec![record(RecordKind::Token)], vec![marker()]),
            tx(
                vec![record(RecordKind::Lease), record(RecordKind::Session)],
                vec![],
            ),
            tx(
                vec![Write::ForgetIdempotent {
                    key: "k".into(),
                    before: Timestamp::from_millis(1),
                }],
                vec![],
            ),
            tx(
                vec![Write::PutIdempotent {
                    key: "k".into(),
                    fingerprint: "f".into(),
                    response: Value::Null,
                    at: Timestamp::from_millis(1),
                }],
                vec![],
            ),
        ];
        for t in refused {
            assert!(!t.allowed_short_of_space(), "{t:?}");
        }
    }

    /// Pages of `total` rows at positions 1..=total, as a store would serve them.
    async fn walk(total: u64) -> (Vec<u64>, usize) {
        let (mut seen, mut reads) = (Vec::new(), 0);
        let read = |after: Option<u64>, limit: usize| {
            reads += 1;
            let from = after.unwrap_or(0) + 1;
            let page: Vec<Positioned<()>> = (from..=total)
                .take(limit)
                .map(|position| Positioned { position, item: () })
                .collect();
            async move { Ok(page) }
        };
        each_page(PAGE, read, |page| {
            seen.extend(page.iter().map(|p| p.position))
        })
        .await
        .expect("the reads do not fail");
        (seen, reads)
    }

    #[tokio::test]
    async fn pages_are_read_to_the_end_of_the_listing_not_of_a_page() {
        let page = PAGE as u64;
        for total in [0, 1, page - 1, page, page + 1, 2 * page, 2 * page + 3] {
            let (seen, reads) = walk(total).await;
            assert_eq!(seen, (1..=total).collect::<Vec<_>>(), "{total} rows");
            // A full page asks once more; a short one is the last.
            assert_eq!(reads as u64, total / page + 1, "{total} rows");
        }
    }
}
