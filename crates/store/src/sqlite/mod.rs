//! The SQLite store.

mod apply;
mod checkpointer;
mod readahead;
mod reader;
mod reserve;
mod schema;
mod syncer;
mod writer;

use std::fs::File;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use async_trait::async_trait;
use holdpoint_core::audit::{AuditHead, RawEvent};
use holdpoint_core::store::{
    CommitError, EventFilter, EventPage, HoldFilter, IdempotentRecord, OpenMark, Positioned,
    Record, RecordKind, SpaceShort, Store, StoreError, StoredHold, Synced, Transaction,
};
use holdpoint_protocol::{BatchId, Event, Grant, GrantId, Hold, HoldCount, HoldId, Timestamp};
use parking_lot::Mutex;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::broadcast;

use crate::cache::{Answer, Query, RecordCache};
use crate::rows::{self, Message, commit_through, commit_written_through};
use reader::ReaderPool;
use writer::Writer;

pub use crate::OpenError;

/// An id as stored: its 16 bytes.
pub(super) fn key(id: &uuid::Uuid) -> &[u8] {
    id.as_bytes()
}

/// Readers per store.
const READERS: usize = 4;
/// Live subscribers that fall this far behind read the rest from the log.
const EVENT_BUFFER: usize = 4096;

/// Opens one connection with Holdpoint's settings.
fn connect(path: &Path, reader: bool) -> Result<Connection, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| e.to_string())?;
    let setup = || -> rusqlite::Result<()> {
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))?;
        // SQLite does not sync at commit: the syncer thread fsyncs the WAL after each group
        // and only then acknowledges it (see syncer.rs). Checkpoints still sync.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "busy_timeout", 5000)?;
        // The writer's cache stays small: SQLite walks all of it at the end of every write
        // transaction, which cost more than a larger cache saved.
        conn.pragma_update(None, "cache_size", if reader { -8000 } else { -2000 })?;
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        if reader {
            conn.pragma_update(None, "query_only", true)?;
            // Readers lose their page cache whenever the writer commits; mapped pages are
            // found again without a system call each.
            conn.pragma_update(None, "mmap_size", 1i64 << 30)?;
        }
        conn.set_prepared_statement_cache_capacity(64);
        // A cached statement keeps its plan whatever values are bound. Without this, SQLite
        // plans some listings again on every run (their best index could depend on a value),
        // which cost more than the queries themselves.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        Ok(())
    };
    setup().map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Has the kernel read the open holds' index (what start reads every open mark from) ahead,
/// for `parts` readers at once (`readahead.rs`); how many of its leaves it named.
fn read_ahead_open_marks(path: &Path, parts: usize) -> Result<usize, String> {
    let root: u32 = connect(path, true)?
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE type = 'index' AND name = 'holds_open'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| e.to_string())?;
    readahead::index(path, root, parts).map_err(|e| e.to_string())
}

/// A Holdpoint database in one SQLite file (plus its WAL).
pub struct SqliteStore {
    path: PathBuf,
    writer: Option<Sender<Message>>,
    writer_thread: Mutex<Option<JoinHandle<()>>>,
    readers: Arc<ReaderPool>,
    /// Only while this process writes: another writer's changes would not clear it.
    cache: Option<Arc<RecordCache>>,
    events: broadcast::Sender<Arc<Event>>,
    /// Whether the disk is full and the space set aside for it in use (`reserve.rs`); none
    /// for a store opened read-only.
    space: Option<Arc<reserve::Space>>,
    /// The syncer's fsyncs, for tests.
    gauge: Arc<syncer::SyncGauge>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating and migrating as needed) the database at `path` for reading and
    /// writing. Only one process may have a database open for writing.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_path_buf();
        let io = |e: std::io::Error| OpenError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut lock_path = path.clone().into_os_string();
        lock_path.push(".lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        lock.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => OpenError::Locked { path: path.clone() },
            std::fs::TryLockError::Error(e) => io(e),
        })?;
        let db = |message: String| OpenError::Database {
            path: path.clone(),
            message,
        };
        // Held by this process alone now: the space set aside last time is given up for the
        // open (on a full disk, the WAL needs it) and set aside again below.
        reserve::give_up_before_open(&path);
        let mut conn = connect(&path, false).map_err(db)?;
        schema::migrate(&mut conn).map_err(db)?;
        // Checkpoints run on their own thread (see checkpointer.rs) instead of SQLite's
        // automatic checkpoint, which would run inside a commit.
        let wal_frames = writer::watch_wal(&mut conn).map_err(|e| db(e.to_string()))?;
        let head = reader::audit_head(&conn)
            .map_err(|e| db(e.message().to_owned()))?
            .unwrap_or_else(|| AuditHead {
                seq: 0,
                hash: holdpoint_core::audit::GENESIS.to_owned(),
            });
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (tx, rx) = std::sync::mpsc::channel();
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cache = Arc::new(RecordCache::default());
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        let gauge = Arc::new(syncer::SyncGauge::default());
        let syncer = syncer::Syncer::spawn(
            PathBuf::from(wal),
            events.clone(),
            failed.clone(),
            gauge.clone(),
        )
        .map_err(io)?;
        let reserve = reserve::Reserve::open(&path);
        let space = reserve.space();
        let mut writer = Writer {
            conn,
            reserve,
            _lock: lock,
            head,
            syncer,
            failed,
            wal_frames,
            nudged_at: 0,
            checkpointer: checkpointer::Checkpointer::spawn(&path).map_err(db)?,
            cache: cache.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("holdpoint-write".into())
            .spawn(move || {
                writer.serve(rx);
                writer.finish();
            })
            .map_err(io)?;
        Ok(SqliteStore {
            readers: Arc::new(ReaderPool::new(path.clone(), READERS)),
            path,
            writer: Some(tx),
            writer_thread: Mutex::new(Some(thread)),
            cache: Some(cache),
            events,
            space: Some(space),
            gauge,
        })
    }

    /// Opens an existing database for reading only (while another process may write it).
    /// Commits fail.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore, OpenError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(OpenError::Missing { path });
        }
        let conn = connect(&path, true).map_err(|message| OpenError::Database {
            path: path.clone(),
            message,
        })?;
        schema::check_current(&conn).map_err(|message| OpenError::Database {
            path: path.clone(),
            message,
        })?;
        let (events, _) = broadcast::channel(1);
        Ok(SqliteStore {
            readers: Arc::new(ReaderPool::new(path.clone(), READERS)),
            path,
            writer: None,
            writer_thread: Mutex::new(None),
            cache: None,
            events,
            space: None,
            gauge: Arc::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// For tests of durability: holds back every fsync until the guard is dropped, so that
    /// commits are written and not yet durable meanwhile.
    #[doc(hidden)]
    pub fn hold_syncs(&self) -> syncer::SyncsHeld {
        self.gauge.pause()
    }

    /// For tests of durability: how many times the WAL was fsynced.
    #[doc(hidden)]
    pub fn syncs(&self) -> u64 {
        self.gauge.syncs()
    }

    /// Finishes queued commits, checkpoints the WAL and releases the database. Later commits
    /// fail.
    pub async fn close(&self) {
        if let Some(w) = &self.writer {
            let _ = w.send(Message::Close);
        }
        let thread = self.writer_thread.lock().take();
        if let Some(t) = thread {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }

    async fn lookup<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.readers.lookup(f).await
    }

    /// A records query, answered from the catalog cache when it can be.
    async fn cached(
        &self,
        query: Query,
        read: impl FnOnce(&Connection) -> Result<Answer, StoreError> + Send + 'static,
    ) -> Result<Answer, StoreError> {
        let generation = match self.cache.as_ref().map(|c| c.get(&query)) {
            Some(Ok(answer)) => return Ok(answer),
            Some(Err(generation)) => generation,
            None => None,
        };
        // A listing may be long: it runs on a blocking thread, unlike a lookup by key.
        let answer = match query {
            Query::List(..) => self.read(read).await?,
            Query::ById(..) | Query::ByKey(..) => self.lookup(read).await?,
        };
        if let (Some(cache), Some(generation)) = (&self.cache, generation) {
            cache.put(generation, query, &answer);
        }
        Ok(answer)
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.readers.run(f).await
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The writer finishes what is queued, then exits and releases the lock.
        if let Some(w) = &self.writer {
            let _ = w.send(Message::Close);
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn commit(&self, tx: Transaction) -> Result<Vec<Arc<Event>>, CommitError> {
        let send = self.writer.as_ref().map(|w| |m| w.send(m).is_ok());
        commit_through(send, tx).await
    }

    /// Answered once the group is committed to the WAL (SQLite writes it at `COMMIT`, with
    /// `synchronous = NORMAL` and no fsync); the fsync that makes it durable is the one the
    /// syncer runs for its group, or for a later one (an fsync of the WAL covers every frame
    /// before it), shared as ever by every commit written meanwhile.
    async fn commit_written(
        &self,
        tx: Transaction,
    ) -> Result<(Vec<Arc<Event>>, Synced), CommitError> {
        let send = self.writer.as_ref().map(|w| |m| w.send(m).is_ok());
        commit_written_through(send, tx).await
    }

    fn short_of_space(&self) -> Option<SpaceShort> {
        self.space.as_ref().and_then(|s| s.shortfall())
    }

    async fn stored_holds(
        &self,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<StoredHold>>, StoreError> {
        self.read(move |c| reader::stored_holds(c, after, limit))
            .await
    }

    async fn hold(&self, id: HoldId) -> Result<Option<Hold>, StoreError> {
        self.lookup(move |c| reader::hold(c, id)).await
    }

    async fn holds(&self, filter: &HoldFilter) -> Result<Vec<Positioned<Hold>>, StoreError> {
        let filter = filter.clone();
        self.read(move |c| reader::holds(c, &filter)).await
    }

    async fn batch(&self, id: BatchId) -> Result<Vec<Hold>, StoreError> {
        self.read(move |c| reader::batch(c, id)).await
    }

    async fn open_hold_counts(&self, world: Option<&str>) -> Result<Vec<HoldCount>, StoreError> {
        let world = world.map(str::to_owned);
        self.read(move |c| reader::open_hold_counts(c, world)).await
    }

    async fn chat_has_open_hold(&self, world: &str, chat: &str) -> Result<bool, StoreError> {
        let (world, chat) = (world.to_owned(), chat.to_owned());
        self.lookup(move |c| reader::chat_has_open_hold(c, &world, &chat))
            .await
    }

    async fn open_marks(
        &self,
        positions: RangeInclusive<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<OpenMark>>, StoreError> {
        self.read(move |c| reader::open_marks(c, positions, limit))
            .await
    }

    async fn open_span(&self) -> Result<Option<RangeInclusive<u64>>, StoreError> {
        self.read(reader::open_span).await
    }

    fn reading_open_marks(&self, parts: usize) {
        let path = self.path.clone();
        // A thread of its own: the walk waits on the disk, page by page, and the leaves it
        // names may take the kernel a while to accept. It ends when they are named.
        let spawned = std::thread::Builder::new()
            .name("holdpoint-readahead".into())
            .spawn(move || match read_ahead_open_marks(&path, parts) {
                Ok(leaves) => tracing::debug!(leaves, "open holds' index read ahead"),
                Err(error) => tracing::debug!(%error, "open holds' index not read ahead"),
            });
        if let Err(error) = spawned {
            tracing::debug!(%error, "open holds' index not read ahead");
        }
    }

    async fn grants(&self, world: Option<&str>) -> Result<Vec<Grant>, StoreError> {
        let world = world.map(str::to_owned);
        self.read(move |c| reader::grants(c, world)).await
    }

    async fn grant(&self, id: GrantId) -> Result<Option<Grant>, StoreError> {
        self.lookup(move |c| reader::grant(c, id)).await
    }

    async fn idempotent(&self, key: &str) -> Result<Option<IdempotentRecord>, StoreError> {
        let key = key.to_owned();
        let row = self.lookup(move |c| reader::idempotent(c, key)).await?;
        row.map(rows::idempotent_record).transpose()
    }

    async fn idempotent_keys_before(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.read(move |c| reader::idempotent_keys_before(c, before, limit))
            .await
    }

    async fn record(&self, kind: RecordKind, id: uuid::Uuid) -> Result<Option<Record>, StoreError> {
        let read = move |c: &Connection| reader::record(c, kind, id).map(Answer::One);
        Ok(self.cached(Query::ById(kind, id), read).await?.one())
    }

    async fn record_by_key(
        &self,
        kind: RecordKind,
        parent: Option<uuid::Uuid>,
        name: &str,
    ) -> Result<Option<Record>, StoreError> {
        let query = Query::ByKey(kind, parent, name.to_owned());
        let name = name.to_owned();
        let read =
            move |c: &Connection| reader::record_by_key(c, kind, parent, &name).map(Answer::One);
        Ok(self.cached(query, read).await?.one())
    }

    async fn records(
        &self,
        kind: RecordKind,
        parent: Option<uuid::Uuid>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<Record>>, StoreError> {
        let read =
            move |c: &Connection| reader::records(c, kind, parent, after, limit).map(Answer::Many);
        Ok(self
            .cached(Query::List(kind, parent, after, limit), read)
            .await?
            .many())
    }

    async fn events(
        &self,
        after: u64,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        let filter = filter.clone();
        self.read(move |c| reader::events(c, after, &filter, limit))
            .await
    }

    async fn events_before(
        &self,
        before: Option<u64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        let filter = filter.clone();
        self.read(move |c| reader::events_before(c, before, &filter, limit))
            .await
    }

    async fn raw_events(&self, after: u64, limit: usize) -> Result<Vec<RawEvent>, StoreError> {
        self.read(move |c| reader::raw_events(c, after, limit))
            .await
    }

    async fn audit_head(&self) -> Result<Option<AuditHead>, StoreError> {
        self.lookup(reader::audit_head).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests;
