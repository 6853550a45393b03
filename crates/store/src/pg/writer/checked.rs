//! The checked way: each job's preconditions are read before it writes, the group's
//! statements pipelined wave by wave (`waves.rs`).

use std::collections::HashMap;

use holdpoint_core::audit::AuditHead;
use holdpoint_core::store::Conflict;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::session::{Answer, Checked, EventRows, Session, parent};
use super::statements::{
    GRANT_LIVE, HOLD_EXISTS, HOLD_VERSION, IDEMPOTENT_EXISTS, RECORD_HOLDER, RECORD_VERSION,
};
use super::waves::waves;
use super::{Applied, GroupError, Sealed, Writer};
use crate::pg::pipeline::{Step, in_order};
use crate::rows::{Job, PreparedWrite, RecordRow};

impl Writer {
    /// Applies a group in one transaction, checking each job's preconditions before it
    /// writes.
    ///
    /// The group's statements are pipelined (`pipeline.rs`), a few round trips for the
    /// whole group instead of some for each job: the head's lock with the first wave's
    /// checks; then each wave's writes with the next wave's checks; the last writes with the
    /// group's events; the commit. A wave is a run of jobs whose checks read nothing that an
    /// earlier job of the same wave writes (`waves`), so every check sees what the jobs
    /// before it wrote, as when they ran one by one.
    pub(super) async fn try_group(&self, jobs: &[Job]) -> Result<Applied, GroupError> {
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

impl<'s> Session<'s> {
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
