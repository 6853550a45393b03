//! Holds somebody waits on, and the ones nobody waits on any more.
//!
//! A program that raises a hold and waits on it (`holdpoint mcp`, `holdpoint ask`, a script's
//! long poll) will run the call once it is approved. If it stops waiting for good — killed,
//! its client gone while Holdpoint was down — the hold would stay pending, and a person who
//! approved it would approve a call that can never run. So a hold that has been waited on is
//! withdrawn once nobody has waited on it for `server.waiter_grace`, recording why.
//!
//! Each node counts the waits under way through it. So that a waiter that comes back through
//! another node (or after a restart) keeps its hold, every node writes the holds it attends
//! to a record of its own (`RecordKind::Attendance`) while it has any, renewed a third of the
//! grace at a time. A node withdraws a hold only when no node's record lists it; the holds in
//! the records of nodes that stopped (a restart is a new node) are taken up by the others,
//! which give their waiters a full grace to come back.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use holdpoint_core::Engine;
use holdpoint_core::clock::Clock;
use holdpoint_core::record::{Records, put};
use holdpoint_core::store::{CommitError, RecordKind, Write};
use holdpoint_protocol::{Actor, HoldId, Source, Timestamp};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The waits under way through this node, and the holds whose waiters left lately.
#[derive(Clone)]
pub struct Attendance {
    inner: Arc<Inner>,
}

struct Inner {
    node: Uuid,
    grace: Duration,
    state: Mutex<State>,
    /// A hold is waited on that this node's record does not list yet.
    news: tokio::sync::Notify,
    /// The sweeping task, once started: its last write is awaited before the store closes.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The least time between two writes of a node's record: news of many holds share one.
const SPACING: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    /// Waits under way, by hold.
    waiting: HashMap<HoldId, usize>,
    /// Holds waited on through this node (or taken up from a stopped node's record) that
    /// nobody waits on now, and since when.
    left: HashMap<HoldId, Timestamp>,
    /// What this node's record says, and until when, as last written.
    written: BTreeSet<HoldId>,
    written_until: Option<Timestamp>,
    version: u64,
}

/// What a node's record says: the holds it attends, until when.
#[derive(Serialize, Deserialize)]
struct Attended {
    until: Timestamp,
    holds: BTreeSet<HoldId>,
}

/// One wait on a hold; the hold is attended while this lives.
pub struct Waiting {
    attendance: Attendance,
    hold: HoldId,
    clock: Arc<dyn Clock>,
    resolved: bool,
}

impl Attendance {
    pub fn new(grace: Duration) -> Attendance {
        Attendance {
            inner: Arc::new(Inner {
                node: Uuid::now_v7(),
                grace,
                state: Mutex::default(),
                news: tokio::sync::Notify::new(),
                task: Mutex::default(),
            }),
        }
    }

    /// Marks hold `id` as waited on until the returned guard is dropped.
    pub fn wait(&self, engine: &Engine, id: HoldId) -> Waiting {
        let mut state = self.inner.state.lock();
        *state.waiting.entry(id).or_default() += 1;
        state.left.remove(&id);
        let news = !state.written.contains(&id);
        drop(state);
        if news {
            // Written at once, so a node that dies right after still left word of it.
            self.inner.news.notify_one();
        }
        Waiting {
            attendance: self.clone(),
            hold: id,
            clock: engine.clock().clone(),
            resolved: false,
        }
    }

    /// The reason recorded on a hold withdrawn for want of a waiter.
    fn reason(&self) -> String {
        format!(
            "nobody waited on it for {}: the program or MCP gateway that raised it stopped \
             waiting, so its call can no longer run",
            humantime::format_duration(self.inner.grace)
        )
    }

    /// Every third of the grace, and soon after a hold is first waited on, until `shutdown`:
    /// writes this node's record, takes up the holds of stopped nodes' records, and withdraws
    /// the holds nobody waits on.
    pub fn start(&self, engine: Engine, records: Records, shutdown: CancellationToken) {
        let attendance = self.clone();
        let every = (self.inner.grace / 3).max(Duration::from_millis(100));
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => {
                        // What is waited on now is left in the record for the next start.
                        let now = engine.clock().now();
                        if let Err(e) = attendance.write_own(&records, now).await {
                            tracing::warn!(error = %e, "could not record which holds are waited on");
                        }
                        return;
                    }
                    _ = tick.tick() => {}
                    () = attendance.inner.news.notified() => {}
                }
                if let Err(e) = attendance.sweep(&engine, &records).await {
                    tracing::warn!(error = %e, "could not check which holds are waited on");
                }
                tokio::time::sleep(SPACING).await;
            }
        });
        *self.inner.task.lock() = Some(task);
    }

    /// Waits for the sweeping task to end (the server stops): it writes what is waited on
    /// as it ends, so the next start knows.
    pub async fn stopped(&self) {
        let task = self.inner.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    async fn sweep(&self, engine: &Engine, records: &Records) -> Result<(), String> {
        let now = engine.clock().now();
        let grace = self.inner.grace;
        self.write_own(records, now).await?;
        let due: Vec<HoldId> = {
            let state = self.inner.state.lock();
            state
                .left
                .iter()
                .filter(|(_, since)| since.saturating_add(grace) <= now)
                .map(|(id, _)| *id)
                .collect()
        };
        let others = records
            .all_keyed::<Attended>(RecordKind::Attendance, None)
            .await
            .map_err(|e| e.to_string())?;
        let mut elsewhere = BTreeSet::new();
        for other in others.into_iter().filter(|r| r.id != self.inner.node) {
            if other.value.until > now {
                elsewhere.extend(other.value.holds);
                continue;
            }
            // A node that stopped: its waiters get a full grace to come back through this one.
            {
                let mut state = self.inner.state.lock();
                for id in &other.value.holds {
                    if !state.waiting.contains_key(id) {
                        state.left.entry(*id).or_insert(now);
                    }
                }
            }
            let delete = Write::DeleteRecord {
                kind: RecordKind::Attendance,
                id: other.id,
            };
            // Another node may have deleted it first.
            let _ = records.commit(vec![delete], vec![]).await;
        }
        let by = Actor::of(Source::System);
        let reason = self.reason();
        for id in due {
            if self.inner.state.lock().left.remove(&id).is_none() {
                continue; // a waiter came back meanwhile
            }
            if elsewhere.contains(&id) {
                continue; // another node's waiter has it
            }
            match engine.withdraw_by(id, &by, &reason).await {
                Ok(Some(_)) => tracing::info!(hold = %id, "withdrew a hold nobody waits on"),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hold = %id, error = %e, "could not withdraw a hold nobody waits on")
                }
            }
        }
        Ok(())
    }

    /// Writes this node's record when what it attends changed or its record is a third of the
    /// grace from its end; deletes it when it attends nothing.
    async fn write_own(&self, records: &Records, now: Timestamp) -> Result<(), String> {
        let (attended, written, written_until, version) = {
            let state = self.inner.state.lock();
            let attended: BTreeSet<HoldId> = state
                .waiting
                .keys()
                .chain(state.left.keys())
                .copied()
                .collect();
            (
                attended,
                state.written.clone(),
                state.written_until,
                state.version,
            )
        };
        let renew = written_until
            .is_some_and(|until| now.saturating_add(self.inner.grace / 3 * 2) >= until);
        if attended == written && (attended.is_empty() || !renew) {
            return Ok(());
        }
        let node = self.inner.node;
        let (write, version, until) = if attended.is_empty() {
            let delete = Write::DeleteRecord {
                kind: RecordKind::Attendance,
                id: node,
            };
            (delete, 0, None)
        } else {
            let until = now.saturating_add(self.inner.grace);
            let record = Attended {
                until,
                holds: attended.clone(),
            };
            let write = put(
                RecordKind::Attendance,
                node,
                None,
                None,
                version + 1,
                &record,
            )
            .map_err(|e| e.to_string())?;
            (write, version + 1, Some(until))
        };
        let committed = records.commit(vec![write], vec![]).await;
        let mut state = self.inner.state.lock();
        match committed {
            Ok(()) => {
                state.written = attended;
                state.written_until = until;
                state.version = version;
                Ok(())
            }
            Err(e) => {
                // Another node took this record for a stopped node's (this one stalled past
                // its end, say): the next sweep writes it anew.
                if matches!(e, CommitError::Conflict(_)) {
                    state.written.clear();
                    state.written_until = None;
                    state.version = 0;
                }
                Err(e.to_string())
            }
        }
    }
}

impl Waiting {
    /// The wait saw the hold resolved: nobody needs to wait on it again.
    pub fn resolved(mut self) {
        self.resolved = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let now = self.clock.now();
        let mut state = self.attendance.inner.state.lock();
        if let Some(n) = state.waiting.get_mut(&self.hold) {
            *n -= 1;
            if *n == 0 {
                state.waiting.remove(&self.hold);
                if !self.resolved {
                    state.left.insert(self.hold, now);
                }
            }
        }
    }
}
