//! Who is calling, and whether they may.
//!
//! Programs send `Authorization: Bearer <token>`. Browsers log in once with a person's token
//! (`/login?token=…`) and then carry an HttpOnly, SameSite=Strict session cookie; every
//! request of theirs that changes something must also send the session's CSRF token in
//! `X-CSRF-Token`. Every request must name this server in `Host` (so a DNS-rebinding page
//! cannot reach it), and a request from a browser page must come from this server's origin.
//!
//! - this module: the [`Caller`] a handler extracts;
//! - `credentials`: tokens and browser sessions, as records;
//! - `guard`: the middleware that checks Host, Origin and CSRF and finds the caller;
//! - `signin`: the sign-in page, and the same page saying why signing in did not work.

mod credentials;
mod ends;
mod guard;
mod signin;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use holdpoint_core::{Scope, roles};
use holdpoint_protocol::{Actor, Event, EventPayload, Principal, Role, TokenId, WorldId};

pub use credentials::{Credentials, SESSION_TTL, secret};
pub use ends::Ends;
pub use guard::{Access, CSRF_HEADER, Guard, SESSION_COOKIE, guard, session_cookie};
pub use signin::{SIGN_IN_REFERRER_POLICY, sign_in_page, sign_in_refused};

use crate::error::ApiError;

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    /// The token it calls with (a browser session's is the token it signed in with).
    pub token: TokenId,
    /// The one world this credential may use, if limited to one.
    pub world: Option<WorldId>,
    /// For browser sessions: the CSRF token.
    pub csrf: Option<String>,
    /// For browser sessions: the SHA-256 of the session's cookie, which names it.
    pub session: Option<String>,
}

impl Caller {
    /// What this caller may see of holds: an agent's credential, only those raised under
    /// its name.
    pub fn scope(&self) -> Scope {
        Scope {
            world: self.world.map(|w| w.to_string()),
            chat: None,
            raised_by: self.is_agent().then(|| self.principal.name.clone()),
        }
    }

    pub fn is_agent(&self) -> bool {
        self.principal.role == Role::Agent
    }

    pub fn require(&self, roles: &[Role]) -> Result<(), ApiError> {
        if roles.contains(&self.principal.role) {
            return Ok(());
        }
        let allowed: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
        Err(ApiError::forbidden(format!(
            "this needs a credential of role {}; {} is {}",
            allowed.join(" or "),
            self.principal.name,
            self.principal.role.as_str()
        )))
    }

    pub fn is_admin(&self) -> bool {
        self.principal.role == Role::Admin
    }

    /// Whether this caller may see `event`, beyond the world filter every reader of the log
    /// applies. Token and webhook events describe credentials and subscriptions, which only
    /// admins may list (a webhook's URL can itself be a secret), so only admins see them: in
    /// the live stream and in the audit listing alike.
    pub fn sees(&self, event: &Event) -> bool {
        match event.payload {
            EventPayload::TokenCreated { .. }
            | EventPayload::TokenRevoked { .. }
            | EventPayload::WebhookCreated { .. }
            | EventPayload::WebhookDeleted { .. } => self.is_admin(),
            _ => true,
        }
    }

    /// Who this caller is in the audit log: name and role.
    pub fn actor(&self) -> Actor {
        roles::actor_of(&self.principal)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("sign in: send Authorization: Bearer <token>"))
    }
}
