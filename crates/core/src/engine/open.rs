//! The open holds, as the applied log tells: who raised each where (counted per world and per
//! raiser, for metrics and for the caps on what one client may keep open) and its timers (the
//! deadline, and the reminder while it is due), in time order.
//!
//! One structure for both, because an engine keeps every open hold in memory and there may be
//! millions: each costs one map entry of 40 bytes (its id, its world's and raiser's numbers, two
//! times) and at most one entry of 24 bytes in the time-ordered queue (its next timer, not
//! both), about 120 bytes in all with the containers' slack; the holds themselves stay in the
//! store. Entries come from committed `hold.created` events (and, at start, from the store's
//! marks of its open holds) and leave when a hold resolves, so every node knows every deadline;
//! if several nodes fire the same deadline, the store's version check lets exactly one apply it.

use std::collections::BTreeSet;
use std::sync::Arc;

// foldhash, seeded per map, rather than SipHash: start inserts every open hold, and its hash
// is a few times cheaper while still keyed against chosen collisions.
use foldhash::HashMap;

use holdpoint_protocol::{Hold, HoldId, Timestamp};

use crate::store::OpenMark;

/// Caps on open holds that a raise through [`Engine::gate_all`](super::Engine::gate_all) may
/// not pass; `None`: no cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingLimits {
    /// Open holds in one world.
    pub per_world: Option<u64>,
    /// Open holds raised by one principal (by its name, as holds record it).
    pub per_raiser: Option<u64>,
}

/// Which cap a raise would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingLimit {
    PerWorld,
    PerRaiser,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TimerKind {
    Remind,
    Deadline,
}

/// A time in milliseconds since the epoch, or none (`NONE`): half the size of an
/// `Option<Timestamp>`.
type Millis = i64;
const NONE: Millis = Millis::MAX;

fn millis(at: Option<Timestamp>) -> Millis {
    at.map_or(NONE, Timestamp::as_millis)
}

/// One open hold.
#[derive(Clone, Copy)]
struct Open {
    world: u32,
    raiser: u32,
    remind: Millis,
    deadline: Millis,
}

impl Open {
    fn slot(&mut self, kind: TimerKind) -> &mut Millis {
        match kind {
            TimerKind::Remind => &mut self.remind,
            TimerKind::Deadline => &mut self.deadline,
        }
    }

    /// When its next timer is due, if it has one.
    fn next(&self) -> Option<Millis> {
        Some(self.remind.min(self.deadline)).filter(|&at| at != NONE)
    }

    fn timers(&self) -> usize {
        usize::from(self.remind != NONE) + usize::from(self.deadline != NONE)
    }
}

/// Names (of worlds, of raisers) numbered while they have open holds, with how many each has.
#[derive(Default)]
struct Names {
    numbers: HashMap<Arc<str>, u32>,
    slots: Vec<(Arc<str>, u64)>,
    /// Numbers whose name has no open hold left, to be given again.
    free: Vec<u32>,
    /// The number given last: holds come in runs of one world and raiser (a batch), and a
    /// comparison costs less than a hash.
    last: u32,
}

impl Names {
    /// Counts one more open hold of `name`; its number.
    fn add(&mut self, name: &str) -> u32 {
        // A slot with open holds names its number; one without is free, whatever it names.
        if let Some(slot) = self.slots.get_mut(self.last as usize)
            && slot.1 > 0
            && *slot.0 == *name
        {
            slot.1 += 1;
            return self.last;
        }
        if let Some(&n) = self.numbers.get(name) {
            self.slots[n as usize].1 += 1;
            self.last = n;
            return n;
        }
        let name: Arc<str> = Arc::from(name);
        let n = match self.free.pop() {
            Some(n) => {
                self.slots[n as usize] = (name.clone(), 1);
                n
            }
            None => {
                self.slots.push((name.clone(), 1));
                (self.slots.len() - 1) as u32
            }
        };
        self.numbers.insert(name, n);
        self.last = n;
        n
    }

    /// Counts one open hold of the name numbered `n` less.
    fn remove(&mut self, n: u32) {
        let slot = &mut self.slots[n as usize];
        slot.1 -= 1;
        if slot.1 == 0 {
            self.numbers.remove(&slot.0);
            self.free.push(n);
        }
    }

    fn open(&self, name: &str) -> u64 {
        self.numbers
            .get(name)
            .map_or(0, |&n| self.slots[n as usize].1)
    }
}

/// The open holds' entries, in two maps by one random bit of each id, so that start fills
/// them on two cores: with ten million open, filling one map took two seconds on one core,
/// most of it the kernel zeroing its fresh memory as the inserts first touched it.
#[derive(Default)]
struct Entries([HashMap<HoldId, Open>; 2]);

impl Entries {
    /// The map of `id`: by the last byte of its random part.
    fn of(id: HoldId) -> usize {
        usize::from(id.as_uuid().as_bytes()[15] & 1)
    }

    fn map(&self, id: HoldId) -> &HashMap<HoldId, Open> {
        &self.0[Self::of(id)]
    }

    fn map_mut(&mut self, id: HoldId) -> &mut HashMap<HoldId, Open> {
        &mut self.0[Self::of(id)]
    }

    fn len(&self) -> usize {
        self.0.iter().map(HashMap::len).sum()
    }
}

#[derive(Default)]
pub(crate) struct OpenHolds {
    holds: Entries,
    worlds: Names,
    raisers: Names,
    /// Each open hold's next timer, in time order.
    queue: BTreeSet<(Millis, HoldId)>,
    /// Timers set, reminders and deadlines together.
    timers: usize,
}

impl OpenHolds {
    pub(crate) fn opened(&mut self, hold: &Hold) {
        self.opened_mark(&OpenMark::of(hold));
    }

    /// Starts taking in the open holds read at start ([`Loading`]).
    pub(crate) fn loading() -> Loading {
        Loading::default()
    }

    /// Tracks the open hold `mark` describes (once, however often it is told).
    pub(crate) fn opened_mark(&mut self, mark: &OpenMark) {
        let std::collections::hash_map::Entry::Vacant(entry) =
            self.holds.map_mut(mark.id).entry(mark.id)
        else {
            return;
        };
        let open = Self::counted(&mut self.worlds, &mut self.raisers, &mut self.timers, mark);
        if let Some(at) = open.next() {
            self.queue.insert((at, mark.id));
        }
        entry.insert(open);
    }

    /// The entry of the open hold `mark` describes, its names and timers counted.
    fn counted(
        worlds: &mut Names,
        raisers: &mut Names,
        timers: &mut usize,
        mark: &OpenMark,
    ) -> Open {
        let open = Open {
            world: worlds.add(&mark.world),
            raiser: raisers.add(&mark.requested_by),
            remind: millis(mark.remind_at),
            deadline: millis(mark.deadline),
        };
        *timers += open.timers();
        open
    }

    /// Forgets a resolved hold and its timers.
    pub(crate) fn closed(&mut self, id: HoldId) {
        let Some(open) = self.holds.map_mut(id).remove(&id) else {
            return;
        };
        self.worlds.remove(open.world);
        self.raisers.remove(open.raiser);
        self.timers -= open.timers();
        if let Some(at) = open.next() {
            self.queue.remove(&(at, id));
        }
    }

    /// Sets (or moves) one timer of an open hold; nothing for a hold not open.
    pub(crate) fn set_timer(&mut self, id: HoldId, kind: TimerKind, at: Timestamp) {
        let Some(open) = self.holds.map_mut(id).get_mut(&id) else {
            return;
        };
        let before = open.next();
        let slot = open.slot(kind);
        if *slot == NONE {
            self.timers += 1;
        }
        *slot = at.as_millis();
        let after = open.next();
        if before != after {
            if let Some(at) = before {
                self.queue.remove(&(at, id));
            }
            if let Some(at) = after {
                self.queue.insert((at, id));
            }
        }
    }

    /// When the next timer is due.
    pub(crate) fn next_at(&self) -> Option<Timestamp> {
        self.queue
            .first()
            .map(|&(at, _)| Timestamp::from_millis(at))
    }

    /// Removes and returns the timers due at `now`, up to `max` holds' worth.
    pub(crate) fn pop_due(&mut self, now: Timestamp, max: usize) -> Vec<(HoldId, TimerKind)> {
        let now = now.as_millis();
        let mut due = Vec::new();
        for _ in 0..max {
            let Some(&(at, id)) = self.queue.first().filter(|&&(at, _)| at <= now) else {
                break;
            };
            self.queue.pop_first();
            let Some(open) = self.holds.map_mut(id).get_mut(&id) else {
                continue;
            };
            for kind in [TimerKind::Remind, TimerKind::Deadline] {
                let slot = open.slot(kind);
                if *slot == at {
                    *slot = NONE;
                    self.timers -= 1;
                    due.push((id, kind));
                }
            }
            if let Some(next) = open.next() {
                self.queue.insert((next, id));
            }
        }
        due
    }

    /// Whether the hold is open as far as the applied log tells.
    pub(crate) fn tracks(&self, id: HoldId) -> bool {
        self.holds.map(id).contains_key(&id)
    }

    pub(crate) fn total(&self) -> u64 {
        self.holds.len() as u64
    }

    /// Timers set: each open hold's deadline, and its reminder while due.
    pub(crate) fn timers(&self) -> usize {
        self.timers
    }

    /// The cap that `new` more holds in `world` raised by `raiser` would pass, if any.
    pub(crate) fn exceeds(
        &self,
        limits: &PendingLimits,
        world: &str,
        raiser: &str,
        new: u64,
    ) -> Option<(PendingLimit, u64)> {
        let over = |cap: Option<u64>, open: u64| cap.filter(|cap| open + new > *cap);
        over(limits.per_world, self.worlds.open(world))
            .map(|cap| (PendingLimit::PerWorld, cap))
            .or_else(|| {
                over(limits.per_raiser, self.raisers.open(raiser))
                    .map(|cap| (PendingLimit::PerRaiser, cap))
            })
    }
}

/// The open holds as start reads them, taken in page by page and then built at once: the map
/// made at its size, and the queue from its entries sorted, which packs its nodes full (with
/// ten million open, 95 bytes a hold after a restart against 117 inserted one by one).
/// Kept a page to a vector: one vector for them all grew by doubling, which with millions
/// open touched and copied twice the memory.
#[derive(Default)]
pub(crate) struct Loading {
    open: OpenHolds,
    holds: Vec<Vec<(HoldId, Open)>>,
    queue: Vec<Vec<(Millis, HoldId)>>,
}

impl Loading {
    /// Takes in one page of marks.
    pub(crate) fn add_page<'a>(&mut self, marks: impl ExactSizeIterator<Item = &'a OpenMark>) {
        let open = &mut self.open;
        let mut holds = Vec::with_capacity(marks.len());
        let mut queue = Vec::with_capacity(marks.len());
        for mark in marks {
            let entry =
                OpenHolds::counted(&mut open.worlds, &mut open.raisers, &mut open.timers, mark);
            if let Some(at) = entry.next() {
                queue.push((at, mark.id));
            }
            holds.push((mark.id, entry));
        }
        self.holds.push(holds);
        self.queue.push(queue);
    }

    /// The maps and the queue, built at once on cores of their own: with millions open,
    /// each takes a second or more (most of it the kernel zeroing their fresh memory).
    pub(crate) fn done(self) -> OpenHolds {
        let Loading {
            mut open,
            holds,
            queue,
        } = self;
        let holds = &holds;
        let (twice, queue) = std::thread::scope(|scope| {
            let queue = scope.spawn(|| {
                let mut all = Vec::with_capacity(queue.iter().map(Vec::len).sum());
                for page in queue {
                    all.extend(page);
                }
                BTreeSet::from_iter(all)
            });
            let [first, second] = &mut open.holds.0;
            let second = scope.spawn(|| fill(second, 1, holds));
            let mut twice = fill(first, 0, holds);
            twice.extend(joined(second.join()));
            (twice, joined(queue.join()))
        });
        // Each hold is read once (parts and their pages are disjoint ranges of positions);
        // were one read twice, it is counted once.
        for entry in twice {
            open.worlds.remove(entry.world);
            open.raisers.remove(entry.raiser);
            open.timers -= entry.timers();
        }
        open.queue = queue;
        open
    }
}

/// Fills map number `n` with its share of `holds`; the entries found there already.
fn fill(map: &mut HashMap<HoldId, Open>, n: usize, holds: &[Vec<(HoldId, Open)>]) -> Vec<Open> {
    let mine = || {
        holds
            .iter()
            .flatten()
            .filter(|(id, _)| Entries::of(*id) == n)
    };
    map.reserve(mine().count());
    mine()
        .filter_map(|(id, entry)| map.insert(*id, *entry))
        .collect()
}

/// What a scoped thread returned; its panic, carried on.
fn joined<T>(result: std::thread::Result<T>) -> T {
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn mark(world: &str, raiser: &str, remind: Option<i64>, deadline: Option<i64>) -> OpenMark {
        OpenMark {
            id: HoldId::random(),
            world: Arc::from(world),
            requested_by: Arc::from(raiser),
            deadline: deadline.map(Timestamp::from_millis),
            remind_at: remind.map(Timestamp::from_millis),
        }
    }

    #[test]
    fn counts_follow_holds_opened_and_closed_per_world_and_raiser() {
        let limits = PendingLimits {
            per_world: Some(2),
            per_raiser: Some(1),
        };
        let mut open = OpenHolds::default();
        let a = mark("w", "bot", None, None);
        open.opened_mark(&a);
        open.opened_mark(&a);
        assert_eq!(open.total(), 1);
        assert_eq!(
            open.exceeds(&limits, "w", "bot", 1),
            Some((PendingLimit::PerRaiser, 1))
        );
        assert_eq!(open.exceeds(&limits, "w", "other", 1), None);
        assert_eq!(
            open.exceeds(&limits, "w", "other", 2),
            Some((PendingLimit::PerWorld, 2))
        );
        open.closed(a.id);
        open.closed(a.id);
        assert_eq!(open.total(), 0);
        assert_eq!(open.exceeds(&limits, "w", "bot", 1), None);
        assert!(open.worlds.numbers.is_empty() && open.raisers.numbers.is_empty());
    }

    #[test]
    fn a_name_s_number_is_given_again_once_it_has_no_open_hold() {
        let mut open = OpenHolds::default();
        let (a, b) = (mark("w1", "x", None, None), mark("w2", "x", None, None));
        open.opened_mark(&a);
        open.opened_mark(&b);
        open.closed(a.id);
        let c = mark("w3", "x", None, None);
        open.opened_mark(&c);
        assert_eq!(open.worlds.slots.len(), 2, "w3 took w1's number");
        assert_eq!(
            (
                open.worlds.open("w1"),
                open.worlds.open("w2"),
                open.worlds.open("w3"),
                open.raisers.open("x")
            ),
            (0, 1, 1, 2)
        );
    }

    #[test]
    fn timers_pop_in_time_order_and_clear_per_hold() {
        let mut q = OpenHolds::default();
        let a = mark("w", "r", Some(10), Some(30));
        let b = mark("w", "r", None, Some(20));
        let never = mark("w", "r", None, None);
        for m in [&a, &b, &never] {
            q.opened_mark(m);
        }
        assert_eq!((q.timers(), q.queue.len()), (3, 2), "one queued per hold");
        let t = Timestamp::from_millis;
        assert_eq!(q.next_at(), Some(t(10)));
        assert_eq!(
            q.pop_due(t(20), 10),
            vec![(a.id, TimerKind::Remind), (b.id, TimerKind::Deadline)]
        );
        assert_eq!(
            q.next_at(),
            Some(t(30)),
            "a's deadline queued after its reminder"
        );
        q.set_timer(a.id, TimerKind::Deadline, t(40));
        assert_eq!((q.timers(), q.next_at()), (1, Some(t(40))), "moved");
        q.set_timer(never.id, TimerKind::Deadline, t(5));
        assert_eq!(q.next_at(), Some(t(5)));
        q.closed(never.id);
        q.closed(a.id);
        assert_eq!((q.timers(), q.next_at()), (0, None));
        q.set_timer(a.id, TimerKind::Deadline, t(1));
        assert_eq!(q.next_at(), None, "a closed hold gets no timer");
        assert!(q.tracks(b.id) && !q.tracks(a.id), "b is open, due or not");
    }

    #[test]
    fn a_reminder_and_deadline_due_together_pop_together() {
        let mut q = OpenHolds::default();
        let a = mark("w", "r", Some(10), Some(10));
        q.opened_mark(&a);
        assert_eq!(
            q.pop_due(Timestamp::from_millis(10), 1),
            vec![(a.id, TimerKind::Remind), (a.id, TimerKind::Deadline)]
        );
        assert_eq!((q.timers(), q.queue.len()), (0, 0));
    }

    #[test]
    fn holds_loaded_at_start_are_tracked_as_if_opened_one_by_one() {
        let marks: Vec<_> = (0..50)
            .map(|i| {
                let world = format!("w{}", i % 3);
                let raiser = if i % 7 == 0 { "x" } else { "y" };
                let remind = (i % 2 == 0).then_some(1000 - i);
                let deadline = (i % 5 != 0).then_some(2000 - i);
                mark(&world, raiser, remind, deadline)
            })
            .collect();
        let mut one_by_one = OpenHolds::default();
        let mut loading = OpenHolds::loading();
        for m in &marks {
            one_by_one.opened_mark(m);
        }
        // Pages of 16, and one hold read twice.
        for page in marks.chunks(16) {
            loading.add_page(page.iter());
        }
        loading.add_page([&marks[3]].into_iter());
        let mut loaded = loading.done();
        assert_eq!(loaded.total(), 50, "a hold read twice is counted once");
        assert_eq!(loaded.timers(), one_by_one.timers());
        assert_eq!(loaded.queue, one_by_one.queue);
        for name in ["w0", "w1", "w2"] {
            assert_eq!(loaded.worlds.open(name), one_by_one.worlds.open(name));
        }
        assert_eq!(
            (loaded.raisers.open("x"), loaded.raisers.open("y")),
            (8, 42)
        );
        let end = Timestamp::from_millis(5000);
        assert_eq!(loaded.pop_due(end, 100), one_by_one.pop_due(end, 100));
    }

    #[test]
    fn pop_due_respects_its_bound() {
        let mut q = OpenHolds::default();
        for _ in 0..5 {
            q.opened_mark(&mark("w", "r", None, Some(1)));
        }
        assert_eq!(q.pop_due(Timestamp::from_millis(1), 3).len(), 3);
        assert_eq!(q.queue.len(), 2);
    }
}
