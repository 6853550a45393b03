//! Worlds, agents, chats, messages and turns.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use holdpoint_protocol::{
    Agent, AgentChanges, Chat, ChatChanges, ChatId, ErrorBody, MessagesPage, NewAgent, NewChat,
    NewWorld, PageParams, SendMessage, Turn, TurnId, TurnStarted, UpstreamConfig, World,
    WorldChanges,
};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::service::chats as service;

/// A world as the API shows it: the values of its MCP servers' `env` and `headers`, and of
/// its remote A2A agents' `headers`, hidden.
fn shown(mut world: World) -> World {
    holdpoint_core::mcp::hide_all_secrets(&mut world.mcp_servers);
    holdpoint_agent::hide_remote_secrets(&mut world.a2a_agents);
    world
}

/// Worlds this caller may see.
#[utoipa::path(get, path = "/api/v1/worlds", tag = "worlds", responses((status = 200, body = Vec<World>)))]
pub async fn worlds(State(app): State<App>, caller: Caller) -> Result<Json<Vec<World>>, ApiError> {
    let all = app.runtime().worlds().await?;
    Ok(Json(
        all.into_iter()
            .filter(|w| caller.world.is_none_or(|c| c == w.id))
            .map(shown)
            .collect(),
    ))
}

/// Create a world (admins), with its own MCP servers if given (`mcp_servers`, checked as the
/// configuration file's are: a bad one is 422 naming `mcp_servers.NAME.FIELD`).
#[utoipa::path(post, path = "/api/v1/worlds", tag = "worlds", request_body = NewWorld,
    responses((status = 201, body = World), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_world(
    State(app): State<App>,
    caller: Caller,
    Body(new): Body<NewWorld>,
) -> Result<(StatusCode, Json<World>), ApiError> {
    app.channels().check_world_routes(&new.notice_routes)?;
    Ok((
        StatusCode::CREATED,
        Json(shown(
            app.runtime().create_world(&caller.actor(), new).await?,
        )),
    ))
}

/// One world, by id or name.
#[utoipa::path(get, path = "/api/v1/worlds/{world}", tag = "worlds", params(("world" = String, Path, description = "id or name")),
    responses((status = 200, body = World), (status = 404, body = ErrorBody)))]
pub async fn world(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<World>, ApiError> {
    Ok(Json(shown(app.world(&caller, &world).await?)))
}

/// Rename or describe a world, or add, replace and remove its MCP servers (admins):
/// `{"mcp_servers": {"fs": {…}, "old": null}}` sets `fs` and removes `old`, leaving the
/// others. Connections to servers removed or changed are closed. `notice_routes` replaces
/// the world's own notice routes as a whole (`[]` removes them); a route the server's
/// `[channels]` cannot serve (a group it lacks, email or Slack not configured) is 422 naming
/// `notice_routes[N].FIELD`, and nothing is saved.
#[utoipa::path(patch, path = "/api/v1/worlds/{world}", tag = "worlds", request_body = WorldChanges, params(("world" = String, Path)),
    responses((status = 200, body = World), (status = 400, description = "The body is not valid JSON, or there is none (`missing_body`: a PATCH needs a JSON object of the fields to change)", body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_world(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(changes): Body<WorldChanges>,
) -> Result<Json<World>, ApiError> {
    let w = app.world(&caller, &world).await?;
    // Its routes need the server's `[channels]` (its groups, its transports): checked here,
    // before anything is saved.
    if let Some(routes) = &changes.notice_routes {
        app.channels().check_world_routes(routes)?;
    }
    let updated = app
        .runtime()
        .update_world(&caller.actor(), w.id, changes)
        .await?;
    // Its MCP servers are replaced by every node as it reads the change (`McpServers::follow`).
    Ok(Json(shown(updated)))
}

/// The world's own MCP servers, for the MCP gateway that starts them (`holdpoint mcp
/// --world`). Admins get the values of their `env` and `headers`, and nothing else shows
/// them; an agent's credential gets them `(hidden)`, like everyone else: a program is never
/// handed a secret (the gateway starts only the servers that need none).
#[utoipa::path(get, path = "/api/v1/worlds/{world}/mcp-servers", tag = "worlds", params(("world" = String, Path)),
    responses((status = 200, body = BTreeMap<String, UpstreamConfig>), (status = 404, body = ErrorBody)))]
pub async fn world_mcp_servers(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<BTreeMap<String, UpstreamConfig>>, ApiError> {
    let mut servers = app.world(&caller, &world).await?.mcp_servers;
    if !caller.is_admin() {
        holdpoint_core::mcp::hide_all_secrets(&mut servers);
    }
    Ok(Json(servers))
}

/// Delete a world with its agents and chats (admins). Its working directory is kept.
#[utoipa::path(delete, path = "/api/v1/worlds/{world}", tag = "worlds", params(("world" = String, Path)),
    responses((status = 204), (status = 409, description = "A turn runs in it", body = ErrorBody)))]
pub async fn delete_world(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<StatusCode, ApiError> {
    let w = app.world(&caller, &world).await?;
    app.runtime().delete_world(&caller.actor(), w.id).await?;
    // Its MCP servers are stopped by every node as it reads the deletion (`McpServers::follow`).
    Ok(StatusCode::NO_CONTENT)
}

/// The agents of a world.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/agents", tag = "agents", params(("world" = String, Path)), responses((status = 200, body = Vec<Agent>)))]
pub async fn agents(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<Vec<Agent>>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(app.runtime().agents(w.id).await?))
}

/// Create an agent (admins). Its `llm.api_key_env` names an environment variable of the
/// server; the key itself is never stored.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/agents", tag = "agents", request_body = NewAgent, params(("world" = String, Path)),
    responses((status = 201, body = Agent), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_agent(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(new): Body<NewAgent>,
) -> Result<(StatusCode, Json<Agent>), ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok((
        StatusCode::CREATED,
        Json(
            app.runtime()
                .create_agent(&caller.actor(), w.id, new)
                .await?,
        ),
    ))
}

/// One agent, by id or name.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/agents/{agent}", tag = "agents", params(("world" = String, Path), ("agent" = String, Path, description = "id or name")),
    responses((status = 200, body = Agent), (status = 404, body = ErrorBody)))]
pub async fn agent(
    State(app): State<App>,
    caller: Caller,
    Path((world, agent)): Path<(String, String)>,
) -> Result<Json<Agent>, ApiError> {
    let w = app.world(&caller, &world).await?;
    Ok(Json(app.runtime().find_agent(w.id, &agent).await?))
}

/// Change an agent (admins): its instructions, tools or LLM settings.
#[utoipa::path(patch, path = "/api/v1/worlds/{world}/agents/{agent}", tag = "agents", request_body = AgentChanges, params(("world" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = Agent), (status = 400, description = "The body is not valid JSON, or there is none (`missing_body`: a PATCH needs a JSON object of the fields to change)", body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Another agent of the world has the name (`name_taken`)", body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn update_agent(
    State(app): State<App>,
    caller: Caller,
    Path((world, agent)): Path<(String, String)>,
    Body(changes): Body<AgentChanges>,
) -> Result<Json<Agent>, ApiError> {
    let w = app.world(&caller, &world).await?;
    let a = app.runtime().find_agent(w.id, &agent).await?;
    Ok(Json(
        app.runtime()
            .update_agent(&caller.actor(), w.id, a.id, changes)
            .await?,
    ))
}

/// Delete an agent (admins).
#[utoipa::path(delete, path = "/api/v1/worlds/{world}/agents/{agent}", tag = "agents", params(("world" = String, Path), ("agent" = String, Path)),
    responses((status = 204), (status = 409, description = "Chats use it", body = ErrorBody)))]
pub async fn delete_agent(
    State(app): State<App>,
    caller: Caller,
    Path((world, agent)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let w = app.world(&caller, &world).await?;
    let a = app.runtime().find_agent(w.id, &agent).await?;
    app.runtime()
        .delete_agent(&caller.actor(), w.id, a.id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The chats of a world.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/chats", tag = "chats", params(("world" = String, Path)), responses((status = 200, body = Vec<Chat>)))]
pub async fn chats(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
) -> Result<Json<Vec<Chat>>, ApiError> {
    Ok(Json(service::list(&app, &caller, &world).await?))
}

/// Start a chat with one of the world's agents.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/chats", tag = "chats", request_body = NewChat, params(("world" = String, Path)),
    responses((status = 201, body = Chat), (status = 404, body = ErrorBody)))]
pub async fn create_chat(
    State(app): State<App>,
    caller: Caller,
    Path(world): Path<String>,
    Body(new): Body<NewChat>,
) -> Result<(StatusCode, Json<Chat>), ApiError> {
    let chat = service::create(&app, &caller, &world, new).await?;
    Ok((StatusCode::CREATED, Json(chat)))
}

fn chat_id(s: &str) -> Result<ChatId, ApiError> {
    s.parse().map_err(|_| ApiError::not_found("chat", s))
}

/// One chat.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/chats/{chat}", tag = "chats", params(("world" = String, Path), ("chat" = ChatId, Path)),
    responses((status = 200, body = Chat), (status = 404, body = ErrorBody)))]
pub async fn chat(
    State(app): State<App>,
    caller: Caller,
    Path((world, chat)): Path<(String, String)>,
) -> Result<Json<Chat>, ApiError> {
    Ok(Json(
        service::get(&app, &caller, &world, chat_id(&chat)?).await?,
    ))
}

/// Rename a chat, or hand it to another of the world's agents (refused while a turn runs in
/// it).
#[utoipa::path(patch, path = "/api/v1/worlds/{world}/chats/{chat}", tag = "chats", request_body = ChatChanges, params(("world" = String, Path), ("chat" = ChatId, Path)),
    responses((status = 200, body = Chat), (status = 400, description = "The body is not valid JSON, or there is none (`missing_body`: a PATCH needs a JSON object of the fields to change)", body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, description = "A turn runs in it", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn update_chat(
    State(app): State<App>,
    caller: Caller,
    Path((world, chat)): Path<(String, String)>,
    Body(changes): Body<ChatChanges>,
) -> Result<Json<Chat>, ApiError> {
    let id = chat_id(&chat)?;
    Ok(Json(
        service::update(&app, &caller, &world, id, changes).await?,
    ))
}

/// Delete a chat with its messages.
#[utoipa::path(delete, path = "/api/v1/worlds/{world}/chats/{chat}", tag = "chats", params(("world" = String, Path), ("chat" = ChatId, Path)),
    responses((status = 204), (status = 409, description = "A turn runs in it", body = ErrorBody)))]
pub async fn delete_chat(
    State(app): State<App>,
    caller: Caller,
    Path((world, chat)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    service::delete(&app, &caller, &world, chat_id(&chat)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A chat's messages, oldest first, a page at a time. The agent's messages come with their
/// text rendered as safe Markdown (`rendered`): nodes to build, never HTML.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/chats/{chat}/messages", tag = "chats", params(("world" = String, Path), ("chat" = ChatId, Path), PageParams),
    responses((status = 200, body = MessagesPage)))]
pub async fn messages(
    State(app): State<App>,
    caller: Caller,
    Path((world, chat)): Path<(String, String)>,
    Params(q): Params<PageParams>,
) -> Result<Json<MessagesPage>, ApiError> {
    let limit = super::page_size(q.limit, super::Listing::Log)?;
    let after = super::position(q.after)?;
    let id = chat_id(&chat)?;
    Ok(Json(
        service::messages(&app, &caller, &world, id, after, limit).await?,
    ))
}

/// Send a message: it starts a turn and returns at once. Refused with 409 while a hold is
/// pending in the chat, or the agent is still working on the previous message.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/chats/{chat}/messages", tag = "chats", request_body = SendMessage, params(("world" = String, Path), ("chat" = ChatId, Path)),
    responses((status = 202, body = TurnStarted), (status = 409, description = "chat_locked or turn_in_progress", body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn send(
    State(app): State<App>,
    caller: Caller,
    Path((world, chat)): Path<(String, String)>,
    Body(msg): Body<SendMessage>,
) -> Result<(StatusCode, Json<TurnStarted>), ApiError> {
    let turn = service::send(&app, &caller, &world, chat_id(&chat)?, &msg.text).await?;
    Ok((StatusCode::ACCEPTED, Json(TurnStarted { turn: turn.id })))
}

fn turn_id(s: &str) -> Result<TurnId, ApiError> {
    s.parse().map_err(|_| ApiError::not_found("turn", s))
}

/// One turn: its state and its steps.
#[utoipa::path(get, path = "/api/v1/worlds/{world}/turns/{turn}", tag = "chats", params(("world" = String, Path), ("turn" = TurnId, Path)),
    responses((status = 200, body = Turn), (status = 404, body = ErrorBody)))]
pub async fn turn(
    State(app): State<App>,
    caller: Caller,
    Path((world, turn)): Path<(String, String)>,
) -> Result<Json<Turn>, ApiError> {
    Ok(Json(
        service::turn(&app, &caller, &world, turn_id(&turn)?).await?,
    ))
}

/// Cancel a turn: its pending holds are withdrawn and a running command is stopped.
#[utoipa::path(post, path = "/api/v1/worlds/{world}/turns/{turn}/cancel", tag = "chats", params(("world" = String, Path), ("turn" = TurnId, Path)),
    responses((status = 200, body = Turn), (status = 409, description = "Already over", body = ErrorBody)))]
pub async fn cancel(
    State(app): State<App>,
    caller: Caller,
    Path((world, turn)): Path<(String, String)>,
) -> Result<Json<Turn>, ApiError> {
    Ok(Json(
        service::cancel(&app, &caller, &world, turn_id(&turn)?).await?,
    ))
}
