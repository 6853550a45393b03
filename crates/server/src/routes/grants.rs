//! Grants (remembered approvals), the active policy and its explanations.

use axum::Json;
use axum::extract::{Path, State};
use holdpoint_core::policy::Call;
use holdpoint_protocol::{ActivePolicy, ErrorBody, ExplainRequest, Explanation, Grant, GrantId};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Body;

/// Active grants of a world.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/grants", tag = "grants", params(("world" = String, Path)), responses((status = 200, body = Vec<Grant>)))]
pub async fn list(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<Vec<Grant>>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(app.engine().grants(Some(&w.id.to_string())).await?))
}

/// Revoke a grant: the calls it allowed are asked again (people only).
#[utoipa::path(delete, path = "/api/v1/grants/{grant}", tag = "grants", params(("grant" = GrantId, Path)),
    responses((status = 200, body = Grant), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn revoke(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Grant>, ApiError> {
    let id: GrantId = id.parse().map_err(|_| ApiError::not_found("grant", &id))?;
    Ok(Json(
        app.engine()
            .revoke_grant(&caller.principal, id, &caller.scope())
            .await?,
    ))
}

/// What policy (with the world's grants) would decide for a tool call, and why.
#[utoipa::path(post, path = "/api/v1/policy/explain", tag = "grants", request_body = ExplainRequest,
    responses((status = 200, body = Explanation), (status = 404, body = ErrorBody)))]
pub async fn explain(
    State(app): State<App>,
    caller: Caller,
    Body(req): Body<ExplainRequest>,
) -> Result<Json<Explanation>, ApiError> {
    let world = app.world(&caller, &req.world).await?;
    if req.tool.trim().is_empty() {
        return Err(ApiError::field("tool", "name the tool"));
    }
    if !req.arguments.is_object() && !req.arguments.is_null() {
        return Err(ApiError::field("arguments", "must be a JSON object"));
    }
    let arguments = if req.arguments.is_null() {
        serde_json::json!({})
    } else {
        req.arguments
    };
    let call = Call {
        tool: &req.tool,
        arguments: &arguments,
        annotations: req.annotations.as_ref(),
    };
    // The grants it consults are in memory: up to what other nodes committed first.
    app.engine().catch_up().await?;
    Ok(Json(app.engine().explain(
        &world.id.to_string(),
        req.chat.as_deref(),
        &call,
    )))
}

/// The policy in force: its mode and deadlines, every rule as data, and the file's text
/// (people only: agents are not shown which calls would pass unasked).
#[utoipa::path(get, path = "/api/v1/policy", tag = "grants",
    responses((status = 200, body = ActivePolicy), (status = 403, body = ErrorBody)))]
pub async fn policy(State(app): State<App>) -> Json<ActivePolicy> {
    Json(app.engine().policy().describe())
}
