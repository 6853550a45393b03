//! Makes commits durable. The writer commits a group without waiting for the disk; then the
//! WAL is fsynced (which covers every group committed so far), and only then are the groups'
//! events published and their callers answered, in log order.
//!
//! Under load the syncer thread does this while the writer already applies the next group.
//! When the group is a single transaction, no other work waits and the thread has nothing in
//! hand, the writer syncs the group itself: at low load that saves waking a thread (a good
//! part of a lone commit's latency), and it keeps log order, since everything before the group
//! has been answered already.
//!
//! A failed fsync leaves it unknown what reached the disk, so the store then refuses all
//! further commits rather than acknowledging anything it cannot vouch for.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use holdpoint_core::store::{CommitError, StoreError};
use holdpoint_protocol::Event;
use parking_lot::{Condvar, Mutex};
use tokio::sync::broadcast;

use crate::rows::Reply;

/// One transaction's answer, to be given once it is durable.
pub(super) type Answer = (Reply, Result<Vec<Arc<Event>>, CommitError>);

/// The largest group the writer syncs itself. A lone transaction is what low load looks like;
/// several at once mean more are on their way, and the writer had better be free to commit
/// them while the syncer thread waits on the disk (syncing inline there serialised commits
/// and fsyncs, and cost a third of the throughput under load).
const INLINE_MAX: usize = 1;

/// The writer's side: hands committed groups over, or settles them inline.
pub(super) struct Syncer {
    handover: Sender<Vec<Answer>>,
    thread: JoinHandle<()>,
    /// Groups handed to the thread and not yet answered.
    in_hand: Arc<AtomicUsize>,
    inline: Durability,
}

impl Syncer {
    pub(super) fn spawn(
        wal: PathBuf,
        events: broadcast::Sender<Arc<Event>>,
        failed: Arc<AtomicBool>,
        gauge: Arc<SyncGauge>,
    ) -> std::io::Result<Syncer> {
        let (handover, rx) = std::sync::mpsc::channel();
        let in_hand = Arc::new(AtomicUsize::new(0));
        let inline = Durability {
            wal,
            file: None,
            events,
            failed,
            gauge,
        };
        let mut durability = inline.another();
        let counter = in_hand.clone();
        let thread = std::thread::Builder::new()
            .name("holdpoint-sync".into())
            .spawn(move || run(&mut durability, &rx, &counter))?;
        Ok(Syncer {
            handover,
            thread,
            in_hand,
            inline,
        })
    }

    /// Makes a committed group durable, then answers it: here when it is a lone transaction,
    /// the writer has nothing else to do (`busy` is false) and the thread nothing in hand;
    /// else on the thread.
    pub(super) fn settle(&mut self, group: Vec<Answer>, busy: bool) {
        if !busy && group.len() <= INLINE_MAX && self.in_hand.load(Ordering::Acquire) == 0 {
            self.inline.settle(vec![group]);
            return;
        }
        self.in_hand.fetch_add(1, Ordering::AcqRel);
        if let Err(std::sync::mpsc::SendError(group)) = self.handover.send(group) {
            // The thread is gone (it only stops when handed nothing more): settle here.
            self.in_hand.fetch_sub(1, Ordering::AcqRel);
            self.inline.settle(vec![group]);
        }
    }

    /// Waits until every group handed over is answered.
    pub(super) fn finish(self) {
        drop(self.handover);
        let _ = self.thread.join();
    }
}

fn run(durability: &mut Durability, rx: &Receiver<Vec<Answer>>, in_hand: &AtomicUsize) {
    while let Ok(first) = rx.recv() {
        let mut groups = vec![first];
        groups.extend(rx.try_iter());
        let n = groups.len();
        durability.settle(groups);
        in_hand.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Syncs the WAL and answers what the sync covered.
struct Durability {
    wal: PathBuf,
    file: Option<File>,
    events: broadcast::Sender<Arc<Event>>,
    failed: Arc<AtomicBool>,
    gauge: Arc<SyncGauge>,
}

impl Durability {
    /// The same duty for another thread, with its own handle on the WAL.
    fn another(&self) -> Durability {
        Durability {
            wal: self.wal.clone(),
            file: None,
            events: self.events.clone(),
            failed: self.failed.clone(),
            gauge: self.gauge.clone(),
        }
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.gauge.until_resumed();
        let synced = match &self.file {
            Some(f) => f.sync_data(),
            None => {
                let f = File::options().write(true).open(&self.wal)?;
                let synced = f.sync_data();
                self.file = Some(f);
                synced
            }
        };
        self.gauge.syncs.fetch_add(1, Ordering::Release);
        synced
    }

    fn settle(&mut self, groups: Vec<Vec<Answer>>) {
        if let Err(e) = self.sync() {
            self.failed.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "could not sync the WAL; the store refuses further writes");
            let error = StoreError::new(format!(
                "the commit could not be made durable ({e}); the store refuses further writes"
            ));
            for (reply, _) in groups.into_iter().flatten() {
                let _ = reply.send(Err(CommitError::Store(error.clone())));
            }
            return;
        }
        for (reply, result) in groups.into_iter().flatten() {
            if let Ok(committed) = &result {
                for e in committed {
                    // No subscribers is fine.
                    let _ = self.events.send(e.clone());
                }
            }
            let _ = reply.send(result);
        }
    }
}

/// What tests see of the syncer, to tell a commit written from a commit durable: the fsyncs
/// done, and a pause that holds the next one back ([`crate::SqliteStore::hold_syncs`]). At
/// one uncontended lock per fsync it costs nothing beside the fsync.
#[derive(Default)]
pub(super) struct SyncGauge {
    paused: Mutex<bool>,
    resumed: Condvar,
    syncs: AtomicU64,
}

impl SyncGauge {
    pub(super) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Acquire)
    }

    pub(super) fn pause(self: &Arc<Self>) -> SyncsHeld {
        *self.paused.lock() = true;
        SyncsHeld(self.clone())
    }

    fn until_resumed(&self) {
        let mut paused = self.paused.lock();
        while *paused {
            self.resumed.wait(&mut paused);
        }
    }
}

/// While it lives, the store makes nothing more durable: commits are still written (and
/// answered by [`holdpoint_core::store::Store::commit_written`]), their syncs wait. For
/// tests only.
pub struct SyncsHeld(Arc<SyncGauge>);

impl Drop for SyncsHeld {
    fn drop(&mut self) {
        *self.0.paused.lock() = false;
        self.0.resumed.notify_all();
    }
}
