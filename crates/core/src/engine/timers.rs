//! Deadlines and reminders of open holds, in time order.
//!
//! Each open hold costs two ordered entries and one map entry (about 200 bytes); the holds
//! themselves stay in the store. Entries come from committed `hold.created` events and leave
//! when a hold resolves, so every node knows every deadline; if several nodes fire the same
//! deadline, the store's version check lets exactly one apply it.

use std::collections::{BTreeSet, HashMap};

use holdpoint_protocol::{Hold, HoldId, Timestamp};

use crate::store::OpenMark;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(crate) enum TimerKind {
    Remind,
    Deadline,
}

#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    queue: BTreeSet<(Timestamp, HoldId, TimerKind)>,
    by_hold: HashMap<HoldId, [Option<Timestamp>; 2]>,
}

fn slot(kind: TimerKind) -> usize {
    match kind {
        TimerKind::Remind => 0,
        TimerKind::Deadline => 1,
    }
}

impl TimerQueue {
    /// Schedules (or moves) one timer of a hold.
    pub(crate) fn set(&mut self, hold: HoldId, kind: TimerKind, at: Timestamp) {
        let slots = self.by_hold.entry(hold).or_default();
        if let Some(old) = slots[slot(kind)].replace(at) {
            self.queue.remove(&(old, hold, kind));
        }
        self.queue.insert((at, hold, kind));
    }

    /// Schedules the timers `hold` has left: its deadline, and its reminder unless sent.
    pub(crate) fn track(&mut self, hold: &Hold) {
        self.track_mark(&OpenMark::of(hold));
    }

    /// Sets the timers of the open hold `mark` describes.
    pub(crate) fn track_mark(&mut self, mark: &OpenMark) {
        if let Some(at) = mark.deadline {
            self.set(mark.id, TimerKind::Deadline, at);
        }
        if let Some(at) = mark.remind_at {
            self.set(mark.id, TimerKind::Remind, at);
        }
    }

    /// Drops every timer of a hold.
    pub(crate) fn clear(&mut self, hold: HoldId) {
        if let Some(slots) = self.by_hold.remove(&hold) {
            for (kind, at) in [TimerKind::Remind, TimerKind::Deadline]
                .into_iter()
                .zip(slots)
            {
                if let Some(at) = at {
                    self.queue.remove(&(at, hold, kind));
                }
            }
        }
    }

    pub(crate) fn next_at(&self) -> Option<Timestamp> {
        self.queue.first().map(|(at, _, _)| *at)
    }

    /// Removes and returns up to `max` timers due at `now`.
    pub(crate) fn pop_due(&mut self, now: Timestamp, max: usize) -> Vec<(HoldId, TimerKind)> {
        let mut due = Vec::new();
        while due.len() < max {
            match self.queue.first() {
                Some(&(at, hold, kind)) if at <= now => {
                    self.queue.pop_first();
                    if let Some(slots) = self.by_hold.get_mut(&hold) {
                        slots[slot(kind)] = None;
                        if slots.iter().all(Option::is_none) {
                            self.by_hold.remove(&hold);
                        }
                    }
                    due.push((hold, kind));
                }
                _ => break,
            }
        }
        due
    }

    /// Whether the hold is open as far as the applied log tells (holds that never expire are
    /// not tracked).
    pub(crate) fn tracks(&self, hold: HoldId) -> bool {
        self.by_hold.contains_key(&hold)
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_pop_in_time_order_and_clear_per_hold() {
        let mut q = TimerQueue::default();
        let (a, b) = (HoldId::random(), HoldId::random());
        let t = Timestamp::from_millis;
        q.set(a, TimerKind::Deadline, t(30));
        q.set(a, TimerKind::Remind, t(10));
        q.set(b, TimerKind::Deadline, t(20));
        assert_eq!(q.next_at(), Some(t(10)));
        assert_eq!(
            q.pop_due(t(20), 10),
            vec![(a, TimerKind::Remind), (b, TimerKind::Deadline)]
        );
        q.set(a, TimerKind::Deadline, t(40));
        assert_eq!(q.len(), 1, "moving a timer replaces it");
        q.clear(a);
        assert_eq!((q.len(), q.next_at()), (0, None));
        assert!(q.by_hold.is_empty());
    }

    #[test]
    fn pop_due_respects_its_bound() {
        let mut q = TimerQueue::default();
        for _ in 0..5 {
            q.set(
                HoldId::random(),
                TimerKind::Deadline,
                Timestamp::from_millis(1),
            );
        }
        assert_eq!(q.pop_due(Timestamp::from_millis(1), 3).len(), 3);
        assert_eq!(q.len(), 2);
    }
}
