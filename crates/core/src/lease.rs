//! Leases: which node does a piece of work when several nodes share one store.
//!
//! A lease names its holder and when it ends. It lives in a record, so taking it is a write at
//! the version read: of several nodes that find it free, the store lets exactly one win. The
//! holder renews it well before it ends; a node that dies stops renewing, and once the lease
//! has ended another node takes the work over. Clocks of the nodes are compared, so they must
//! agree to well within a lease (NTP does).

use std::time::Duration;

use holdpoint_protocol::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::record::{Records, put};
use crate::store::{CommitError, RecordKind, StoreError};

/// A holder and the end of its lease.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The node (`Node::id`) that holds it.
    pub owner: Uuid,
    pub until: Timestamp,
}

impl Lease {
    pub fn expired(&self, now: Timestamp) -> bool {
        now >= self.until
    }
}

/// This process as one node among those sharing a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// New for each process: a restarted process is another node, and finds its old leases
    /// as anyone's, ended or not.
    pub id: Uuid,
    /// How long a lease lasts after it was taken or last renewed.
    pub lease: Duration,
    /// No other process uses the store (SQLite's file is locked by its one process): every
    /// lease is free for this node, ended or not, so a restart resumes at once.
    pub sole: bool,
}

impl Node {
    pub fn new(lease: Duration, sole: bool) -> Node {
        Node {
            id: Uuid::now_v7(),
            lease,
            sole,
        }
    }

    /// A lease held by this node from `now`.
    pub fn lease_from(&self, now: Timestamp) -> Lease {
        Lease {
            owner: self.id,
            until: now.saturating_add(self.lease),
        }
    }

    /// Whether this node may take `lease` at `now`: it ended, or is this node's own.
    pub fn may_take(&self, lease: &Lease, now: Timestamp) -> bool {
        self.sole || lease.owner == self.id || lease.expired(now)
    }

    /// How often a holder renews its leases, and how often a node looks for ended ones: a
    /// third of the length, so a renewal may fail once (a slow database) without losing it.
    pub fn renew_every(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(10))
    }
}

/// One named piece of work that one node at a time does (sending webhooks, say): a record of
/// kind `Lease` keyed by the name.
pub struct WorkLease {
    records: Records,
    name: String,
    node: Node,
}

impl WorkLease {
    pub fn new(records: Records, name: impl Into<String>, node: Node) -> WorkLease {
        WorkLease {
            records,
            name: name.into(),
            node,
        }
    }

    /// Takes the lease if it is free, or renews it if this node holds it. Whether this node
    /// holds it now; another node's write that won the race is `false`, not an error.
    pub async fn hold(&self, now: Timestamp) -> Result<bool, StoreError> {
        let current = self
            .records
            .by_key::<Lease>(RecordKind::Lease, None, &self.name)
            .await?;
        let (id, version) = match &current {
            None => (Uuid::now_v7(), 1),
            Some(k) if self.node.may_take(&k.value, now) => (k.id, k.version + 1),
            Some(_) => return Ok(false),
        };
        let write = put(
            RecordKind::Lease,
            id,
            None,
            Some(self.name.clone()),
            version,
            &self.node.lease_from(now),
        )?;
        match self.records.commit(vec![write], vec![]).await {
            Ok(()) => Ok(true),
            Err(CommitError::Conflict(_)) => Ok(false),
            Err(CommitError::Store(e)) => Err(e),
        }
    }
}
