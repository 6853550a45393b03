//! Credentials: API tokens and browser sessions, kept as records through the runtime's typed
//! record layer. Only the SHA-256 of a token or session secret is stored; creating and
//! revoking a token is recorded in the audit log with who did it.

use std::collections::HashMap;

use axum::http::StatusCode;
use holdpoint_agent::Runtime;
use holdpoint_core::audit::EventDraft;
use holdpoint_core::canonical::sha256_hex;
use holdpoint_core::record::{Records, put};
use holdpoint_core::store::{RecordKind, Write};
use holdpoint_protocol::{
    Actor, CreatedToken, EventPayload, Principal, Role, Timestamp, TokenId, TokenInfo, WorldId,
};
use serde::{Deserialize, Serialize};

use super::{Caller, Ends};
use crate::error::ApiError;

/// How long a browser session lasts.
pub const SESSION_TTL: std::time::Duration = std::time::Duration::from_secs(12 * 3600);

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
    /// Its info, with the name of its world (`None` when it has none or it was deleted).
    fn info(&self, world_name: Option<String>) -> TokenInfo {
        TokenInfo {
            id: self.id,
            name: self.name.clone(),
            role: self.role,
            world_deleted: self.world.is_some() && world_name.is_none(),
            world: world_name,
            created_at: self.created_at,
        }
    }

    fn caller(&self) -> Caller {
        Caller {
            principal: Principal::new(self.name.clone(), self.role),
            token: self.id,
            world: self.world,
            csrf: None,
            session: None,
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
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Tokens and sessions. Cheap to clone.
#[derive(Clone)]
pub struct Credentials {
    runtime: Runtime,
    ends: Ends,
}

impl Credentials {
    pub fn new(runtime: Runtime) -> Self {
        Credentials {
            runtime,
            ends: Ends::default(),
        }
    }

    /// The credentials of the requests under way, which end with them.
    pub fn ends(&self) -> &Ends {
        &self.ends
    }

    fn records(&self) -> &Records {
        self.runtime.records()
    }

    fn now(&self) -> Timestamp {
        self.runtime.engine().clock().now()
    }

    /// An audit event about a token, which belongs to no world.
    fn event(&self, by: &Actor, payload: EventPayload) -> EventDraft {
        EventDraft {
            at: self.now(),
            world: None,
            chat: None,
            hold: None,
            actor: by.clone(),
            payload,
        }
    }

    /// Creates a token; `by` is who asked, as the audit log records it.
    pub async fn create_token(
        &self,
        by: &Actor,
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
        let info = rec.info(world_name);
        let write = put(
            RecordKind::Token,
            *rec.id.as_uuid(),
            None,
            Some(sha256_hex(token.as_bytes())),
            1,
            &rec,
        )?;
        let event = self.event(
            by,
            EventPayload::TokenCreated {
                token: info.clone(),
            },
        );
        self.records().commit(vec![write], vec![event]).await?;
        Ok(CreatedToken { token, info })
    }

    /// Every token, oldest first. Each world a token is limited to is looked up once, however
    /// many tokens it has.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, ApiError> {
        let records = self
            .records()
            .all::<TokenRecord>(RecordKind::Token, None)
            .await?;
        let mut names: HashMap<WorldId, Option<String>> = HashMap::new();
        let mut out = Vec::with_capacity(records.len());
        for rec in records {
            let world = match rec.world {
                None => None,
                Some(w) => match names.get(&w) {
                    Some(name) => name.clone(),
                    None => {
                        let name = self.world_name(Some(w)).await?;
                        names.insert(w, name.clone());
                        name
                    }
                },
            };
            out.push(rec.info(world));
        }
        Ok(out)
    }

    /// The name of the world a token is limited to (none if it was deleted since).
    async fn world_name(&self, world: Option<WorldId>) -> Result<Option<String>, ApiError> {
        let Some(world) = world else {
            return Ok(None);
        };
        match self.runtime.world(world).await {
            Ok(w) => Ok(Some(w.name)),
            Err(holdpoint_agent::RuntimeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Revokes a token (its sessions end with it); `by` is who asked.
    pub async fn revoke_token(&self, by: &Actor, id: TokenId) -> Result<(), ApiError> {
        let Some(rec) = self
            .records()
            .get::<TokenRecord>(RecordKind::Token, *id.as_uuid())
            .await?
        else {
            return Err(ApiError::not_found("token", id));
        };
        let info = rec.info(self.world_name(rec.world).await?);
        let write = Write::DeleteRecord {
            kind: RecordKind::Token,
            id: *id.as_uuid(),
        };
        let event = self.event(by, EventPayload::TokenRevoked { token: info });
        self.records().commit(vec![write], vec![event]).await?;
        // Other nodes learn it from the log; this one ends its requests before answering.
        self.ends.revoked(id);
        Ok(())
    }

    async fn token_by_secret(&self, token: &str) -> Result<Option<TokenRecord>, ApiError> {
        let found = self
            .records()
            .by_key(RecordKind::Token, None, &sha256_hex(token.as_bytes()))
            .await?;
        Ok(found.map(|k| k.value))
    }

    /// The caller a bearer token stands for.
    pub async fn by_token(&self, token: &str) -> Result<Option<Caller>, ApiError> {
        Ok(self.token_by_secret(token).await?.map(|t| t.caller()))
    }

    /// The caller a session cookie stands for, while the session lasts and its token exists.
    pub async fn by_session(&self, cookie: &str) -> Result<Option<Caller>, ApiError> {
        let hash = sha256_hex(cookie.as_bytes());
        let Some(session) = self.lasting_session(&hash).await? else {
            return Ok(None);
        };
        Ok(Some(Caller {
            csrf: Some(session.csrf),
            session: Some(hash),
            ..session.token.caller()
        }))
    }

    /// Whether the session whose cookie has the SHA-256 `hash` still lasts.
    pub async fn session_lasts(&self, hash: &str) -> Result<bool, ApiError> {
        Ok(self.lasting_session(hash).await?.is_some())
    }

    async fn lasting_session(&self, hash: &str) -> Result<Option<SessionRecord>, ApiError> {
        let Some(session) = self
            .records()
            .by_key::<SessionRecord>(RecordKind::Session, None, hash)
            .await?
        else {
            return Ok(None);
        };
        let session = session.value;
        if session.expires_at <= self.now() {
            return Ok(None);
        }
        // A session ends with its token.
        if !self
            .records()
            .exists(RecordKind::Token, *session.token.id.as_uuid())
            .await?
        {
            return Ok(None);
        }
        Ok(Some(session))
    }

    /// Starts a browser session for a person's token; returns the cookie's secret.
    pub async fn log_in(&self, token: &str) -> Result<String, ApiError> {
        let Some(rec) = self.token_by_secret(token).await? else {
            return Err(ApiError::unauthorized(
                "this login link's token is unknown or revoked",
            ));
        };
        if rec.role == Role::Agent {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "agent_token",
                "agent tokens cannot sign in to the web interface",
            ));
        }
        let cookie = secret("hs_")?;
        let session = SessionRecord {
            token: rec,
            csrf: secret("")?,
            expires_at: self.now().saturating_add(SESSION_TTL),
        };
        let write = put(
            RecordKind::Session,
            uuid::Uuid::now_v7(),
            None,
            Some(sha256_hex(cookie.as_bytes())),
            1,
            &session,
        )?;
        self.records().commit(vec![write], vec![]).await?;
        Ok(cookie)
    }

    /// Ends the session of `cookie`, if it exists.
    pub async fn log_out(&self, cookie: &str) -> Result<(), ApiError> {
        let hash = sha256_hex(cookie.as_bytes());
        let found = self
            .records()
            .by_key::<SessionRecord>(RecordKind::Session, None, &hash)
            .await?;
        if let Some(session) = found {
            let write = Write::DeleteRecord {
                kind: RecordKind::Session,
                id: session.id,
            };
            self.records().commit(vec![write], vec![]).await?;
        }
        self.ends.session_ended(&hash);
        Ok(())
    }

    /// Deletes the browser sessions that ended by `now` (an ended session is refused anyway;
    /// this keeps them from piling up); returns how many.
    pub async fn end_expired_sessions(&self, now: Timestamp) -> Result<usize, ApiError> {
        /// Deleted per transaction, so a long backlog never holds the writer for long.
        const PER_TRANSACTION: usize = 500;
        let ended: Vec<Write> = self
            .records()
            .all_keyed::<SessionRecord>(RecordKind::Session, None)
            .await?
            .into_iter()
            .filter(|s| s.value.expires_at <= now)
            .map(|s| Write::DeleteRecord {
                kind: RecordKind::Session,
                id: s.id,
            })
            .collect();
        let n = ended.len();
        for chunk in ended.chunks(PER_TRANSACTION) {
            self.records().commit(chunk.to_vec(), vec![]).await?;
        }
        Ok(n)
    }

    /// On the first start, an admin token: written to `path` (readable by its owner only).
    /// Returns it when it was created now or is still in the file.
    pub async fn ensure_admin(&self, path: &std::path::Path) -> Result<Option<String>, ApiError> {
        let existing = self
            .records()
            .page::<TokenRecord>(RecordKind::Token, None, None, 1)
            .await?;
        if !existing.is_empty() {
            return Ok(std::fs::read_to_string(path)
                .ok()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty()));
        }
        let by = Actor::of(holdpoint_protocol::Source::System);
        let created = self
            .create_token(&by, "admin", Role::Admin, None, None)
            .await?;
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
