//! Prepared rows: what a transaction writes, serialised by the caller (off the writer's
//! thread), and the messages that carry it to the writer. Both stores' writers take these.

use std::sync::Arc;

use holdpoint_core::store::{
    CommitError, HoldColumns, IdempotentRecord, PreparedEvent, StoreError, Synced, Transaction,
    Write,
};
use holdpoint_protocol::{BatchId, Event, GrantId, Hold, HoldId, Timestamp};
use tokio::sync::oneshot;

use crate::cache;

pub(crate) enum Message {
    Commit(Job),
    Close,
}

pub(crate) type Reply = oneshot::Sender<Result<Vec<Arc<Event>>, CommitError>>;

pub(crate) struct Job {
    pub(crate) writes: Vec<PreparedWrite>,
    pub(crate) events: Vec<PreparedEvent>,
    pub(crate) reply: Reply,
    /// [`Transaction::allowed_short_of_space`]: written even by a store short of space.
    pub(crate) allowed_short: bool,
    /// Told the committed events as soon as the transaction is written, before it is
    /// durable ([`Store::commit_written`]); `reply` still answers once it is. A writer that
    /// cannot tell the two apart drops it, and the caller waits for `reply`.
    pub(crate) written: Option<Written>,
}

/// Where a writer tells that a transaction is written, not yet durable.
pub(crate) type Written = oneshot::Sender<Vec<Arc<Event>>>;

/// Commits `tx` through a store's writer: its writes are prepared here, on the caller's task,
/// handed over with `send` (false when the writer is gone), and the writer's answer awaited.
/// `None` for a store opened read-only.
pub(crate) async fn commit_through(
    send: Option<impl FnOnce(Message) -> bool>,
    tx: Transaction,
) -> Result<Vec<Arc<Event>>, CommitError> {
    let answer = submit(send, tx, None)?;
    answered(answer).await
}

/// Like [`commit_through`], answering once the writer has written `tx`, with the wait for
/// its sync ([`Store::commit_written`]).
pub(crate) async fn commit_written_through(
    send: Option<impl FnOnce(Message) -> bool>,
    tx: Transaction,
) -> Result<(Vec<Arc<Event>>, Synced), CommitError> {
    let (tell, written) = oneshot::channel();
    let answer = submit(send, tx, Some(tell))?;
    match written.await {
        Ok(events) => {
            let synced = Synced::until(async move {
                answered(answer).await.map(drop).map_err(|e| match e {
                    CommitError::Store(e) => e,
                    // A written transaction met its preconditions: not reached.
                    CommitError::Conflict(c) => StoreError::new(c.to_string()),
                })
            });
            Ok((events, synced))
        }
        // Not written (a precondition failed, the store refused or failed), or written by a
        // writer that only answers once durable: the final answer says which.
        Err(_) => Ok((answered(answer).await?, Synced::done())),
    }
}

type Answer = oneshot::Receiver<Result<Vec<Arc<Event>>, CommitError>>;

fn submit(
    send: Option<impl FnOnce(Message) -> bool>,
    tx: Transaction,
    written: Option<Written>,
) -> Result<Answer, CommitError> {
    let Some(send) = send else {
        return Err(StoreError::new("the database is open read-only").into());
    };
    let allowed_short = tx.allowed_short_of_space();
    let writes = tx
        .writes
        .into_iter()
        .map(prepare)
        .collect::<Result<Vec<_>, _>>()?;
    let (reply, answer) = oneshot::channel();
    let job = Job {
        writes,
        events: tx.events,
        reply,
        allowed_short,
        written,
    };
    if !send(Message::Commit(job)) {
        return Err(StoreError::new("the store is closed").into());
    }
    Ok(answer)
}

async fn answered(answer: Answer) -> Result<Vec<Arc<Event>>, CommitError> {
    answer
        .await
        .map_err(|_| StoreError::new("the store closed before the commit finished"))?
}

/// A hold's columns and its JSON, serialised by the caller (off the writer's thread).
pub(crate) struct HoldRow {
    pub(crate) id: HoldId,
    pub(crate) batch: BatchId,
    pub(crate) world: String,
    pub(crate) raiser: String,
    pub(crate) chat: Option<String>,
    pub(crate) agent: Option<String>,
    pub(crate) tool: Option<String>,
    pub(crate) kind: &'static str,
    pub(crate) status: &'static str,
    pub(crate) open: bool,
    pub(crate) deadline: Option<i64>,
    pub(crate) remind_at: Option<i64>,
    pub(crate) version: u64,
    pub(crate) data: String,
}

/// A record's columns, with its JSON serialised by the caller.
pub(crate) struct RecordRow {
    pub(crate) kind: &'static str,
    pub(crate) id: uuid::Uuid,
    pub(crate) parent: Vec<u8>,
    pub(crate) key: Option<String>,
    pub(crate) version: u64,
    pub(crate) data: String,
}

pub(crate) enum PreparedWrite {
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
    pub(crate) fn changes_cached(&self) -> bool {
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

/// The columns are [`HoldColumns::of`] the hold, the one definition `audit verify` checks
/// stored rows against.
fn hold_row(hold: &Hold) -> Result<HoldRow, StoreError> {
    let c = HoldColumns::of(hold);
    Ok(HoldRow {
        id: c.id,
        batch: c.batch,
        world: c.world,
        raiser: c.raiser,
        chat: c.chat,
        agent: c.agent,
        tool: c.tool,
        kind: hold.kind().as_str(),
        status: hold.status.as_str(),
        open: c.open,
        deadline: c.deadline,
        remind_at: c.remind_at,
        version: c.version,
        data: serde_json::to_string(hold).map_err(StoreError::new)?,
    })
}

/// A write as its rows, serialised on the caller's task.
pub(crate) fn prepare(write: Write) -> Result<PreparedWrite, StoreError> {
    Ok(match write {
        Write::InsertHold(h) => PreparedWrite::InsertHold(hold_row(&h)?),
        Write::UpdateHold(h) => PreparedWrite::UpdateHold(hold_row(&h)?),
        Write::InsertGrant(g) => PreparedWrite::InsertGrant {
            id: g.id,
            world: g.world.clone(),
            data: serde_json::to_string(&g).map_err(StoreError::new)?,
        },
        Write::RevokeGrant { id, at } => PreparedWrite::RevokeGrant { id, at },
        Write::PutRecord(r) => PreparedWrite::PutRecord(RecordRow {
            kind: r.kind.as_str(),
            id: r.id,
            parent: r.parent.map(|p| p.as_bytes().to_vec()).unwrap_or_default(),
            key: r.key.clone(),
            version: r.version,
            data: serde_json::to_string(&r.data).map_err(StoreError::new)?,
        }),
        Write::DeleteRecord { kind, id } => PreparedWrite::DeleteRecord {
            kind: kind.as_str(),
            id,
        },
        Write::DeleteRecords { kind, parent } => PreparedWrite::DeleteRecords {
            kind: kind.as_str(),
            parent,
        },
        Write::PutIdempotent {
            key,
            fingerprint,
            response,
            at,
        } => PreparedWrite::PutIdempotent {
            key,
            fingerprint,
            response: serde_json::to_string(&response).map_err(StoreError::new)?,
            at,
        },
        Write::ForgetIdempotent { key, before } => PreparedWrite::ForgetIdempotent { key, before },
    })
}

/// An idempotency record from its stored row: the request's fingerprint and the response's
/// JSON text.
pub(crate) fn idempotent_record(
    (fingerprint, response): (String, String),
) -> Result<IdempotentRecord, StoreError> {
    let response = serde_json::from_str(&response).map_err(StoreError::new)?;
    Ok(IdempotentRecord {
        fingerprint,
        response,
    })
}
