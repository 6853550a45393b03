//! Turn leases: each turn under way is driven by one node, named in its `ActiveTurn` record
//! with the end of its lease. The node renews the leases of the turns it drives; every node
//! looks, at start and then as often as leases are renewed, for turns whose lease ended (their
//! node died, or stopped) and claims them with a write at the record's version, so one node
//! wins each and drives it on from its last saved step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use holdpoint_core::lease::Lease;
use holdpoint_core::record::{decode, put};
use holdpoint_core::store::{CommitError, RecordKind, StoreError};
use holdpoint_protocol::TurnId;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::runtime::{Inner, Runtime};

/// The record of a turn under way, keyed by its chat (one per chat): the turn, and who drives
/// it until when.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(from = "Stored")]
pub(crate) struct ActiveTurn {
    pub(crate) turn: TurnId,
    /// None in a record written before turns had leases: free for any node.
    pub(crate) lease: Option<Lease>,
}

/// What older versions stored (the turn's id alone), or what this one stores.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Leased { turn: TurnId, lease: Option<Lease> },
    Bare(TurnId),
}

impl From<Stored> for ActiveTurn {
    fn from(s: Stored) -> Self {
        match s {
            Stored::Leased { turn, lease } => ActiveTurn { turn, lease },
            Stored::Bare(turn) => ActiveTurn { turn, lease: None },
        }
    }
}

/// A turn this node drives: how to stop it, and the lease it holds on it.
pub(crate) struct Driving {
    /// Cancelled to stop the driver: by a person (`cancel_turn`), or when the lease was lost.
    pub(crate) cancel: CancellationToken,
    /// Set when another node took the turn over: the driver stops without saving anything.
    pub(crate) lost: Arc<AtomicBool>,
    /// The `ActiveTurn` record's key (the chat) and the version this node wrote last.
    chat: String,
    version: u64,
}

impl Driving {
    pub(crate) fn new(chat: String, version: u64) -> Driving {
        Driving {
            cancel: CancellationToken::new(),
            lost: Arc::new(AtomicBool::new(false)),
            chat,
            version,
        }
    }

    fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }
}

impl Runtime {
    /// The `ActiveTurn` write that gives this node the lease on `turn` from now, over
    /// `version - 1` (1: the turn is new).
    pub(crate) fn lease_write(
        &self,
        turn: TurnId,
        chat: &str,
        version: u64,
    ) -> Result<holdpoint_core::store::Write, StoreError> {
        let lease = self.inner.config.node.lease_from(self.now());
        put(
            RecordKind::ActiveTurn,
            *turn.as_uuid(),
            None,
            Some(chat.to_owned()),
            version,
            &ActiveTurn {
                turn,
                lease: Some(lease),
            },
        )
    }

    /// Claims every turn under way whose lease ended (or, on a store no other node uses,
    /// every one) and drives it here. Each claim is a write at the version read: where two
    /// nodes claim one turn, one wins and the other leaves it.
    pub(crate) async fn take_over_turns(&self) -> Result<(), StoreError> {
        let node = self.inner.config.node;
        let now = self.now();
        for record in self
            .store()
            .all_records(RecordKind::ActiveTurn, None)
            .await?
        {
            let (version, chat) = (record.version, record.key.clone().unwrap_or_default());
            let active: ActiveTurn = decode(record)?;
            if self.inner.running.lock().contains_key(&active.turn) {
                continue;
            }
            if active.lease.is_some_and(|l| !node.may_take(&l, now)) {
                continue;
            }
            let write = self.lease_write(active.turn, &chat, version + 1)?;
            match self.commit(vec![write], vec![]).await {
                Ok(()) => {
                    tracing::info!(turn = %active.turn, "resuming a turn");
                    self.spawn_turn(active.turn, Driving::new(chat, version + 1));
                }
                Err(CommitError::Conflict(_)) => {}
                Err(CommitError::Store(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Renews the lease of every turn driven here: all in one write when none was lost, which
    /// is nearly always (a node driving many turns pays one commit a period, not one a turn).
    /// When that write conflicts, each is renewed alone to find which: a turn whose record
    /// another node wrote meanwhile (it took the turn over, after this node failed to renew in
    /// time) is stopped here without saving anything more; a turn whose record is gone has
    /// ended.
    async fn renew_leases(&self) {
        let held: Vec<(TurnId, String, u64)> = self
            .inner
            .running
            .lock()
            .iter()
            .map(|(id, d)| (*id, d.chat.clone(), d.version))
            .collect();
        if held.is_empty() {
            return;
        }
        let together: Result<Vec<_>, _> = held
            .iter()
            .map(|(turn, chat, version)| self.lease_write(*turn, chat, version + 1))
            .collect();
        let result = match together {
            Ok(writes) => self.commit(writes, vec![]).await,
            Err(e) => Err(CommitError::Store(e)),
        };
        match result {
            Ok(()) => {
                let mut running = self.inner.running.lock();
                for (turn, _, version) in &held {
                    if let Some(driving) = running.get_mut(turn) {
                        driving.version = version + 1;
                    }
                }
                return;
            }
            Err(CommitError::Conflict(_)) => {}
            Err(CommitError::Store(e)) => {
                tracing::warn!(error = %e, "could not renew the leases of this node's turns");
                return;
            }
        }
        for (turn, chat, version) in held {
            let result = match self.lease_write(turn, &chat, version + 1) {
                Ok(write) => self.commit(vec![write], vec![]).await,
                Err(e) => Err(CommitError::Store(e)),
            };
            let mut running = self.inner.running.lock();
            let Some(driving) = running.get_mut(&turn) else {
                continue;
            };
            match result {
                Ok(()) => driving.version = version + 1,
                Err(CommitError::Conflict(_)) => {
                    // Its record was deleted (the turn ended as this ran) or written by
                    // another node (which took it over): either way, nothing more to do here.
                    tracing::debug!(%turn, "the lease on a turn was lost; it stops here");
                    driving.lose();
                }
                Err(CommitError::Store(e)) => {
                    tracing::warn!(%turn, error = %e, "could not renew a turn's lease");
                }
            }
        }
    }
}

/// Renews this node's leases and takes over ended ones, as often as the node renews, for as
/// long as the runtime lives.
pub(crate) async fn keep(inner: Weak<Inner>, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let rt = Runtime { inner };
        rt.renew_leases().await;
        if let Err(e) = rt.take_over_turns().await {
            tracing::warn!(error = %e, "could not look for turns to take over");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn records_without_a_lease_are_read_as_free() {
        let id = TurnId::random();
        let bare: ActiveTurn = serde_json::from_value(serde_json::json!(id.to_string())).unwrap();
        assert_eq!(bare.turn, id);
        assert!(bare.lease.is_none());
        let lease = Lease {
            owner: Uuid::now_v7(),
            until: holdpoint_protocol::Timestamp::from_millis(5),
        };
        let leased = ActiveTurn {
            turn: id,
            lease: Some(lease),
        };
        let back: ActiveTurn =
            serde_json::from_value(serde_json::to_value(&leased).unwrap()).unwrap();
        assert_eq!((back.turn, back.lease), (id, Some(lease)));
    }
}
