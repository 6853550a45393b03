//! When a server that is down is started again: at the next call after it stopped, then, while
//! starting it fails, after a delay that doubles, for a bounded number of attempts. A server
//! that has never started is started in the background when Holdpoint starts, then tried
//! again with the same delays, without a bound: until it comes up its tools are unknown, so no call
//! could start it.

use std::time::Duration;

use tokio::time::Instant;

/// Failed starts in a row after which no more are attempted.
pub(super) const MAX_ATTEMPTS: u32 = 5;

/// The delay after the first failed start; it doubles after each further one.
const FIRST_DELAY: Duration = Duration::from_secs(1);

/// The longest delay between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(30);

/// A server that is not running: why, and when it may be started again.
#[derive(Clone, Debug)]
pub(super) struct Down {
    pub(super) why: String,
    /// Failed starts in a row.
    pub(super) failures: u32,
    next_attempt: Instant,
    /// Whether attempts stop after [`MAX_ATTEMPTS`] failures (not for a server that never
    /// started).
    bounded: bool,
}

/// What a call finds when its server is down.
#[derive(Debug, PartialEq)]
pub(super) enum Attempt {
    /// Start it now.
    Now,
    /// Not before this much time has passed.
    Later(Duration),
    /// No more attempts.
    GaveUp,
}

impl Down {
    /// A server that stopped (it exited, or broke its connection): started at the next call.
    pub(super) fn stopped(why: String, now: Instant) -> Down {
        Down {
            why,
            failures: 0,
            next_attempt: now,
            bounded: true,
        }
    }

    /// A server not started yet: started now and, while that fails, tried again after the
    /// same delays, until it starts.
    pub(super) fn first(now: Instant) -> Down {
        Down {
            why: "it is being started".into(),
            failures: 0,
            next_attempt: now,
            bounded: false,
        }
    }

    /// Whether no start was attempted yet.
    pub(super) fn is_first(&self) -> bool {
        !self.bounded && self.failures == 0
    }

    /// The attempts' bound, when there is one.
    pub(super) fn bound(&self) -> Option<u32> {
        self.bounded.then_some(MAX_ATTEMPTS)
    }

    /// Another start failed, for `why`.
    pub(super) fn failed(&mut self, why: String, now: Instant) {
        self.why = why;
        self.failures += 1;
        self.next_attempt = now + delay(self.failures);
    }

    pub(super) fn attempt(&self, now: Instant) -> Attempt {
        if self.bounded && self.failures >= MAX_ATTEMPTS {
            Attempt::GaveUp
        } else if now < self.next_attempt {
            Attempt::Later(self.next_attempt - now)
        } else {
            Attempt::Now
        }
    }
}

/// The delay after `failures` failed starts in a row.
fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_server_is_started_at_once_then_backs_off_and_gives_up() {
        let t0 = Instant::now();
        let mut down = Down::stopped("it exited".into(), t0);
        assert_eq!(down.attempt(t0), Attempt::Now);
        down.failed("no such file".into(), t0);
        assert_eq!(down.attempt(t0), Attempt::Later(Duration::from_secs(1)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(down.attempt(t1), Attempt::Now);
        down.failed("no such file".into(), t1);
        assert_eq!(down.attempt(t1), Attempt::Later(Duration::from_secs(2)));
        for _ in 2..MAX_ATTEMPTS {
            down.failed("no such file".into(), t1);
        }
        assert_eq!(down.attempt(t1 + MAX_DELAY), Attempt::GaveUp);
        assert_eq!(down.why, "no such file");
    }

    #[test]
    fn a_server_that_never_started_is_tried_after_the_same_delays_without_giving_up() {
        let t0 = Instant::now();
        let mut down = Down::first(t0);
        assert!(down.is_first());
        assert_eq!(down.attempt(t0), Attempt::Now);
        down.failed("refused".into(), t0);
        assert!(!down.is_first());
        assert_eq!(down.attempt(t0), Attempt::Later(Duration::from_secs(1)));
        let mut t = t0;
        for _ in 0..2 * MAX_ATTEMPTS {
            t += MAX_DELAY;
            assert_eq!(down.attempt(t), Attempt::Now);
            down.failed("refused".into(), t);
        }
        assert_eq!(down.attempt(t), Attempt::Later(MAX_DELAY));
        assert_eq!(down.bound(), None);
    }

    #[test]
    fn delays_double_up_to_a_bound() {
        let secs: Vec<u64> = (1..=8).map(|f| delay(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(delay(u32::MAX), MAX_DELAY);
    }
}
