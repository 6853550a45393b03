//! Who is calling, and whether they may.
//!
//! Programs send `Authorization: Bearer <token>`. Browsers log in once with a person's token
//! (`/login?token=…`) and then carry an HttpOnly, SameSite=Strict session cookie; every
//! request of theirs that changes something must also send the session's CSRF token in
//! `X-CSRF-Token`. Every request must name this server in `Host` (so a DNS-rebinding page
//! cannot reach it), and a request from a browser page must come from this server's origin.
//! Only the SHA-256 of a token or session secret is stored.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use holdpoint_core::Scope;
use holdpoint_core::canonical::sha256_hex;
use holdpoint_core::store::{CommitError, Record, RecordKind, Store, Transaction, Write};
use holdpoint_protocol::{CreatedToken, Principal, Role, Timestamp, TokenId, TokenInfo, WorldId};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::ApiError;

pub const SESSION_COOKIE: &str = "holdpoint_session";
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a browser session lasts.
pub const SESSION_TTL: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    /// The one world this credential may use, if limited to one.
    pub world: Option<WorldId>,
    /// For browser sessions: the CSRF token.
    pub csrf: Option<String>,
}

impl Caller {
    /// What this caller may see of holds.
    pub fn scope(&self) -> Scope {
        Scope {
            world: self.world.map(|w| w.to_string()),
            chat: None,
        }
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

#[derive(Serialize, Deserialize)]
struct TokenRecord {
    id: TokenId,
    name: String,
    role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    world: Option<WorldId>,
    created_at: Timestamp,
}

impl TokenRecord {
    fn info(&self, world_name: Option<String>) -> TokenInfo {
        TokenInfo {
            id: self.id,
            name: self.name.clone(),
            role: self.role,
            world: world_name,
            created_at: self.created_at,
        }
    }

    fn caller(&self, csrf: Option<String>) -> Caller {
        Caller {
            principal: Principal::new(self.name.clone(), self.role),
            world: self.world,
            csrf,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SessionRecord {
    token: TokenRecord,
    csrf: String,
    expires_at: Timestamp,
}

/// A fresh secret: `prefix` and 256 random bits.
pub fn secret(prefix: &str) -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_randomness",
            format!("no random bytes: {e}"),
        )
    })?;
    Ok(format!(
        "{prefix}{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// Compares secrets in constant time.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn value<T: serde::de::DeserializeOwned>(r: Record) -> Result<T, ApiError> {
    serde_json::from_value(r.data).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            e.to_string(),
        )
    })
}

async fn put(store: &Arc<dyn Store>, writes: Vec<Write>) -> Result<(), ApiError> {
    store
        .commit(Transaction {
            writes,
            events: vec![],
        })
        .await
        .map(|_| ())
        .map_err(|e| match e {
            CommitError::Store(e) => e.into(),
            CommitError::Conflict(c) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", c.to_string())
            }
        })
}

fn record<T: Serialize>(
    kind: RecordKind,
    id: uuid::Uuid,
    key: String,
    data: &T,
) -> Result<Write, ApiError> {
    let data = serde_json::to_value(data)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(Write::PutRecord(Box::new(Record {
        kind,
        id,
        parent: None,
        key: Some(key),
        version: 1,
        data,
    })))
}

impl App {
    pub async fn create_token(
        &self,
        name: &str,
        role: Role,
        world: Option<WorldId>,
        world_name: Option<String>,
    ) -> Result<CreatedToken, ApiError> {
        let name = name.trim();
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
            return Err(ApiError::field(
                "name",
                "1 to 100 characters, no control characters",
            ));
        }
        let token = secret("hp_")?;
        let rec = TokenRecord {
            id: TokenId::random(),
            name: name.to_owned(),
            role,
            world,
            created_at: self.now(),
        };
        put(
            self.store(),
            vec![record(
                RecordKind::Token,
                *rec.id.as_uuid(),
                sha256_hex(token.as_bytes()),
                &rec,
            )?],
        )
        .await?;
        Ok(CreatedToken {
            token,
            info: rec.info(world_name),
        })
    }

    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, ApiError> {
        let page = self
            .store()
            .records(RecordKind::Token, None, None, 10_000)
            .await?;
        let mut out = Vec::new();
        for p in page {
            let rec: TokenRecord = value(p.item)?;
            let world = match rec.world {
                Some(w) => self.runtime().world(w).await.ok().map(|w| w.name),
                None => None,
            };
            out.push(rec.info(world));
        }
        Ok(out)
    }

    pub async fn revoke_token(&self, id: TokenId) -> Result<(), ApiError> {
        if self
            .store()
            .record(RecordKind::Token, *id.as_uuid())
            .await?
            .is_none()
        {
            return Err(ApiError::not_found("token", id));
        }
        put(
            self.store(),
            vec![Write::DeleteRecord {
                kind: RecordKind::Token,
                id: *id.as_uuid(),
            }],
        )
        .await
    }

    async fn by_token(&self, token: &str) -> Result<Option<Caller>, ApiError> {
        let r = self
            .store()
            .record_by_key(RecordKind::Token, None, &sha256_hex(token.as_bytes()))
            .await?;
        Ok(r.map(value::<TokenRecord>)
            .transpose()?
            .map(|t| t.caller(None)))
    }

    async fn by_session(&self, cookie: &str) -> Result<Option<Caller>, ApiError> {
        let r = self
            .store()
            .record_by_key(RecordKind::Session, None, &sha256_hex(cookie.as_bytes()))
            .await?;
        let Some(session) = r.map(value::<SessionRecord>).transpose()? else {
            return Ok(None);
        };
        if session.expires_at <= self.now() {
            return Ok(None);
        }
        // A session ends with its token.
        if self
            .store()
            .record(RecordKind::Token, *session.token.id.as_uuid())
            .await?
            .is_none()
        {
            return Ok(None);
        }
        Ok(Some(session.token.caller(Some(session.csrf))))
    }

    /// Starts a browser session for a person's token; returns the cookie's secret.
    pub async fn log_in(&self, token: &str) -> Result<String, ApiError> {
        let r = self
            .store()
            .record_by_key(RecordKind::Token, None, &sha256_hex(token.as_bytes()))
            .await?;
        let Some(rec) = r.map(value::<TokenRecord>).transpose()? else {
            return Err(ApiError::unauthorized(
                "this login link's token is unknown or revoked",
            ));
        };
        if rec.role == Role::Agent {
            return Err(ApiError::forbidden(
                "agent tokens cannot sign in to the web interface",
            ));
        }
        let cookie = secret("hs_")?;
        let session = SessionRecord {
            token: rec,
            csrf: secret("")?,
            expires_at: self.now().saturating_add(SESSION_TTL),
        };
        put(
            self.store(),
            vec![record(
                RecordKind::Session,
                uuid::Uuid::now_v7(),
                sha256_hex(cookie.as_bytes()),
                &session,
            )?],
        )
        .await?;
        Ok(cookie)
    }

    pub async fn log_out(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(cookie) = session_cookie(headers) else {
            return Ok(());
        };
        if let Some(r) = self
            .store()
            .record_by_key(RecordKind::Session, None, &sha256_hex(cookie.as_bytes()))
            .await?
        {
            put(
                self.store(),
                vec![Write::DeleteRecord {
                    kind: RecordKind::Session,
                    id: r.id,
                }],
            )
            .await?;
        }
        Ok(())
    }

    /// Deletes the browser sessions that ended by `now` (an ended session is refused anyway;
    /// this keeps them from piling up); returns how many.
    pub async fn end_expired_sessions(&self, now: Timestamp) -> Result<usize, ApiError> {
        /// Deleted per transaction, so a long backlog never holds the writer for long.
        const PER_TRANSACTION: usize = 500;
        let mut ended = Vec::new();
        for r in self.store().all_records(RecordKind::Session, None).await? {
            let id = r.id;
            if value::<SessionRecord>(r)?.expires_at <= now {
                ended.push(Write::DeleteRecord {
                    kind: RecordKind::Session,
                    id,
                });
            }
        }
        let n = ended.len();
        for chunk in ended.chunks(PER_TRANSACTION) {
            put(self.store(), chunk.to_vec()).await?;
        }
        Ok(n)
    }

    /// On the first start, an admin token: written to `path` (readable by its owner only).
    /// Returns it when it was created now or is still in the file.
    pub async fn ensure_admin(&self, path: &std::path::Path) -> Result<Option<String>, ApiError> {
        let existing = self
            .store()
            .records(RecordKind::Token, None, None, 1)
            .await?;
        if !existing.is_empty() {
            return Ok(std::fs::read_to_string(path)
                .ok()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty()));
        }
        let created = self.create_token("admin", Role::Admin, None, None).await?;
        write_private(path, &created.token).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "io",
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
        Ok(Some(created.token))
    }
}

/// Writes a file only its owner can read.
fn write_private(path: &std::path::Path, content: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content.as_bytes())?;
    f.write_all(b"\n")
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

/// Probes answer whatever the Host: a load balancer or an orchestrator calls them by address,
/// and they reveal nothing.
fn probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// Paths anyone may call (still Host-checked).
fn public(path: &str) -> bool {
    matches!(
        path,
        "/" | "/healthz" | "/readyz" | "/metrics" | "/login" | "/api/v1/openapi.json"
    )
}

/// Checks Host and Origin, then who is calling; puts the [`Caller`] into the request.
pub async fn guard(State(app): State<App>, mut req: Request, next: Next) -> Response {
    match check(&app, &mut req).await {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

async fn check(app: &App, req: &mut Request) -> Result<(), ApiError> {
    if probe(req.uri().path()) {
        return Ok(());
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !app.host_allowed(host) {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            format!(
                "this server answers to {}, not {host:?} (set server.allowed_hosts to add names)",
                app.allowed_hosts().join(", ")
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
        && !app.origin_allowed(origin)
    {
        return Err(ApiError::forbidden(format!(
            "requests from {origin} are not accepted: this API is for this server's own pages"
        )));
    }
    if public(req.uri().path()) {
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
        (Some(token), _) => app
            .by_token(&token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("the bearer token is unknown or revoked"))?,
        (None, Some(cookie)) => {
            let caller = app
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
        let s = secret("hp_").unwrap();
        assert_eq!((s.len(), s.starts_with("hp_")), (67, true));
        assert_ne!(s, secret("hp_").unwrap());
    }
}
