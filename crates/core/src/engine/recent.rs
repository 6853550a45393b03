//! Holds this node wrote recently, and those it saw raised on other nodes, so that the hot
//! path (a decision soon after a hold is raised, a wait on a hold just raised) need not read
//! the store.
//!
//! Entries are hints. A change computed from an entry is committed at the entry's version:
//! if the hold changed meanwhile (on another node, say) the store refuses it and the engine
//! recomputes from the store. Only a resolved entry is taken as fact, since a resolved hold
//! never changes again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use holdpoint_protocol::{Hold, HoldId};

pub(crate) struct RecentHolds {
    map: HashMap<HoldId, Arc<Hold>>,
    order: VecDeque<HoldId>,
    capacity: usize,
}

impl RecentHolds {
    pub(crate) fn new(capacity: usize) -> Self {
        RecentHolds {
            map: HashMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    pub(crate) fn get(&self, id: HoldId) -> Option<Arc<Hold>> {
        self.map.get(&id).cloned()
    }

    /// Keeps `hold` unless a newer version is already kept; forgets the oldest beyond capacity.
    pub(crate) fn put(&mut self, hold: Arc<Hold>) {
        if self.capacity == 0 {
            return;
        }
        if let Some(kept) = self.map.get(&hold.id) {
            if kept.version < hold.version {
                self.map.insert(hold.id, hold);
            }
            return;
        }
        while self.order.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
        self.order.push_back(hold.id);
        self.map.insert(hold.id, hold);
    }

    pub(crate) fn forget(&mut self, id: HoldId) {
        // The id stays in `order` until it ages out; `put` then finds nothing to evict twice.
        self.map.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(version: u64) -> Hold {
        let mut h: Hold = serde_json::from_value(serde_json::json!({
            "id": HoldId::random(), "batch": HoldId::random(), "world": "w", "requested_by": "a",
            "created_at": "2026-01-01T00:00:00.000Z", "deadline": null, "on_timeout": {"action": "deny"},
            "quorum": 1, "offers": [], "status": "pending", "version": 1,
            "spec": {"kind": "question", "question": "q", "options": [{"id": "a", "label": "A"}]}
        }))
        .unwrap();
        h.version = version;
        h
    }

    #[test]
    fn keeps_the_newest_version_and_forgets_the_oldest_hold() {
        let mut r = RecentHolds::new(2);
        let (a, mut a2, b, c) = (hold(1), hold(1), hold(1), hold(1));
        a2.id = a.id;
        a2.version = 2;
        r.put(Arc::new(a.clone()));
        r.put(Arc::new(a2.clone()));
        r.put(Arc::new(a.clone()));
        assert_eq!(
            r.get(a.id).unwrap().version,
            2,
            "an older version does not replace a newer one"
        );
        r.put(Arc::new(b.clone()));
        r.put(Arc::new(c.clone()));
        assert!(r.get(a.id).is_none(), "the oldest is forgotten");
        assert!(r.get(b.id).is_some() && r.get(c.id).is_some());
        r.forget(b.id);
        assert!(r.get(b.id).is_none());
        assert!(RecentHolds::new(0).get(c.id).is_none());
    }
}
