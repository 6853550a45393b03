//! The writer: one task and one connection per process, applying transactions in groups,
//! one PostgreSQL transaction (one WAL flush) per group.
//!
//! A group first locks the chain head's row (`SELECT … FOR UPDATE`). That lock is what keeps
//! the audit chain one line: whoever holds it appends after the head it read, and every other
//! writer, in this process or on another node, waits for the commit. Because every group
//! takes it, all writes are serialised: a precondition checked with a read still holds when
//! the write follows, and positions and sequence numbers are handed out in commit order, so
//! a reader never sees sequence n+1 before n. Each transaction's preconditions are checked
//! before it writes, so one that fails them leaves no trace; should a statement fail
//! unexpectedly, the group is rolled back and its transactions redone one by one.
//!
//! A group that appends events notifies the tails of every node (`NOTIFY`, delivered at
//! commit; see `tail.rs`). Committed events are published in log order, shared with this
//! process's tail (`publish.rs`). The head read at a group's start says whether someone else
//! wrote since then (another node whose events the tail has not published yet; or a commit
//! of ours whose answer was lost with the connection): those events are read from the log
//! and published first, so subscribers see the whole log without gaps.

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_core::audit::{AuditHead, seal};
use holdpoint_core::store::{CommitError, Conflict, PreparedEvent, StoreError};
use holdpoint_protocol::Grant;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, SimpleQueryMessage, Statement};

use super::conn::Target;
use super::publish::Publisher;
use super::reader::parent_key;
use super::tail::CHANNEL;
use crate::rows::{Job, Message, PreparedWrite, RecordRow};

/// The writer's connection and its backend's process id (whose notifications the tail
/// skips). Acknowledged commits must survive a crash of the database server, whatever the
/// server's default for `synchronous_commit`.
pub(super) async fn connect(target: &Target) -> Result<(Client, i32), String> {
    let client = target.connect().await?;
    let messages = client
        .simple_query("SET synchronous_commit = on; SELECT pg_backend_pid()")
        .await
        .map_err(|e| target.explain(&e))?;
    let pid = messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .unwrap_or(0);
    Ok((client, pid))
}

/// The most transactions committed together.
const MAX_GROUP: usize = 512;

/// Why a group failed as a whole.
enum GroupError {
    Sql(tokio_postgres::Error),
    /// A write changed other rows than its checked precondition promised.
    Unexpected(String),
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::Sql(e) => write!(f, "{e}"),
            GroupError::Unexpected(m) => f.write_str(m),
        }
    }
}

impl From<tokio_postgres::Error> for GroupError {
    fn from(e: tokio_postgres::Error) -> Self {
        GroupError::Sql(e)
    }
}

type Sealed = Vec<Result<Vec<(u64, String)>, Conflict>>;

pub(super) struct Writer {
    pub(super) target: Target,
    pub(super) client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
    publisher: Arc<Publisher>,
}

impl Writer {
    pub(super) fn new(
        target: Target,
        (client, pid): (Client, i32),
        publisher: Arc<Publisher>,
    ) -> Writer {
        publisher.set_writer_pid(pid);
        Writer {
            target,
            client: Some(client),
            statements: HashMap::new(),
            publisher,
        }
    }

    /// Applies transactions until the store closes.
    pub(super) async fn serve(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        while let Some(first) = rx.recv().await {
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
                    Err(_) => break,
                }
            }
            self.commit_group(jobs).await;
            if closing {
                break;
            }
        }
    }

    /// The writer's connection, opened again if it was lost.
    async fn client(&mut self) -> Result<&Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            self.statements.clear();
            let (client, pid) = connect(&self.target).await.map_err(StoreError)?;
            self.publisher.set_writer_pid(pid);
            self.client = Some(client);
        }
        self.client
            .as_ref()
            .ok_or_else(|| StoreError("no connection".into()))
    }

    async fn statement(&mut self, sql: &'static str) -> Result<Statement, GroupError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        let s = client.prepare(sql).await?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    /// A statement without parameters, in one round trip.
    async fn batch(&mut self, sql: &str) -> Result<(), GroupError> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        Ok(client.batch_execute(sql).await?)
    }

    async fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, GroupError> {
        let s = self.statement(sql).await?;
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        Ok(client.execute(&s, params).await?)
    }

    async fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<tokio_postgres::Row>, GroupError> {
        let s = self.statement(sql).await?;
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        Ok(client.query_opt(&s, params).await?)
    }

    async fn exists(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<bool, GroupError> {
        Ok(self.query_opt(sql, params).await?.is_some())
    }

    async fn commit_group(&mut self, jobs: Vec<Job>) {
        if let Err(e) = self.client().await {
            let error = StoreError(format!("the database is unreachable: {}", e.0));
            for job in jobs {
                let _ = job.reply.send(Err(CommitError::Store(error.clone())));
            }
            return;
        }
        match self.try_group(&jobs).await {
            Ok((before, sealed)) => {
                let mut publishing = self.publisher.lock().await;
                if let Some(client) = &self.client
                    && let Err(e) = publishing.read_log(client, Some(before)).await
                {
                    tracing::warn!(error = %e, "cannot read the log to publish what others wrote");
                }
                let mut answers = Vec::with_capacity(jobs.len());
                for (job, result) in jobs.into_iter().zip(sealed) {
                    let result = result.map_err(CommitError::Conflict).map(|sealed| {
                        job.events
                            .into_iter()
                            .zip(sealed)
                            .map(|(e, (seq, hash))| Arc::new(e.draft.into_event(seq, hash)))
                            .collect::<Vec<_>>()
                    });
                    if let Ok(events) = &result {
                        for e in events {
                            publishing.send(e.clone());
                        }
                    }
                    answers.push((job.reply, result));
                }
                drop(publishing);
                for (reply, result) in answers {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                let lost = self.client.as_ref().is_none_or(Client::is_closed);
                if let Some(client) = self.client.as_ref().filter(|_| !lost) {
                    let _ = client.batch_execute("ROLLBACK").await;
                }
                if jobs.len() > 1 && !lost {
                    for job in jobs {
                        Box::pin(self.commit_group(vec![job])).await;
                    }
                    return;
                }
                tracing::error!(error = %e, "a commit failed");
                let error = StoreError(if lost {
                    format!(
                        "the connection to the database was lost during the commit, which may or may not have been applied: {e}"
                    )
                } else {
                    format!("the commit failed; nothing of it was applied: {e}")
                });
                for job in jobs {
                    let _ = job.reply.send(Err(CommitError::Store(error.clone())));
                }
            }
        }
    }

    /// Applies a group in one transaction. Returns the head it started from and, per job,
    /// the positions and hashes of its events or the precondition that failed.
    async fn try_group(&mut self, jobs: &[Job]) -> Result<(u64, Sealed), GroupError> {
        // BEGIN and the head's lock in one round trip.
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        let messages = client
            .simple_query("BEGIN; SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE")
            .await?;
        let head_row = messages.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some((
                r.get(0).and_then(|v| v.parse::<u64>().ok()),
                r.get(1).map(str::to_owned),
            )),
            _ => None,
        });
        let Some((Some(before), Some(hash))) = head_row else {
            return Err(GroupError::Unexpected(
                "the chain head's row is missing or unreadable".into(),
            ));
        };
        let mut head = AuditHead { seq: before, hash };
        let mut events = EventRows::default();
        let mut results = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Some(conflict) = self.check(&job.writes).await? {
                results.push(Err(conflict));
                continue;
            }
            for w in &job.writes {
                self.write(w).await?;
            }
            let sealed = job
                .events
                .iter()
                .map(|e| events.append(&mut head, e))
                .collect();
            results.push(Ok(sealed));
        }
        let mut commit = "COMMIT".to_owned();
        if head.seq != before {
            // The group's events and the new head in one statement: nothing reads the log
            // inside the group, so they can wait for its end.
            let seq = head.seq as i64;
            self.execute(
                "WITH appended AS (INSERT INTO events (seq, type, hold, world, chat, body, hash) \
                 SELECT * FROM unnest($1::bigint[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])) \
                 UPDATE audit_head SET seq = $8, hash = $9 WHERE id = 1",
                &[
                    &events.seq,
                    &events.kind,
                    &events.hold,
                    &events.world,
                    &events.chat,
                    &events.body,
                    &events.hash,
                    &seq,
                    &head.hash,
                ],
            )
            .await?;
            // The other nodes' tails are woken at commit, in the same round trip.
            commit = format!("NOTIFY {CHANNEL}, '{}'; COMMIT", head.seq);
        }
        self.batch(&commit).await?;
        Ok((before, results))
    }

    /// The first precondition of `writes` that does not hold, seeing earlier jobs' writes.
    async fn check(&mut self, writes: &[PreparedWrite]) -> Result<Option<Conflict>, GroupError> {
        for w in writes {
            let conflict = match w {
                PreparedWrite::InsertHold(r) => self
                    .exists("SELECT 1 FROM holds WHERE id = $1", &[r.id.as_uuid()])
                    .await?
                    .then_some(Conflict::HoldExists(r.id)),
                PreparedWrite::UpdateHold(r) => {
                    let stored = self
                        .query_opt("SELECT version FROM holds WHERE id = $1", &[r.id.as_uuid()])
                        .await?
                        .map(|row| row.get::<_, i64>(0));
                    (stored != Some(r.version as i64 - 1)).then_some(Conflict::StaleHold(r.id))
                }
                PreparedWrite::InsertGrant { .. } => None,
                PreparedWrite::RevokeGrant { id, .. } => (!self
                    .exists(
                        "SELECT 1 FROM grants WHERE id = $1 AND revoked_at IS NULL",
                        &[id.as_uuid()],
                    )
                    .await?)
                    .then_some(Conflict::NoSuchGrant(*id)),
                PreparedWrite::PutRecord(r) => self.check_record(r).await?,
                PreparedWrite::DeleteRecord { .. }
                | PreparedWrite::DeleteRecords { .. }
                | PreparedWrite::ForgetIdempotent { .. } => None,
                PreparedWrite::PutIdempotent { key, .. } => self
                    .exists("SELECT 1 FROM idempotency WHERE key = $1", &[key])
                    .await?
                    .then(|| Conflict::KeyTaken(key.clone())),
            };
            if conflict.is_some() {
                return Ok(conflict);
            }
        }
        Ok(None)
    }

    async fn check_record(&mut self, r: &RecordRow) -> Result<Option<Conflict>, GroupError> {
        let stored = self
            .query_opt(
                "SELECT version FROM records WHERE kind = $1 AND id = $2",
                &[&r.kind, &r.id],
            )
            .await?
            .map(|row| row.get::<_, i64>(0));
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
            let holder = self
                .query_opt(
                    "SELECT id FROM records WHERE kind = $1 AND parent = $2 AND key = $3",
                    &[&r.kind, &parent(r), k],
                )
                .await?
                .map(|row| row.get::<_, uuid::Uuid>(0));
            if holder.is_some_and(|id| id != r.id) {
                return Ok(Some(taken(k)));
            }
        }
        Ok(None)
    }

    /// One write whose precondition was checked.
    async fn write(&mut self, w: &PreparedWrite) -> Result<(), GroupError> {
        let one = |changed: u64, what: &str| {
            if changed == 1 {
                Ok(())
            } else {
                Err(GroupError::Unexpected(format!(
                    "{what} changed {changed} rows instead of 1"
                )))
            }
        };
        match w {
            PreparedWrite::InsertHold(r) => {
                self.execute(
                    "INSERT INTO holds (id, batch, world, chat, agent, tool, kind, status, open, deadline, remind_at, version, data) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                    &[
                        r.id.as_uuid(),
                        r.batch.as_uuid(),
                        &r.world,
                        &r.chat,
                        &r.agent,
                        &r.tool,
                        &r.kind,
                        &r.status,
                        &r.open,
                        &r.deadline,
                        &r.remind_at,
                        &(r.version as i64),
                        &r.data,
                    ],
                )
                .await?;
            }
            PreparedWrite::UpdateHold(r) => {
                let changed = self
                    .execute(
                        "UPDATE holds SET status = $1, open = $2, remind_at = $3, version = $4, data = $5 WHERE id = $6 AND version = $7",
                        &[
                            &r.status,
                            &r.open,
                            &r.remind_at,
                            &(r.version as i64),
                            &r.data,
                            r.id.as_uuid(),
                            &(r.version as i64 - 1),
                        ],
                    )
                    .await?;
                one(changed, "a hold's update")?;
            }
            PreparedWrite::InsertGrant { id, world, data } => {
                self.execute(
                    "INSERT INTO grants (id, world, revoked_at, data) VALUES ($1, $2, NULL, $3)",
                    &[id.as_uuid(), world, data],
                )
                .await?;
            }
            PreparedWrite::RevokeGrant { id, at } => {
                let data: String = self
                    .query_opt("SELECT data FROM grants WHERE id = $1", &[id.as_uuid()])
                    .await?
                    .ok_or_else(|| GroupError::Unexpected(format!("grant {id} is gone")))?
                    .get(0);
                let unreadable =
                    |e: serde_json::Error| GroupError::Unexpected(format!("grant {id}: {e}"));
                let mut grant: Grant = serde_json::from_str(&data).map_err(unreadable)?;
                grant.revoked_at = Some(*at);
                let data = serde_json::to_string(&grant).map_err(unreadable)?;
                self.execute(
                    "UPDATE grants SET revoked_at = $1, data = $2 WHERE id = $3",
                    &[&at.as_millis(), &data, id.as_uuid()],
                )
                .await?;
            }
            PreparedWrite::PutRecord(r) => {
                if r.version == 1 {
                    self.execute(
                        "INSERT INTO records (kind, id, parent, key, version, data) VALUES ($1, $2, $3, $4, $5, $6)",
                        &[&r.kind, &r.id, &parent(r), &r.key, &(r.version as i64), &r.data],
                    )
                    .await?;
                } else {
                    let changed = self
                        .execute(
                            "UPDATE records SET key = $1, version = $2, data = $3 WHERE kind = $4 AND id = $5 AND version = $6",
                            &[&r.key, &(r.version as i64), &r.data, &r.kind, &r.id, &(r.version as i64 - 1)],
                        )
                        .await?;
                    one(changed, "a record's update")?;
                }
            }
            PreparedWrite::DeleteRecord { kind, id } => {
                self.execute(
                    "DELETE FROM records WHERE kind = $1 AND id = $2",
                    &[kind, id],
                )
                .await?;
            }
            PreparedWrite::DeleteRecords { kind, parent } => {
                self.execute(
                    "DELETE FROM records WHERE kind = $1 AND parent = $2",
                    &[kind, parent],
                )
                .await?;
            }
            PreparedWrite::PutIdempotent {
                key,
                fingerprint,
                response,
                at,
            } => {
                self.execute(
                    "INSERT INTO idempotency (key, fingerprint, response, created_at) VALUES ($1, $2, $3, $4)",
                    &[key, fingerprint, response, &at.as_millis()],
                )
                .await?;
            }
            PreparedWrite::ForgetIdempotent { key, before } => {
                self.execute(
                    "DELETE FROM idempotency WHERE key = $1 AND created_at < $2",
                    &[key, &before.as_millis()],
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// A group's events as columns, stored together at the group's end.
#[derive(Default)]
struct EventRows {
    seq: Vec<i64>,
    kind: Vec<&'static str>,
    hold: Vec<Option<uuid::Uuid>>,
    world: Vec<Option<String>>,
    chat: Vec<Option<String>>,
    body: Vec<String>,
    hash: Vec<String>,
}

impl EventRows {
    /// Seals one event after `head`.
    fn append(&mut self, head: &mut AuditHead, e: &PreparedEvent) -> (u64, String) {
        let seq = head.seq + 1;
        let sealed = seal(seq, &head.hash, &e.canonical);
        let d = &e.draft;
        self.seq.push(seq as i64);
        self.kind.push(d.payload.type_name());
        self.hold.push(d.hold.as_ref().map(|h| *h.as_uuid()));
        self.world.push(d.world.clone());
        self.chat.push(d.chat.clone());
        self.body.push(sealed.body);
        self.hash.push(sealed.hash.clone());
        *head = AuditHead {
            seq,
            hash: sealed.hash.clone(),
        };
        (seq, sealed.hash)
    }
}

/// A record row's parent as stored: the nil uuid for none.
fn parent(r: &RecordRow) -> uuid::Uuid {
    parent_key(uuid::Uuid::from_slice(&r.parent).ok())
}
