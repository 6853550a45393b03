//! The PostgreSQL store: the same contract as the SQLite one, on a database that several
//! processes (nodes) can share.
//!
//! One writer per process, on a thread of its own, applies transactions in groups
//! (`writer/`), each group one PostgreSQL transaction that first locks the chain head's row;
//! a tail follows what other nodes commit (`tail.rs`), and the two publish every event once,
//! in log order (`publish.rs`); reads go to a few shared connections that reconnect by
//! themselves (`conn.rs`, `reader.rs`); the schema is migrated at open (`schema.rs`).
//! Acknowledged means committed by PostgreSQL, with `synchronous_commit` on: durable as the
//! database's own settings make it.

mod catalog;
mod conn;
mod pipeline;
mod publish;
mod reader;
mod schema;
mod tail;
mod writer;

use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use holdpoint_core::audit::{AuditHead, RawEvent};
use holdpoint_core::store::{
    CommitError, EventFilter, EventPage, HoldFilter, IdempotentRecord, OpenMark, Positioned,
    Record, RecordKind, Store, StoreError, StoredHold, Transaction,
};
use holdpoint_protocol::{BatchId, Event, Grant, GrantId, Hold, HoldCount, HoldId, Timestamp};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

use catalog::Catalog;
use conn::{Conn, Readers, Target};
pub use conn::{check_url, redact};
use publish::Publisher;

use crate::OpenError;
use crate::cache::{self, Answer, Query};
use crate::rows::{self, Message, commit_through};

/// Connections for reads, each shared by concurrent reads.
const READERS: usize = 4;
/// Live subscribers that fall this far behind read the rest from the log.
const EVENT_BUFFER: usize = 4096;

/// A Holdpoint database in PostgreSQL.
pub struct PgStore {
    target: Target,
    writer: Option<mpsc::UnboundedSender<Message>>,
    /// Answers once the writer's thread has stopped.
    writer_task: Mutex<Option<oneshot::Receiver<()>>>,
    /// Follows other nodes' commits (none for a store opened read-only).
    tail: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
    /// Credentials, worlds and the like, kept while the catalog's version stays put.
    catalog: Arc<Catalog>,
    publisher: Arc<Publisher>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.target.name)
            .finish_non_exhaustive()
    }
}

fn open_error(message: String) -> OpenError {
    OpenError::Postgres { message }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`),
    /// migrates its schema as needed and starts the writer. Errors say what to fix: the
    /// host, the credentials, the database's name.
    pub async fn open(url: &str) -> Result<PgStore, OpenError> {
        let target = Target::parse(url).map_err(open_error)?;
        let (mut client, _) = writer::connect(&target).await.map_err(open_error)?;
        schema::migrate(&mut client)
            .await
            .map_err(|m| open_error(format!("PostgreSQL at {}: {m}", target.name)))?;
        let conn = Conn::new(client);
        let head = reader::audit_head(&conn)
            .await
            .map_err(|e| open_error(e.message().to_owned()))?;
        drop(conn);
        let publisher = Arc::new(Publisher::new(head.map_or(0, |h| h.seq), EVENT_BUFFER));
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = writer::Writer::new(target.clone(), publisher.clone());
        let task = writer
            .spawn(rx)
            .map_err(|e| open_error(format!("cannot start the writer's thread: {e}")))?;
        let tail = tokio::spawn(tail::run(target.clone(), publisher.clone()));
        let readers = Arc::new(Readers::new(target.clone(), READERS));
        Ok(PgStore {
            catalog: Catalog::new(readers.clone()),
            readers,
            target,
            writer: Some(tx),
            writer_task: Mutex::new(Some(task)),
            tail: Some(tail),
            publisher,
        })
    }

    /// Connects for reading only (`holdpoint audit verify` beside running servers): nothing
    /// is migrated, and commits fail.
    pub async fn open_read_only(url: &str) -> Result<PgStore, OpenError> {
        let target = Target::parse(url).map_err(open_error)?;
        let client = target.connect().await.map_err(open_error)?;
        schema::check_current(&client)
            .await
            .map_err(|m| open_error(format!("PostgreSQL at {}: {m}", target.name)))?;
        let readers = Arc::new(Readers::new(target.clone(), 1));
        Ok(PgStore {
            catalog: Catalog::new(readers.clone()),
            readers,
            target,
            writer: None,
            writer_task: Mutex::new(None),
            tail: None,
            publisher: Arc::new(Publisher::new(0, 1)),
        })
    }

    /// `host:port/database`, without credentials.
    pub fn name(&self) -> &str {
        &self.target.name
    }

    /// Finishes queued commits and stops the writer and the tail. Later commits fail.
    pub async fn close(&self) {
        if let Some(t) = &self.tail {
            t.abort();
        }
        if let Some(w) = &self.writer {
            let _ = w.send(Message::Close);
        }
        let task = self.writer_task.lock().take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }

    /// Stops following what other nodes commit, as if every notification were lost and the
    /// poll never came: for tests of what must hold without the tail.
    #[doc(hidden)]
    pub fn stop_tail(&self) {
        if let Some(t) = &self.tail {
            t.abort();
        }
    }

    async fn conn(&self) -> Result<Arc<Conn>, StoreError> {
        self.readers.get().await
    }

    /// A records query, answered from the catalog cache when it can be: once the cache is
    /// known to be current (`catalog.rs`).
    async fn cached(
        &self,
        query: Query,
        read: impl Future<Output = Result<Answer, StoreError>>,
    ) -> Result<Answer, StoreError> {
        if !cache::keeps(query.kind()) {
            return read.await;
        }
        self.catalog.refresh().await?;
        let generation = match self.catalog.cache.get(&query) {
            Ok(answer) => return Ok(answer),
            Err(generation) => generation,
        };
        let answer = read.await?;
        if let Some(generation) = generation {
            self.catalog.cache.put(generation, query, &answer);
        }
        Ok(answer)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // The writer finishes what is queued, then exits.
        if let Some(w) = &self.writer {
            let _ = w.send(Message::Close);
        }
        if let Some(t) = &self.tail {
            t.abort();
        }
    }
}

#[async_trait]
impl Store for PgStore {
    async fn commit(&self, tx: Transaction) -> Result<Vec<Arc<Event>>, CommitError> {
        let send = self.writer.as_ref().map(|w| |m| w.send(m).is_ok());
        commit_through(send, tx).await
    }

    async fn hold(&self, id: HoldId) -> Result<Option<Hold>, StoreError> {
        reader::hold(&*self.conn().await?, id).await
    }

    async fn holds(&self, filter: &HoldFilter) -> Result<Vec<Positioned<Hold>>, StoreError> {
        reader::holds(&*self.conn().await?, filter).await
    }

    async fn batch(&self, id: BatchId) -> Result<Vec<Hold>, StoreError> {
        reader::batch(&*self.conn().await?, id).await
    }

    async fn stored_holds(
        &self,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<StoredHold>>, StoreError> {
        reader::stored_holds(&*self.conn().await?, after, limit).await
    }

    async fn open_hold_counts(&self, world: Option<&str>) -> Result<Vec<HoldCount>, StoreError> {
        reader::open_hold_counts(&*self.conn().await?, world).await
    }

    async fn chat_has_open_hold(&self, world: &str, chat: &str) -> Result<bool, StoreError> {
        reader::chat_has_open_hold(&*self.conn().await?, world, chat).await
    }

    async fn open_marks(
        &self,
        positions: RangeInclusive<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<OpenMark>>, StoreError> {
        reader::open_marks(&*self.conn().await?, positions, limit).await
    }

    async fn open_span(&self) -> Result<Option<RangeInclusive<u64>>, StoreError> {
        reader::open_span(&*self.conn().await?).await
    }

    async fn grants(&self, world: Option<&str>) -> Result<Vec<Grant>, StoreError> {
        reader::grants(&*self.conn().await?, world.map(str::to_owned)).await
    }

    async fn grant(&self, id: GrantId) -> Result<Option<Grant>, StoreError> {
        reader::grant(&*self.conn().await?, id).await
    }

    async fn idempotent(&self, key: &str) -> Result<Option<IdempotentRecord>, StoreError> {
        let row = reader::idempotent(&*self.conn().await?, key).await?;
        row.map(rows::idempotent_record).transpose()
    }

    async fn idempotent_keys_before(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        reader::idempotent_keys_before(&*self.conn().await?, before, limit).await
    }

    async fn record(&self, kind: RecordKind, id: uuid::Uuid) -> Result<Option<Record>, StoreError> {
        let read = async {
            reader::record(&*self.conn().await?, kind, id)
                .await
                .map(Answer::One)
        };
        Ok(self.cached(Query::ById(kind, id), read).await?.one())
    }

    async fn record_by_key(
        &self,
        kind: RecordKind,
        parent: Option<uuid::Uuid>,
        name: &str,
    ) -> Result<Option<Record>, StoreError> {
        let read = async {
            reader::record_by_key(&*self.conn().await?, kind, parent, name)
                .await
                .map(Answer::One)
        };
        let query = Query::ByKey(kind, parent, name.to_owned());
        Ok(self.cached(query, read).await?.one())
    }

    async fn records(
        &self,
        kind: RecordKind,
        parent: Option<uuid::Uuid>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Positioned<Record>>, StoreError> {
        let read = async {
            reader::records(&*self.conn().await?, kind, parent, after, limit)
                .await
                .map(Answer::Many)
        };
        let query = Query::List(kind, parent, after, limit);
        Ok(self.cached(query, read).await?.many())
    }

    async fn events(
        &self,
        after: u64,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        reader::events(&*self.conn().await?, after, filter, limit).await
    }

    async fn events_before(
        &self,
        before: Option<u64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        reader::events_before(&*self.conn().await?, before, filter, limit).await
    }

    async fn raw_events(&self, after: u64, limit: usize) -> Result<Vec<RawEvent>, StoreError> {
        reader::raw_events(&*self.conn().await?, after, limit).await
    }

    async fn audit_head(&self) -> Result<Option<AuditHead>, StoreError> {
        reader::audit_head(&*self.conn().await?).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.publisher.subscribe()
    }

    /// Reads the head (one round trip) and, when the tail has not published up to it yet,
    /// publishes the rest from the log itself rather than wait for the tail's wake-up or poll.
    async fn catch_up(&self) -> Result<Option<u64>, StoreError> {
        let conn = self.conn().await?;
        let head = reader::audit_head(&conn).await?.map_or(0, |h| h.seq);
        if self.publisher.published() >= head {
            return Ok(Some(head));
        }
        let mut publishing = self.publisher.lock().await;
        publishing
            .read_log(&conn.client, Some(head))
            .await
            .map_err(StoreError::new)?;
        match publishing.published() {
            p if p >= head => Ok(Some(head)),
            p => Err(StoreError::new(format!(
                "the event after {p} in the log is unreadable, so what was committed up to {head} cannot be published"
            ))),
        }
    }
}
