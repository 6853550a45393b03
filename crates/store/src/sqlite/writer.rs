//! The single writer: applies transactions in groups, one fsync per group.
//!
//! Each transaction's preconditions (a hold's version, an unused idempotency key…) are
//! checked with reads before it writes anything, so a transaction that fails them leaves no
//! trace and needs no rollback; the group then commits once. Should a statement fail
//! unexpectedly (a full disk, say), the whole group is rolled back and its transactions are
//! redone one by one, so that only the faulty one fails. A committed group goes to the
//! syncer, which makes it durable before anyone hears of it.
//!
//! This module is the writer's loop; `rows.rs` has what it is sent, `group.rs` how a group is
//! gathered from the queue and answered, and `apply.rs` how a group is applied.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};

use holdpoint_core::audit::AuditHead;
use holdpoint_core::store::{CommitError, StoreError};
use rusqlite::Connection;

use super::checkpointer::{self, Checkpointer};
use super::reserve::{self, Reserve};
use super::syncer::Syncer;
use crate::cache::RecordCache;
use crate::group;
use crate::rows::{Job, Message, PreparedWrite};

/// Each time the WAL has grown by this many pages (4 MiB), the checkpointer is asked to copy
/// them into the database, concurrently with further commits. (Asked after every commit, it
/// would copy a few pages and fsync the database each time, contending with the writer for
/// the WAL's locks and the disk.)…
const CHECKPOINT_AT: i32 = 1024;
/// …and once the WAL holds this many (32 MiB), the writer finishes that copy itself between
/// two commits, so that the WAL can start over and stays bounded under sustained load.
const WAL_BOUND: i32 = 8192;

/// Follows the WAL's size after each commit. Registering the hook also turns off SQLite's
/// automatic checkpoint, which would otherwise run inside a commit.
pub(super) fn watch_wal(conn: &mut Connection) -> rusqlite::Result<Arc<AtomicI32>> {
    let frames = Arc::new(AtomicI32::new(0));
    let seen = frames.clone();
    conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages| {
        seen.store(pages, Ordering::Relaxed);
        Ok(())
    }))?;
    Ok(frames)
}

pub(super) struct Writer {
    pub(super) conn: Connection,
    /// Held for as long as the writer runs: one writing process per database.
    pub(super) _lock: File,
    pub(super) head: AuditHead,
    /// Makes committed groups durable, then answers them.
    pub(super) syncer: Syncer,
    /// Set once an fsync failed: nothing more is committed.
    pub(super) failed: Arc<AtomicBool>,
    /// Pages in the WAL after the last commit.
    pub(super) wal_frames: Arc<AtomicI32>,
    /// The WAL's size when the checkpointer was last asked to run.
    pub(super) nudged_at: i32,
    pub(super) checkpointer: Checkpointer,
    /// Cleared after each commit that changes a record it keeps.
    pub(super) cache: Arc<RecordCache>,
    /// The space set aside for a full disk.
    pub(super) reserve: Reserve,
}

impl Writer {
    /// Applies transactions until the store closes.
    pub(super) fn serve(&mut self, mut rx: Receiver<Message>) {
        let mut next = None;
        loop {
            // Short of space, the writer looks for room for its reserve now and then, with
            // or without commits to make.
            self.reserve.restore_if_due();
            let first = match next.take() {
                Some(message) => message,
                None if self.reserve.is_short() => match rx.recv_timeout(reserve::RETRY) {
                    Ok(message) => message,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(message) => message,
                    Err(_) => break,
                },
            };
            let Some(group) = group::gather(first, &mut rx) else {
                break;
            };
            // With more work waiting, the sync is left to the syncer thread, to overlap the
            // next group; otherwise the writer syncs at once (see syncer.rs).
            if !group.closing {
                next = rx.try_recv().ok();
            }
            self.commit_group(group.jobs, next.is_some());
            self.keep_wal_bounded();
            if group.closing {
                break;
            }
        }
    }

    fn keep_wal_bounded(&mut self) {
        let pages = self.wal_frames.load(Ordering::Relaxed);
        if pages < self.nudged_at {
            // The WAL started over.
            self.nudged_at = 0;
        }
        if pages >= WAL_BOUND {
            match checkpointer::passive(&self.conn) {
                // The next commit reports the WAL's size again.
                Ok(()) => self.wal_frames.store(0, Ordering::Relaxed),
                Err(e) => tracing::warn!(error = %e, "checkpoint failed"),
            }
        } else if pages >= self.nudged_at + CHECKPOINT_AT {
            self.nudged_at = pages;
            self.checkpointer.nudge();
        }
    }

    /// Waits until every commit is durable and answered, then folds the WAL into the
    /// database, so a closed store is one file.
    pub(super) fn finish(self) {
        let Writer {
            conn,
            syncer,
            checkpointer,
            ..
        } = self;
        syncer.finish();
        checkpointer.stop();
        if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(error = %e, "checkpoint at close failed");
        }
    }

    fn commit_group(&mut self, jobs: Vec<Job>, busy: bool) {
        if self.failed.load(Ordering::SeqCst) {
            let error = StoreError::new(
                "an earlier commit could not be made durable; the store refuses further writes",
            );
            group::fail(jobs, &error);
            return;
        }
        // Short of space, only what serves the holds already raised is written: the rest
        // would use up the space kept for deciding them.
        let jobs = self.refuse_unless_served(jobs);
        if jobs.is_empty() {
            return;
        }
        let start = self.head.clone();
        match self.try_group(&jobs) {
            Ok(results) => {
                if jobs
                    .iter()
                    .any(|job| job.writes.iter().any(PreparedWrite::changes_cached))
                {
                    self.cache.invalidate();
                }
                let answers = jobs
                    .into_iter()
                    .zip(results)
                    .map(|(job, sealed)| {
                        let answer = group::answer(job.events, sealed);
                        // Committed to the WAL: a crash of this process no longer loses it,
                        // so a caller who asked is told now, before the fsync (the syncer
                        // still answers `reply` once the group is durable).
                        if let (Some(written), Ok(events)) = (job.written, &answer) {
                            let _ = written.send(events.clone());
                        }
                        (job.reply, answer)
                    })
                    .collect();
                self.syncer.settle(answers, busy);
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.head = start;
                if jobs.len() > 1 {
                    for job in jobs {
                        self.commit_group(vec![job], busy);
                    }
                } else if is_disk_full(&e) && self.reserve.release() {
                    // The space set aside is free now: the commit fits, if it is one that
                    // may use it (`commit_group` refuses it otherwise).
                    self.commit_group(jobs, busy);
                } else {
                    tracing::error!(error = %e, "a commit failed; nothing of it was applied");
                    let error = StoreError::new(format!("the commit failed: {e}"));
                    group::fail(jobs, &error);
                }
            }
        }
    }
}

impl Writer {
    /// While the store is short of space, answers each job it may not write then
    /// (`Transaction::allowed_short_of_space`) with the shortfall, and returns the others.
    fn refuse_unless_served(&mut self, jobs: Vec<Job>) -> Vec<Job> {
        let Some(short) = self.reserve.shortfall() else {
            return jobs;
        };
        let (served, refused): (Vec<Job>, Vec<Job>) =
            jobs.into_iter().partition(|job| job.allowed_short);
        for job in refused {
            let error = StoreError::short_of_space(short);
            let _ = job.reply.send(Err(CommitError::Store(error)));
        }
        served
    }
}

/// Whether SQLite failed because the disk is full.
fn is_disk_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}
