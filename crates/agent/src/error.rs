//! The runtime's errors, with stable codes interfaces map to their own shape.

use holdpoint_core::store::{CommitError, Conflict, StoreError};
use holdpoint_core::{EngineError, ValidationError};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{error}")]
    Invalid { error: ValidationError },
    #[error("{what} {id:?} not found")]
    NotFound { what: &'static str, id: String },
    /// The request conflicts with what exists or is under way (HTTP 409).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RuntimeError {
    pub fn code(&self) -> &'static str {
        match self {
            RuntimeError::Invalid { .. } => "invalid_input",
            RuntimeError::NotFound { .. } => "not_found",
            RuntimeError::Conflict { code, .. } => code,
            RuntimeError::Engine(e) => e.code(),
            RuntimeError::Store(_) => "storage_unavailable",
        }
    }

    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        RuntimeError::Invalid {
            error: ValidationError::new(field, message),
        }
    }

    pub(crate) fn not_found(what: &'static str, id: impl ToString) -> Self {
        RuntimeError::NotFound {
            what,
            id: id.to_string(),
        }
    }
}

impl From<ValidationError> for RuntimeError {
    fn from(error: ValidationError) -> Self {
        RuntimeError::Invalid { error }
    }
}

impl From<CommitError> for RuntimeError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Store(e) => RuntimeError::Store(e),
            CommitError::Conflict(Conflict::RecordExists { kind, name }) => {
                RuntimeError::Conflict {
                    code: "name_taken",
                    message: format!("{} named {name:?} exists already", article(kind)),
                }
            }
            CommitError::Conflict(c) => RuntimeError::Conflict {
                code: "conflict",
                message: format!("{c}; try again"),
            },
        }
    }
}

/// "a chat", "an agent".
fn article(noun: &str) -> String {
    let an = noun.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {noun}", if an { "an" } else { "a" })
}
