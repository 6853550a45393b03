//! Time, behind a trait so deadlines can be tested without waiting.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use holdpoint_protocol::Timestamp;
use tokio::sync::watch;

/// Wall-clock time for deadlines and event timestamps.
#[async_trait]
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
    /// Returns once `now() >= t`.
    async fn sleep_until(&self, t: Timestamp);
}

/// The system's wall-clock time now, for programs that show times (the CLI). Library code
/// takes time from its [`Clock`], so that tests can move it.
pub fn now() -> Timestamp {
    Timestamp::from(std::time::SystemTime::now())
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

/// Wall-clock jumps (NTP, suspend) are noticed within this long.
const MAX_SLEEP: Duration = Duration::from_secs(30);

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        now()
    }

    async fn sleep_until(&self, t: Timestamp) {
        loop {
            let now = self.now();
            if now >= t {
                return;
            }
            tokio::time::sleep(t.duration_since(now).min(MAX_SLEEP)).await;
        }
    }
}

/// A clock that moves only when told to: for tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<Timestamp>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(ManualClock {
            now: watch::Sender::new(start),
        })
    }

    pub fn advance(&self, d: Duration) {
        self.now.send_modify(|t| *t = t.saturating_add(d));
    }

    pub fn set(&self, t: Timestamp) {
        self.now.send_replace(t);
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    async fn sleep_until(&self, t: Timestamp) {
        let mut rx = self.now.subscribe();
        loop {
            if *rx.borrow_and_update() >= t {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_clock_wakes_sleepers_when_advanced() {
        let clock = ManualClock::new(Timestamp::from_millis(0));
        let c = clock.clone();
        let sleeper =
            tokio::spawn(async move { c.sleep_until(Timestamp::from_millis(5000)).await });
        clock.advance(Duration::from_secs(2));
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(3));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(clock.now(), Timestamp::from_millis(5000));
    }
}
