//! How far the follower has applied the log, and who is waiting for which position.
//!
//! A commit waits until the follower has applied its own events (so what a caller did is in
//! force for its next call). Each waiter is woken exactly once, when its position is reached.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use tokio::sync::oneshot;

pub(crate) struct Progress {
    state: Mutex<State>,
}

struct State {
    applied: u64,
    waiting: BTreeMap<u64, Vec<oneshot::Sender<()>>>,
}

impl Progress {
    pub(crate) fn new(applied: u64) -> Self {
        Progress {
            state: Mutex::new(State {
                applied,
                waiting: BTreeMap::new(),
            }),
        }
    }

    /// Waits until everything up to `seq` is applied.
    pub(crate) async fn reached(&self, seq: u64) {
        let rx = {
            let mut state = self.state.lock();
            if state.applied >= seq {
                return;
            }
            let (tx, rx) = oneshot::channel();
            state.waiting.entry(seq).or_default().push(tx);
            rx
        };
        // The follower lives as long as the engine; a dropped sender means it stopped.
        let _ = rx.await;
    }

    /// Records that everything up to `seq` is applied and wakes those who waited for it.
    pub(crate) fn advance(&self, seq: u64) {
        let ready = {
            let mut state = self.state.lock();
            state.applied = state.applied.max(seq);
            let later = state.waiting.split_off(&(seq + 1));
            std::mem::replace(&mut state.waiting, later)
        };
        for tx in ready.into_values().flatten() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_wake_once_their_position_is_applied() {
        let p = std::sync::Arc::new(Progress::new(3));
        p.reached(2).await;
        let (a, b) = (p.clone(), p.clone());
        let five = tokio::spawn(async move { a.reached(5).await });
        let seven = tokio::spawn(async move { b.reached(7).await });
        tokio::task::yield_now().await;
        p.advance(5);
        tokio::time::timeout(std::time::Duration::from_secs(5), five)
            .await
            .unwrap()
            .unwrap();
        assert!(!seven.is_finished());
        p.advance(9);
        tokio::time::timeout(std::time::Duration::from_secs(5), seven)
            .await
            .unwrap()
            .unwrap();
    }
}
