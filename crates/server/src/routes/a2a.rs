//! `/a2a/{world}/{agent}`: a world's agent as an A2A agent (A2A 1.0's JSON-RPC binding, and
//! 0.3's methods), and its agent card. The mapping of turns and holds to tasks is `a2a.rs`'s.

use std::convert::Infallible;

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::header;
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use holdpoint_a2a::jsonrpc;

use crate::a2a::{Answer, Endpoint};
use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract;

/// Send a JSON-RPC request of A2A to one of the world's agents (docs/a2a.md): `SendMessage`,
/// `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask` (A2A 1.0; send
/// `A2A-Version: 1.0`), or 0.3's `message/send`, `message/stream`, `tasks/get`,
/// `tasks/cancel`, `tasks/resubscribe`. A task is a turn and its context the chat. A turn
/// that stops at holds is `input-required`, its holds in the status message; a reply decides
/// them as the person whose token sent it (an agent's token never decides). Errors are
/// JSON-RPC errors in a 200 answer; the streaming methods answer with server-sent events,
/// each one JSON-RPC response. This is A2A's JSON-RPC, not a REST operation.
#[utoipa::path(post, path = "/a2a/{world}/{agent}", tag = "a2a", operation_id = "a2a_message",
    params(("world" = String, Path, description = "The world (name or id)"),
        ("agent" = String, Path, description = "The agent (name or id)"),
        ("A2A-Version" = Option<String>, Header, description = "1.0 for A2A 1.0's methods (0.3's need none)")),
    request_body(content = Object, description = "One JSON-RPC request", content_type = "application/json"),
    responses((status = 200, description = "One JSON-RPC response (application/json), or server-sent events of them (text/event-stream) for the streaming methods"),
        (status = 404, description = "No such world or agent", body = holdpoint_protocol::ErrorBody),
        (status = 413, description = "The body is larger than server.max_body", body = holdpoint_protocol::ErrorBody)))]
pub async fn post(
    State(app): State<App>,
    caller: Caller,
    Path((world, agent)): Path<(String, String)>,
    request: Request,
) -> Result<Response, ApiError> {
    let endpoint = Endpoint::open(&app, &caller, &world, &agent).await?;
    let version = request
        .headers()
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = extract::read(request, &app).await?;
    let request = match jsonrpc::read(&body, version.as_deref()) {
        Ok(request) => request,
        // Not readable as a request of either version: answered in 1.0's shapes.
        Err((id, e)) => {
            return Ok(Json(jsonrpc::error(&id, &e, jsonrpc::Version::V1)).into_response());
        }
    };
    // A stream counts against the caller's streams, as the live stream does.
    let slot = if request.method.streams() {
        Some(app.limiter().stream(&caller)?)
    } else {
        None
    };
    Ok(match endpoint.answer(request).await {
        Answer::One(value) => Json(value).into_response(),
        Answer::Stream(rx) => {
            let shutdown = app.shutdown().clone();
            let body = stream::unfold(
                (rx, slot, shutdown),
                |(mut rx, slot, shutdown)| async move {
                    let value = tokio::select! {
                        () = shutdown.cancelled() => return None,
                        v = rx.recv() => v?,
                    };
                    let event = Sse::default().data(value.to_string());
                    Some((Ok::<_, Infallible>(event), (rx, slot, shutdown)))
                },
            );
            let mut response = axum::response::Sse::new(body)
                .keep_alive(KeepAlive::new().interval(app.config().heartbeat))
                .into_response();
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            response
        }
    })
}

/// The agent's A2A agent card: its skills (the agent, and each tool it may call), its
/// endpoint, streaming, and the bearer token it needs. Carries A2A 1.0's fields and 0.3's,
/// so that clients of both read it.
#[utoipa::path(get, path = "/a2a/{world}/{agent}/.well-known/agent-card.json", tag = "a2a", operation_id = "a2a_agent_card",
    params(("world" = String, Path, description = "The world (name or id)"),
        ("agent" = String, Path, description = "The agent (name or id)")),
    responses((status = 200, description = "The agent card", content_type = "application/json"),
        (status = 404, description = "No such world or agent", body = holdpoint_protocol::ErrorBody)))]
pub async fn card(
    State(app): State<App>,
    caller: Caller,
    Path((world, agent)): Path<(String, String)>,
    request: Request,
) -> Result<Response, ApiError> {
    let endpoint = Endpoint::open(&app, &caller, &world, &agent).await?;
    // The guard has checked the Host against server.allowed_hosts.
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    let url = format!("http://{host}{}", endpoint.path());
    Ok(Json(endpoint.card(url).await?).into_response())
}
