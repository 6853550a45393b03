//! The router: every route, its OpenAPI description, and the layers around them.

mod access;
mod audit;
mod catalog;
mod grants;
mod holds;
mod hooks;
mod live;
mod ops;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{delete, get, post};
use utoipa::OpenApi;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::app::App;
use crate::error::ApiError;
use crate::{auth, metrics};

/// The whole HTTP interface. Tests call it directly; `serve` puts it on a socket.
/// A listing's page size: `limit`, 100 when left out, at most 1000.
pub(crate) fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    match limit.unwrap_or(100) {
        n @ 1..=1000 => Ok(n),
        n => Err(ApiError::param(
            "limit",
            format!("{n} is not from 1 to 1000"),
        )),
    }
}

pub fn router(app: App) -> Router {
    let max_body = app.config().max_body;
    Router::new()
        .route("/", get(ops::index))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/login", get(access::login))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1/session", get(access::session))
        .route("/api/v1/logout", post(access::logout))
        .route(
            "/api/v1/tokens",
            get(access::tokens).post(access::create_token),
        )
        .route("/api/v1/tokens/{token}", delete(access::revoke_token))
        .route(
            "/api/v1/worlds",
            get(catalog::worlds).post(catalog::create_world),
        )
        .route(
            "/api/v1/worlds/{world}",
            get(catalog::world)
                .patch(catalog::update_world)
                .delete(catalog::delete_world),
        )
        .route(
            "/api/v1/worlds/{world}/agents",
            get(catalog::agents).post(catalog::create_agent),
        )
        .route(
            "/api/v1/worlds/{world}/agents/{agent}",
            get(catalog::agent)
                .patch(catalog::update_agent)
                .delete(catalog::delete_agent),
        )
        .route(
            "/api/v1/worlds/{world}/chats",
            get(catalog::chats).post(catalog::create_chat),
        )
        .route(
            "/api/v1/worlds/{world}/chats/{chat}",
            get(catalog::chat)
                .patch(catalog::update_chat)
                .delete(catalog::delete_chat),
        )
        .route(
            "/api/v1/worlds/{world}/chats/{chat}/messages",
            get(catalog::messages).post(catalog::send),
        )
        .route("/api/v1/worlds/{world}/turns/{turn}", get(catalog::turn))
        .route(
            "/api/v1/worlds/{world}/turns/{turn}/cancel",
            post(catalog::cancel),
        )
        .route("/api/v1/worlds/{world}/holds", post(holds::create))
        .route("/api/v1/worlds/{world}/grants", get(grants::list))
        .route(
            "/api/v1/worlds/{world}/webhooks",
            get(hooks::list).post(hooks::create),
        )
        .route("/api/v1/holds", get(holds::list))
        .route("/api/v1/holds/{hold}", get(holds::get))
        .route("/api/v1/holds/{hold}/decision", post(holds::decide))
        .route("/api/v1/holds/{hold}/default", post(holds::decide_default))
        .route("/api/v1/holds/{hold}/wait", get(holds::wait))
        .route("/api/v1/holds/{hold}/withdraw", post(holds::withdraw))
        .route(
            "/api/v1/batches/{batch}/decision",
            post(holds::decide_batch),
        )
        .route("/api/v1/grants/{grant}", delete(grants::revoke))
        .route("/api/v1/policy/explain", post(grants::explain))
        .route("/api/v1/webhooks/{webhook}", delete(hooks::delete))
        .route(
            "/api/v1/webhooks/{webhook}/deliveries",
            get(hooks::deliveries),
        )
        .route("/api/v1/audit/events", get(audit::events))
        .route("/api/v1/audit/verify", get(audit::verify))
        .route("/api/v1/events", get(live::stream))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), auth::guard))
        .layer(middleware::from_fn_with_state(app.clone(), metrics::track))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(app)
}

async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}

/// The OpenAPI document, as committed in `docs/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API token: hp_…"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                auth::SESSION_COOKIE,
                "A browser session (from /login). Requests that change something also need the X-CSRF-Token header.",
            ))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Holdpoint",
        description = "A human-in-the-loop runtime for LLM agents. Errors are always {\"error\": {\"code\", \"message\", \"details\"}}.",
        license(name = "Apache-2.0")
    ),
    security(("token" = []), ("session" = [])),
    modifiers(&Security),
    paths(
        ops::healthz, ops::readyz, ops::metrics,
        access::login, access::session, access::logout, access::tokens, access::create_token, access::revoke_token,
        catalog::worlds, catalog::create_world, catalog::world, catalog::update_world, catalog::delete_world,
        catalog::agents, catalog::create_agent, catalog::agent, catalog::update_agent, catalog::delete_agent,
        catalog::chats, catalog::create_chat, catalog::chat, catalog::update_chat, catalog::delete_chat, catalog::messages, catalog::send,
        catalog::turn, catalog::cancel,
        holds::list, holds::get, holds::decide, holds::decide_default, holds::decide_batch, holds::wait, holds::create, holds::withdraw,
        grants::list, grants::revoke, grants::explain,
        hooks::list, hooks::create, hooks::delete, hooks::deliveries,
        audit::events, audit::verify,
        live::stream,
    ),
    components(schemas(holdpoint_protocol::EventPayload, holdpoint_protocol::Event)),
    tags(
        (name = "holds", description = "Holds: list, decide, wait on, raise and withdraw them"),
        (name = "worlds"), (name = "agents"), (name = "chats"),
        (name = "grants", description = "Remembered approvals, and policy explanations"),
        (name = "events", description = "Live events (server-sent events)"),
        (name = "webhooks"), (name = "audit"),
        (name = "access", description = "Tokens and browser sessions"),
        (name = "operations")
    )
)]
struct ApiDoc;
