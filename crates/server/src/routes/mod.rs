//! The router: every route, its OpenAPI description, and the layers around them.

mod a2a;
mod access;
mod audit;
mod catalog;
mod grants;
mod holds;
mod hooks;
mod links;
mod live;
mod mcp;
mod ops;
mod policy;
mod slack;
mod ui;

mod table;

use std::sync::LazyLock;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::middleware;
use axum::routing::get;
use holdpoint_protocol::Role;
use utoipa::OpenApi;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::routes;

use crate::app::App;
use crate::error::ApiError;
use crate::{auth, headers, limits, metrics};

use table::{AccessTable, Routes};

use crate::auth::Access;

const ADMINS: &[Role] = &[Role::Admin];
const PEOPLE: &[Role] = &[Role::Admin, Role::Approver];
use crate::service::RAISERS;
/// Who uses the MCP gateway: agents only (its sessions raise holds as their agent).
const AGENTS: &[Role] = &[Role::Agent];

/// Every route, once: its handler (method, path and description in its `#[utoipa::path]`)
/// and who may call it. Deciding holds needs a person's role, but that is the engine's rule
/// (with a rule's named approvers), so those routes only need a caller. An agent's
/// credential gets least privilege: it raises holds, and reads, waits on and withdraws the
/// ones raised under its name (`Caller::scope`), by id or on the live stream; chats, the
/// listing of holds, grants and the policy are people's.
fn declare() -> Routes {
    use Access::{Probe, Public, Roles, Signed};
    let pages = ui::PAGES
        .iter()
        .fold(Routes::new(ApiDoc::openapi()), |r, page| {
            r.hidden(page, Method::GET, Public, get(ui::index))
        });
    pages
        .add(Public, routes!(ui::sign_in_page, ui::sign_in))
        .hidden("/ui/{*asset}", Method::GET, Public, get(ui::asset))
        .add(Probe, routes!(ops::healthz))
        .add(Probe, routes!(ops::readyz))
        .add(Public, routes!(ops::metrics))
        .add(Public, routes!(access::login))
        .add(Public, routes!(openapi_json))
        .add(Signed, routes!(access::session))
        .add(Signed, routes!(access::logout))
        .add(Roles(ADMINS), routes!(access::tokens))
        .add(Roles(ADMINS), routes!(access::create_token))
        .add(Roles(ADMINS), routes!(access::revoke_token))
        .add(Signed, routes!(catalog::worlds))
        .add(Roles(ADMINS), routes!(catalog::create_world))
        .add(Signed, routes!(catalog::world))
        .add(Roles(ADMINS), routes!(catalog::update_world))
        .add(Roles(ADMINS), routes!(catalog::delete_world))
        .add(Roles(RAISERS), routes!(catalog::world_mcp_servers))
        .add(Signed, routes!(catalog::agents))
        .add(Roles(ADMINS), routes!(catalog::create_agent))
        .add(Signed, routes!(catalog::agent))
        .add(Roles(ADMINS), routes!(catalog::update_agent))
        .add(Roles(ADMINS), routes!(catalog::delete_agent))
        .add(Roles(PEOPLE), routes!(catalog::chats))
        .add(Roles(PEOPLE), routes!(catalog::create_chat))
        .add(Roles(PEOPLE), routes!(catalog::chat))
        .add(Roles(PEOPLE), routes!(catalog::update_chat))
        .add(Roles(PEOPLE), routes!(catalog::delete_chat))
        .add(Roles(PEOPLE), routes!(catalog::messages))
        .add(Roles(PEOPLE), routes!(catalog::send))
        .add(Roles(PEOPLE), routes!(catalog::turn))
        .add(Roles(PEOPLE), routes!(catalog::cancel))
        .add(Roles(RAISERS), routes!(holds::create))
        .add(Roles(PEOPLE), routes!(holds::list))
        .add(Roles(PEOPLE), routes!(holds::counts))
        .add(Signed, routes!(holds::get))
        .add(Roles(PEOPLE), routes!(holds::file))
        .add(Signed, routes!(holds::decide))
        .add(Signed, routes!(holds::decide_default))
        .add(Signed, routes!(holds::decide_batch))
        .add(Signed, routes!(holds::wait))
        .add(Signed, routes!(holds::withdraw))
        .add(Roles(PEOPLE), routes!(grants::list))
        .add(Roles(PEOPLE), routes!(grants::revoke))
        .add(Roles(PEOPLE), routes!(grants::policy))
        .add(Roles(PEOPLE), routes!(grants::explain))
        .add(Roles(PEOPLE), routes!(policy::world_policy))
        .add(Roles(ADMINS), routes!(policy::set_world_policy))
        .add(Roles(PEOPLE), routes!(policy::history))
        .add(Roles(ADMINS), routes!(policy::reload))
        .add(Roles(PEOPLE), routes!(policy::suggested_rule))
        .add(Roles(PEOPLE), routes!(policy::replay))
        .add(Roles(ADMINS), routes!(hooks::list))
        .add(Roles(ADMINS), routes!(hooks::create))
        .add(Roles(ADMINS), routes!(hooks::delete))
        .add(Roles(ADMINS), routes!(hooks::deliveries))
        .add(Roles(PEOPLE), routes!(audit::events))
        .add(Roles(ADMINS), routes!(audit::verify))
        .add(Signed, routes!(live::stream))
        .add(Roles(AGENTS), routes!(mcp::post, mcp::get, mcp::delete))
        .add(Signed, routes!(a2a::post))
        .add(Signed, routes!(a2a::card))
        .add(Public, routes!(links::open, links::confirm))
        .add(Roles(PEOPLE), routes!(links::notices))
        .add(Public, routes!(slack::interactions))
}

/// The size of a page a log-like listing is asked for: `limit`, by the one rule the engine
/// applies to its listing of holds too (`holdpoint_core::limits::page_size`).
pub(crate) fn page_size(limit: Option<usize>, listing: Listing) -> Result<usize, ApiError> {
    let (default, max) = match listing {
        Listing::Log => (100, 1000),
    };
    holdpoint_core::limits::page_size(limit, default, max).map_err(|e| {
        let mut e = ApiError::from(e);
        // A listing's limit is in its query string.
        e.status = axum::http::StatusCode::BAD_REQUEST;
        e
    })
}

/// The position a listing goes on after (`after`): a log position, which the store keeps as a
/// signed 64-bit integer.
pub(crate) fn position(after: Option<u64>) -> Result<Option<u64>, ApiError> {
    match after {
        Some(n) if i64::try_from(n).is_err() => Err(ApiError::param(
            "after",
            format!("{n} is beyond any position (at most {})", i64::MAX),
        )),
        other => Ok(other),
    }
}

/// The listings, by the size of their pages (holds: the engine's own).
#[derive(Clone, Copy)]
pub(crate) enum Listing {
    /// The audit log, messages, deliveries: 100 by default, at most 1000.
    Log,
}

/// The whole HTTP interface. Tests call it directly; `serve` puts it on a socket.
pub fn router(app: App) -> Router {
    let max_body = app.config().max_body;
    let (router, _, access) = declare().finish();
    router
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        // After the guard, which finds the caller whose rate it counts.
        .layer(middleware::from_fn_with_state(app.clone(), limits::rate))
        .layer(middleware::from_fn_with_state(app.clone(), auth::guard))
        .layer(middleware::from_fn_with_state::<
            _,
            std::sync::Arc<AccessTable>,
            _,
        >(access, table::mark))
        .layer(middleware::from_fn_with_state(app.clone(), metrics::track))
        .layer(middleware::from_fn(ops::path_text))
        .layer(middleware::from_fn(ops::uri_limit))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(headers::security))
        .with_state(app)
}

/// This document: every route and schema of the API.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(openapi())
}

/// Every route as declared: its method, its path template and who may call it.
pub fn operations() -> Vec<(Method, String, Access)> {
    let (_, _, access) = declare().finish();
    access
        .operations()
        .map(|(path, method, access)| (method.clone(), path.to_owned(), access))
        .collect()
}

/// The OpenAPI document, as committed in `docs/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    static DOC: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| declare().finish().1);
    DOC.clone()
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
    // Schemas that operations name but do not bring along themselves: the event stream's and a
    // raise's lines' (their bodies are not one JSON value) and those of query parameters (utoipa collects only bodies').
    components(schemas(
        holdpoint_protocol::EventPayload, holdpoint_protocol::Event, holdpoint_protocol::ErrorBody,
        holdpoint_protocol::HoldKind, holdpoint_protocol::Order, holdpoint_protocol::RaiseSynced,
    )),
    tags(
        (name = "holds", description = "Holds: list, decide, wait on, raise and withdraw them"),
        (name = "worlds"), (name = "agents"), (name = "chats"),
        (name = "grants", description = "Remembered approvals, the active policy and its explanations"),
        (name = "policy", description = "Worlds' own policies, their versions, and reloading the base policy file"),
        (name = "events", description = "Live events (server-sent events)"),
        (name = "webhooks"), (name = "audit"),
        (name = "access", description = "Tokens and browser sessions"),
        (name = "mcp", description = "The MCP gateway over streamable HTTP: MCP's JSON-RPC, not REST (docs/mcp.md)"),
        (name = "a2a", description = "The world's agents as A2A agents: A2A's JSON-RPC, not REST (docs/a2a.md)"),
        (name = "operations")
    )
)]
struct ApiDoc;
