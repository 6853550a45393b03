//! The guard before routing: `Host` names this server, `Origin` is this server's, then the
//! caller — a bearer token, or a session cookie with its CSRF token for changes.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use holdpoint_protocol::Role;
use std::sync::Arc;

use super::credentials::{Credentials, same};
use crate::error::ApiError;

pub const SESSION_COOKIE: &str = "holdpoint_session";
pub const CSRF_HEADER: &str = "x-csrf-token";

/// What the guard checks requests against: the names this server answers to, and the
/// credentials. Cheap to clone.
#[derive(Clone)]
pub struct Guard {
    hosts: Arc<[String]>,
    credentials: Credentials,
}

impl Guard {
    /// `hosts`: the `Host` header values the server answers to (`127.0.0.1:7717`, …).
    pub fn new(hosts: &[String], credentials: Credentials) -> Self {
        Guard {
            hosts: hosts.into(),
            credentials,
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        host.is_some_and(|h| self.host_allowed(h))
    }
}

pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Who may call a route: declared beside it (`routes/mod.rs`), put into each request by the
/// route table, and checked here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone, whatever the `Host`: load balancers and orchestrators call probes by address,
    /// and they reveal nothing.
    Probe,
    /// Anyone (the `Host` and `Origin` are still checked).
    Public,
    /// Any caller with a token or a browser session.
    Signed,
    /// Callers of these roles.
    Roles(&'static [Role]),
}

impl Access {
    pub fn is_public(self) -> bool {
        matches!(self, Access::Probe | Access::Public)
    }
}

/// Checks Host and Origin, then who is calling and whether the route's [`Access`] (put into
/// the request by the route table; none for an unknown path, which needs a caller) lets them;
/// puts the [`Caller`] into the request.
///
/// A request with a caller is watched until its response's last byte: when its credential
/// ends (a token revoked, a session signed out), a request that only reads (a long poll) is
/// answered 401 and any response still streaming (a live stream) ends.
pub async fn guard(State(guard): State<Guard>, mut req: Request, next: Next) -> Response {
    if let Err(e) = check(&guard, &mut req).await {
        if signing_in(&req) {
            return super::sign_in_refused(&e);
        }
        return e.into_response();
    }
    let Some(caller) = req.extensions().get::<super::Caller>() else {
        return next.run(req).await;
    };
    let watch = guard.credentials.ends().watch(caller);
    let response = if req.method().is_safe() {
        tokio::select! {
            response = next.run(req) => response,
            () = watch.ended() => return ended().into_response(),
        }
    } else {
        // A change runs to its end: its answer says what it did.
        next.run(req).await
    };
    response.map(|body| watch.cut(body))
}

/// Whether `req` signs a browser in (`GET /login`, `GET` and `POST /signin`): public routes,
/// whose refusals by the guard are the sign-in page saying why, never the API's JSON, so the
/// person can paste a token at once.
fn signing_in(req: &Request) -> bool {
    matches!(req.uri().path(), "/login" | "/signin")
}

/// Whether the browser says the request comes from a page of this very origin
/// (`Sec-Fetch-Site: same-origin`).
///
/// Only the sign-in form's POST (`signing_in`) takes this in place of an `Origin`. A browser sends
/// `Origin: null` for a form whose page hides its referrer, and for pages of no origin
/// (sandboxed frames, `data:` pages) too — which is what a login CSRF would post from: a page
/// signing the victim in with the attacker's own token, so that the victim's decisions are
/// made as the attacker. `null` alone is therefore refused. `Sec-Fetch-Site` is set by the
/// browser, which no page can change, and it says `same-origin` only for a page of this
/// origin; programs that set it themselves have no browser to sign in.
fn same_origin_fetch(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"same-origin")
}

fn ended() -> ApiError {
    ApiError::unauthorized("the credential was revoked, or the session ended, during the request")
}

async fn check(guard: &Guard, req: &mut Request) -> Result<(), ApiError> {
    let access = req
        .extensions()
        .get::<Access>()
        .copied()
        .unwrap_or(Access::Signed);
    if access == Access::Probe {
        return Ok(());
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !guard.host_allowed(host) {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            format!(
                "this server answers to {}, not {host:?} (set server.allowed_hosts to add names)",
                guard.hosts.join(", ")
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
        && !guard.origin_allowed(origin)
        && !(origin == "null" && signing_in(req) && same_origin_fetch(headers))
    {
        return Err(ApiError::forbidden(format!(
            "requests from {origin} are not accepted: this API is for this server's own pages"
        )));
    }
    if access.is_public() {
        return Ok(());
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned());
    let caller = match (bearer, session_cookie(headers)) {
        (Some(token), _) => guard
            .credentials
            .by_token(&token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("the bearer token is unknown or revoked"))?,
        (None, Some(cookie)) => {
            let caller = guard
                .credentials
                .by_session(&cookie)
                .await?
                .ok_or_else(|| ApiError::unauthorized("the session has ended: sign in again"))?;
            let unsafe_method =
                !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
            let sent = req
                .headers()
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if unsafe_method && !caller.csrf.as_deref().is_some_and(|csrf| same(csrf, sent)) {
                let (code, what) = if sent.is_empty() {
                    ("csrf_token_missing", "send")
                } else {
                    (
                        "csrf_token_invalid",
                        "this is not the session's CSRF token: send",
                    )
                };
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    code,
                    format!(
                        "{what} the session's CSRF token (GET /api/v1/session) in {CSRF_HEADER}"
                    ),
                ));
            }
            caller
        }
        (None, None) => {
            return Err(ApiError::unauthorized(
                "sign in: send Authorization: Bearer <token>",
            ));
        }
    };
    if let Access::Roles(roles) = access {
        caller.require(roles)?;
    }
    req.extensions_mut().insert(caller);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; holdpoint_session=hs_abc; b=2".parse().unwrap(),
        );
        assert_eq!(session_cookie(&h).as_deref(), Some("hs_abc"));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
        let s = super::super::secret("hp_").unwrap();
        assert_eq!((s.len(), s.starts_with("hp_")), (67, true));
        assert_ne!(s, super::super::secret("hp_").unwrap());
    }
}
