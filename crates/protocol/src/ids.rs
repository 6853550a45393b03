//! Identifiers. Hold, batch and grant ids are UUID v7: a millisecond timestamp followed by 74
//! random bits. Nobody can guess one (and a hold id never suffices to decide a hold: that takes
//! a person's credential), and because they grow with time, new rows append to the end of the
//! store's indexes instead of landing on a random page each, which keeps durable writes cheap.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A string that is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseIdError {
    pub kind: &'static str,
    pub input: String,
}

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a valid {} id (expected a UUID)",
            self.input, self.kind
        )
    }
}

impl std::error::Error for ParseIdError {}

macro_rules! random_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        /// Read as text, a bad id is refused in words (`"x" is not a valid hold id
        /// (expected a UUID)`), not with the UUID parser's own message.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                if !d.is_human_readable() {
                    return Uuid::deserialize(d).map(Self);
                }
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl $name {
            /// A fresh id: time-ordered, with 74 random bits.
            pub fn random() -> Self {
                Self(Uuid::now_v7())
            }

            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            pub fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::schema::uuid()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl FromStr for $name {
            type Err = ParseIdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::try_parse(s).map(Self).map_err(|_| ParseIdError {
                    kind: $kind,
                    input: s.chars().take(64).collect(),
                })
            }
        }
    };
}

random_id!(
    /// Identifies one hold.
    HoldId,
    "hold"
);
random_id!(
    /// Identifies the batch of holds raised by one LLM response (or one external request).
    BatchId,
    "batch"
);
random_id!(
    /// Identifies one grant (a remembered approval).
    GrantId,
    "grant"
);
random_id!(
    /// Identifies one world.
    WorldId,
    "world"
);
random_id!(
    /// Identifies one agent of a world.
    AgentId,
    "agent"
);
random_id!(
    /// Identifies one chat of a world.
    ChatId,
    "chat"
);
random_id!(
    /// Identifies one turn: an agent's work on one user message.
    TurnId,
    "turn"
);
random_id!(
    /// Identifies one API token.
    TokenId,
    "token"
);
random_id!(
    /// Identifies one webhook subscription.
    WebhookId,
    "webhook"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_json() {
        let id = HoldId::random();
        assert_eq!(id.to_string().parse::<HoldId>(), Ok(id));
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<HoldId>(&json).unwrap(), id);
    }

    #[test]
    fn a_bad_id_names_its_kind() {
        let err = "nope".parse::<BatchId>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"nope\" is not a valid batch id (expected a UUID)"
        );
    }

    #[test]
    fn a_bad_id_in_json_is_refused_in_words() {
        let err = serde_json::from_str::<HoldId>("\"zz\"").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("\"zz\" is not a valid hold id (expected a UUID)"),
            "{err}"
        );
        let err = serde_json::from_str::<HoldId>("7").unwrap_err();
        assert!(err.to_string().contains("expected a string"), "{err}");
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(GrantId::random(), GrantId::random());
    }
}
