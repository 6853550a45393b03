//! `/mcp/{world}`: the MCP gateway of a world over streamable HTTP, for agents' tokens. The
//! same gateway as `holdpoint mcp` on stdio, asking the engine in this process as the agent
//! whose token opened the session (`service/in_process.rs`).

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::http::{StatusCode, header};
use axum::response::Response;
use holdpoint_mcp::{Approver, Gateway, Holds, HttpRefusal};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract;
use crate::service::in_process;

/// The largest error text of the MCP service that is passed on.
const ERROR_TEXT: usize = 4096;

/// Send a JSON-RPC message of MCP (revisions 2024-11-05 to 2025-11-25) to the world's MCP
/// gateway: the world's upstream MCP servers' tools as `server__tool`, and Holdpoint's own
/// `ask_human` and `request_approval`, every call through the world's policy (docs/mcp.md).
/// This is MCP's streamable HTTP transport, not a REST operation: the body is one JSON-RPC
/// message (`application/json`; the client accepts `application/json` and
/// `text/event-stream`). `initialize` opens a session, whose id comes back in
/// `Mcp-Session-Id` and goes with every later request; a session belongs to the token that
/// opened it. A request is answered with a stream of server-sent events that ends with its
/// JSON-RPC response (progress notifications come first while a call waits on a hold);
/// notifications and responses are answered 202. A waiting call whose stream is closed
/// before its answer withdraws its hold. Agents' tokens only.
#[utoipa::path(post, path = "/mcp/{world}", tag = "mcp", operation_id = "mcp_message",
    params(("world" = String, Path, description = "The world (name or id) whose policy applies"),
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session, from the answer to initialize"),
        ("Holdpoint-Approver-Token" = Option<String>, Header, description = "With initialize: the token of a person (approver or admin) who answers the session's elicitations; holds raised by the session's calls are then put to a client that supports elicitation, and its user's answers are decided as that person. Refused (401, 403) when it is not a person's valid token")),
    responses((status = 200, description = "Server-sent events: the JSON-RPC messages answering the request", content_type = "text/event-stream"),
        (status = 202, description = "A notification or a response was accepted"),
        (status = 400, description = "Not a JSON-RPC message of MCP: a JSON-RPC error (-32700 with id null for what is not JSON, -32600 with the message's id or null for JSON that is not a message), or the project's error shape"),
        (status = 403, description = "The caller's role is not agent, or the session was opened by another token or at another world's endpoint", body = holdpoint_protocol::ErrorBody),
        (status = 404, description = "No such world, or no such session (it ended: open another with initialize)", body = holdpoint_protocol::ErrorBody),
        (status = 406, description = "The client does not accept application/json and text/event-stream", body = holdpoint_protocol::ErrorBody),
        (status = 408, description = "The body did not arrive in time", body = holdpoint_protocol::ErrorBody),
        (status = 413, description = "The body is larger than server.max_body", body = holdpoint_protocol::ErrorBody),
        (status = 415, description = "The body is not sent as application/json", body = holdpoint_protocol::ErrorBody)))]
pub async fn post(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    serve(app, caller, world, request).await
}

/// Open the session's stream of server-sent events for messages that answer no request (MCP's
/// streamable HTTP transport; see `POST /mcp/{world}`).
#[utoipa::path(get, path = "/mcp/{world}", tag = "mcp", operation_id = "mcp_stream",
    params(("world" = String, Path, description = "The world (name or id)"),
        ("Mcp-Session-Id" = String, Header, description = "The session, from the answer to initialize")),
    responses((status = 200, description = "Server-sent events: JSON-RPC messages of the session", content_type = "text/event-stream"),
        (status = 400, description = "No Mcp-Session-Id", body = holdpoint_protocol::ErrorBody),
        (status = 403, description = "The caller's role is not agent, or the session was opened by another token or at another world's endpoint", body = holdpoint_protocol::ErrorBody),
        (status = 404, description = "No such world, or no such session", body = holdpoint_protocol::ErrorBody),
        (status = 406, description = "The client does not accept text/event-stream", body = holdpoint_protocol::ErrorBody)))]
pub async fn get(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    serve(app, caller, world, request).await
}

/// End a session (MCP's streamable HTTP transport; see `POST /mcp/{world}`): the holds its
/// calls still wait on are withdrawn.
#[utoipa::path(delete, path = "/mcp/{world}", tag = "mcp", operation_id = "mcp_end_session",
    params(("world" = String, Path, description = "The world (name or id)"),
        ("Mcp-Session-Id" = String, Header, description = "The session, from the answer to initialize")),
    responses((status = 204, description = "The session ended"),
        (status = 400, description = "No Mcp-Session-Id", body = holdpoint_protocol::ErrorBody),
        (status = 403, description = "The caller's role is not agent, or the session was opened by another token or at another world's endpoint", body = holdpoint_protocol::ErrorBody),
        (status = 404, description = "No such world, or no such session", body = holdpoint_protocol::ErrorBody)))]
pub async fn delete(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    serve(app, caller, world, request).await
}

async fn serve(
    app: App,
    caller: Caller,
    world: String,
    request: Request,
) -> Result<Response, ApiError> {
    let world = app.world(&caller, &world).await?;
    let approver = approver(&app, request.headers()).await?;
    let (parts, body) = request.into_parts();
    // Within server.max_body and in time, as every body.
    let body = extract::read(Request::new(body), &app).await?;
    let request = Request::from_parts(parts, Body::from(body));
    let upstreams = app.mcp().for_world(&world).await;
    let world_id = world.id.to_string();
    let agent = in_process::as_session(&app, &caller);
    let holds_world = world_id.clone();
    let open = move || {
        let holds = Holds::new(agent.clone(), holds_world.clone(), None);
        let gateway = Gateway::new(holds, upstreams.clone());
        match &approver {
            Some(approver) => gateway.with_approver(approver.clone()),
            None => gateway,
        }
    };
    let response = app
        .mcp()
        .http()
        .handle(request, &caller.token.to_string(), &world_id, open)
        .await
        .map_err(|e| match e {
            HttpRefusal::NotYours => ApiError::forbidden(e.to_string()),
            HttpRefusal::TooLarge(_) => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the body is larger than the server accepts (server.max_body)",
            ),
            HttpRefusal::Unreadable(m) => ApiError::new(StatusCode::BAD_REQUEST, "bad_request", m),
        })?;
    let response = response.map(Body::new);
    refusal_in_our_shape(response).await
}

/// The MCP service refuses some requests with plain text (no session, not acceptable, …):
/// those get the API's error shape. JSON-RPC errors and everything else pass as they are.
async fn refusal_in_our_shape(response: Response) -> Result<Response, ApiError> {
    let status = response.status();
    let text = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| t.starts_with("text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !text {
        return Ok(response);
    }
    let bytes = axum::body::to_bytes(response.into_body(), ERROR_TEXT)
        .await
        .unwrap_or_default();
    let message = String::from_utf8_lossy(&bytes).into_owned();
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        s if s.is_server_error() => "mcp_failed",
        _ => "bad_request",
    };
    Err(ApiError::new(status, code, message))
}

/// The header with which a session's opener gives the token of the person who answers its
/// elicitations (an approver's or an admin's): read when the session opens.
const APPROVER_TOKEN: &str = "Holdpoint-Approver-Token";

/// The person of `Holdpoint-Approver-Token`, when one is given: a person's valid token, else
/// the request is refused (401 for a token that is not one, 403 for an agent's).
async fn approver(app: &App, headers: &HeaderMap) -> Result<Option<Approver>, ApiError> {
    let Some(value) = headers.get(APPROVER_TOKEN) else {
        return Ok(None);
    };
    let token = value
        .to_str()
        .map_err(|_| ApiError::field(APPROVER_TOKEN, "must be visible ASCII"))?;
    in_process::approver(app, token.trim())
        .await
        .map(Some)
        .map_err(|mut e| {
            e.message = format!("{APPROVER_TOKEN}: {}", e.message);
            e
        })
}
