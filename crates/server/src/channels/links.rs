//! Signed one-time decision links.
//!
//! A link's token is `CLAIMS.SIGNATURE`, both base64url: the claims (JSON) name one notice,
//! one hold, the digest of the arguments shown (approvals), one decision, the recipient and
//! the name they decide as, and when the link expires; the signature is HMAC-SHA256 of the
//! claims' text under the server's link key (`channels-link.key` in the data directory, made
//! at first start, its owner's only). Changing any claim breaks the signature.
//!
//! Opening a link decides nothing: its page posts a form back with a CSRF token, an HMAC of
//! the link under the same key, which only that page carries.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The key's file in the data directory.
pub const KEY_FILE: &str = "channels-link.key";

/// What a link lets its holder do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The notice the link came with.
    pub notice: uuid::Uuid,
    pub hold: holdpoint_protocol::HoldId,
    /// The digest of the arguments shown (approvals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// `approve_once`, `deny`, or `answer:OPTION` for a question.
    pub decision: String,
    /// The address the link was sent to.
    pub to: String,
    /// The name the decision is recorded as.
    pub decides_as: String,
    /// Unix milliseconds after which the link does nothing.
    pub expires: i64,
}

/// The server's key for links. Cheap to clone.
#[derive(Clone)]
pub struct LinkKey(std::sync::Arc<[u8; 32]>);

/// Why a token is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a token of ours, or altered.
    Forged,
}

impl LinkKey {
    /// The key in `dir`, made (random, mode 0600) when there is none yet.
    pub fn open(dir: &Path) -> std::io::Result<LinkKey> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(KEY_FILE);
        let read = |text: &str| -> std::io::Result<LinkKey> {
            let bytes = B64
                .decode(text.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    std::io::Error::other(format!(
                        "{} is not a link key (delete it to make another: every link sent \
                         so far stops working)",
                        path.display()
                    ))
                })?;
            Ok(LinkKey(std::sync::Arc::new(bytes)))
        };
        if let Ok(text) = std::fs::read_to_string(&path) {
            return read(&text);
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(B64.encode(key).as_bytes())?;
                f.write_all(b"\n")?;
                f.sync_all()?;
                Ok(LinkKey(std::sync::Arc::new(key)))
            }
            // Another node on the shared data directory made it first.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                read(&std::fs::read_to_string(&path)?)
            }
            Err(e) => Err(e),
        }
    }

    #[cfg(test)]
    pub fn fixed(bytes: [u8; 32]) -> LinkKey {
        LinkKey(std::sync::Arc::new(bytes))
    }

    fn mac(&self, purpose: &str, text: &str) -> Hmac<Sha256> {
        // HMAC takes keys of any length: this never fails.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0[..])
            .unwrap_or_else(|_| unreachable!());
        mac.update(purpose.as_bytes());
        mac.update(b".");
        mac.update(text.as_bytes());
        mac
    }

    /// The token of a link with `claims`.
    pub fn sign(&self, claims: &Claims) -> String {
        let body = B64.encode(serde_json::to_vec(claims).unwrap_or_default());
        let tag = self.mac("link", &body).finalize().into_bytes();
        format!("{body}.{}", B64.encode(tag))
    }

    /// The claims of `token`, when this key signed it (compared in constant time).
    pub fn verify(&self, token: &str) -> Result<Claims, Refused> {
        let (body, tag) = token.split_once('.').ok_or(Refused::Forged)?;
        let tag = B64.decode(tag).map_err(|_| Refused::Forged)?;
        self.mac("link", body)
            .verify_slice(&tag)
            .map_err(|_| Refused::Forged)?;
        let json = B64.decode(body).map_err(|_| Refused::Forged)?;
        serde_json::from_slice(&json).map_err(|_| Refused::Forged)
    }

    /// The CSRF token of the confirm form of `token`'s page.
    pub fn csrf(&self, token: &str) -> String {
        B64.encode(self.mac("csrf", token).finalize().into_bytes())
    }

    /// Whether `given` is `token`'s CSRF token (in constant time).
    pub fn csrf_ok(&self, token: &str, given: &str) -> bool {
        B64.decode(given)
            .is_ok_and(|tag| self.mac("csrf", token).verify_slice(&tag).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            notice: uuid::Uuid::nil(),
            hold: holdpoint_protocol::HoldId::random(),
            digest: Some("ab".into()),
            decision: "approve_once".into(),
            to: "alice@example.com".into(),
            decides_as: "alice".into(),
            expires: 1,
        }
    }

    #[test]
    fn tokens_are_signed_and_bound() {
        let key = LinkKey::fixed([7; 32]);
        let c = claims();
        let token = key.sign(&c);
        assert_eq!(key.verify(&token), Ok(c.clone()));
        assert_eq!(LinkKey::fixed([8; 32]).verify(&token), Err(Refused::Forged));
        // Another claim under the first one's signature.
        let other = key.sign(&Claims {
            decision: "deny".into(),
            ..c
        });
        let forged = format!(
            "{}.{}",
            other.split_once('.').unwrap().0,
            token.split_once('.').unwrap().1
        );
        assert_eq!(key.verify(&forged), Err(Refused::Forged));
        assert_eq!(key.verify("nonsense"), Err(Refused::Forged));
        let csrf = key.csrf(&token);
        assert!(key.csrf_ok(&token, &csrf));
        assert!(!key.csrf_ok(&other, &csrf));
        assert!(!key.csrf_ok(&token, "AAAA"));
    }

    #[test]
    fn the_key_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = LinkKey::open(dir.path()).unwrap();
        let b = LinkKey::open(dir.path()).unwrap();
        assert_eq!(a.0, b.0);
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
