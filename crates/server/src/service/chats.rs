//! Chats with a world's agents: starting and changing them, their messages, and the turns a
//! message starts.

use holdpoint_protocol::{
    Chat, ChatChanges, ChatId, ChatMessage, MessageRole, MessagesPage, NewChat, Turn, TurnId,
};

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;

/// The chats of `world` (by id or name, as the caller may see it).
pub async fn list(app: &App, caller: &Caller, world: &str) -> Result<Vec<Chat>, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app.runtime().chats(w.id).await?)
}

/// Starts a chat with one of the world's agents.
pub async fn create(
    app: &App,
    caller: &Caller,
    world: &str,
    new: NewChat,
) -> Result<Chat, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app
        .runtime()
        .create_chat(&caller.actor(), w.id, new)
        .await?)
}

/// One chat of `world`.
pub async fn get(app: &App, caller: &Caller, world: &str, chat: ChatId) -> Result<Chat, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app.runtime().chat(w.id, chat).await?)
}

/// Renames a chat, or hands it to another agent (refused while a turn runs in it).
pub async fn update(
    app: &App,
    caller: &Caller,
    world: &str,
    chat: ChatId,
    changes: ChatChanges,
) -> Result<Chat, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app
        .runtime()
        .update_chat(&caller.actor(), w.id, chat, changes)
        .await?)
}

/// Deletes a chat with its messages (refused while a turn runs in it).
pub async fn delete(app: &App, caller: &Caller, world: &str, chat: ChatId) -> Result<(), ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app
        .runtime()
        .delete_chat(&caller.actor(), w.id, chat)
        .await?)
}

/// At most `limit` of a chat's messages after log position `after`, oldest first. The agent's
/// messages come with their text rendered as safe Markdown: nodes to build, never HTML.
pub async fn messages(
    app: &App,
    caller: &Caller,
    world: &str,
    chat: ChatId,
    after: Option<u64>,
    limit: usize,
) -> Result<MessagesPage, ApiError> {
    let w = app.world(caller, world).await?;
    let page = app.runtime().messages(w.id, chat, after, limit).await?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|(p, _)| *p))
        .flatten();
    let items = page
        .into_iter()
        .map(|(position, message)| {
            // Only the agent's text is Markdown; people's messages are shown as they wrote them.
            let rendered = match (&message.role, &message.content) {
                (MessageRole::Assistant, Some(text)) => Some(crate::markdown::render(text)),
                _ => None,
            };
            ChatMessage {
                position,
                message,
                rendered,
            }
        })
        .collect();
    Ok(MessagesPage { items, next })
}

/// Sends `text` to the chat's agent: a turn starts and runs on; refused while a hold is
/// pending in the chat or a turn is under way.
pub async fn send(
    app: &App,
    caller: &Caller,
    world: &str,
    chat: ChatId,
    text: &str,
) -> Result<Turn, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app
        .runtime()
        .send_message(&caller.actor(), w.id, chat, text)
        .await?)
}

/// One turn of `world`: its state and its steps.
pub async fn turn(app: &App, caller: &Caller, world: &str, id: TurnId) -> Result<Turn, ApiError> {
    let w = app.world(caller, world).await?;
    let t = app.runtime().turn(id).await?;
    if t.world != w.id {
        return Err(ApiError::not_found("turn", id));
    }
    Ok(t)
}

/// Cancels a turn: its pending holds are withdrawn and a running command is stopped.
pub async fn cancel(app: &App, caller: &Caller, world: &str, id: TurnId) -> Result<Turn, ApiError> {
    let w = app.world(caller, world).await?;
    Ok(app.runtime().cancel_turn(&caller.actor(), w.id, id).await?)
}
