//! The writer: one thread and one connection per process, applying transactions in groups,
//! one PostgreSQL transaction (one WAL flush) per group.
//!
//! A group first locks the chain head's row (`SELECT … FOR UPDATE`, or the guarded `UPDATE`
//! below). That lock is what keeps the audit chain one line: whoever holds it appends after
//! the head it read, and every other writer, in this process or on another node, waits for
//! the commit. Because every group takes it, all writes are serialised: a precondition
//! checked with a read still holds when the write follows, and positions and sequence
//! numbers are handed out in commit order, so a reader never sees sequence n+1 before n. Each transaction's preconditions are checked
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
//!
//! Its parts: the thread and its loop (`thread.rs`); the connection, reopened when lost
//! (`connection.rs`), and the statements prepared on it (`statements.rs`); here, how a group
//! is committed, answered and published, and which way it takes: the short way
//! (`at_head.rs`) or the checked way (`checked.rs`, in waves: `waves.rs`). Both build their
//! requests from a session (`session.rs`: the group's begin, events and commit) and the
//! statement of each write (`writes.rs`).

mod at_head;
mod checked;
mod connection;
mod session;
mod statements;
mod thread;
mod waves;
mod writes;

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_core::audit::AuditHead;
use holdpoint_core::store::{Conflict, StoreError};
use tokio_postgres::{Client, Statement};

use at_head::guarded;
pub(super) use connection::connect;
use session::Session;

use super::conn::Target;
use super::publish::Publisher;
use crate::group;
use crate::rows::Job;

/// How long after meeting another writer's commits the writer keeps to the checked way.
const SHARED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

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

    async fn commit_group(&mut self, jobs: Vec<Job>) {
        if let Err(e) = self.client().await {
            let error = StoreError::new(format!("the database is unreachable: {}", e.message()));
            group::fail(jobs, &error);
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
                    let result = group::answer(job.events, result);
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
                group::fail(jobs, &error);
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
}
