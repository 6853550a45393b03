//! The open holds, counted in all, per world and per raiser (the `requested_by` a hold carries),
//! as the applied log tells: for metrics, and for the caps on what one client may keep open.

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_protocol::{Hold, HoldId};

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

#[derive(Default)]
pub(crate) struct OpenHolds {
    /// Each open hold's world and raiser, to count it off when it resolves (resolution events
    /// name the world but not who raised the hold).
    holds: HashMap<HoldId, (Arc<str>, Arc<str>)>,
    by_world: HashMap<Arc<str>, u64>,
    by_raiser: HashMap<Arc<str>, u64>,
}

impl OpenHolds {
    pub(crate) fn opened(&mut self, hold: &Hold) {
        self.opened_by(hold.id, &hold.world, &hold.requested_by);
    }

    /// Counts open hold `id` of `world`, raised by `raiser` (once, however often it is told).
    pub(crate) fn opened_by(&mut self, id: HoldId, world: &str, raiser: &str) {
        if self.holds.contains_key(&id) {
            return;
        }
        let world = self.intern_world(world);
        let raiser = self.intern_raiser(raiser);
        *self.by_world.entry(world.clone()).or_default() += 1;
        *self.by_raiser.entry(raiser.clone()).or_default() += 1;
        self.holds.insert(id, (world, raiser));
    }

    pub(crate) fn closed(&mut self, id: HoldId) {
        let Some((world, raiser)) = self.holds.remove(&id) else {
            return;
        };
        for (map, key) in [(&mut self.by_world, world), (&mut self.by_raiser, raiser)] {
            if let Some(n) = map.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.holds.len() as u64
    }

    /// The cap that `new` more holds in `world` raised by `raiser` would pass, if any.
    pub(crate) fn exceeds(
        &self,
        limits: &PendingLimits,
        world: &str,
        raiser: &str,
        new: u64,
    ) -> Option<(PendingLimit, u64)> {
        let over = |cap: Option<u64>, open: Option<&u64>| {
            cap.filter(|cap| open.copied().unwrap_or(0) + new > *cap)
        };
        over(limits.per_world, self.by_world.get(world))
            .map(|cap| (PendingLimit::PerWorld, cap))
            .or_else(|| {
                over(limits.per_raiser, self.by_raiser.get(raiser))
                    .map(|cap| (PendingLimit::PerRaiser, cap))
            })
    }

    fn intern_world(&self, name: &str) -> Arc<str> {
        self.by_world
            .get_key_value(name)
            .map_or_else(|| Arc::from(name), |(k, _)| k.clone())
    }

    fn intern_raiser(&self, name: &str) -> Arc<str> {
        self.by_raiser
            .get_key_value(name)
            .map_or_else(|| Arc::from(name), |(k, _)| k.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn hold(world: &str, raiser: &str) -> Hold {
        let h: Hold = serde_json::from_value(serde_json::json!({
            "id": HoldId::random(), "batch": HoldId::random(), "world": world,
            "requested_by": raiser, "created_at": "2026-01-01T00:00:00.000Z", "deadline": null,
            "on_timeout": {"action": "deny"}, "quorum": 1, "offers": [], "status": "pending",
            "version": 1,
            "spec": {"kind": "question", "question": "q", "options": [{"id": "a", "label": "A"}]}
        }))
        .unwrap();
        h
    }

    #[test]
    fn counts_follow_holds_opened_and_closed_per_world_and_raiser() {
        let limits = PendingLimits {
            per_world: Some(2),
            per_raiser: Some(1),
        };
        let mut open = OpenHolds::default();
        let a = hold("w", "bot");
        open.opened(&a);
        open.opened(&a);
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
        assert!(open.by_world.is_empty() && open.by_raiser.is_empty());
    }
}
