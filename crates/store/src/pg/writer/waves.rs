//! Waves: the runs of a group's jobs whose checks can be read in the same round trip, each
//! check still seeing what the jobs before it wrote.

use holdpoint_protocol::{GrantId, HoldId};

use super::session::parent;
use crate::rows::{Job, PreparedWrite};

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
pub(super) fn waves(jobs: &[Job]) -> Vec<std::ops::Range<usize>> {
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

#[cfg(test)]
mod tests {
    use holdpoint_protocol::Timestamp;

    use super::*;
    use crate::rows::RecordRow;

    fn job(writes: Vec<PreparedWrite>) -> Job {
        Job {
            writes,
            events: Vec::new(),
            reply: tokio::sync::oneshot::channel().0,
            allowed_short: false,
            written: None,
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
