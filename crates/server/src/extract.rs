//! Request extractors whose errors name the field at fault.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// How long a request body may take to arrive once its headers have.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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
        // A body that stops arriving must not hold the request (and its connection) forever.
        let read = tokio::time::timeout(BODY_TIMEOUT, Bytes::from_request(req, state))
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    format!(
                        "the body did not arrive within {} seconds",
                        BODY_TIMEOUT.as_secs()
                    ),
                )
            })?;
        let bytes = read.map_err(|e| {
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
        // No body at all is an empty object: `POST …/withdraw` needs no fields.
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return parse(b"{}").map(Body);
        }
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

fn field_error(at: &str, path: &str, error: &impl std::fmt::Display) -> ApiError {
    let path = if path == "." { "" } else { path };
    let mut field = join(at, path);
    let message = error.to_string();
    let mut message = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_owned();
    // serde reports a missing field at the object that lacks it: name the field itself.
    if let Some(name) = quoted_after(&message, "missing field `") {
        field = join(&field, &name);
        message = "is required".into();
    } else if let Some(name) = quoted_after(&message, "unknown field `") {
        let allowed = message
            .split_once(", expected ")
            .map(|(_, rest)| format!(" (expected {rest})"))
            .unwrap_or_default();
        // The path ends at the unknown field, except inside an internally tagged enum
        // (a decision), where serde loses it.
        if !(field == name || field.ends_with(&format!(".{name}"))) {
            field = join(&field, &name);
        }
        message = format!("is not a known field{allowed}");
    }
    ApiError::field(&field, plain_types(&message))
}

fn join(outer: &str, inner: &str) -> String {
    match (outer.is_empty(), inner.is_empty()) {
        (_, true) => outer.to_owned(),
        (true, false) => inner.to_owned(),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// `x` in "…prefix`x`…".
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.split_once(prefix)?.1;
    Some(rest.split_once('`')?.0.to_owned())
}

/// serde's words for types, in the API's words.
fn plain_types(message: &str) -> String {
    let words: [(&str, &str); 9] = [
        ("expected usize", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected an object"),
    ];
    let mut out = message.to_owned();
    for (from, to) in words {
        out = out.replace(from, to);
    }
    match out.split_once("expected struct ") {
        Some((before, _)) => format!("{before}expected an object"),
        None => out,
    }
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
                // A query string is not a body: 400, as for a bad header.
                let mut err = field_error("", &path, e.inner());
                err.status = StatusCode::BAD_REQUEST;
                err
            })
    }
}
