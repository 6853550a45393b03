//! A group's session: the writer's connection and statements while the group runs, and the
//! statements that begin, append to the audit chain and end every group.

use std::collections::HashMap;

use holdpoint_core::audit::{AuditHead, seal};
use holdpoint_core::store::{Conflict, PreparedEvent};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, SimpleQueryMessage, Statement};

use super::GroupError;
use super::statements::{APPEND_AT_HEAD, APPEND_EVENTS};
use crate::pg::catalog::MOVE_VERSION;
use crate::pg::pipeline::Step;
use crate::pg::reader::parent_key;
use crate::pg::tail::CHANNEL;
use crate::rows::RecordRow;

/// What a pipelined statement of a group answered.
pub(super) enum Answer {
    Head(AuditHead),
    Checked(Checked),
    Applied,
}

/// What a write's precondition found.
pub(super) enum Checked {
    Clear,
    Conflict(Conflict),
    /// The grant to revoke, as stored (its revocation is written into it).
    Grant(String),
}

/// The writer's connection and statements, while a group runs.
pub(super) struct Session<'s> {
    pub(super) client: &'s Client,
    pub(super) statements: &'s HashMap<&'static str, Statement>,
}

impl<'s> Session<'s> {
    pub(super) fn statement(&self, sql: &'static str) -> Result<Statement, GroupError> {
        self.statements
            .get(sql)
            .cloned()
            .ok_or_else(|| GroupError::Unexpected(format!("a statement was not prepared: {sql}")))
    }

    /// `BEGIN` and the chain head's lock, in one request.
    pub(super) fn begin_and_lock(&self) -> Step<'s, Answer, GroupError> {
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

    /// Moves the catalog's version: the group changes a record kind that nodes cache.
    pub(super) fn move_catalog(&self) -> Result<Step<'s, Answer, GroupError>, GroupError> {
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
    pub(super) fn commit(&self, head: Option<u64>) -> Step<'s, Answer, GroupError> {
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
    pub(super) fn append(
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

/// A write expected to change exactly one row.
pub(super) fn one(changed: u64, what: &str) -> Result<Answer, GroupError> {
    if changed == 1 {
        Ok(Answer::Applied)
    } else {
        Err(GroupError::Unexpected(format!(
            "{what} changed {changed} rows instead of 1"
        )))
    }
}

/// A group's events as columns, stored together at the group's end.
#[derive(Default)]
pub(super) struct EventRows {
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
    pub(super) fn append(&mut self, head: &mut AuditHead, e: &PreparedEvent) -> (u64, String) {
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
pub(super) fn parent(r: &RecordRow) -> uuid::Uuid {
    parent_key(uuid::Uuid::from_slice(&r.parent).ok())
}
