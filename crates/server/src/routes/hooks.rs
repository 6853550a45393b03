//! Webhook subscriptions (admins).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use holdpoint_protocol::{
    CreatedWebhook, DeliveriesPage, ErrorBody, NewWebhook, PageParams, Webhook, WebhookId,
};

use crate::app::App;
use crate::auth::{Caller, secret};
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::webhooks::{DEFAULT_EVENTS, EVENT_TYPES, Subscription};

/// A world's webhook subscriptions (admins), without their secrets.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/webhooks", tag = "webhooks", params(("world" = String, Path)),
    responses((status = 200, body = Vec<Webhook>), (status = 403, body = ErrorBody)))]
pub async fn list(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<Vec<Webhook>>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(
        app.webhooks()
            .subscriptions(w.id)
            .await?
            .into_iter()
            .map(|s| s.webhook)
            .collect(),
    ))
}

/// Subscribe a URL to a world's hold events. The answer holds the signing secret, this once.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/webhooks", tag = "webhooks", request_body = NewWebhook, params(("world" = String, Path)),
    responses((status = 201, body = CreatedWebhook), (status = 422, body = ErrorBody)))]
pub async fn create(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(new): Body<NewWebhook>,
) -> Result<(StatusCode, Json<CreatedWebhook>), ApiError> {
    let w = app.world(&caller, &world).await?;
    let url = reqwest::Url::parse(&new.url)
        .map_err(|e| ApiError::field("url", format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::field("url", "must be an http:// or https:// URL"));
    }
    let events = new
        .events
        .unwrap_or_else(|| DEFAULT_EVENTS.iter().map(|e| (*e).to_owned()).collect());
    if events.is_empty() {
        return Err(ApiError::field(
            "events",
            "subscribe to at least one event type",
        ));
    }
    for (i, e) in events.iter().enumerate() {
        if !EVENT_TYPES.contains(&e.as_str()) {
            return Err(ApiError::field(
                &format!("events[{i}]"),
                format!("{e:?} is not one of {}", EVENT_TYPES.join(", ")),
            ));
        }
    }
    let webhook = Webhook {
        id: WebhookId::random(),
        world: w.id.to_string(),
        url: url.to_string(),
        events,
        created_at: app.now(),
    };
    let sub = Subscription {
        webhook: webhook.clone(),
        secret: secret("whsec_")?,
    };
    app.webhooks()
        .save_subscription(&caller.actor(), &sub, w.id)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedWebhook {
            webhook,
            secret: sub.secret,
        }),
    ))
}

fn webhook_id(s: &str) -> Result<WebhookId, ApiError> {
    s.parse().map_err(|_| ApiError::not_found("webhook", s))
}

async fn owned(app: &App, caller: &Caller, id: WebhookId) -> Result<Subscription, ApiError> {
    let sub = app
        .webhooks()
        .subscription(id)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook", id))?;
    app.world(caller, &sub.webhook.world).await?;
    Ok(sub)
}

/// Unsubscribe a webhook (admins). Its deliveries stop after the attempt in progress.
#[utoipa::path(delete, path = "/api/v1/webhooks/{webhook}", tag = "webhooks", params(("webhook" = WebhookId, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let sub = owned(&app, &caller, webhook_id(&id)?).await?;
    app.webhooks()
        .delete_subscription(&caller.actor(), &sub.webhook)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The deliveries to this webhook, oldest first, a page at a time, with their attempts and
/// status. Finished ones are kept for `webhooks.keep_deliveries` (30 days by default).
#[utoipa::path(get, path = "/api/v1/webhooks/{webhook}/deliveries", tag = "webhooks", params(("webhook" = WebhookId, Path), PageParams),
    responses((status = 200, body = DeliveriesPage), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn deliveries(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Params(q): Params<PageParams>,
) -> Result<Json<DeliveriesPage>, ApiError> {
    let sub = owned(&app, &caller, webhook_id(&id)?).await?;
    let limit = super::page_size(q.limit, super::Listing::Log)?;
    Ok(Json(
        app.webhooks()
            .deliveries(sub.webhook.id, super::position(q.after)?, limit)
            .await?,
    ))
}
