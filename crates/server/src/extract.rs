//! Request extractors whose errors name the field at fault.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body. Errors: 413 (too large), 415 (not JSON), 400 (malformed), 422 (a field is wrong,
/// named by its path).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.starts_with("application/json"));
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "the body is larger than the server accepts (server.max_body)",
                )
            } else {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text())
            }
        })?;
        parse(&bytes).map(Body)
    }
}

/// Reads JSON, naming the path of a field that does not fit.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                format!("the body is not valid JSON: {inner}"),
            );
        }
        field_error("", &path, &inner)
    })
}

/// Reads a part of a request already parsed as JSON; errors name the field under `at`.
pub fn parse_value<T: DeserializeOwned>(value: serde_json::Value, at: &str) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        field_error(at, &path, e.inner())
    })
}

fn field_error(at: &str, path: &str, error: &serde_json::Error) -> ApiError {
    // serde reports a missing field at the object that lacks it, and says which.
    let path = if path == "." { "" } else { path };
    let field = match (at.is_empty(), path.is_empty()) {
        (_, true) => at.to_owned(),
        (true, false) => path.to_owned(),
        (false, false) => format!("{at}.{path}"),
    };
    let message = error.to_string();
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_owned();
    ApiError::field(&field, message)
}

/// Query parameters, named in errors.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Params)
            .map_err(|e| {
                let path = e.path().to_string();
                let message = e.into_inner().to_string();
                let mut err = ApiError::field(if path == "." { "" } else { &path }, message);
                err.status = StatusCode::BAD_REQUEST;
                err
            })
    }
}
