//! The single writer: applies transactions in groups, one fsync per group.
//!
//! Each transaction of a group runs inside its own savepoint, so a failed precondition (or
//! any error) rolls back that transaction alone; the group then commits once. Committed
//! events are published in log order before the callers hear back, so anyone who learns of
//! a commit can already find its events.

use std::fs::File;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};

use holdpoint_core::audit::{AuditHead, seal};
use holdpoint_core::store::{CommitError, Conflict, PreparedEvent, StoreError};
use holdpoint_protocol::{Event, Grant, GrantId, HoldId, Timestamp};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use tokio::sync::{broadcast, oneshot};

/// The most transactions committed together.
const MAX_GROUP: usize = 512;

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
    pub(super) batch: String,
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
}

pub(super) struct Writer {
    pub(super) conn: Connection,
    /// Held for as long as the writer runs: one writing process per database.
    pub(super) _lock: File,
    pub(super) head: AuditHead,
    pub(super) events: broadcast::Sender<Arc<Event>>,
}

/// Why one transaction of a group did not apply.
enum Failed {
    Conflict(Conflict),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        Failed::Sql(e)
    }
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation)
}

impl Writer {
    pub(super) fn run(mut self, rx: Receiver<Message>) {
        loop {
            let first = match rx.recv() {
                Ok(Message::Commit(job)) => job,
                Ok(Message::Close) | Err(_) => break,
            };
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
            self.commit_group(jobs);
            if closing {
                break;
            }
        }
        // Fold the WAL into the database so a closed store is one file.
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(error = %e, "checkpoint at close failed");
        }
    }

    fn commit_group(&mut self, jobs: Vec<Job>) {
        let start = self.head.clone();
        let mut results: Vec<(Reply, Result<Vec<Event>, CommitError>)> =
            Vec::with_capacity(jobs.len());
        let group = (|| -> rusqlite::Result<()> {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            for job in jobs {
                self.conn.execute_batch("SAVEPOINT job")?;
                let before = self.head.clone();
                let outcome = self.apply(job.writes, job.events);
                let result = match outcome {
                    Ok(events) => {
                        self.conn.execute_batch("RELEASE job")?;
                        Ok(events)
                    }
                    Err(failed) => {
                        self.conn.execute_batch("ROLLBACK TO job; RELEASE job")?;
                        self.head = before;
                        Err(match failed {
                            Failed::Conflict(c) => CommitError::Conflict(c),
                            Failed::Sql(e) => CommitError::Store(StoreError::new(e)),
                        })
                    }
                };
                results.push((job.reply, result));
            }
            if self.head != start {
                self.conn
                    .prepare_cached("INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT (id) DO UPDATE SET seq = ?1, hash = ?2")?
                    .execute(params![self.head.seq as i64, self.head.hash])?;
            }
            self.conn.execute_batch("COMMIT")
        })();
        if let Err(e) = group {
            tracing::error!(error = %e, "group commit failed; nothing of it was applied");
            let _ = self.conn.execute_batch("ROLLBACK");
            self.head = start;
            let error = StoreError::new(format!("the commit failed: {e}"));
            for (reply, _) in results {
                let _ = reply.send(Err(CommitError::Store(error.clone())));
            }
            return;
        }
        for (reply, result) in results {
            let result = result.map(|events| {
                let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();
                for e in &events {
                    // No subscribers is fine.
                    let _ = self.events.send(e.clone());
                }
                events
            });
            let _ = reply.send(result);
        }
    }

    fn apply(
        &mut self,
        writes: Vec<PreparedWrite>,
        events: Vec<PreparedEvent>,
    ) -> Result<Vec<Event>, Failed> {
        for w in writes {
            self.write(w)?;
        }
        let mut committed = Vec::with_capacity(events.len());
        for e in events {
            let seq = self.head.seq + 1;
            let sealed = seal(seq, &self.head.hash, &e.canonical);
            let d = &e.draft;
            self.conn
                .prepare_cached("INSERT INTO events (seq, type, hold, world, chat, body, hash) VALUES (?, ?, ?, ?, ?, ?, ?)")?
                .execute(params![
                    seq as i64,
                    d.payload.type_name(),
                    d.hold.map(|h| h.to_string()),
                    d.world,
                    d.chat,
                    sealed.body,
                    sealed.hash
                ])?;
            self.head = AuditHead {
                seq,
                hash: sealed.hash.clone(),
            };
            committed.push(e.draft.into_event(seq, sealed.hash));
        }
        Ok(committed)
    }

    fn write(&mut self, w: PreparedWrite) -> Result<(), Failed> {
        match w {
            PreparedWrite::InsertHold(r) => {
                let inserted = self
                    .conn
                    .prepare_cached(
                        "INSERT INTO holds (id, batch, world, chat, kind, status, open, deadline, remind_at, version, data) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    )?
                    .execute(params![
                        r.id.to_string(),
                        r.batch,
                        r.world,
                        r.chat,
                        r.kind,
                        r.status,
                        r.open,
                        r.deadline,
                        r.remind_at,
                        r.version as i64,
                        r.data
                    ]);
                match inserted {
                    Err(e) if is_unique_violation(&e) => {
                        Err(Failed::Conflict(Conflict::HoldExists(r.id)))
                    }
                    other => other.map(|_| ()).map_err(Failed::Sql),
                }
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
                        r.id.to_string(),
                        r.version as i64 - 1
                    ])?;
                if changed == 1 {
                    Ok(())
                } else {
                    Err(Failed::Conflict(Conflict::StaleHold(r.id)))
                }
            }
            PreparedWrite::InsertGrant { id, world, data } => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO grants (id, world, revoked_at, data) VALUES (?, ?, NULL, ?)",
                    )?
                    .execute(params![id.to_string(), world, data])?;
                Ok(())
            }
            PreparedWrite::RevokeGrant { id, at } => {
                let data: Option<String> = self
                    .conn
                    .prepare_cached("SELECT data FROM grants WHERE id = ? AND revoked_at IS NULL")?
                    .query_row([id.to_string()], |r| r.get(0))
                    .optional()?;
                let Some(data) = data else {
                    return Err(Failed::Conflict(Conflict::NoSuchGrant(id)));
                };
                let mut grant: Grant = serde_json::from_str(&data).map_err(|e| {
                    Failed::Sql(rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
                })?;
                grant.revoked_at = Some(at);
                let data = serde_json::to_string(&grant).map_err(|e| {
                    Failed::Sql(rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
                })?;
                self.conn
                    .prepare_cached("UPDATE grants SET revoked_at = ?, data = ? WHERE id = ?")?
                    .execute(params![at.as_millis(), data, id.to_string()])?;
                Ok(())
            }
            PreparedWrite::PutIdempotent {
                key,
                fingerprint,
                response,
                at,
            } => {
                let inserted = self
                    .conn
                    .prepare_cached("INSERT INTO idempotency (key, fingerprint, response, created_at) VALUES (?, ?, ?, ?)")?
                    .execute(params![key, fingerprint, response, at.as_millis()]);
                match inserted {
                    Err(e) if is_unique_violation(&e) => {
                        Err(Failed::Conflict(Conflict::KeyTaken(key)))
                    }
                    other => other.map(|_| ()).map_err(Failed::Sql),
                }
            }
        }
    }
}
