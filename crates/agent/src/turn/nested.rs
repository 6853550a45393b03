//! A sub-agent: a call of `a2a__NAME` whose entry names an agent of the same world
//! (`agent = "researcher"`) runs that agent's turn here, without HTTP, in a chat of its own
//! under the caller's (`Chat::lineage`), and its answer is the call's result.
//!
//! Its holds belong to the conversation a person follows: they are raised in the chat of the
//! first caller, with the lineage of agents between (`Hold::lineage`), so they are shown,
//! listed and locked there, and a grant made "for this chat" there covers the sub-agent's calls
//! too. While the sub-agent waits, the caller's turn waits with the sub-agent's batch as its
//! own: canceling the caller withdraws those holds, and the sub-agent's turn is canceled.
//!
//! After a crash the caller's call is reported interrupted, as any call that was running; the
//! sub-agent's turn is picked up on its own and finishes in its chat.

use std::time::Duration;

use holdpoint_core::EventStream;
use holdpoint_core::roles::actor_of;
use holdpoint_core::store::EventFilter;
use holdpoint_protocol::{Actor, BatchId, ChatId, EventPayload, HoldQuery, TurnId, TurnStatus};
use serde_json::{Value, json};

use super::driver::{Driver, Stop};
use super::remote::Context;

/// How deep agents may call each other: the conversation's agent and four below it.
const MAX_DEPTH: usize = 5;
/// How often a sub-agent's turn is read again when no event says it changed (an event missed
/// while the stream caught up, say): a backstop, not the way changes are seen.
const RECHECK: Duration = Duration::from_secs(5);

const CANCELED: &str =
    "the turn was canceled while the sub-agent worked; its turn was canceled too";

impl Driver<'_> {
    /// Runs call `i`, of the world's agent `sub` under the name `name`, with `message`: the
    /// sub-agent's answer, or why there is none. `Err` only for what stops the turn.
    pub(super) async fn run_nested(
        &mut self,
        i: usize,
        name: &str,
        sub: &str,
        message: &str,
    ) -> Result<Result<Value, String>, Stop> {
        let call = self.turn.calls[i].call.id.clone();
        let lineage = self.lineage_through(Some(&call));
        if lineage.len() >= MAX_DEPTH {
            return Ok(Err(format!(
                "agents call each other at most {MAX_DEPTH} deep; this call would be deeper ({})",
                holdpoint_protocol::lineage_text(&lineage)
            )));
        }
        let agent = match self.rt.find_agent(self.turn.world, sub).await {
            Ok(agent) => agent,
            Err(e) => return Ok(Err(format!("the agent {sub:?} cannot be called: {e}"))),
        };
        if lineage.iter().any(|s| s.agent == Some(agent.id)) {
            return Ok(Err(format!(
                "{} would call {:?} again, which is already working on this ({}): agents do not call themselves",
                self.agent.name,
                agent.name,
                holdpoint_protocol::lineage_text(&lineage)
            )));
        }
        let by = actor_of(&self.principal());
        let mut stored = self.stored_context(name).await?;
        let known = match stored
            .context
            .context_id
            .as_deref()
            .map(str::parse::<ChatId>)
        {
            Some(Ok(id)) => self.rt.chat(self.turn.world, id).await.ok(),
            _ => None,
        };
        // The sub-agent's chat, with this call as the one it answers.
        let chat = match known {
            Some(chat) if chat.agent == agent.id => {
                self.rt.set_chat_lineage(&by, chat, lineage).await?
            }
            _ => {
                let title = format!("{} for {}", agent.name, self.agent.name);
                self.rt.new_chat(&by, &agent, title, lineage).await?
            }
        };
        let context = Context {
            context_id: Some(chat.id.to_string()),
            task_id: None,
        };
        self.keep_context(name, &mut stored, context).await?;
        // Followed from before the turn starts, so that no change of it is missed: the events
        // of its chat, and the holds raised through it (in the conversation's chat).
        let filter = EventFilter {
            world: Some(self.turn.world.to_string()),
            ..EventFilter::default()
        };
        let mut events = self
            .rt
            .engine()
            .events(None, filter)
            .await
            .map_err(|e| Stop::Failed(e.to_string()))?;
        let turn = match self
            .rt
            .send_message(&by, self.turn.world, chat.id, message)
            .await
        {
            Ok(turn) => turn.id,
            Err(e) => {
                return Ok(Err(format!(
                    "the agent {:?} cannot take the message: {e}",
                    agent.name
                )));
            }
        };
        loop {
            let now = self.rt.turn(turn).await?;
            match now.status {
                // Running, or not yet saved as waiting on a hold raised through it: this turn
                // waits as long as the batch it waits on is open.
                TurnStatus::Running => {
                    if !self.waits_on_open_batch().await? {
                        self.follow(None).await?;
                    }
                }
                TurnStatus::Waiting => self.follow(now.batch).await?,
                TurnStatus::Finished => {
                    self.follow(None).await?;
                    let text = self.rt.answer(&now).await?.unwrap_or_default();
                    return Ok(Ok(
                        json!({"agent": agent.name, "chat": chat.id, "text": text}),
                    ));
                }
                other => {
                    self.follow(None).await?;
                    let why = now.error.as_deref().unwrap_or("no reason was given");
                    let state: &str = other.into();
                    return Ok(Err(format!(
                        "the agent {:?}'s turn ended {state}: {why}",
                        agent.name
                    )));
                }
            }
            tokio::select! {
                () = self.cancel.cancelled() => {
                    self.cancel_sub_turn(&by, turn).await;
                    return Ok(Err(CANCELED.into()));
                }
                next = next_change(&mut events, chat.id) => match next {
                    // A hold raised through the sub-agent (by it, or by an agent it called):
                    // this turn waits on it at once, before the sub-agent has saved that it
                    // waits, so a cancel from here withdraws it.
                    Ok(Some(batch)) => self.follow(Some(batch)).await?,
                    Ok(None) => {}
                    Err(e) => return Err(Stop::Failed(format!("following the agent {:?} failed: {e}", agent.name))),
                },
            }
        }
    }

    /// This turn waits as the sub-agent does, on its batch (`Some`), or runs again.
    async fn follow(&mut self, waits_on: Option<BatchId>) -> Result<(), Stop> {
        let status = if waits_on.is_some() {
            TurnStatus::Waiting
        } else {
            TurnStatus::Running
        };
        if self.turn.status == status && self.turn.batch == waits_on {
            return Ok(());
        }
        self.turn.status = status;
        self.turn.batch = waits_on;
        self.save(vec![], vec![]).await
    }

    /// Whether this turn waits on a batch that still has open holds.
    async fn waits_on_open_batch(&self) -> Result<bool, Stop> {
        let Some(batch) = self.turn.batch else {
            return Ok(false);
        };
        let query = HoldQuery {
            world: Some(self.turn.world.to_string()),
            batch: Some(batch),
            limit: Some(1),
            ..HoldQuery::default()
        };
        let open = self
            .rt
            .engine()
            .holds(&query)
            .await
            .map_err(|e| Stop::Failed(e.to_string()))?;
        Ok(!open.items.is_empty())
    }

    async fn cancel_sub_turn(&self, by: &Actor, turn: TurnId) {
        if let Err(e) = self.rt.cancel_turn(by, self.turn.world, turn).await {
            // Ended meanwhile, most likely; anything else is only logged.
            tracing::info!(turn = %self.turn.id, sub = %turn, error = %e, "a sub-agent's turn could not be canceled");
        }
    }
}

/// Waits for the next event that may change what the sub-agent in `chat` does: the batch of a
/// hold raised through it, `None` for another change (or after [`RECHECK`] without any).
async fn next_change(
    events: &mut EventStream,
    chat: ChatId,
) -> Result<Option<BatchId>, holdpoint_core::store::StoreError> {
    let chat_text = chat.to_string();
    let give_up = tokio::time::Instant::now() + RECHECK;
    loop {
        let Ok(event) = tokio::time::timeout_at(give_up, events.next()).await else {
            return Ok(None);
        };
        let event = event?;
        if let EventPayload::HoldCreated { hold } = &event.payload
            && hold.lineage.iter().any(|s| s.chat == Some(chat))
        {
            return Ok(Some(hold.batch));
        }
        if event.chat.as_deref() == Some(chat_text.as_str()) {
            return Ok(None);
        }
    }
}
