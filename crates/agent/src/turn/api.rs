//! What the runtime offers about turns: sending a message (which starts one) and cancelling.

use std::time::Duration;

use holdpoint_core::record::put;
use holdpoint_core::store::{CommitError, Conflict, RecordKind};
use holdpoint_protocol::{
    Actor, ChatId, EventPayload, Message, MessageRole, Turn, TurnId, TurnStatus, WorldId,
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::driver::{Driver, Stop};
use super::lease::Driving;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// Longest user message.
const MAX_MESSAGE: usize = 64 * 1024;

impl Runtime {
    /// Adds a user message to a chat and starts a turn for it; `by` is who sent it, as the
    /// audit log records it. Refused while a hold is pending in the chat (decide it first) or
    /// a turn is under way there.
    pub async fn send_message(
        &self,
        by: &Actor,
        world: WorldId,
        chat: ChatId,
        text: &str,
    ) -> Result<Turn, RuntimeError> {
        let c = self.chat(world, chat).await?;
        if text.trim().is_empty() {
            return Err(RuntimeError::invalid("text", "must not be empty"));
        }
        if text.len() > MAX_MESSAGE {
            return Err(RuntimeError::invalid(
                "text",
                format!(
                    "is {} bytes long; at most {MAX_MESSAGE} are allowed",
                    text.len()
                ),
            ));
        }
        if self
            .engine()
            .chat_locked(&world.to_string(), &chat.to_string())
            .await?
        {
            return Err(RuntimeError::Conflict {
                code: "chat_locked",
                message: "a hold is pending in this chat: decide it before sending a new message"
                    .into(),
            });
        }
        let now = self.now();
        let turn = Turn {
            id: TurnId::random(),
            world,
            chat,
            agent: c.agent,
            status: TurnStatus::Running,
            step: 0,
            calls: Vec::new(),
            batch: None,
            error: None,
            started_at: now,
            finished_at: None,
            version: 1,
        };
        let message = Message {
            role: MessageRole::User,
            content: Some(text.to_owned()),
            tool_calls: vec![],
            tool_call_id: None,
            turn: Some(turn.id),
            at: now,
        };
        let writes = vec![
            put(
                RecordKind::Message,
                Uuid::now_v7(),
                Some(*chat.as_uuid()),
                None,
                1,
                &message,
            )?,
            put(
                RecordKind::Turn,
                *turn.id.as_uuid(),
                Some(*chat.as_uuid()),
                None,
                1,
                &turn,
            )?,
            // One active turn per chat: the key is the chat. This node drives it, under a lease.
            self.lease_write(turn.id, &chat.to_string(), 1)?,
        ];
        let events = vec![
            self.event_by(
                by,
                world,
                Some(chat.to_string()),
                EventPayload::MessageCreated { message },
            ),
            self.event_by(
                by,
                world,
                Some(chat.to_string()),
                EventPayload::TurnStarted { turn: turn.id },
            ),
        ];
        match self.commit(writes, events).await {
            Ok(()) => {}
            Err(CommitError::Conflict(Conflict::RecordExists { .. })) => {
                return Err(RuntimeError::Conflict {
                    code: "turn_in_progress",
                    message: "the agent is still working on the previous message in this chat; wait for it or cancel it".into(),
                });
            }
            Err(e) => return Err(e.into()),
        }
        self.spawn_turn(turn.id, Driving::new(chat.to_string(), 1));
        Ok(turn)
    }

    /// Cancels a turn: its pending holds are withdrawn, a running command is stopped, and the
    /// calls not run are reported to the LLM as not executed. The cancellation and the
    /// withdrawals are recorded as `by`'s.
    pub async fn cancel_turn(
        &self,
        by: &Actor,
        world: WorldId,
        id: TurnId,
    ) -> Result<Turn, RuntimeError> {
        let turn = self.turn(id).await?;
        if turn.world != world {
            return Err(RuntimeError::not_found("turn", id));
        }
        if !turn.status.is_active() {
            return Err(RuntimeError::Conflict {
                code: "turn_finished",
                message: format!("turn {id} is already {:?}", turn.status).to_lowercase(),
            });
        }
        self.note_canceler(id, by);
        let token = self.inner.running.lock().get(&id).map(|d| d.cancel.clone());
        match token {
            Some(token) => token.cancel(),
            None => {
                // Nobody drives it here (another node, or a stopped task): cancel it directly.
                let mut d = Driver::load(self, id, CancellationToken::new()).await?;
                d.abandon(Stop::Canceled).await;
            }
        }
        let turn = self.wait_until_inactive(id).await;
        if turn.as_ref().is_ok_and(|t| !t.status.is_active()) {
            // Not read when the turn ended otherwise before it saw the cancel.
            self.take_canceler(id);
        }
        turn
    }

    async fn wait_until_inactive(&self, id: TurnId) -> Result<Turn, RuntimeError> {
        let mut events = self.engine().events(None, Default::default()).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let turn = self.turn(id).await?;
            if !turn.status.is_active() {
                return Ok(turn);
            }
            match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Ok(turn),
            }
        }
    }
}
