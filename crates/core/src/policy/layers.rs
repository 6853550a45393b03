//! Policy in layers: the server's policy file is the base; a world may have a policy of its
//! own, which replaces the base for that world except where the base binds every world — its
//! `locked` rules and its `mode_floor`.
//!
//! A world's policy in force is one [`Policy`] built when either layer changes: the base's
//! locked rules first, then the world's rules, under the stricter of the world's mode and the
//! floor, with no deadline longer than the base's `max_deadline` (a longer wait is a looser
//! bound: the call's timeout outcome comes later, or never). Strictest-wins then does the rest: a locked `deny` beats any `allow` or `ask`, a
//! locked `ask` beats an `allow` and any `ask` demanding a smaller quorum, and a tie goes to
//! the earlier rule — the locked one, so a world's rule cannot swap in a longer deadline or
//! wider offers either. Evaluating a layered policy costs what evaluating one file costs.

use std::collections::HashMap;
use std::sync::Arc;

use holdpoint_protocol::{Deadline, PolicyLayer, PolicyVersion};

use super::matcher::{Pointer, ToolIndex};
use super::{AskDefaults, Mode, Policy, PolicyError, PolicyErrors};
use crate::canonical;

/// A world's own policy, as stored, and the policy in force for the world.
#[derive(Debug, Clone)]
pub struct WorldLayer {
    pub version: u64,
    pub digest: String,
    /// The world's policy as its text reads, alone.
    pub own: Arc<Policy>,
    /// The policy in force for the world: the base's locked rules and floor over `own`.
    pub effective: Arc<Policy>,
}

/// The base policy and every world's own.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    base: Arc<Policy>,
    base_digest: String,
    worlds: HashMap<String, WorldLayer>,
}

impl Layers {
    pub fn new(base: Policy) -> Layers {
        let base_digest = digest_of(&base);
        Layers {
            base: Arc::new(base),
            base_digest,
            worlds: HashMap::new(),
        }
    }

    pub fn base(&self) -> &Arc<Policy> {
        &self.base
    }

    /// SHA-256 of the base's text; empty when the server runs without a policy file.
    pub fn base_digest(&self) -> &str {
        &self.base_digest
    }

    pub fn world(&self, world: &str) -> Option<&WorldLayer> {
        self.worlds.get(world)
    }

    pub fn worlds(&self) -> impl Iterator<Item = (&String, &WorldLayer)> {
        self.worlds.iter()
    }

    /// The policy in force for `world`, and which versions it is made of.
    pub fn for_world(&self, world: &str) -> (Arc<Policy>, PolicyVersion) {
        match self.worlds.get(world) {
            Some(w) => (
                w.effective.clone(),
                PolicyVersion {
                    base: self.base_digest.clone(),
                    world: Some(w.version),
                },
            ),
            None => (
                self.base.clone(),
                PolicyVersion {
                    base: self.base_digest.clone(),
                    world: None,
                },
            ),
        }
    }

    /// These layers with a new base: every world's policy in force is rebuilt on it.
    pub fn with_base(&self, base: Policy) -> Layers {
        let mut next = Layers::new(base);
        for (world, layer) in &self.worlds {
            let effective = Arc::new(layered(&next.base, &layer.own));
            next.worlds.insert(
                world.clone(),
                WorldLayer {
                    effective,
                    ..layer.clone()
                },
            );
        }
        next
    }

    /// Installs a world's policy, unless a newer version of it is in force already (two
    /// changes applied out of order keep the later one).
    pub fn set_world(&mut self, world: &str, version: u64, own: Policy) {
        if self.worlds.get(world).is_some_and(|w| w.version >= version) {
            return;
        }
        let digest = digest_of(&own);
        let effective = Arc::new(layered(&self.base, &own));
        self.worlds.insert(
            world.to_owned(),
            WorldLayer {
                version,
                digest,
                own: Arc::new(own),
                effective,
            },
        );
    }

    /// Retires a deleted world's policy: a world made later starts from the base.
    pub fn remove_world(&mut self, world: &str) {
        self.worlds.remove(world);
    }

    /// The policy `own` would make in force for a world, on this base.
    pub fn effective(&self, own: &Policy) -> Policy {
        layered(&self.base, own)
    }
}

/// SHA-256 of a policy's text (empty for the built-in default, which has none).
fn digest_of(policy: &Policy) -> String {
    policy
        .source
        .as_deref()
        .map(|t| canonical::sha256_hex(t.as_bytes()))
        .unwrap_or_default()
}

impl Policy {
    /// Names of the rules no world's policy can loosen.
    pub fn locked_rules(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.locked)
            .map(|r| r.name.clone())
            .collect()
    }

    pub fn mode_floor(&self) -> Option<Mode> {
        self.mode_floor
    }

    /// The text the policy was read from.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// Checks that this policy can be a world's: locking rules and setting a floor are the
    /// base's alone.
    pub fn check_world_layer(&self) -> Result<(), PolicyErrors> {
        let mut problems: Vec<PolicyError> = self
            .rules
            .iter()
            .filter(|r| r.locked)
            .map(|r| PolicyError {
                path: format!("rules[{}].locked", r.origin),
                message: "only the server's policy file can lock rules".into(),
            })
            .collect();
        if self.mode_floor.is_some() {
            problems.push(PolicyError {
                path: "mode_floor".into(),
                message: "only the server's policy file can set a mode floor".into(),
            });
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PolicyErrors(problems))
        }
    }
}

/// `own` under the base's locked rules and mode floor.
fn layered(base: &Policy, own: &Policy) -> Policy {
    let mut rules = Vec::with_capacity(own.rules.len());
    // A command line is read once per pointer per call: the base's rules share the world's
    // slot for the same pointer, and take new slots after the world's for others.
    let mut slots: Vec<(Pointer, usize)> = own
        .rules
        .iter()
        .filter_map(|r| r.command.as_ref())
        .map(|c| (c.pointer.clone(), c.slot))
        .collect();
    let mut command_pointers = own.command_pointers;
    // A locked rule asks with the base's deadlines and timeout outcomes where it names none.
    let defaults = Arc::new(AskDefaults {
        tools: base.tools.clone(),
        default_deadline: base.default_deadline,
    });
    for r in base.rules.iter().filter(|r| r.locked) {
        let mut r = r.clone();
        r.layer = Some(PolicyLayer::Base);
        r.defaults = Some(defaults.clone());
        if let Some(c) = &mut r.command {
            c.slot = match slots.iter().find(|(p, _)| *p == c.pointer) {
                Some((_, slot)) => *slot,
                None => {
                    slots.push((c.pointer.clone(), command_pointers));
                    command_pointers += 1;
                    command_pointers - 1
                }
            };
        }
        rules.push(r);
    }
    let locked = rules.len();
    // The base's max_deadline is every world's ceiling: no hold in a world waits longer than
    // the base allows, whatever the world's own deadlines say.
    let ceiling = base.max_deadline;
    rules.extend(own.rules.iter().cloned().map(|mut r| {
        r.layer = Some(PolicyLayer::World);
        r.ask.deadline = r.ask.deadline.map(|d| shorter(d, ceiling));
        r
    }));
    let tools = own
        .tools
        .iter()
        .map(|(name, t)| {
            let mut t = t.clone();
            t.deadline = t.deadline.map(|d| shorter(d, ceiling));
            (name.clone(), t)
        })
        .collect();
    let max_deadline = shorter(own.max_deadline, ceiling);
    let patterns: Vec<(u32, Vec<String>)> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u32, r.tools.clone()))
        .collect();
    // Both layers' patterns compiled on their own; together they compile too. Should that
    // ever fail, the base's locked rules alone still bind the world.
    let index = ToolIndex::build(&patterns).unwrap_or_else(|_| {
        rules.truncate(locked);
        ToolIndex::build(&patterns[..locked]).unwrap_or_default()
    });
    let (mode, mode_layer) = match base.mode_floor {
        Some(floor) if floor.strictness() > own.mode.strictness() => (floor, PolicyLayer::Base),
        _ => (own.mode, PolicyLayer::World),
    };
    Policy {
        mode,
        mode_floor: None,
        mode_layer: Some(mode_layer),
        default_deadline: shorter(own.default_deadline, max_deadline),
        max_deadline,
        tools,
        rules,
        index,
        command_pointers,
        ..own.clone()
    }
}

/// The shorter of two deadlines (`never` is the longest).
fn shorter(a: Deadline, b: Deadline) -> Deadline {
    match (a, b) {
        (Deadline::After(x), Deadline::After(y)) => Deadline::After(x.min(y)),
        (Deadline::Never, d) | (d, Deadline::Never) => d,
    }
}

impl Policy {
    /// The layer that decided an evaluation: the world's (its rule or its mode) or the base's.
    pub fn layer_of(&self, rule: Option<usize>) -> PolicyLayer {
        match rule.and_then(|i| self.rules.get(i)) {
            Some(r) => r.layer.unwrap_or(PolicyLayer::Base),
            None => self.mode_layer.unwrap_or(PolicyLayer::Base),
        }
    }
}
