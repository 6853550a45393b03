//! The short way, for a group that needs no reads: one round trip in all, guarded on the
//! chain head this writer committed last still being the head.

use holdpoint_core::audit::AuditHead;

use super::session::{Answer, EventRows};
use super::{Applied, GroupError, Writer};
use crate::pg::pipeline::{Step, in_order};
use crate::rows::{Job, PreparedWrite};

impl Writer {
    /// Applies a group whose writes all carry their own guards (`guarded`) in one
    /// round trip, after `head`, the head this writer's last group left: `BEGIN`; the
    /// events and the head's move, only from `head` (which takes the head's lock first, as
    /// the checked way does); the writes; `COMMIT`. Each write fails where its check would
    /// have found a conflict, and a failure rolls the whole group back: the caller then
    /// applies it the checked way, which tells which jobs conflict.
    pub(super) async fn try_at_head(
        &self,
        jobs: &[Job],
        head: &AuditHead,
    ) -> Result<Applied, GroupError> {
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
}

/// Whether each of `job`'s writes fails by itself where its check would find a conflict, so
/// the job can be written without reading first: a hold's or a key's insert on its unique
/// index, a hold's update on its version; the others check nothing.
pub(super) fn guarded(job: &Job) -> bool {
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
