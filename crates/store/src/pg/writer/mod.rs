//! The writer: one thread and one connection per process, applying transactions in groups,
//! one PostgreSQL transaction (one WAL flush) per group.
//!
//! A group first locks the chain head's row (`SELECT … FOR UPDATE`, or the guarded `UPDATE`
//! below). That lock is what keeps the audit chain one line: whoever holds it appends after
//! the head it read, and every other writer, in this process or on another node, waits for
//! the commit. Because every group
//! takes it, all writes are serialised: a precondition checked with a read still holds when
//! the write follows, and positions and sequence numbers are handed out in commit order, so
//! a reader never sees sequence n+1 before n. Each transaction's preconditions are checked
//! before it writes, so one that fails them leaves no trace; should a statement fail
//! unexpectedly, the group is rolled back and its transactions redone one by one.
//!
//! While this writer is the only one writing, a group whose writes all carry their own
//! guards takes a shorter way: one round trip in all (`try_at_head`). It moves the head it
//! committed last, guarded on it still being the head, and writes without reading first;
//! should the head have moved or a guard fail, the transaction rolls back and the group
//! takes the checked way.
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
use holdpoint_protocol::{Grant, GrantId, HoldId};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, SimpleQueryMessage, Statement};

use super::catalog::MOVE_VERSION;
use super::conn::Target;
use super::pipeline::{Step, in_order};
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

// The writer's statements, prepared on each connection it opens.
const HOLD_EXISTS: &str = "SELECT 1 FROM holds WHERE id = $1";
const HOLD_VERSION: &str = "SELECT version FROM holds WHERE id = $1";
const GRANT_LIVE: &str = "SELECT data FROM grants WHERE id = $1 AND revoked_at IS NULL";
const IDEMPOTENT_EXISTS: &str = "SELECT 1 FROM idempotency WHERE key = $1";
const RECORD_VERSION: &str = "SELECT version FROM records WHERE kind = $1 AND id = $2";
const RECORD_HOLDER: &str = "SELECT id FROM records WHERE kind = $1 AND parent = $2 AND key = $3";
const INSERT_HOLD: &str = "INSERT INTO holds (id, batch, world, chat, agent, tool, kind, status, open, deadline, remind_at, version, data) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
// A conditional write that must change exactly one row fails when it changes none (a
// division by zero): the error aborts the transaction, so the `COMMIT` pipelined after it
// rolls the group back rather than commit the rest without it.
const UPDATE_HOLD: &str = "WITH changed AS (UPDATE holds SET status = $1, open = $2, remind_at = $3, version = $4, data = $5 \
     WHERE id = $6 AND version = $7 RETURNING 1) SELECT 1 / count(*) FROM changed";
const INSERT_GRANT: &str =
    "INSERT INTO grants (id, world, revoked_at, data) VALUES ($1, $2, NULL, $3)";
const REVOKE_GRANT: &str = "UPDATE grants SET revoked_at = $1, data = $2 WHERE id = $3";
const INSERT_RECORD: &str =
    "INSERT INTO records (kind, id, parent, key, version, data) VALUES ($1, $2, $3, $4, $5, $6)";
const UPDATE_RECORD: &str = "WITH changed AS (UPDATE records SET key = $1, version = $2, data = $3 \
     WHERE kind = $4 AND id = $5 AND version = $6 RETURNING 1) SELECT 1 / count(*) FROM changed";
const DELETE_RECORD: &str = "DELETE FROM records WHERE kind = $1 AND id = $2";
const DELETE_RECORDS: &str = "DELETE FROM records WHERE kind = $1 AND parent = $2";
const INSERT_IDEMPOTENT: &str =
    "INSERT INTO idempotency (key, fingerprint, response, created_at) VALUES ($1, $2, $3, $4)";
const FORGET_IDEMPOTENT: &str = "DELETE FROM idempotency WHERE key = $1 AND created_at < $2";
/// A group's events and the new head in one statement.
const APPEND_EVENTS: &str = "WITH appended AS (INSERT INTO events (seq, type, hold, world, chat, body, hash) \
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])) \
     UPDATE audit_head SET seq = $8, hash = $9 WHERE id = 1";
/// The same, the head moved only from the one expected (taking its lock; a failure when
/// another writer moved it), for a group written without reading first.
const APPEND_AT_HEAD: &str = "WITH moved AS (UPDATE audit_head SET seq = $8, hash = $9 WHERE id = 1 AND seq = $10 AND hash = $11 RETURNING 1), \
     appended AS (INSERT INTO events (seq, type, hold, world, chat, body, hash) \
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[])) \
     SELECT 1 / count(*) FROM moved";
/// How long after meeting another writer's commits the writer keeps to the checked way.
const SHARED_FOR: std::time::Duration = std::time::Duration::from_secs(1);
const STATEMENTS: [&str; 19] = [
    MOVE_VERSION,
    HOLD_EXISTS,
    HOLD_VERSION,
    GRANT_LIVE,
    IDEMPOTENT_EXISTS,
    RECORD_VERSION,
    RECORD_HOLDER,
    INSERT_HOLD,
    UPDATE_HOLD,
    INSERT_GRANT,
    REVOKE_GRANT,
    INSERT_RECORD,
    UPDATE_RECORD,
    DELETE_RECORD,
    DELETE_RECORDS,
    INSERT_IDEMPOTENT,
    FORGET_IDEMPOTENT,
    APPEND_EVENTS,
    APPEND_AT_HEAD,
];

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

/// A committed group: the head it started from and the one it left, and per job the
/// positions and hashes of its events or the precondition that failed.
struct Applied {
    before: u64,
    after: AuditHead,
    sealed: Sealed,
}

pub(super) struct Writer {
    pub(super) target: Target,
    pub(super) client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
    publisher: Arc<Publisher>,
    /// The head this writer's last group left, while no other writer is known to follow it.
    head: Option<AuditHead>,
    /// Until when to keep to the checked way, having lately met another writer's commits.
    shared_until: Option<std::time::Instant>,
}

impl Writer {
    pub(super) fn new(target: Target, publisher: Arc<Publisher>) -> Writer {
        Writer {
            target,
            client: None,
            statements: HashMap::new(),
            publisher,
            head: None,
            shared_until: None,
        }
    }

    /// Runs the writer on a thread of its own, with its connection, until the store
    /// closes; the receiver answers when it has stopped.
    ///
    /// On the server's runtime, the writer's task waited behind the request handlers each
    /// time PostgreSQL answered it (a group then took about 700 µs, of which PostgreSQL's
    /// work and the WAL flush are about 250): every write of the process waits for the
    /// writer, so its latency is everyone's.
    pub(super) fn spawn(
        mut self,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> std::io::Result<oneshot::Receiver<()>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (done, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("holdpoint-pg-writer".into())
            .spawn(move || {
                runtime.block_on(async move {
                    // Connected ahead of the first group; should it fail, that group
                    // tries again and says why.
                    let _ = self.client().await;
                    self.serve(rx).await;
                });
                let _ = done.send(());
            })?;
        Ok(stopped)
    }

    /// Applies transactions until the store closes.
    async fn serve(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
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
            self.head = None;
            let (client, pid) = connect(&self.target).await.map_err(StoreError::new)?;
            self.publisher.set_writer_pid(pid);
            self.client = Some(client);
        }
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| StoreError::new("no connection"))?;
        if self.statements.is_empty() {
            self.statements = Self::prepare(client).await?;
        }
        Ok(client)
    }

    /// Prepares every statement the writer runs on a newly opened connection, in one
    /// round trip, so that a group's statements can be pipelined.
    async fn prepare(client: &Client) -> Result<HashMap<&'static str, Statement>, StoreError> {
        let steps = STATEMENTS
            .iter()
            .map(|&sql| {
                Box::pin(async move { client.prepare(sql).await.map(|s| (sql, s)) })
                    as Step<'_, _, _>
            })
            .collect();
        let prepared = in_order(steps)
            .await
            .map_err(|e| StoreError::new(format!("cannot prepare the writer's statements: {e}")))?;
        Ok(prepared.into_iter().collect())
    }

    async fn commit_group(&mut self, jobs: Vec<Job>) {
        if let Err(e) = self.client().await {
            let error = StoreError::new(format!("the database is unreachable: {}", e.message()));
            for job in jobs {
                let _ = job.reply.send(Err(CommitError::Store(error.clone())));
            }
            return;
        }
        match self.apply(&jobs).await {
            Ok(Applied { before, sealed, .. }) => {
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
                let lost = !self.rolled_back().await;
                if jobs.len() > 1 && !lost {
                    for job in jobs {
                        Box::pin(self.commit_group(vec![job])).await;
                    }
                    return;
                }
                tracing::error!(error = %e, "a commit failed");
                let error = StoreError::new(if lost {
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

    /// Applies a group in one transaction: in one round trip when it can (`try_at_head`),
    /// else checked (`try_group`).
    async fn apply(&mut self, jobs: &[Job]) -> Result<Applied, GroupError> {
        let alone = self
            .shared_until
            .is_none_or(|t| t <= std::time::Instant::now());
        let guess = self.head.take().filter(|_| alone);
        let tried = match &guess {
            Some(head) if jobs.iter().all(guarded) => Some(self.try_at_head(jobs, head).await),
            _ => None,
        };
        let applied = match tried {
            Some(Ok(applied)) => Ok(applied),
            Some(Err(e)) if !self.rolled_back().await => Err(e),
            _ => {
                let applied = self.try_group(jobs).await;
                if let (Ok(a), Some(guess)) = (&applied, &guess)
                    && a.before != guess.seq
                {
                    // Someone else committed since our last group: theirs come often
                    // enough that guessing the head would mostly cost a round trip.
                    self.shared_until = Some(std::time::Instant::now() + SHARED_FOR);
                }
                applied
            }
        };
        if let Ok(a) = &applied {
            self.head = Some(a.after.clone());
        }
        applied
    }

    /// Ends a failed group's transaction; false when the connection is lost (whether the
    /// group was applied is then unknown).
    async fn rolled_back(&self) -> bool {
        match self.client.as_ref().filter(|c| !c.is_closed()) {
            Some(client) => {
                let _ = client.batch_execute("ROLLBACK").await;
                !client.is_closed()
            }
            None => false,
        }
    }

    /// The connection and its statements, for a group.
    fn session(&self) -> Result<Session<'_>, GroupError> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| GroupError::Unexpected("no connection".into()))?;
        Ok(Session {
            client,
            statements: &self.statements,
        })
    }

    /// Applies a group whose writes all carry their own guards (`guarded`) in one
    /// round trip, after `head`, the head this writer's last group left: `BEGIN`; the
    /// events and the head's move, only from `head` (which takes the head's lock first, as
    /// the checked way does); the writes; `COMMIT`. Each write fails where its check would
    /// have found a conflict, and a failure rolls the whole group back: the caller then
    /// applies it the checked way, which tells which jobs conflict.
    async fn try_at_head(&self, jobs: &[Job], head: &AuditHead) -> Result<Applied, GroupError> {
        let session = self.session()?;
        let client = session.client;
        let mut after = head.clone();
        let mut events = EventRows::default();
        let sealed = jobs
            .iter()
            .map(|job| {
                Ok(job
                    .events
                    .iter()
                    .map(|e| events.append(&mut after, e))
                    .collect())
            })
            .collect();
        let mut steps: Vec<Step<'_, Answer, GroupError>> = Vec::new();
        steps.push(Box::pin(async move {
            client.batch_execute("BEGIN").await?;
            Ok(Answer::Applied)
        }));
        steps.push(session.append(events, &after, Some(head))?);
        for write in jobs.iter().flat_map(|job| &job.writes) {
            steps.push(session.write(write, None)?);
        }
        if jobs
            .iter()
            .flat_map(|job| &job.writes)
            .any(PreparedWrite::changes_cached)
        {
            steps.push(session.move_catalog()?);
        }
        steps.push(session.commit((after.seq != head.seq).then_some(after.seq)));
        in_order(steps).await?;
        Ok(Applied {
            before: head.seq,
            after,
            sealed,
        })
    }

    /// Applies a group in one transaction, checking each job's preconditions before it
    /// writes.
    ///
    /// The group's statements are pipelined (`pipeline.rs`), a few round trips for the
    /// whole group instead of some for each job: the head's lock with the first wave's
    /// checks; then each wave's writes with the next wave's checks; the last writes with the
    /// group's events; the commit. A wave is a run of jobs whose checks read nothing that an
    /// earlier job of the same wave writes (`waves`), so every check sees what the jobs
    /// before it wrote, as when they ran one by one.
    async fn try_group(&self, jobs: &[Job]) -> Result<Applied, GroupError> {
        let session = self.session()?;
        let mut head: Option<AuditHead> = None;
        let mut before = 0;
        let mut events = EventRows::default();
        let mut results: Sealed = Vec::with_capacity(jobs.len());
        let mut writes: Vec<Step<'_, Answer, GroupError>> = Vec::new();
        let mut catalog_changed = false;
        for wave in waves(jobs) {
            let mut steps = std::mem::take(&mut writes);
            let lock = head.is_none();
            if lock {
                steps.insert(0, session.begin_and_lock());
            }
            let mut checked = Vec::new();
            for (j, job) in jobs[wave.clone()].iter().enumerate() {
                for (w, write) in job.writes.iter().enumerate() {
                    if let Some(step) = session.check(write) {
                        steps.push(step);
                        checked.push((wave.start + j, w));
                    }
                }
            }
            let mut answers = in_order(steps).await?.into_iter();
            if lock {
                let Some(Answer::Head(h)) = answers.next() else {
                    return Err(GroupError::Unexpected("the chain head was not read".into()));
                };
                before = h.seq;
                head = Some(h);
            }
            let head = head
                .as_mut()
                .ok_or_else(|| GroupError::Unexpected("the chain head was not read".into()))?;
            // Each check's answer, by job and write; the previous wave's writes answered
            // first, and said nothing but that they applied.
            let mut found: HashMap<(usize, usize), Checked> = HashMap::new();
            for answer in answers {
                if let Answer::Checked(c) = answer {
                    let key = checked
                        .get(found.len())
                        .copied()
                        .ok_or_else(|| GroupError::Unexpected("a check too many".into()))?;
                    found.insert(key, c);
                }
            }
            for (j, job) in jobs[wave.clone()].iter().enumerate() {
                let job_index = wave.start + j;
                let conflict =
                    (0..job.writes.len()).find_map(|w| match found.get(&(job_index, w)) {
                        Some(Checked::Conflict(c)) => Some(c.clone()),
                        _ => None,
                    });
                if let Some(conflict) = conflict {
                    results.push(Err(conflict));
                    continue;
                }
                catalog_changed |= job.writes.iter().any(PreparedWrite::changes_cached);
                for (w, write) in job.writes.iter().enumerate() {
                    let grant = match found.remove(&(job_index, w)) {
                        Some(Checked::Grant(data)) => Some(data),
                        _ => None,
                    };
                    writes.push(session.write(write, grant)?);
                }
                let sealed = job.events.iter().map(|e| events.append(head, e)).collect();
                results.push(Ok(sealed));
            }
        }
        let head = head.ok_or_else(|| GroupError::Unexpected("an empty group".into()))?;
        if catalog_changed {
            // Every node's cache learns of it before it next answers from it (catalog.rs).
            writes.push(session.move_catalog()?);
        }
        let moved = head.seq != before;
        if moved {
            // The group's events and the new head in one statement, after the last writes:
            // nothing reads the log inside the group, so they can wait for its end.
            writes.push(session.append(events, &head, None)?);
        }
        writes.push(session.commit(moved.then_some(head.seq)));
        in_order(writes).await?;
        Ok(Applied {
            before,
            after: head,
            sealed: results,
        })
    }
}

/// What a pipelined statement of a group answered.
enum Answer {
    Head(AuditHead),
    Checked(Checked),
    Applied,
}

/// What a write's precondition found.
enum Checked {
    Clear,
    Conflict(Conflict),
    /// The grant to revoke, as stored (its revocation is written into it).
    Grant(String),
}

/// The writer's connection and statements, while a group runs.
struct Session<'s> {
    client: &'s Client,
    statements: &'s HashMap<&'static str, Statement>,
}

impl<'s> Session<'s> {
    fn statement(&self, sql: &'static str) -> Result<Statement, GroupError> {
        self.statements
            .get(sql)
            .cloned()
            .ok_or_else(|| GroupError::Unexpected(format!("a statement was not prepared: {sql}")))
    }

    /// `BEGIN` and the chain head's lock, in one request.
    fn begin_and_lock(&self) -> Step<'s, Answer, GroupError> {
        let client = self.client;
        Box::pin(async move {
            let messages = client
                .simple_query("BEGIN; SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE")
                .await?;
            let head_row = messages.iter().find_map(|m| match m {
                SimpleQueryMessage::Row(r) => Some((
                    r.get(0).and_then(|v| v.parse::<u64>().ok()),
                    r.get(1).map(str::to_owned),
                )),
                _ => None,
            });
            let Some((Some(seq), Some(hash))) = head_row else {
                return Err(GroupError::Unexpected(
                    "the chain head's row is missing or unreadable".into(),
                ));
            };
            Ok(Answer::Head(AuditHead { seq, hash }))
        })
    }

    /// The statement that reads `write`'s precondition; none when it has none.
    fn check<'a>(&self, write: &'a PreparedWrite) -> Option<Step<'a, Answer, GroupError>>
    where
        's: 'a,
    {
        let client = self.client;
        let found = |sql: &'static str| self.statement(sql);
        let step: Step<'a, Checked, GroupError> = match write {
            PreparedWrite::InsertHold(r) => {
                let exists = found(HOLD_EXISTS);
                Box::pin(async move {
                    let row = client.query_opt(&exists?, &[r.id.as_uuid()]).await?;
                    Ok(match row {
                        Some(_) => Checked::Conflict(Conflict::HoldExists(r.id)),
                        None => Checked::Clear,
                    })
                })
            }
            PreparedWrite::UpdateHold(r) => {
                let version = found(HOLD_VERSION);
                Box::pin(async move {
                    let stored = client
                        .query_opt(&version?, &[r.id.as_uuid()])
                        .await?
                        .map(|row| row.get::<_, i64>(0));
                    Ok(if stored == Some(r.version as i64 - 1) {
                        Checked::Clear
                    } else {
                        Checked::Conflict(Conflict::StaleHold(r.id))
                    })
                })
            }
            PreparedWrite::RevokeGrant { id, .. } => {
                let live = found(GRANT_LIVE);
                Box::pin(async move {
                    let row = client.query_opt(&live?, &[id.as_uuid()]).await?;
                    Ok(match row {
                        Some(row) => Checked::Grant(row.get(0)),
                        None => Checked::Conflict(Conflict::NoSuchGrant(*id)),
                    })
                })
            }
            PreparedWrite::PutIdempotent { key, .. } => {
                let exists = found(IDEMPOTENT_EXISTS);
                Box::pin(async move {
                    let row = client.query_opt(&exists?, &[key]).await?;
                    Ok(match row {
                        Some(_) => Checked::Conflict(Conflict::KeyTaken(key.clone())),
                        None => Checked::Clear,
                    })
                })
            }
            PreparedWrite::PutRecord(r) => {
                let (version, holder) = (found(RECORD_VERSION), found(RECORD_HOLDER));
                Box::pin(async move { check_record(client, r, version?, holder?).await })
            }
            PreparedWrite::InsertGrant { .. }
            | PreparedWrite::DeleteRecord { .. }
            | PreparedWrite::DeleteRecords { .. }
            | PreparedWrite::ForgetIdempotent { .. } => return None,
        };
        Some(Box::pin(async move { step.await.map(Answer::Checked) }))
    }

    /// The statement of one write whose precondition held; `grant` is the stored grant a
    /// revocation's check read.
    fn write<'a>(
        &self,
        w: &'a PreparedWrite,
        grant: Option<String>,
    ) -> Result<Step<'a, Answer, GroupError>, GroupError>
    where
        's: 'a,
    {
        let client = self.client;
        Ok(match w {
            PreparedWrite::InsertHold(r) => {
                let insert = self.statement(INSERT_HOLD)?;
                let version = r.version as i64;
                Box::pin(async move {
                    client
                        .execute(
                            &insert,
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
                                &version,
                                &r.data,
                            ],
                        )
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::UpdateHold(r) => {
                let update = self.statement(UPDATE_HOLD)?;
                let (version, previous) = (r.version as i64, r.version as i64 - 1);
                Box::pin(async move {
                    let changed = client
                        .execute(
                            &update,
                            &[
                                &r.status,
                                &r.open,
                                &r.remind_at,
                                &version,
                                &r.data,
                                r.id.as_uuid(),
                                &previous,
                            ],
                        )
                        .await?;
                    one(changed, "a hold's update")
                })
            }
            PreparedWrite::InsertGrant { id, world, data } => {
                let insert = self.statement(INSERT_GRANT)?;
                Box::pin(async move {
                    client
                        .execute(&insert, &[id.as_uuid(), world, data])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::RevokeGrant { id, at } => {
                let revoke = self.statement(REVOKE_GRANT)?;
                let data =
                    grant.ok_or_else(|| GroupError::Unexpected(format!("grant {id} is gone")))?;
                let unreadable =
                    |e: serde_json::Error| GroupError::Unexpected(format!("grant {id}: {e}"));
                let mut grant: Grant = serde_json::from_str(&data).map_err(unreadable)?;
                grant.revoked_at = Some(*at);
                let data = serde_json::to_string(&grant).map_err(unreadable)?;
                let millis = at.as_millis();
                Box::pin(async move {
                    client
                        .execute(&revoke, &[&millis, &data, id.as_uuid()])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutRecord(r) if r.version == 1 => {
                let insert = self.statement(INSERT_RECORD)?;
                let (parent, version) = (parent(r), r.version as i64);
                Box::pin(async move {
                    client
                        .execute(
                            &insert,
                            &[&r.kind, &r.id, &parent, &r.key, &version, &r.data],
                        )
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutRecord(r) => {
                let update = self.statement(UPDATE_RECORD)?;
                let (version, previous) = (r.version as i64, r.version as i64 - 1);
                Box::pin(async move {
                    let changed = client
                        .execute(
                            &update,
                            &[&r.key, &version, &r.data, &r.kind, &r.id, &previous],
                        )
                        .await?;
                    one(changed, "a record's update")
                })
            }
            PreparedWrite::DeleteRecord { kind, id } => {
                let delete = self.statement(DELETE_RECORD)?;
                Box::pin(async move {
                    client.execute(&delete, &[kind, id]).await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::DeleteRecords { kind, parent } => {
                let delete = self.statement(DELETE_RECORDS)?;
                Box::pin(async move {
                    client.execute(&delete, &[kind, parent]).await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::PutIdempotent {
                key,
                fingerprint,
                response,
                at,
            } => {
                let insert = self.statement(INSERT_IDEMPOTENT)?;
                let millis = at.as_millis();
                Box::pin(async move {
                    client
                        .execute(&insert, &[key, fingerprint, response, &millis])
                        .await?;
                    Ok(Answer::Applied)
                })
            }
            PreparedWrite::ForgetIdempotent { key, before } => {
                let delete = self.statement(FORGET_IDEMPOTENT)?;
                let millis = before.as_millis();
                Box::pin(async move {
                    client.execute(&delete, &[key, &millis]).await?;
                    Ok(Answer::Applied)
                })
            }
        })
    }

    /// Moves the catalog's version: the group changes a record kind that nodes cache.
    fn move_catalog(&self) -> Result<Step<'s, Answer, GroupError>, GroupError> {
        let statement = self.statement(MOVE_VERSION)?;
        let client = self.client;
        Ok(Box::pin(async move {
            let changed = client.execute(&statement, &[]).await?;
            one(changed, "the catalog's version")
        }))
    }

    /// `COMMIT`, sent with the writes: a write that fails (a conditional one that changed
    /// nothing included) aborts the transaction, and the `COMMIT` then rolls it back; its
    /// error is the first answer read, so the group is reported failed. With `head`, the
    /// group appended events up to it, and the other nodes' tails are woken at commit.
    fn commit(&self, head: Option<u64>) -> Step<'s, Answer, GroupError> {
        let client = self.client;
        let commit = match head {
            Some(seq) => format!("NOTIFY {CHANNEL}, '{seq}'; COMMIT"),
            None => "COMMIT".to_owned(),
        };
        Box::pin(async move {
            client.batch_execute(&commit).await?;
            Ok(Answer::Applied)
        })
    }

    /// The group's events and the new head `to`, in one statement; with `from`, the head
    /// moves only from it, and the statement fails when `from` is no longer the head.
    fn append(
        &self,
        events: EventRows,
        to: &AuditHead,
        from: Option<&AuditHead>,
    ) -> Result<Step<'s, Answer, GroupError>, GroupError> {
        let append = self.statement(match from {
            Some(_) => APPEND_AT_HEAD,
            None => APPEND_EVENTS,
        })?;
        let client = self.client;
        let (seq, hash) = (to.seq as i64, to.hash.clone());
        let from = from.map(|f| (f.seq as i64, f.hash.clone()));
        Ok(Box::pin(async move {
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![
                &events.seq,
                &events.kind,
                &events.hold,
                &events.world,
                &events.chat,
                &events.body,
                &events.hash,
                &seq,
                &hash,
            ];
            if let Some((from_seq, from_hash)) = &from {
                params.extend([from_seq as &(dyn ToSql + Sync), from_hash]);
            }
            client.execute(&append, &params).await?;
            Ok(Answer::Applied)
        }))
    }
}

/// A record's preconditions: the version it replaces, and that no other record holds its key.
async fn check_record(
    client: &Client,
    r: &RecordRow,
    version: Statement,
    holder: Statement,
) -> Result<Checked, GroupError> {
    let parent = parent(r);
    let by_id: [&(dyn ToSql + Sync); 2] = [&r.kind, &r.id];
    let stored = client.query_opt(&version, &by_id);
    let holder = async {
        match &r.key {
            Some(k) => client
                .query_opt(&holder, &[&r.kind, &parent, k])
                .await
                .map(|row| row.map(|row| row.get::<_, uuid::Uuid>(0))),
            None => Ok(None),
        }
    };
    let (stored, holder) = tokio::join!(stored, holder);
    let stored = stored?.map(|row| row.get::<_, i64>(0));
    let taken = |name: &str| {
        Checked::Conflict(Conflict::RecordExists {
            kind: r.kind,
            name: name.to_owned(),
        })
    };
    if r.version == 1 && stored.is_some() {
        return Ok(taken(&r.id.to_string()));
    }
    if r.version > 1 && stored != Some(r.version as i64 - 1) {
        return Ok(Checked::Conflict(Conflict::StaleRecord {
            kind: r.kind,
            id: r.id,
        }));
    }
    if let (Some(k), Some(holder)) = (&r.key, holder?)
        && holder != r.id
    {
        return Ok(taken(k));
    }
    Ok(Checked::Clear)
}

/// Whether each of `job`'s writes fails by itself where its check would find a conflict, so
/// the job can be written without reading first: a hold's or a key's insert on its unique
/// index, a hold's update on its version; the others check nothing.
fn guarded(job: &Job) -> bool {
    job.writes.iter().all(|w| match w {
        PreparedWrite::InsertHold(_)
        | PreparedWrite::UpdateHold(_)
        | PreparedWrite::InsertGrant { .. }
        | PreparedWrite::PutIdempotent { .. }
        | PreparedWrite::ForgetIdempotent { .. } => true,
        PreparedWrite::RevokeGrant { .. }
        | PreparedWrite::PutRecord(_)
        | PreparedWrite::DeleteRecord { .. }
        | PreparedWrite::DeleteRecords { .. } => false,
    })
}

/// A write expected to change exactly one row.
fn one(changed: u64, what: &str) -> Result<Answer, GroupError> {
    if changed == 1 {
        Ok(Answer::Applied)
    } else {
        Err(GroupError::Unexpected(format!(
            "{what} changed {changed} rows instead of 1"
        )))
    }
}

/// What a job's checks read or its writes change, for telling which jobs of a group may be
/// checked in the same round trip. Coarse where the exact rows are not known: deleting a
/// record, or changing one whose earlier key is not known, touches the keys of its kind.
#[derive(PartialEq, Eq)]
enum Touch<'a> {
    Hold(&'a HoldId),
    Grant(&'a GrantId),
    Idempotent(&'a str),
    Record(&'static str, &'a uuid::Uuid),
    Key(&'static str, uuid::Uuid, &'a str),
    /// Any record's key of this kind.
    Keys(&'static str),
    /// Any record of this kind.
    Kind(&'static str),
}

impl Touch<'_> {
    /// Whether a check reading `self` could see a different answer after a write changing
    /// `written`.
    fn read_after(&self, written: &Touch<'_>) -> bool {
        match (self, written) {
            (Touch::Record(k, _) | Touch::Key(k, _, _), Touch::Kind(w)) => k == w,
            (Touch::Key(k, _, _), Touch::Keys(w)) => k == w,
            _ => self == written,
        }
    }
}

/// What `w`'s precondition reads.
fn reads(w: &PreparedWrite) -> Vec<Touch<'_>> {
    match w {
        PreparedWrite::InsertHold(r) | PreparedWrite::UpdateHold(r) => vec![Touch::Hold(&r.id)],
        PreparedWrite::RevokeGrant { id, .. } => vec![Touch::Grant(id)],
        PreparedWrite::PutIdempotent { key, .. } => vec![Touch::Idempotent(key)],
        PreparedWrite::PutRecord(r) => {
            let mut touched = vec![Touch::Record(r.kind, &r.id)];
            if let Some(k) = &r.key {
                touched.push(Touch::Key(r.kind, parent(r), k));
            }
            touched
        }
        PreparedWrite::InsertGrant { .. }
        | PreparedWrite::DeleteRecord { .. }
        | PreparedWrite::DeleteRecords { .. }
        | PreparedWrite::ForgetIdempotent { .. } => Vec::new(),
    }
}

/// What `w` changes.
fn changes(w: &PreparedWrite) -> Vec<Touch<'_>> {
    match w {
        PreparedWrite::InsertHold(r) | PreparedWrite::UpdateHold(r) => vec![Touch::Hold(&r.id)],
        PreparedWrite::InsertGrant { id, .. } | PreparedWrite::RevokeGrant { id, .. } => {
            vec![Touch::Grant(id)]
        }
        PreparedWrite::PutIdempotent { key, .. } | PreparedWrite::ForgetIdempotent { key, .. } => {
            vec![Touch::Idempotent(key)]
        }
        PreparedWrite::PutRecord(r) if r.version == 1 => {
            let mut touched = vec![Touch::Record(r.kind, &r.id)];
            if let Some(k) = &r.key {
                touched.push(Touch::Key(r.kind, parent(r), k));
            }
            touched
        }
        PreparedWrite::PutRecord(r) => vec![Touch::Record(r.kind, &r.id), Touch::Keys(r.kind)],
        PreparedWrite::DeleteRecord { kind, .. } | PreparedWrite::DeleteRecords { kind, .. } => {
            vec![Touch::Kind(kind)]
        }
    }
}

/// Splits a group into waves: runs of jobs in order, a new one starting at each job whose
/// checks read what an earlier job of the current wave writes.
fn waves(jobs: &[Job]) -> Vec<std::ops::Range<usize>> {
    let mut waves = Vec::new();
    let mut start = 0;
    let mut written: Vec<Touch<'_>> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let stale = job
            .writes
            .iter()
            .flat_map(reads)
            .any(|r| written.iter().any(|w| r.read_after(w)));
        if stale {
            waves.push(start..i);
            start = i;
            written.clear();
        }
        written.extend(job.writes.iter().flat_map(changes));
    }
    if start < jobs.len() || jobs.is_empty() {
        waves.push(start..jobs.len());
    }
    waves
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

#[cfg(test)]
mod tests {
    use holdpoint_protocol::Timestamp;

    use super::*;

    fn job(writes: Vec<PreparedWrite>) -> Job {
        Job {
            writes,
            events: Vec::new(),
            reply: tokio::sync::oneshot::channel().0,
            allowed_short: false,
        }
    }

    fn record(kind: &'static str, id: u128, key: Option<&str>, version: u64) -> PreparedWrite {
        PreparedWrite::PutRecord(RecordRow {
            kind,
            id: uuid::Uuid::from_u128(id),
            parent: uuid::Uuid::from_u128(7).as_bytes().to_vec(),
            key: key.map(str::to_owned),
            version,
            data: "{}".into(),
        })
    }

    fn idempotent(key: &str) -> PreparedWrite {
        PreparedWrite::PutIdempotent {
            key: key.into(),
            fingerprint: "f".into(),
            response: "{}".into(),
            at: Timestamp::from_millis(0),
        }
    }

    fn split(jobs: Vec<Vec<PreparedWrite>>) -> Vec<std::ops::Range<usize>> {
        waves(&jobs.into_iter().map(job).collect::<Vec<_>>())
    }

    #[test]
    fn jobs_that_read_nothing_another_wrote_share_a_wave() {
        let jobs = vec![
            vec![record("agent", 1, Some("a"), 1)],
            vec![record("agent", 2, Some("b"), 1)],
            vec![record("turn", 3, None, 2)],
            vec![idempotent("k1"), record("message", 4, None, 1)],
            vec![idempotent("k2")],
        ];
        assert_eq!(split(jobs), vec![0..5]);
    }

    #[test]
    fn a_check_of_what_an_earlier_job_wrote_starts_a_wave() {
        // The same key, the same record, the same idempotency key.
        assert_eq!(
            split(vec![
                vec![record("agent", 1, Some("a"), 1)],
                vec![record("agent", 2, Some("a"), 1)],
            ]),
            vec![0..1, 1..2]
        );
        assert_eq!(
            split(vec![
                vec![record("turn", 1, None, 2)],
                vec![record("turn", 1, None, 3)],
                vec![record("turn", 2, None, 2)],
            ]),
            vec![0..1, 1..3]
        );
        assert_eq!(
            split(vec![vec![idempotent("k")], vec![idempotent("k")]]),
            vec![0..1, 1..2]
        );
    }

    #[test]
    fn deleting_or_renaming_a_record_touches_its_kind() {
        let delete = PreparedWrite::DeleteRecord {
            kind: "agent",
            id: uuid::Uuid::from_u128(1),
        };
        assert_eq!(
            split(vec![vec![delete], vec![record("agent", 2, Some("a"), 1)]]),
            vec![0..1, 1..2]
        );
        let other_kind = PreparedWrite::DeleteRecords {
            kind: "message",
            parent: uuid::Uuid::from_u128(7),
        };
        assert_eq!(
            split(vec![
                vec![other_kind],
                vec![record("agent", 2, Some("a"), 1)]
            ]),
            vec![0..2]
        );
        // An update may change the record's key: a later check of a key of its kind waits.
        assert_eq!(
            split(vec![
                vec![record("agent", 1, Some("b"), 2)],
                vec![record("agent", 2, Some("a"), 1)],
                vec![record("agent", 3, None, 1)],
            ]),
            vec![0..1, 1..3]
        );
    }
}
