//! The single writer: applies transactions in groups, one fsync per group.
//!
//! Each transaction's preconditions (a hold's version, an unused idempotency key…) are
//! checked with reads before it writes anything, so a transaction that fails them leaves no
//! trace and needs no rollback; the group then commits once. Should a statement fail
//! unexpectedly (a full disk, say), the whole group is rolled back and its transactions are
//! redone one by one, so that only the faulty one fails. A committed group goes to the
//! syncer, which makes it durable before anyone hears of it.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};

use holdpoint_core::audit::{AuditHead, seal};
use holdpoint_core::store::{CommitError, Conflict, PreparedEvent, StoreError};
use holdpoint_protocol::{BatchId, Event, Grant, GrantId, HoldId, Timestamp};

use super::key;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::cache::{self, RecordCache};
use super::checkpointer::{self, Checkpointer};
use super::syncer::Syncer;

/// The most transactions committed together.
const MAX_GROUP: usize = 512;
/// Each time the WAL has grown by this many pages (4 MiB), the checkpointer is asked to copy
/// them into the database, concurrently with further commits. (Asked after every commit, it
/// would copy a few pages and fsync the database each time, contending with the writer for
/// the WAL's locks and the disk.)…
const CHECKPOINT_AT: i32 = 1024;
/// …and once the WAL holds this many (32 MiB), the writer finishes that copy itself between
/// two commits, so that the WAL can start over and stays bounded under sustained load.
const WAL_BOUND: i32 = 8192;

/// Follows the WAL's size after each commit. Registering the hook also turns off SQLite's
/// automatic checkpoint, which would otherwise run inside a commit.
pub(super) fn watch_wal(conn: &mut Connection) -> rusqlite::Result<Arc<AtomicI32>> {
    let frames = Arc::new(AtomicI32::new(0));
    let seen = frames.clone();
    conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages| {
        seen.store(pages, Ordering::Relaxed);
        Ok(())
    }))?;
    Ok(frames)
}

pub(super) enum Message {
    Commit(Job),
    Close,
}

pub(super) type Reply = oneshot::Sender<Result<Vec<Arc<Event>>, CommitError>>;

pub(super) struct Job {
    pub(super) writes: Vec<PreparedWrite>,
    pub(super) events: Vec<PreparedEvent>,
    pub(super) reply: Reply,
}

/// A hold's columns and its JSON, serialised by the caller (off the writer's thread).
pub(super) struct HoldRow {
    pub(super) id: HoldId,
    pub(super) batch: BatchId,
    pub(super) world: String,
    pub(super) chat: Option<String>,
    pub(super) kind: &'static str,
    pub(super) status: &'static str,
    pub(super) open: bool,
    pub(super) deadline: Option<i64>,
    pub(super) remind_at: Option<i64>,
    pub(super) version: u64,
    pub(super) data: String,
}

/// A record's columns, with its JSON serialised by the caller.
pub(super) struct RecordRow {
    pub(super) kind: &'static str,
    pub(super) id: uuid::Uuid,
    pub(super) parent: Vec<u8>,
    pub(super) key: Option<String>,
    pub(super) version: u64,
    pub(super) data: String,
}

pub(super) enum PreparedWrite {
    InsertHold(HoldRow),
    UpdateHold(HoldRow),
    InsertGrant {
        id: GrantId,
        world: String,
        data: String,
    },
    RevokeGrant {
        id: GrantId,
        at: Timestamp,
    },
    PutIdempotent {
        key: String,
        fingerprint: String,
        response: String,
        at: Timestamp,
    },
    ForgetIdempotent {
        key: String,
        before: Timestamp,
    },
    PutRecord(RecordRow),
    DeleteRecord {
        kind: &'static str,
        id: uuid::Uuid,
    },
    DeleteRecords {
        kind: &'static str,
        parent: uuid::Uuid,
    },
}

impl PreparedWrite {
    /// Whether this write changes a record the catalog cache keeps.
    fn changes_cached(&self) -> bool {
        match self {
            PreparedWrite::PutRecord(r) => cache::covers(r.kind),
            PreparedWrite::DeleteRecord { kind, .. }
            | PreparedWrite::DeleteRecords { kind, .. } => cache::covers(kind),
            PreparedWrite::InsertHold(_)
            | PreparedWrite::UpdateHold(_)
            | PreparedWrite::InsertGrant { .. }
            | PreparedWrite::RevokeGrant { .. }
            | PreparedWrite::PutIdempotent { .. }
            | PreparedWrite::ForgetIdempotent { .. } => false,
        }
    }
}

pub(super) struct Writer {
    pub(super) conn: Connection,
    /// Held for as long as the writer runs: one writing process per database.
    pub(super) _lock: File,
    pub(super) head: AuditHead,
    /// Makes committed groups durable, then answers them.
    pub(super) syncer: Syncer,
    /// Set once an fsync failed: nothing more is committed.
    pub(super) failed: Arc<AtomicBool>,
    /// Pages in the WAL after the last commit.
    pub(super) wal_frames: Arc<AtomicI32>,
    /// The WAL's size when the checkpointer was last asked to run.
    pub(super) nudged_at: i32,
    pub(super) checkpointer: Checkpointer,
    /// Cleared after each commit that changes a record it keeps.
    pub(super) cache: Arc<RecordCache>,
}

impl Writer {
    /// Applies transactions until the store closes.
    pub(super) fn serve(&mut self, rx: Receiver<Message>) {
        let mut next = None;
        loop {
            let first = match next.take() {
                Some(message) => message,
                None => match rx.recv() {
                    Ok(message) => message,
                    Err(_) => break,
                },
            };
            let Message::Commit(first) = first else { break };
            let mut jobs = vec![first];
            let mut closing = false;
            while jobs.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(Message::Commit(job)) => jobs.push(job),
                    Ok(Message::Close) => {
                        closing = true;
                        break;
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            // With more work waiting, the sync is left to the syncer thread, to overlap the
            // next group; otherwise the writer syncs at once (see syncer.rs).
            if !closing {
                next = rx.try_recv().ok();
            }
            self.commit_group(jobs, next.is_some());
            self.keep_wal_bounded();
            if closing {
                break;
            }
        }
    }

    fn keep_wal_bounded(&mut self) {
        let pages = self.wal_frames.load(Ordering::Relaxed);
        if pages < self.nudged_at {
            // The WAL started over.
            self.nudged_at = 0;
        }
        if pages >= WAL_BOUND {
            match checkpointer::passive(&self.conn) {
                // The next commit reports the WAL's size again.
                Ok(()) => self.wal_frames.store(0, Ordering::Relaxed),
                Err(e) => tracing::warn!(error = %e, "checkpoint failed"),
            }
        } else if pages >= self.nudged_at + CHECKPOINT_AT {
            self.nudged_at = pages;
            self.checkpointer.nudge();
        }
    }

    /// Waits until every commit is durable and answered, then folds the WAL into the
    /// database, so a closed store is one file.
    pub(super) fn finish(self) {
        let Writer {
            conn,
            syncer,
            checkpointer,
            ..
        } = self;
        syncer.finish();
        checkpointer.stop();
        if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(error = %e, "checkpoint at close failed");
        }
    }

    fn commit_group(&mut self, jobs: Vec<Job>, busy: bool) {
        if self.failed.load(Ordering::SeqCst) {
            let error = StoreError::new(
                "an earlier commit could not be made durable; the store refuses further writes",
            );
            for job in jobs {
                let _ = job.reply.send(Err(CommitError::Store(error.clone())));
            }
            return;
        }
        let start = self.head.clone();
        match self.try_group(&jobs) {
            Ok(results) => {
                if jobs
                    .iter()
                    .any(|job| job.writes.iter().any(PreparedWrite::changes_cached))
                {
                    self.cache.invalidate();
                }
                let answers = jobs
                    .into_iter()
                    .zip(results)
                    .map(|(job, result)| {
                        let result = result.map_err(CommitError::Conflict).map(|sealed| {
                            job.events
                                .into_iter()
                                .zip(sealed)
                                .map(|(e, (seq, hash))| Arc::new(e.draft.into_event(seq, hash)))
                                .collect()
                        });
                        (job.reply, result)
                    })
                    .collect();
                self.syncer.settle(answers, busy);
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.head = start;
                if jobs.len() > 1 {
                    for job in jobs {
                        self.commit_group(vec![job], busy);
                    }
                } else {
                    tracing::error!(error = %e, "a commit failed; nothing of it was applied");
                    let error = StoreError::new(format!("the commit failed: {e}"));
                    for job in jobs {
                        let _ = job.reply.send(Err(CommitError::Store(error.clone())));
                    }
                }
            }
        }
    }

    /// Applies a group in one SQLite transaction. Per job: the positions and hashes of its
    /// events, or the precondition that failed (and then nothing of the job was written).
    #[allow(clippy::type_complexity)]
    fn try_group(
        &mut self,
        jobs: &[Job],
    ) -> rusqlite::Result<Vec<Result<Vec<(u64, String)>, Conflict>>> {
        let start = self.head.seq;
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let mut results = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Some(conflict) = self.check(&job.writes)? {
                results.push(Err(conflict));
                continue;
            }
            for w in &job.writes {
                self.write(w)?;
            }
            let mut sealed = Vec::with_capacity(job.events.len());
            for e in &job.events {
                sealed.push(self.append(e)?);
            }
            results.push(Ok(sealed));
        }
        if self.head.seq != start {
            self.conn
                .prepare_cached("INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT (id) DO UPDATE SET seq = ?1, hash = ?2")?
                .execute(params![self.head.seq as i64, self.head.hash])?;
        }
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(results)
    }

    /// The first precondition of `writes` that does not hold, seeing earlier jobs' writes.
    fn check(&mut self, writes: &[PreparedWrite]) -> rusqlite::Result<Option<Conflict>> {
        for w in writes {
            let conflict = match w {
                PreparedWrite::InsertHold(r) => {
                    let exists = self
                        .conn
                        .prepare_cached("SELECT 1 FROM holds WHERE id = ?")?
                        .exists([key(r.id.as_uuid())])?;
                    exists.then_some(Conflict::HoldExists(r.id))
                }
                PreparedWrite::UpdateHold(r) => {
                    let stored: Option<i64> = self
                        .conn
                        .prepare_cached("SELECT version FROM holds WHERE id = ?")?
                        .query_row([key(r.id.as_uuid())], |row| row.get(0))
                        .optional()?;
                    (stored != Some(r.version as i64 - 1)).then_some(Conflict::StaleHold(r.id))
                }
                PreparedWrite::InsertGrant { .. } => None,
                PreparedWrite::RevokeGrant { id, .. } => {
                    let active = self
                        .conn
                        .prepare_cached("SELECT 1 FROM grants WHERE id = ? AND revoked_at IS NULL")?
                        .exists([key(id.as_uuid())])?;
                    (!active).then_some(Conflict::NoSuchGrant(*id))
                }
                PreparedWrite::PutRecord(r) => self.check_record(r)?,
                PreparedWrite::DeleteRecord { .. }
                | PreparedWrite::DeleteRecords { .. }
                | PreparedWrite::ForgetIdempotent { .. } => None,
                PreparedWrite::PutIdempotent { key, .. } => {
                    let taken = self
                        .conn
                        .prepare_cached("SELECT 1 FROM idempotency WHERE key = ?")?
                        .exists([key])?;
                    taken.then(|| Conflict::KeyTaken(key.clone()))
                }
            };
            if conflict.is_some() {
                return Ok(conflict);
            }
        }
        Ok(None)
    }

    fn check_record(&mut self, r: &RecordRow) -> rusqlite::Result<Option<Conflict>> {
        let stored: Option<i64> = self
            .conn
            .prepare_cached("SELECT version FROM records WHERE kind = ? AND id = ?")?
            .query_row(params![r.kind, key(&r.id)], |row| row.get(0))
            .optional()?;
        let taken = |name: &str| Conflict::RecordExists {
            kind: r.kind,
            name: name.to_owned(),
        };
        if r.version == 1 && stored.is_some() {
            return Ok(Some(taken(&r.id.to_string())));
        }
        if r.version > 1 && stored != Some(r.version as i64 - 1) {
            return Ok(Some(Conflict::StaleRecord {
                kind: r.kind,
                id: r.id,
            }));
        }
        if let Some(k) = &r.key {
            let holder: Option<Vec<u8>> = self
                .conn
                .prepare_cached("SELECT id FROM records WHERE kind = ? AND parent = ? AND key = ?")?
                .query_row(params![r.kind, r.parent, k], |row| row.get(0))
                .optional()?;
            if holder.is_some_and(|id| id != key(&r.id)) {
                return Ok(Some(taken(k)));
            }
        }
        Ok(None)
    }

    /// Seals and stores one event after the current head.
    fn append(&mut self, e: &PreparedEvent) -> rusqlite::Result<(u64, String)> {
        let seq = self.head.seq + 1;
        let sealed = seal(seq, &self.head.hash, &e.canonical);
        let d = &e.draft;
        self.conn
            .prepare_cached("INSERT INTO events (seq, type, hold, world, chat, body, hash) VALUES (?, ?, ?, ?, ?, ?, ?)")?
            .execute(params![
                seq as i64,
                d.payload.type_name(),
                d.hold.as_ref().map(|h| key(h.as_uuid())),
                d.world,
                d.chat,
                sealed.body,
                sealed.hash
            ])?;
        self.head = AuditHead {
            seq,
            hash: sealed.hash.clone(),
        };
        Ok((seq, sealed.hash))
    }

    /// One write whose precondition was checked.
    fn write(&mut self, w: &PreparedWrite) -> rusqlite::Result<()> {
        match w {
            PreparedWrite::InsertHold(r) => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO holds (id, batch, world, chat, kind, status, open, deadline, remind_at, version, data) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    )?
                    .execute(params![
                        key(r.id.as_uuid()),
                        key(r.batch.as_uuid()),
                        r.world,
                        r.chat,
                        r.kind,
                        r.status,
                        r.open,
                        r.deadline,
                        r.remind_at,
                        r.version as i64,
                        r.data
                    ])?;
            }
            PreparedWrite::UpdateHold(r) => {
                let changed = self
                    .conn
                    .prepare_cached(
                        "UPDATE holds SET status = ?, open = ?, remind_at = ?, version = ?, data = ? WHERE id = ? AND version = ?",
                    )?
                    .execute(params![
                        r.status,
                        r.open,
                        r.remind_at,
                        r.version as i64,
                        r.data,
                        key(r.id.as_uuid()),
                        r.version as i64 - 1
                    ])?;
                if changed != 1 {
                    return Err(rusqlite::Error::StatementChangedRows(changed));
                }
            }
            PreparedWrite::InsertGrant { id, world, data } => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO grants (id, world, revoked_at, data) VALUES (?, ?, NULL, ?)",
                    )?
                    .execute(params![key(id.as_uuid()), world, data])?;
            }
            PreparedWrite::RevokeGrant { id, at } => {
                let data: String = self
                    .conn
                    .prepare_cached("SELECT data FROM grants WHERE id = ?")?
                    .query_row([key(id.as_uuid())], |r| r.get(0))?;
                let unreadable =
                    |e: serde_json::Error| rusqlite::Error::ToSqlConversionFailure(Box::new(e));
                let mut grant: Grant = serde_json::from_str(&data).map_err(unreadable)?;
                grant.revoked_at = Some(*at);
                let data = serde_json::to_string(&grant).map_err(unreadable)?;
                self.conn
                    .prepare_cached("UPDATE grants SET revoked_at = ?, data = ? WHERE id = ?")?
                    .execute(params![at.as_millis(), data, key(id.as_uuid())])?;
            }
            PreparedWrite::PutRecord(r) => {
                if r.version == 1 {
                    self.conn
                        .prepare_cached(
                            "INSERT INTO records (kind, id, parent, key, version, data) VALUES (?, ?, ?, ?, ?, ?)",
                        )?
                        .execute(params![r.kind, key(&r.id), r.parent, r.key, r.version as i64, r.data])?;
                } else {
                    let changed = self
                        .conn
                        .prepare_cached(
                            "UPDATE records SET key = ?, version = ?, data = ? WHERE kind = ? AND id = ? AND version = ?",
                        )?
                        .execute(params![r.key, r.version as i64, r.data, r.kind, key(&r.id), r.version as i64 - 1])?;
                    if changed != 1 {
                        return Err(rusqlite::Error::StatementChangedRows(changed));
                    }
                }
            }
            PreparedWrite::DeleteRecord { kind, id } => {
                self.conn
                    .prepare_cached("DELETE FROM records WHERE kind = ? AND id = ?")?
                    .execute(params![kind, key(id)])?;
            }
            PreparedWrite::DeleteRecords { kind, parent } => {
                self.conn
                    .prepare_cached("DELETE FROM records WHERE kind = ? AND parent = ?")?
                    .execute(params![kind, key(parent)])?;
            }
            PreparedWrite::PutIdempotent {
                key,
                fingerprint,
                response,
                at,
            } => {
                self.conn
                    .prepare_cached("INSERT INTO idempotency (key, fingerprint, response, created_at) VALUES (?, ?, ?, ?)")?
                    .execute(params![key, fingerprint, response, at.as_millis()])?;
            }
            PreparedWrite::ForgetIdempotent { key, before } => {
                self.conn
                    .prepare_cached("DELETE FROM idempotency WHERE key = ? AND created_at < ?")?
                    .execute(params![key, before.as_millis()])?;
            }
        }
        Ok(())
    }
}
