//! What webhooks and email notices share in sending: one node sends, the one holding the lease
//! named after the sender (renewed as often as turn leases; another node takes over once it
//! ends). It follows the log from a stored cursor of the same name, recording each event's
//! deliveries together with the cursor's next position before sending any, so after a restart
//! or a takeover what was pending is sent again and no event is skipped. Failed attempts wait
//! with exponential backoff.

use std::time::Duration;

use async_trait::async_trait;
use holdpoint_agent::Runtime;
use holdpoint_core::lease::WorkLease;
use holdpoint_core::record::{Records, put};
use holdpoint_core::store::{EventFilter, RecordKind, Write};
use holdpoint_protocol::{Event, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// A sender's stored position in the log: its record's id and version.
pub(crate) struct Cursor {
    name: &'static str,
    id: uuid::Uuid,
    version: u64,
}

impl Cursor {
    /// The write that moves the cursor to `seq`, to commit with the deliveries `seq` calls for.
    pub(crate) fn to(&self, seq: u64) -> Result<Write, ApiError> {
        Ok(put(
            RecordKind::Cursor,
            self.id,
            None,
            Some(self.name.into()),
            self.version + 1,
            &seq,
        )?)
    }

    /// Once that write is committed.
    pub(crate) fn moved(&mut self) {
        self.version += 1;
    }
}

/// Something that sends what events call for, from one node at a time.
#[async_trait]
pub(crate) trait Sender: Clone + Send + Sync + 'static {
    /// Names its lease and its cursor.
    const NAME: &'static str;
    /// What it keeps while following the log.
    type State: Send + 'static;

    fn runtime(&self) -> &Runtime;
    /// Cancelled when its sending stops.
    fn shutdown(&self) -> &CancellationToken;
    /// The same sender, stopping with `stop`.
    fn stopping_with(&self, stop: CancellationToken) -> Self;
    /// Sends again what was pending when sending last stopped; the state to follow the log with.
    async fn resume(&self) -> Result<Self::State, ApiError>;
    /// Records the deliveries `event` calls for together with `cursor.to(event.seq)`, then
    /// sends them. An error stops sending; it starts again shortly with this event.
    async fn schedule(
        &self,
        event: &Event,
        state: &mut Self::State,
        cursor: &mut Cursor,
    ) -> Result<(), ApiError>;
}

fn records<S: Sender>(s: &S) -> &Records {
    s.runtime().records()
}

fn now<S: Sender>(s: &S) -> Timestamp {
    s.runtime().engine().clock().now()
}

/// Starts sending on whichever node holds the sender's lease: this one at once if it is free
/// (always, on a store no other node uses), else once the holder stops renewing it. Sending
/// stops here when the lease is lost, and starts again when it is taken back.
pub(crate) async fn start<S: Sender>(sender: &S) -> Result<(), ApiError> {
    let node = sender.runtime().node();
    let lease = WorkLease::new(records(sender).clone(), S::NAME, node);
    let mut sending = None;
    if lease.hold(now(sender)).await? {
        sending = Some(follow(sender).await?);
    }
    let sender = sender.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = sender.shutdown().cancelled() => return,
                () = tokio::time::sleep(node.renew_every()) => {}
            }
            sending = keep_sending(&sender, &lease, sending).await;
        }
    });
    Ok(())
}

/// Renews or takes the lease, and starts or stops sending accordingly; the token that stops
/// sending when it runs here.
async fn keep_sending<S: Sender>(
    sender: &S,
    lease: &WorkLease,
    sending: Option<CancellationToken>,
) -> Option<CancellationToken> {
    // A follower that stopped (the database went away) is started again.
    let sending = sending.filter(|t| !t.is_cancelled());
    let held = lease.hold(now(sender)).await.unwrap_or_else(|e| {
        tracing::warn!(sender = S::NAME, error = %e, "could not renew a sender's lease");
        false
    });
    match (held, sending) {
        (true, Some(t)) => Some(t),
        (true, None) => follow(sender).await.map_or_else(
            |e| {
                tracing::warn!(sender = S::NAME, error = %e.message, "could not start sending");
                None
            },
            Some,
        ),
        (false, Some(t)) => {
            t.cancel();
            None
        }
        (false, None) => None,
    }
}

/// Sends from here: what was pending, then what the log calls for from the cursor on.
/// Returns the token that stops it (cancelled by itself should the log become unreadable).
async fn follow<S: Sender>(sender: &S) -> Result<CancellationToken, ApiError> {
    let stop = sender.shutdown().child_token();
    let sender = sender.stopping_with(stop.clone());
    let stored = records(&sender)
        .by_key::<u64>(RecordKind::Cursor, None, S::NAME)
        .await?
        .map(|k| (k.id, k.version, k.value));
    // On the very first start, only what happens from now on is sent.
    let from = match &stored {
        Some((_, _, seq)) => *seq,
        None => records(&sender)
            .store()
            .audit_head()
            .await?
            .map_or(0, |h| h.seq),
    };
    let mut state = sender.resume().await?;
    let mut events = sender
        .runtime()
        .engine()
        .events(Some(from), EventFilter::default())
        .await?;
    let mut cursor = match stored {
        Some((id, version, _)) => Cursor {
            name: S::NAME,
            id,
            version,
        },
        None => {
            // Recorded at once: a process killed after an event was committed but before it
            // was scheduled resumes from here, not from a later head that has passed it.
            let mut cursor = Cursor {
                name: S::NAME,
                id: uuid::Uuid::now_v7(),
                version: 0,
            };
            records(&sender)
                .commit(vec![cursor.to(from)?], vec![])
                .await?;
            cursor.moved();
            cursor
        }
    };
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                () = sender.shutdown().cancelled() => return,
                e = events.next() => match e {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::error!(sender = S::NAME, error = %e, "stopped following the log");
                        sender.shutdown().cancel();
                        return;
                    }
                },
            };
            if let Err(e) = sender.schedule(&event, &mut state, &mut cursor).await {
                // Started again shortly from the stored cursor, this event included.
                tracing::warn!(sender = S::NAME, seq = event.seq, error = %e.message, "could not schedule deliveries");
                sender.shutdown().cancel();
                return;
            }
        }
    });
    Ok(stop)
}

/// Waits before attempt `attempts + 1` (the first waits not at all, the second `backoff`,
/// then twice as long each time); false when sending stopped meanwhile.
pub(crate) async fn back_off(
    shutdown: &CancellationToken,
    backoff: Duration,
    attempts: u32,
) -> bool {
    if attempts == 0 {
        return true;
    }
    let wait = backoff.saturating_mul(2u32.saturating_pow(attempts - 1));
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}
