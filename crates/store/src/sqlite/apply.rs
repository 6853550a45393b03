//! Applying a group of transactions in one SQLite transaction: each transaction's
//! preconditions are checked with reads before it writes anything, so one that fails them
//! leaves no trace; its events are sealed onto the audit chain after the head.

use holdpoint_core::audit::{AuditHead, seal};
use holdpoint_core::store::{Conflict, PreparedEvent};
use holdpoint_protocol::Grant;
use rusqlite::{OptionalExtension, params};

use super::key;
use super::writer::Writer;
use crate::rows::{Job, PreparedWrite, RecordRow};

impl Writer {
    /// Applies a group in one SQLite transaction. Per job: the positions and hashes of its
    /// events, or the precondition that failed (and then nothing of the job was written).
    #[allow(clippy::type_complexity)]
    pub(super) fn try_group(
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
                        "INSERT INTO holds (id, batch, world, raiser, chat, agent, tool, kind, status, open, deadline, remind_at, version, data) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    )?
                    .execute(params![
                        key(r.id.as_uuid()),
                        key(r.batch.as_uuid()),
                        r.world,
                        r.raiser,
                        r.chat,
                        r.agent,
                        r.tool,
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
