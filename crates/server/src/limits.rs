//! What one client can make the server hold, and how fast it may ask (`[limits]`): live event
//! streams (per credential and in all), long polls per credential, and requests per second per
//! credential. Pending holds per world and per credential are the engine's caps
//! (`PendingLimits`), counted where holds are raised.
//!
//! Every refusal happens before the request's handler runs, so a refused request has done
//! nothing; a slot taken is given back when its stream or long poll ends, however it ends
//! (its [`Slot`] is dropped with the response or the connection).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use holdpoint_protocol::{Role, TokenId};
use parking_lot::Mutex;

use crate::auth::Caller;
use crate::config::LimitSettings;
use crate::error::ApiError;

/// When to try again after a refused stream: streams end when their clients close them.
const STREAM_RETRY: Duration = Duration::from_secs(5);
/// When to try again after a refused long poll: others end within their timeout.
const WAIT_RETRY: Duration = Duration::from_secs(1);
/// Buckets kept before idle (full) ones are forgotten.
const BUCKETS_KEPT: usize = 10_000;

/// The counters behind the limits. One per server.
pub struct Limiter {
    settings: LimitSettings,
    state: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    streams: HashMap<TokenId, usize>,
    all_streams: usize,
    waits: HashMap<TokenId, usize>,
    buckets: HashMap<TokenId, Bucket>,
}

/// A token bucket: `tokens` requests may be made now; it refills at the rate per second up
/// to the burst.
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Clone, Copy)]
enum Kind {
    Stream,
    Wait,
}

/// A stream or long poll under way; dropping it frees its place.
pub struct Slot {
    limiter: Arc<Limiter>,
    kind: Kind,
    token: TokenId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.limiter.state.lock();
        let state = &mut *state;
        let map = match self.kind {
            Kind::Stream => {
                state.all_streams = state.all_streams.saturating_sub(1);
                &mut state.streams
            }
            Kind::Wait => &mut state.waits,
        };
        if let Some(n) = map.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.token);
            }
        }
    }
}

impl Limiter {
    pub fn new(settings: LimitSettings) -> Arc<Self> {
        Arc::new(Limiter {
            settings,
            state: Mutex::default(),
        })
    }

    /// Live event streams open now.
    pub fn streams(&self) -> usize {
        self.state.lock().all_streams
    }

    /// A place for one more live event stream of `caller`. A tenth of `limits.streams` is kept
    /// for people: agents' streams are refused when the rest is taken, so a flood of agents
    /// cannot keep the web UI from its live updates.
    pub fn stream(self: &Arc<Self>, caller: &Caller) -> Result<Slot, ApiError> {
        let limits = &self.settings;
        let mut state = self.state.lock();
        let mine = state.streams.get(&caller.token).copied().unwrap_or(0);
        if mine >= limits.streams_per_token {
            return Err(ApiError::limited(
                StatusCode::TOO_MANY_REQUESTS,
                "limits.streams_per_token",
                format!(
                    "{} has {mine} live event streams open, as many as allowed",
                    caller.principal.name
                ),
                STREAM_RETRY,
            ));
        }
        let people_only = limits.streams / 10;
        let room = match caller.principal.role {
            Role::Agent => limits.streams - people_only,
            Role::Admin | Role::Approver => limits.streams,
        };
        if state.all_streams >= room {
            return Err(ApiError::limited(
                StatusCode::SERVICE_UNAVAILABLE,
                "limits.streams",
                format!(
                    "this server has {} live event streams open, as many as it takes{}",
                    state.all_streams,
                    if room < limits.streams {
                        " from agents (the rest is kept for people)"
                    } else {
                        ""
                    }
                ),
                STREAM_RETRY,
            ));
        }
        *state.streams.entry(caller.token).or_default() += 1;
        state.all_streams += 1;
        Ok(Slot {
            limiter: self.clone(),
            kind: Kind::Stream,
            token: caller.token,
        })
    }

    /// A place for one more long poll of `caller`.
    pub fn wait(self: &Arc<Self>, caller: &Caller) -> Result<Slot, ApiError> {
        let mut state = self.state.lock();
        let mine = state.waits.entry(caller.token).or_default();
        if *mine >= self.settings.waits_per_token {
            let n = *mine;
            return Err(ApiError::limited(
                StatusCode::TOO_MANY_REQUESTS,
                "limits.waits_per_token",
                format!(
                    "{} has {n} long polls under way, as many as allowed",
                    caller.principal.name
                ),
                WAIT_RETRY,
            ));
        }
        *mine += 1;
        Ok(Slot {
            limiter: self.clone(),
            kind: Kind::Wait,
            token: caller.token,
        })
    }

    /// Counts one request of `caller` (or what stands for one: a call of the MCP gateway in
    /// this process); refused (429) beyond its rate.
    pub fn count(&self, caller: &Caller) -> Result<(), ApiError> {
        self.request(caller, Instant::now()).map_err(|wait| {
            ApiError::limited(
                StatusCode::TOO_MANY_REQUESTS,
                "limits.requests_per_second",
                format!(
                    "{} made more than {} requests a second",
                    caller.principal.name, self.settings.requests_per_second
                ),
                wait,
            )
        })
    }

    /// Takes one request from `caller`'s bucket; when it is empty, how long until it is not.
    fn request(&self, caller: &Caller, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(self.settings.requests_per_second);
        let burst = f64::from(self.settings.request_burst);
        let mut state = self.state.lock();
        if state.buckets.len() >= BUCKETS_KEPT {
            // A full bucket is the same as none.
            state
                .buckets
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
        }
        let bucket = state.buckets.entry(caller.token).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refilled = now.duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refilled).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}

/// The middleware: a caller's request beyond its rate is refused (429) before anything runs.
/// Each credential has its own bucket, so an agent's flood slows that agent only, never the
/// people deciding its holds. Requests without a caller (probes, public pages) are not
/// counted here.
pub async fn rate(State(limiter): State<Arc<Limiter>>, req: Request, next: Next) -> Response {
    if let Some(caller) = req.extensions().get::<Caller>()
        && let Err(refused) = limiter.count(caller)
    {
        return refused.into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use holdpoint_protocol::Principal;

    fn caller(role: Role) -> Caller {
        Caller {
            principal: Principal::new("bot", role),
            token: TokenId::random(),
            world: None,
            csrf: None,
            session: None,
        }
    }

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let limiter = Limiter::new(LimitSettings {
            requests_per_second: 10,
            request_burst: 20,
            ..LimitSettings::default()
        });
        let bot = caller(Role::Agent);
        let t0 = Instant::now();
        for _ in 0..20 {
            limiter.request(&bot, t0).unwrap();
        }
        let wait = limiter.request(&bot, t0).unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100));
        // Another credential has its own bucket.
        limiter.request(&caller(Role::Approver), t0).unwrap();
        let later = t0 + Duration::from_millis(100);
        limiter.request(&bot, later).unwrap();
        assert!(limiter.request(&bot, later).is_err());
    }

    #[test]
    fn a_tenth_of_the_streams_is_kept_for_people() {
        let limiter = Limiter::new(LimitSettings {
            streams: 10,
            streams_per_token: 10,
            ..LimitSettings::default()
        });
        let agent = caller(Role::Agent);
        let slots: Vec<Slot> = (0..9).map(|_| limiter.stream(&agent).unwrap()).collect();
        let other_agent = caller(Role::Agent);
        let refused = limiter.stream(&other_agent).err().unwrap();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        let person = limiter.stream(&caller(Role::Approver)).unwrap();
        assert_eq!(limiter.streams(), 10);
        drop(slots);
        drop(person);
        assert_eq!(limiter.streams(), 0);
        assert!(limiter.state.lock().streams.is_empty());
    }
}
