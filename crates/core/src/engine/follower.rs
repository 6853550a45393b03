//! Follows the store's committed events (this node's and, on a shared store, every other
//! node's) and keeps the engine's in-memory views current: waiters, timers, grants, worlds'
//! policies, and the human channels.

use std::sync::{Arc, Weak};

use holdpoint_protocol::{Event, EventPayload};
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::{Engine, Inner};
use crate::store::EventFilter;

pub(super) async fn run(inner: Weak<Inner>, mut rx: Receiver<Arc<Event>>, mut last: u64) {
    loop {
        let mut received = rx.recv().await;
        let Some(engine) = inner.upgrade().map(|inner| Engine { inner }) else {
            return;
        };
        // Apply everything already waiting, then wake the commits it covers, once.
        loop {
            match received {
                Ok(event) if event.seq <= last => {}
                Ok(event) if event.seq == last + 1 => {
                    last = event.seq;
                    engine.apply(&event).await;
                }
                // A gap or a lag: read what was missed from the log.
                Ok(_) | Err(RecvError::Lagged(_)) => last = engine.read_missed(last).await,
                Err(RecvError::Closed) => return,
            }
            received = match rx.try_recv() {
                Ok(event) => Ok(event),
                Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
            };
        }
        engine.inner.progress.advance(last);
    }
}

impl Engine {
    async fn read_missed(&self, mut last: u64) -> u64 {
        loop {
            match self
                .inner
                .store
                .events(last, &EventFilter::default(), 1024)
                .await
            {
                Ok(page) => {
                    for event in &page.events {
                        if event.seq > last {
                            last = event.seq;
                            self.apply(event).await;
                        }
                    }
                    if page.events.len() < 1024 {
                        return last;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not read missed events; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
    }

    async fn apply(&self, event: &Arc<Event>) {
        match &event.payload {
            EventPayload::HoldCreated { hold } => {
                self.inner.open.lock().opened(hold);
                // A hint for deciding it here though another node raised it (recent.rs);
                // this node's own holds are kept already, by the commit that wrote them.
                let mut recent = self.inner.recent.lock();
                if recent.get(hold.id).is_none() {
                    recent.put(hold.clone());
                }
                drop(recent);
                self.inner.timers_changed.notify_one();
            }
            EventPayload::HoldDecided { outcome }
            | EventPayload::HoldExpired { outcome }
            | EventPayload::HoldWithdrawn { outcome } => {
                if let Some(id) = event.hold {
                    self.inner.open.lock().closed(id);
                    // Before its waiters wake: what they read then is the resolved hold.
                    self.inner.recent.lock().resolved(id, outcome);
                    let waiting = self.inner.waiters.lock().remove(&id);
                    for tx in waiting.into_iter().flatten() {
                        let _ = tx.send(outcome.clone());
                    }
                }
            }
            EventPayload::GrantCreated { grant } => self.inner.grants.write().insert(grant.clone()),
            EventPayload::GrantRevoked { grant } => self.inner.grants.write().remove(*grant),
            // Before the progress this event makes is announced, so neither a commit nor a
            // read barrier waiting for it returns before the new version is in force.
            EventPayload::PolicyChanged {
                world: Some(world),
                version: Some(version),
                ..
            } => self.follow_world_policy(world, *version).await,
            EventPayload::WorldDeleted { world } => self.forget_world_policy(&world.to_string()),
            _ => {}
        }
        if event.hold.is_some() {
            for channel in &self.inner.channels {
                channel.notify(event);
            }
        }
    }
}
