//! The engine's errors. Each has a stable `code` that interfaces map to their own error shape
//! (HTTP status, exit code, MCP error).

use holdpoint_protocol::Hold;

use crate::store::StoreError;

/// A field that failed validation, and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Where, as a path into the request (`options[2].id`, `arguments`).
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ValidationError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error, under `prefix` (`items[3]` + `options` → `items[3].options`).
    pub fn within(self, prefix: &str) -> Self {
        let field = match (prefix.is_empty(), self.field.is_empty()) {
            (true, _) => self.field,
            (false, true) => prefix.to_owned(),
            (false, false) if self.field.starts_with('[') => format!("{prefix}{}", self.field),
            (false, false) => format!("{prefix}.{}", self.field),
        };
        ValidationError { field, ..self }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request is malformed or not allowed for this hold (HTTP 422).
    #[error("{error}")]
    Invalid {
        code: &'static str,
        error: ValidationError,
    },
    /// No such thing in the caller's scope (HTTP 404). Holds of other worlds look the same as
    /// holds that do not exist.
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    /// The caller may not do this (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// The hold was decided before; the recorded decision is attached (HTTP 409).
    #[error("hold {} is already decided", .hold.id)]
    AlreadyDecided { hold: Box<Hold> },
    /// The request conflicts with the current state (HTTP 409).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// Storage failed; nothing was applied (HTTP 503).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A policy that does not load: every problem, by its path in the text (HTTP 422). The
    /// policy in force stays.
    #[error("{0}")]
    InvalidPolicy(crate::policy::PolicyErrors),
    /// A raise would leave more holds open than a cap allows (in its world, or by its
    /// raiser); nothing was applied (HTTP 429).
    #[error("{message}")]
    Limited {
        limit: crate::PendingLimit,
        cap: u64,
        message: String,
    },
    /// Too many concurrent changes to the same hold; try again (HTTP 503).
    #[error("the hold is changing too quickly; try again")]
    Busy,
    /// The store is short of space: it writes only decisions, withdrawals and timeouts of the
    /// holds already raised until the space it needs is free; the message says how much is
    /// free and how much is needed (HTTP 507).
    #[error("{0}")]
    StorageFull(crate::store::SpaceShort),
}

impl EngineError {
    pub fn invalid(
        code: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        EngineError::Invalid {
            code,
            error: ValidationError::new(field, message),
        }
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        EngineError::Conflict {
            code,
            message: message.into(),
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Invalid { code, .. } | EngineError::Conflict { code, .. } => code,
            EngineError::NotFound { .. } => "not_found",
            EngineError::Forbidden(_) => "forbidden",
            EngineError::AlreadyDecided { .. } => "already_decided",
            EngineError::Store(_) => "storage_unavailable",
            EngineError::Busy => "busy",
            EngineError::StorageFull(_) => "storage_full",
            EngineError::Limited { .. } => "limit_reached",
            EngineError::InvalidPolicy(_) => "invalid_policy",
        }
    }
}

impl From<ValidationError> for EngineError {
    fn from(error: ValidationError) -> Self {
        EngineError::Invalid {
            code: "invalid_input",
            error,
        }
    }
}
