//! Prepared rows: what a transaction writes, serialised by the caller (off the writer's
//! thread), and the messages that carry it to the writer.

use std::sync::Arc;

use holdpoint_core::store::{CommitError, PreparedEvent};
use holdpoint_protocol::{BatchId, Event, GrantId, HoldId, Timestamp};
use tokio::sync::oneshot;

use super::cache;

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
    pub(super) agent: Option<String>,
    pub(super) tool: Option<String>,
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
    pub(super) fn changes_cached(&self) -> bool {
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
