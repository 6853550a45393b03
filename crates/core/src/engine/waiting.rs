//! Waiting for a hold's outcome: a waiter is registered first, then the hold is checked, so a
//! resolution applied by the follower in between is never missed.

use std::time::Duration;

use holdpoint_protocol::{HoldId, Outcome};
use tokio::sync::oneshot;

use super::{Engine, Inner, Scope};
use crate::error::EngineError;

impl Engine {
    /// Waits until the hold is resolved or `timeout` passes (`None`: still open). The hold
    /// keeps its own deadline either way.
    pub async fn wait(
        &self,
        id: HoldId,
        timeout: Duration,
        scope: &Scope,
    ) -> Result<Option<Outcome>, EngineError> {
        let (tx, rx) = oneshot::channel();
        self.inner.waiters.lock().entry(id).or_default().push(tx);
        let guard = WaiterGuard {
            inner: &self.inner,
            id,
        };
        // Registered first, then checked: a resolution applied from here on wakes us, and one
        // applied before has already cleared the hold's timers (or is in the store).
        let known_open = match self.inner.recent.lock().get(id) {
            Some(hold) if scope.admits(&hold) => {
                if let Some(outcome) = &hold.outcome {
                    return Ok(Some(outcome.clone()));
                }
                self.inner.open.lock().tracks(id)
            }
            _ => false,
        };
        if !known_open {
            let hold = self.hold(id, scope).await?;
            if let Some(outcome) = hold.outcome {
                return Ok(Some(outcome));
            }
        }
        let result = tokio::time::timeout(timeout, rx).await;
        drop(guard);
        match result {
            Ok(Ok(outcome)) => Ok(Some(outcome)),
            Ok(Err(_)) => Err(EngineError::Busy),
            Err(_) => Ok(None),
        }
    }
}

/// Removes a waiter's closed sender when its wait ends early (timeout, disconnect).
struct WaiterGuard<'a> {
    inner: &'a Inner,
    id: HoldId,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        let mut waiters = self.inner.waiters.lock();
        if let Some(list) = waiters.get_mut(&self.id) {
            list.retain(|tx| !tx.is_closed());
            if list.is_empty() {
                waiters.remove(&self.id);
            }
        }
    }
}
