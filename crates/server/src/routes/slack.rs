//! Slack's interaction requests (`crate::channels::slack`): a hold's button pressed in Slack,
//! or the reason for a deny submitted.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use holdpoint_protocol::ErrorBody;
use serde::Deserialize;

use crate::app::App;
use crate::error::ApiError;

/// What Slack posts: one form field holding the interaction as JSON. Only the OpenAPI
/// document reads this: the handler takes the body's bytes, which the signature covers.
#[derive(Deserialize, utoipa::ToSchema)]
#[expect(
    dead_code,
    reason = "describes the request body in the OpenAPI document"
)]
pub struct InteractionForm {
    /// The interaction (`block_actions` or `view_submission`), as JSON.
    pub payload: String,
}

/// Slack's interaction requests: verified by their `v0` signature (the app's signing secret,
/// `X-Slack-Signature` and `X-Slack-Request-Timestamp`, at most 5 minutes old), then decided at
/// once as the Slack member's mapped approver via `slack`. Signs no one in.
#[utoipa::path(post, path = "/slack/interactions", tag = "holds",
    request_body(content = InteractionForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "Acknowledged; for a submitted modal, its errors if any"),
        (status = 400, body = ErrorBody, description = "No payload field of JSON"),
        (status = 401, body = ErrorBody, description = "The signature is missing, wrong, or more than 5 minutes old"),
        (status = 404, body = ErrorBody, description = "Slack is not configured")))]
pub async fn interactions(
    State(app): State<App>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok(
        match app.channels().slack_interaction(&headers, &body).await? {
            Some(json) => Json(json).into_response(),
            None => StatusCode::OK.into_response(),
        },
    )
}
