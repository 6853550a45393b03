//! Who acts: authenticated principals (people and agents) and the actors recorded on events.

use serde::{Deserialize, Serialize};

/// What a credential may do. Agents run agents and create holds; they never decide them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    Admin,
    Approver,
    Agent,
}

impl Role {
    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether it is a person's (who may sign in to the web interface and decide holds).
    pub fn is_person(self) -> bool {
        match self {
            Role::Admin | Role::Approver => true,
            Role::Agent => false,
        }
    }
}

/// The longest `via` (the client a person acts through), in characters.
pub const VIA_MAX: usize = 200;

/// An authenticated caller: a named person or agent credential with its role.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// Through which client the principal acts, when it says (`Holdpoint-Via`): recorded with
    /// what it decides, next to its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

impl Principal {
    pub fn new(name: impl Into<String>, role: Role) -> Self {
        Principal {
            name: name.into(),
            role,
            via: None,
        }
    }

    /// The same principal, acting through the client `via`.
    pub fn via(self, via: Option<String>) -> Self {
        Principal { via, ..self }
    }
}

/// What kind of actor did something.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Source {
    /// An authenticated person (admin or approver).
    Person,
    /// An agent credential or an agent's turn.
    Agent,
    /// A deadline passed and the configured outcome was applied.
    Timeout,
    /// Holdpoint itself (a turn going on, failing or interrupted by a restart).
    System,
    /// A non-interactive client applied the documented fail-closed default.
    Default,
    /// The policy (a rule, a grant or the mode) decided without asking.
    Policy,
}

/// The actor recorded on an event or an outcome.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Actor {
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The role of the credential that acted, when a credential did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The client the person acted through, as it named itself (`"MCP elicitation in
    /// claude-code 2.1"`), when it did; absent in records made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

impl Actor {
    pub const fn of(source: Source) -> Self {
        Actor {
            source,
            name: None,
            role: None,
            via: None,
        }
    }

    pub fn named(source: Source, name: impl Into<String>) -> Self {
        Actor {
            source,
            name: Some(name.into()),
            role: None,
            via: None,
        }
    }
}
