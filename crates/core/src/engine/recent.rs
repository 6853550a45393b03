//! Holds this node wrote recently, and those it saw raised on other nodes, so that the hot
//! path (a decision soon after a hold is raised, a wait on a hold just raised) need not read
//! the store.
//!
//! Entries are hints. A change computed from an entry is committed at the entry's version:
//! if the hold changed meanwhile (on another node, say) the store refuses it and the engine
//! recomputes from the store. Only a resolved entry is taken as fact, since a resolved hold
//! never changes again.
//!
//! A resolved version this node is committing is kept aside until the follower applies the
//! event that resolves the hold with the same outcome: from then on it is a fact, and it is
//! kept before the follower wakes the hold's waiters. Otherwise a waiter, woken by the
//! follower before the committing task has run again, would find the hold still open here
//! and read it from the store.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use holdpoint_protocol::{Hold, HoldId, Outcome};
use parking_lot::Mutex;

pub(crate) struct RecentHolds {
    map: HashMap<HoldId, Arc<Hold>>,
    order: VecDeque<HoldId>,
    capacity: usize,
    /// Resolved versions being committed by this node (not facts until committed).
    resolving: HashMap<HoldId, Vec<Arc<Hold>>>,
}

impl RecentHolds {
    pub(crate) fn new(capacity: usize) -> Self {
        RecentHolds {
            map: HashMap::new(),
            order: VecDeque::new(),
            capacity,
            resolving: HashMap::new(),
        }
    }

    /// Keeps aside the resolved versions among `holds`, which this node is about to commit.
    fn resolving(&mut self, holds: &[Arc<Hold>]) {
        if self.capacity == 0 {
            return;
        }
        for h in holds.iter().filter(|h| h.outcome.is_some()) {
            self.resolving.entry(h.id).or_default().push(h.clone());
        }
    }

    /// The commit of `holds` ended, made or not: what was kept aside for it goes.
    fn settled(&mut self, holds: &[Arc<Hold>]) {
        for h in holds.iter().filter(|h| h.outcome.is_some()) {
            if let Some(list) = self.resolving.get_mut(&h.id) {
                list.retain(|kept| !Arc::ptr_eq(kept, h));
                if list.is_empty() {
                    self.resolving.remove(&h.id);
                }
            }
        }
    }

    /// The log resolved hold `id` with `outcome`: the version being committed with that
    /// outcome is the committed one, and is kept.
    pub(crate) fn resolved(&mut self, id: HoldId, outcome: &Outcome) {
        let committed = self
            .resolving
            .get(&id)
            .and_then(|list| list.iter().find(|h| h.outcome.as_ref() == Some(outcome)))
            .cloned();
        if let Some(hold) = committed {
            self.put(hold);
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

/// The resolved versions among a commit's holds, kept aside while the commit is under way:
/// until this is dropped, when the commit ended or its caller went away (a request whose
/// client disconnected drops its commit mid-way), so nothing is left aside for good.
pub(crate) struct Committing<'a> {
    recent: &'a Mutex<RecentHolds>,
    holds: &'a [Arc<Hold>],
}

impl<'a> Committing<'a> {
    pub(crate) fn new(recent: &'a Mutex<RecentHolds>, holds: &'a [Arc<Hold>]) -> Self {
        recent.lock().resolving(holds);
        Committing { recent, holds }
    }
}

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        self.recent.lock().settled(self.holds);
    }
}

#[cfg(test)]
mod tests {
    use holdpoint_protocol::OutcomeStatus;

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

    fn outcome(status: OutcomeStatus) -> Outcome {
        serde_json::from_value(serde_json::json!({
            "status": status, "source": "person", "decided_by": ["alice"],
            "decided_at": "2026-01-01T00:00:01.000Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_resolved_version_being_committed_is_kept_once_the_log_resolves_it_so() {
        let mut r = RecentHolds::new(8);
        let open = hold(1);
        r.put(Arc::new(open.clone()));
        let resolved = |status| {
            let mut h = open.clone();
            h.version = 2;
            h.outcome = Some(outcome(status));
            Arc::new(h)
        };
        let (approved, denied) = (
            resolved(OutcomeStatus::Approved),
            resolved(OutcomeStatus::Denied),
        );
        // Two decisions of this node race; the log resolves the hold as one of them did.
        r.resolving(std::slice::from_ref(&approved));
        r.resolving(std::slice::from_ref(&denied));
        assert_eq!(
            r.get(open.id).unwrap().version,
            1,
            "not a fact before the log says so"
        );
        r.resolved(open.id, &outcome(OutcomeStatus::TimedOut));
        assert_eq!(
            r.get(open.id).unwrap().version,
            1,
            "resolved otherwise: nothing kept"
        );
        r.resolved(open.id, denied.outcome.as_ref().unwrap());
        assert!(Arc::ptr_eq(&r.get(open.id).unwrap(), &denied));
        r.settled(&[approved]);
        r.settled(&[denied]);
        assert!(
            r.resolving.is_empty(),
            "settled commits leave nothing aside"
        );
        // A commit that fails is settled with nothing kept.
        let other = hold(1);
        let mut failed = other.clone();
        failed.outcome = Some(outcome(OutcomeStatus::Approved));
        let failed = Arc::new(failed);
        r.resolving(&[failed.clone(), Arc::new(hold(1))]);
        r.settled(&[failed]);
        assert!(r.resolving.is_empty() && r.get(other.id).is_none());
    }

    #[test]
    fn a_commit_dropped_mid_way_leaves_nothing_aside() {
        let recent = Mutex::new(RecentHolds::new(8));
        let mut h = hold(1);
        h.outcome = Some(outcome(OutcomeStatus::Approved));
        let holds = [Arc::new(h)];
        let committing = Committing::new(&recent, &holds);
        assert_eq!(recent.lock().resolving.len(), 1);
        // A request future dropped while its commit was under way drops this with it.
        drop(committing);
        assert!(recent.lock().resolving.is_empty());
    }
}
