//! Policies that change while the engine runs: worlds' own policies (stored as records, each
//! change a new version recorded in the audit log with who made it and the text's digest) and
//! reloads of the base. A policy is checked whole — parsed, its examples and checks run — before
//! it replaces the one in force; one that fails leaves the old one in force.

use std::sync::Arc;

use holdpoint_protocol::{
    Actor, EventPayload, PolicyReloaded, Principal, WorldPolicy, WorldPolicyState,
};
use uuid::Uuid;

use super::{Engine, check_reachable};
use crate::audit::EventDraft;
use crate::canonical;
use crate::error::EngineError;
use crate::policy::{Layers, Policy, PolicyError, PolicyErrors};
use crate::record;
use crate::roles;
use crate::store::{CommitError, Conflict, RecordKind, Store, StoreError, Transaction};

/// The longest policy text a world may be given.
pub const MAX_POLICY_TEXT: usize = 256 * 1024;

/// The base with every world's stored policy over it.
pub(super) async fn load(store: &dyn Store, mut layers: Layers) -> Result<Layers, StoreError> {
    for r in store.all_records(RecordKind::WorldPolicy, None).await? {
        let version = r.version;
        let stored: WorldPolicy = record::decode(r)?;
        // A stored policy was valid when it was set; one that no longer loads (a newer
        // Holdpoint reads it differently) stops the start rather than leave its world to the
        // base, which may allow more.
        let own = Policy::from_toml_unchecked(&stored.text).map_err(|e| {
            StoreError::new(format!(
                "the policy of world {} (version {version}) no longer loads: {e}",
                stored.world
            ))
        })?;
        layers.set_world(&stored.world, version, own);
    }
    Ok(layers)
}

fn invalid(path: &str, message: impl Into<String>) -> EngineError {
    EngineError::InvalidPolicy(PolicyErrors(vec![PolicyError {
        path: path.into(),
        message: message.into(),
    }]))
}

impl Engine {
    /// `text` as a world's policy, in force over the base as it would be: parsed, with no
    /// locks or floor of its own, its examples and checks run against the policy in force
    /// (the base's locked rules and floor decide there too). Every problem is named.
    fn checked_world_policy(&self, text: &str) -> Result<Policy, EngineError> {
        let own = Policy::from_toml_unchecked(text).map_err(EngineError::InvalidPolicy)?;
        let effective = self.layers().effective(&own);
        let mut problems = own
            .check_world_layer()
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        if let Err(e) = effective.self_check() {
            problems.extend(e.0);
        }
        if problems.is_empty() {
            Ok(effective)
        } else {
            Err(EngineError::InvalidPolicy(PolicyErrors(problems)))
        }
    }

    /// A world's own policy now, and the base it lies on.
    pub async fn world_policy(&self, world: Uuid) -> Result<WorldPolicyState, EngineError> {
        let current = match self
            .inner
            .store
            .record(RecordKind::WorldPolicy, world)
            .await?
        {
            Some(r) => Some(record::decode::<WorldPolicy>(r)?),
            None => None,
        };
        let layers = self.layers();
        Ok(WorldPolicyState {
            current,
            base_digest: layers.base_digest().to_owned(),
            locked: layers.base().locked_rules(),
            mode_floor: layers.base().mode_floor().map(|m| m.as_str().to_owned()),
        })
    }

    /// Every version of a world's policy, oldest first.
    pub async fn world_policy_history(&self, world: Uuid) -> Result<Vec<WorldPolicy>, EngineError> {
        let store = &self.inner.store;
        let records = store
            .all_records(RecordKind::PolicyHistory, Some(world))
            .await?;
        Ok(records
            .into_iter()
            .map(record::decode)
            .collect::<Result<_, _>>()?)
    }

    /// Checks `text` as a world's policy ([`Engine::checked_world_policy`]) and, when it is valid, makes it the world's next version: stored,
    /// recorded in the audit log with `who` and its digest, and in force for the next call.
    /// An invalid text changes nothing and names every problem.
    pub async fn set_world_policy(
        &self,
        who: &Principal,
        world: Uuid,
        text: &str,
    ) -> Result<WorldPolicy, EngineError> {
        if text.len() > MAX_POLICY_TEXT {
            return Err(invalid(
                "",
                format!(
                    "the policy is {} bytes; at most {MAX_POLICY_TEXT} are allowed",
                    text.len()
                ),
            ));
        }
        let effective = self.checked_world_policy(text)?;
        check_reachable(&effective, &self.inner.channels)
            .map_err(|e| invalid("mode", e.to_string()))?;

        let key = world.to_string();
        let current = self
            .inner
            .store
            .record(RecordKind::WorldPolicy, world)
            .await?;
        let version = current.map_or(1, |r| r.version + 1);
        let now = self.now();
        let by = roles::actor_of(who);
        let value = WorldPolicy {
            world: key.clone(),
            version,
            digest: canonical::sha256_hex(text.as_bytes()),
            text: text.to_owned(),
            by: by.clone(),
            at: now,
        };
        let writes = vec![
            record::put(
                RecordKind::WorldPolicy,
                world,
                None,
                Some(key.clone()),
                version,
                &value,
            )?,
            record::put(
                RecordKind::PolicyHistory,
                Uuid::now_v7(),
                Some(world),
                Some(format!("{version:010}")),
                1,
                &value,
            )?,
        ];
        let event = EventDraft {
            at: now,
            world: Some(key.clone()),
            chat: None,
            hold: None,
            actor: by,
            payload: EventPayload::PolicyChanged {
                world: Some(key.clone()),
                version: Some(version),
                digest: value.digest.clone(),
            },
        };
        let tx = Transaction {
            writes,
            events: vec![event.into()],
        };
        match self.commit(tx).await {
            Ok(_) => {}
            Err(CommitError::Conflict(
                Conflict::StaleRecord { .. } | Conflict::RecordExists { .. },
            )) => {
                return Err(EngineError::conflict(
                    "policy_changed",
                    "the world's policy changed meanwhile; read it again and retry",
                ));
            }
            Err(e) => return Err(super::decide::commit_error(e)),
        }
        // In force here already: the commit returned once this node's follower had applied
        // the `policy.changed` event (`follow_world_policy`), as every other node's does.
        Ok(value)
    }

    /// Brings a world's policy up to `version`, the one a `policy.changed` event names,
    /// from its stored record. Every node does this from the log, the node the change was
    /// made through included, so a change through any node is in force on every node: on
    /// this one for its next call after the commit, on another for any call gated after
    /// its read barrier. A record already newer than `version` is installed as it is (a
    /// later event finds it in force); a version already in force is not read again.
    pub(super) async fn follow_world_policy(&self, world: &str, version: u64) {
        if self
            .layers()
            .world(world)
            .is_some_and(|w| w.version >= version)
        {
            return;
        }
        let Ok(id) = Uuid::parse_str(world) else {
            tracing::error!(world, "a policy change names a world that is not an id");
            return;
        };
        let record = loop {
            match self.inner.store.record(RecordKind::WorldPolicy, id).await {
                Ok(record) => break record,
                Err(e) => {
                    tracing::warn!(error = %e, world, version, "could not read a world's changed policy; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        };
        // Gone meanwhile (its world deleted): nothing to install.
        let Some(record) = record else { return };
        let stored = record.version;
        let own = record::decode::<WorldPolicy>(record)
            .map_err(|e| e.to_string())
            .and_then(|p| Policy::from_toml_unchecked(&p.text).map_err(|e| e.to_string()));
        match own {
            Ok(own) => {
                let mut layers = self.inner.policy.write();
                let mut next = Layers::clone(&layers);
                next.set_world(world, stored, own);
                *layers = Arc::new(next);
            }
            // It was checked when it was set; a node that reads it differently (a different
            // Holdpoint) says so loudly rather than stop following the log.
            Err(e) => tracing::error!(
                world,
                version = stored,
                error = %e,
                "a world's changed policy does not load on this node; its previous version stays in force"
            ),
        }
    }

    /// Takes a deleted world's policy out of force (its records went with the world), so
    /// nothing of it outlives the world on any node.
    pub(super) fn forget_world_policy(&self, world: &str) {
        let mut layers = self.inner.policy.write();
        if layers.world(world).is_some() {
            let mut next = Layers::clone(&layers);
            next.remove_world(world);
            *layers = Arc::new(next);
        }
    }

    /// Replaces the base policy with a reloaded one, already checked, and records the change
    /// (by `who`: a person's reload, or Holdpoint's own on a signal) when its text differs.
    /// Each world's examples and checks run against the policy it would then have in force, as
    /// when the world's policy is set: a base that would break one is refused, the world and
    /// its problems named, and the old base stays in force.
    pub async fn reload_policy(
        &self,
        who: Actor,
        policy: Policy,
    ) -> Result<PolicyReloaded, EngineError> {
        let next = self.layers().with_base(policy.clone());
        let mut problems: Vec<PolicyError> = Vec::new();
        let mut worlds: Vec<_> = next.worlds().collect();
        worlds.sort_by_key(|(name, _)| name.as_str());
        for (name, world) in worlds {
            if let Err(e) = world.effective.self_check() {
                problems.extend(e.0.into_iter().map(|p| PolicyError {
                    path: format!("world {name}: {}", p.path),
                    message: format!("{} (under the new base)", p.message),
                }));
            }
        }
        if !problems.is_empty() {
            return Err(EngineError::InvalidPolicy(PolicyErrors(problems)));
        }
        let digest = policy
            .source()
            .map(|t| canonical::sha256_hex(t.as_bytes()))
            .unwrap_or_default();
        let changed = digest != self.layers().base_digest();
        self.set_policy(policy)
            .map_err(|e| invalid("mode", e.to_string()))?;
        if changed {
            let event = EventDraft {
                at: self.now(),
                world: None,
                chat: None,
                hold: None,
                actor: who,
                payload: EventPayload::PolicyChanged {
                    world: None,
                    version: None,
                    digest: digest.clone(),
                },
            };
            let tx = Transaction {
                writes: Vec::new(),
                events: vec![event.into()],
            };
            self.commit(tx).await.map_err(super::decide::commit_error)?;
        }
        Ok(PolicyReloaded { digest, changed })
    }
}

/// Examples shown for each kind of difference a replay finds.
const REPLAY_EXAMPLES: usize = 5;
/// Events a replay reads from the log at a time.
const REPLAY_PAGE: usize = 1000;

impl Engine {
    /// What `text`, as the world's policy, would have decided for the calls recorded in the
    /// world (those of the last `since`, or all), against what happened. The text is checked
    /// as [`Engine::set_world_policy`] checks it; nothing changes.
    pub async fn replay_world_policy(
        &self,
        world: Uuid,
        text: &str,
        since: Option<std::time::Duration>,
    ) -> Result<holdpoint_protocol::ReplayReport, EngineError> {
        let candidate = self.checked_world_policy(text)?;
        let filter = crate::store::EventFilter {
            world: Some(world.to_string()),
            ..Default::default()
        };
        let from = since.map(|d| self.now().saturating_sub(d));
        // A page at a time, to the log's end as it is now: the log may hold millions of
        // events, and replay keeps only what it reports. The next page is read (and decoded,
        // on the store's own thread) while this one is replayed.
        let mut replay = crate::policy::replay::Replay::new(&candidate, REPLAY_EXAMPLES, from);
        let read = |after: u64| {
            let store = self.inner.store.clone();
            let filter = filter.clone();
            tokio::spawn(async move { store.events(after, &filter, REPLAY_PAGE).await })
        };
        let mut next = Some(read(0));
        while let Some(reading) = next.take() {
            let page = reading.await.map_err(|e| {
                EngineError::Store(StoreError::new(format!("a replay's read failed: {e}")))
            })??;
            if page.events.len() == REPLAY_PAGE {
                next = Some(read(page.scanned_to));
            }
            for e in &page.events {
                replay.record(e);
            }
        }
        Ok(replay.finish())
    }
}
