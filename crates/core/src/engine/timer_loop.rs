//! The timer task: fires the due deadlines and reminders of the queue in `open.rs` through
//! the same optimistic path as any decision, so a timeout races a decision fairly.

use std::sync::Weak;
use std::time::Duration;

use holdpoint_protocol::{HoldId, Timestamp};

use super::open::TimerKind;
use super::{Engine, Inner, Scope, Updated};
use crate::error::EngineError;

/// Fires due deadlines and reminders. Holds only a weak reference while it sleeps.
pub(super) async fn run(inner: Weak<Inner>) {
    const BURST: usize = 256;
    loop {
        let Some(engine) = inner.upgrade().map(|inner| Engine { inner }) else {
            return;
        };
        let now = engine.now();
        let due = engine.inner.open.lock().pop_due(now, BURST);
        if !due.is_empty() {
            let mut set = tokio::task::JoinSet::new();
            for (hold, kind) in due {
                let e = engine.clone();
                set.spawn(async move { e.fire(hold, kind).await });
            }
            while set.join_next().await.is_some() {}
            continue;
        }
        let next = engine.inner.open.lock().next_at();
        let clock = engine.inner.clock.clone();
        // A change notified while nobody waits leaves a permit, so none is lost here.
        let notify = engine.inner.timers_changed.clone();
        drop(engine);
        let changed = notify.notified();
        match next {
            Some(at) => {
                tokio::select! {
                    () = clock.sleep_until(at) => {}
                    () = changed => {}
                }
            }
            None => changed.await,
        }
    }
}

impl Engine {
    fn set_timer(&self, hold: HoldId, kind: TimerKind, at: Timestamp) {
        self.inner.open.lock().set_timer(hold, kind, at);
        self.inner.timers_changed.notify_one();
    }

    /// Applies a due deadline or reminder. On a storage failure it tries again shortly: a
    /// hold must never outlive its deadline because one write failed.
    async fn fire(&self, id: HoldId, kind: TimerKind) {
        const RETRY: Duration = Duration::from_secs(1);
        let result = self
            .update(id, &Scope::any(), None, |hold, now| {
                let t = match kind {
                    TimerKind::Deadline => crate::hold::expire(hold, now),
                    TimerKind::Remind => crate::hold::remind(hold, now),
                };
                Ok(t.map(|t| (t, ())))
            })
            .await;
        match result {
            Ok(Updated::Applied(..)) => {}
            Ok(Updated::Unchanged(hold)) => {
                // Still open but not yet due by this node's clock: look again then.
                let at = match kind {
                    TimerKind::Deadline => hold.deadline,
                    TimerKind::Remind => hold.remind_at.filter(|_| !hold.reminded),
                };
                if let Some(at) = at.filter(|_| hold.is_open()) {
                    self.set_timer(id, kind, at.max(self.now()));
                }
            }
            Err(EngineError::NotFound { .. }) => {}
            Err(e) => {
                tracing::warn!(hold = %id, error = %e, "could not apply a hold's {kind:?} timer; retrying");
                self.set_timer(id, kind, self.now().saturating_add(RETRY));
            }
        }
    }
}
