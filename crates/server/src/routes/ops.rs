//! Health, readiness, metrics, and the answers for unknown routes.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use holdpoint_protocol::Health;

use crate::app::App;
use crate::error::ApiError;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "ok", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// The server can serve: its storage answers, and has room for every write. Short of space
/// it is not ready (503 `storage_full`, saying how much is free and how much is needed),
/// though it still decides the holds already raised.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "ready", body = Health), (status = 503, description = "not ready: the storage does not answer (`storage_unavailable`), or is short of space and takes only decisions, withdrawals and timeouts (`storage_full`)", body = holdpoint_protocol::ErrorBody)))]
pub async fn readyz(State(app): State<App>) -> Result<Json<Health>, ApiError> {
    app.store().audit_head().await?;
    if let Some(short) = app.store().short_of_space() {
        let mut e = ApiError::storage_full(short);
        e.status = StatusCode::SERVICE_UNAVAILABLE;
        return Err(e);
    }
    Ok(Json(Health {
        status: "ready".into(),
    }))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(State(app): State<App>) -> Response {
    let text = app
        .metrics()
        .render(app.engine().open_holds(), app.limiter().streams());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint: see /api/v1/openapi.json",
    )
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method: see /api/v1/openapi.json",
    )
}

/// The longest request target (path and query) served. Longer ones get 414 in the API's error
/// shape. (Past 64 KiB the HTTP layer itself refuses them before Holdpoint sees them.)
pub const MAX_URI: usize = 8 * 1024;

pub async fn uri_limit(req: Request, next: Next) -> Response {
    let len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if len > MAX_URI {
        return ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the path and query are {len} bytes; at most {MAX_URI} are accepted"),
        )
        .into_response();
    }
    next.run(req).await
}

/// A path whose percent-escapes do not decode to UTF-8 (`/api/v1/holds/%80`) names nothing:
/// 400 in the API's error shape, rather than the plain-text refusal of the path extractor.
pub async fn path_text(req: Request, next: Next) -> Response {
    if std::str::from_utf8(&percent_decoded(req.uri().path())).is_err() {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "the path is not UTF-8 once its %-escapes are decoded",
        )
        .into_response();
    }
    next.run(req).await
}

/// `%XX` escapes decoded; anything else, a malformed escape included, as it is.
fn percent_decoded(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|hex| b == b'%' && hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(decoded) => {
                out.push(decoded);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}
