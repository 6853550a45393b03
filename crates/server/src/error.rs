//! The API's one error shape: `{"error": {"code", "message", "details"}}`. Client mistakes are
//! 4xx with a message that names the field; only the server's own trouble is 5xx.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdpoint_agent::RuntimeError;
use holdpoint_core::store::{CommitError, SpaceShort, StoreError};
use holdpoint_core::{EngineError, PendingLimit, ValidationError};
use holdpoint_protocol::{ErrorBody, ErrorDetail};
use serde_json::{Value, json};

/// When to try again after a raise refused for the pending holds it would leave (the engine's
/// limits; `limits.rs` has the server's own): holds are decided by people, in seconds or
/// minutes.
const PENDING_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
    /// Whole seconds for `Retry-After`, when a limit refused the request.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code: code.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// A bad field: 422 naming it.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let text = if field.is_empty() {
            message.clone()
        } else {
            format!("{field}: {message}")
        };
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", text)
            .with_details(json!({ "field": field }))
    }

    /// A bad query parameter or header: 400 naming it.
    pub fn param(name: &str, message: impl Into<String>) -> Self {
        let mut e = ApiError::field(name, message);
        e.status = StatusCode::BAD_REQUEST;
        e
    }

    /// A policy that does not load: 422 with every problem as `details.problems`.
    pub fn invalid_policy(problems: &holdpoint_core::policy::PolicyErrors) -> Self {
        let list: Vec<Value> = problems
            .0
            .iter()
            .map(|p| json!({ "path": p.path, "message": p.message }))
            .collect();
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_policy",
            problems.to_string(),
        )
        .with_details(json!({ "problems": list }))
    }

    /// A limit on what a client may hold or ask reached: 429 (`limits.*` of one credential)
    /// or 503 (of the whole server), with `Retry-After` and the limit named in `details`.
    pub fn limited(
        status: StatusCode,
        setting: &str,
        message: impl Into<String>,
        retry_after: std::time::Duration,
    ) -> Self {
        let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let limit = setting.strip_prefix("limits.").unwrap_or(setting);
        let mut e = ApiError::new(
            status,
            "limit_reached",
            format!("{} ({setting}); retry after {seconds} s", message.into()),
        )
        .with_details(json!({ "limit": limit, "setting": setting, "retry_after": seconds }));
        e.retry_after = Some(seconds);
        e
    }

    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// What the error body says, without its status.
    pub fn detail(self) -> ErrorDetail {
        ErrorDetail {
            code: self.code,
            message: self.message,
            // Always an object, so clients can read `details.field` without a check.
            details: Some(self.details.unwrap_or_else(|| json!({}))),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(code = %self.code, message = %self.message, "request failed");
        }
        let (status, retry_after) = (self.status, self.retry_after);
        let body = ErrorBody {
            error: self.detail(),
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                "www-authenticate",
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        ApiError::field(&e.field, e.message)
    }
}

/// How long a client refused for want of space is asked to wait: space is freed by a
/// person, and the store looks for it every second.
pub const STORAGE_FULL_RETRY: u64 = 30;

impl ApiError {
    /// The store is short of space: 507 `storage_full`, with how much is free and needed (in
    /// the message and `details`) and `Retry-After`.
    pub fn storage_full(short: SpaceShort) -> Self {
        let mut e = ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "storage_full",
            short.to_string(),
        )
        .with_details(json!({
            "free_bytes": short.free,
            "needed_bytes": short.needed,
            "retry_after": STORAGE_FULL_RETRY,
        }));
        e.retry_after = Some(STORAGE_FULL_RETRY);
        e
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if let Some(short) = e.space_short() {
            return ApiError::storage_full(short);
        }
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            e.to_string(),
        )
    }
}

/// A commit of records, mapped as the runtime maps its own (a taken name is a 409).
impl From<CommitError> for ApiError {
    fn from(e: CommitError) -> Self {
        RuntimeError::from(e).into()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let code = e.code();
        match e {
            EngineError::Invalid { error, .. } => {
                let mut err = ApiError::field(&error.field, error.message);
                err.code = code.into();
                err
            }
            EngineError::NotFound { what, id } => ApiError::not_found(what, id),
            EngineError::Forbidden(message) => ApiError::forbidden(message),
            EngineError::AlreadyDecided { hold } => {
                let message = format!(
                    "hold {} is already decided; the recorded decision is in details",
                    hold.id
                );
                ApiError::new(StatusCode::CONFLICT, code, message)
                    .with_details(json!({ "hold": hold }))
            }
            EngineError::InvalidPolicy(problems) => ApiError::invalid_policy(&problems),
            EngineError::Limited { limit, message, .. } => ApiError::limited(
                StatusCode::TOO_MANY_REQUESTS,
                match limit {
                    PendingLimit::PerWorld => "limits.pending_holds_per_world",
                    PendingLimit::PerRaiser => "limits.pending_holds_per_token",
                },
                message,
                PENDING_RETRY,
            ),
            EngineError::Conflict { message, .. } => {
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
            EngineError::Store(e) => e.into(),
            e @ EngineError::Busy => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, e.to_string())
            }
            EngineError::StorageFull(short) => ApiError::storage_full(short),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        let code = e.code();
        match e {
            RuntimeError::Invalid { error } => error.into(),
            RuntimeError::NotFound { what, id } => ApiError::not_found(what, format!("{id:?}")),
            RuntimeError::Conflict { message, .. } => {
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
            RuntimeError::Engine(e) => e.into(),
            RuntimeError::Store(e) => e.into(),
        }
    }
}
