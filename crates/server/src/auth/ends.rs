//! The end of a credential — a token revoked, a browser session signed out or expired — ends
//! every request under way with it: live event streams, long polls, the MCP gateway's
//! streams. The guard watches each request's credential (`Ends::watch`); a revocation is
//! learnt from the event log, which every node follows, so it ends them on every node; a
//! session signed out on this node ends at once, and sessions are checked every second for
//! the rest (signed out on another node, expired).

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use holdpoint_core::Engine;
use holdpoint_protocol::{EventPayload, TokenId};
use http_body::Frame;
use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::{Caller, Credentials};

/// How often the sessions with requests under way are checked.
const SESSION_CHECK: Duration = Duration::from_secs(1);

/// The credentials of the requests under way. Cheap to clone.
#[derive(Clone, Default)]
pub struct Ends {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    live: HashMap<Key, Live>,
    /// Every token revoked since this process started (revocations are rare): a request
    /// whose credential was checked just before its revocation was learnt is ended when it
    /// starts to be watched.
    revoked: HashSet<TokenId>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Token(TokenId),
    /// A browser session, by the SHA-256 of its cookie.
    Session(String),
}

struct Live {
    token: TokenId,
    end: CancellationToken,
    requests: usize,
}

/// One request's watch on its credential; the credential's count of requests goes with it.
pub struct Watch {
    ends: Ends,
    key: Key,
    end: CancellationToken,
}

impl Ends {
    /// Watches `caller`'s credential for the length of a request.
    pub fn watch(&self, caller: &Caller) -> Watch {
        let key = match &caller.session {
            Some(session) => Key::Session(session.clone()),
            None => Key::Token(caller.token),
        };
        let mut state = self.state.lock();
        let revoked = state.revoked.contains(&caller.token);
        let live = state.live.entry(key.clone()).or_insert_with(|| Live {
            token: caller.token,
            end: CancellationToken::new(),
            requests: 0,
        });
        live.requests += 1;
        if revoked {
            live.end.cancel();
        }
        let end = live.end.clone();
        drop(state);
        Watch {
            ends: self.clone(),
            key,
            end,
        }
    }

    /// `token` was revoked: its requests end, and those of the sessions signed in with it.
    pub fn revoked(&self, token: TokenId) {
        let mut state = self.state.lock();
        state.revoked.insert(token);
        for live in state.live.values().filter(|l| l.token == token) {
            live.end.cancel();
        }
    }

    /// The session of this cookie's hash ended.
    pub fn session_ended(&self, session: &str) {
        if let Some(live) = self
            .state
            .lock()
            .live
            .get(&Key::Session(session.to_owned()))
        {
            live.end.cancel();
        }
    }

    /// Follows the event log for revocations (made on any node), and checks the sessions
    /// with requests under way every second, until `shutdown`.
    pub async fn follow(
        &self,
        engine: &Engine,
        credentials: Credentials,
        shutdown: CancellationToken,
    ) -> Result<(), holdpoint_core::EngineError> {
        let mut events = engine.events(None, Default::default()).await?;
        let ends = self.clone();
        tokio::spawn(async move {
            let mut check = tokio::time::interval(SESSION_CHECK);
            check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    event = events.next() => match event {
                        Ok(event) => {
                            if let EventPayload::TokenRevoked { token } = &event.payload {
                                ends.revoked(token.id);
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "revocations are no longer followed");
                            return;
                        }
                    },
                    _ = check.tick() => ends.check_sessions(&credentials).await,
                }
            }
        });
        Ok(())
    }

    async fn check_sessions(&self, credentials: &Credentials) {
        let sessions: Vec<String> = self
            .state
            .lock()
            .live
            .iter()
            .filter(|(_, live)| !live.end.is_cancelled())
            .filter_map(|(key, _)| match key {
                Key::Session(s) => Some(s.clone()),
                Key::Token(_) => None,
            })
            .collect();
        for session in sessions {
            // A failed read ends nothing: the next check tries again.
            if let Ok(false) = credentials.session_lasts(&session).await {
                self.session_ended(&session);
            }
        }
    }
}

impl Watch {
    /// Whether the credential has ended.
    #[cfg(test)]
    fn has_ended(&self) -> bool {
        self.end.is_cancelled()
    }

    /// Resolves when the credential ends.
    pub async fn ended(&self) {
        self.end.cancelled().await;
    }

    /// `body`, cut off when the credential ends.
    pub fn cut(self, body: Body) -> Body {
        let ended = Box::pin(self.end.clone().cancelled_owned());
        Body::new(Cut {
            body,
            ended,
            _watch: self,
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut state = self.ends.state.lock();
        if let Some(live) = state.live.get_mut(&self.key) {
            live.requests -= 1;
            if live.requests == 0 {
                state.live.remove(&self.key);
            }
        }
    }
}

/// A response body that ends when its request's credential does.
struct Cut {
    body: Body,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
    _watch: Watch,
}

impl http_body::Body for Cut {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.ended.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint_protocol::{Principal, Role};

    fn caller(token: TokenId, session: Option<&str>) -> Caller {
        Caller {
            principal: Principal::new("alice".to_owned(), Role::Approver),
            token,
            world: None,
            csrf: session.map(|_| "csrf".to_owned()),
            session: session.map(str::to_owned),
        }
    }

    #[test]
    fn a_revocation_ends_the_token_and_its_sessions_and_nothing_else() {
        let ends = Ends::default();
        let (alice, bob) = (TokenId::random(), TokenId::random());
        let bearer = ends.watch(&caller(alice, None));
        let browser = ends.watch(&caller(alice, Some("s1")));
        let other = ends.watch(&caller(bob, None));
        ends.revoked(alice);
        assert!(bearer.has_ended() && browser.has_ended());
        assert!(!other.has_ended());
        // A request whose token was checked before the revocation was learnt ends at once.
        assert!(ends.watch(&caller(alice, None)).has_ended());
    }

    #[test]
    fn a_session_ends_alone_and_watches_are_forgotten_when_done() {
        let ends = Ends::default();
        let alice = TokenId::random();
        let one = ends.watch(&caller(alice, Some("s1")));
        let two = ends.watch(&caller(alice, Some("s2")));
        ends.session_ended("s1");
        assert!(one.has_ended() && !two.has_ended());
        drop((one, two));
        assert!(ends.state.lock().live.is_empty());
        // A session signed in again later with the same cookie hash is a new entry.
        assert!(!ends.watch(&caller(alice, Some("s1"))).has_ended());
    }
}
