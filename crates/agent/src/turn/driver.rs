//! Driving a turn: one step after another, each saved before the next begins, until the turn
//! ends; and how it ends when it stops early.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use holdpoint_core::audit::EventDraft;
use holdpoint_core::record::put;
use holdpoint_core::store::{CommitError, Conflict, RecordKind, Write};
use holdpoint_protocol::{
    Actor, Agent, CallRecord, CallState, ChatId, EventPayload, LineageStep, Message, MessageRole,
    Principal, Source, ToolResult, Turn, TurnId, TurnStatus,
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::finished;
use super::lease::Driving;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// Why a turn stopped being driven.
pub(super) enum Stop {
    /// Another driver saved the turn first: it carries on.
    Lost,
    Canceled,
    /// A person denied a call with "deny and stop": who did, as the log recorded the decision.
    StoppedByPerson(Actor),
    Failed(String),
}

impl From<RuntimeError> for Stop {
    fn from(e: RuntimeError) -> Self {
        Stop::Failed(e.to_string())
    }
}

impl Runtime {
    /// Drives a turn in this process (once), under the lease `driving` holds on it.
    pub(crate) fn spawn_turn(&self, id: TurnId, driving: Driving) {
        let (cancel, lost) = (driving.cancel.clone(), driving.lost.clone());
        {
            let mut running = self.inner.running.lock();
            if running.contains_key(&id) {
                return;
            }
            running.insert(id, driving);
        }
        let rt = self.clone();
        tokio::spawn(async move {
            rt.drive(id, cancel, lost).await;
            rt.inner.running.lock().remove(&id);
        });
    }

    async fn drive(&self, id: TurnId, cancel: CancellationToken, lost: Arc<AtomicBool>) {
        let mut d = match Driver::load(self, id, cancel).await {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(turn = %id, error = %e, "cannot resume a turn");
                return;
            }
        };
        d.lost = lost;
        if let Err(stop) = d.recover_interrupted().await {
            d.abandon(stop).await;
            return;
        }
        while d.turn.status.is_active() {
            let step = if d.cancel.is_cancelled() {
                Err(Stop::Canceled)
            } else {
                d.step().await
            };
            match step {
                Ok(()) => {}
                Err(Stop::Lost) => return,
                Err(stop) => {
                    d.abandon(stop).await;
                    return;
                }
            }
        }
    }
}

/// One turn being driven in this process, with what its steps need.
pub(super) struct Driver<'a> {
    pub(super) rt: &'a Runtime,
    pub(super) turn: Turn,
    pub(super) agent: Agent,
    pub(super) dir: PathBuf,
    pub(super) cancel: CancellationToken,
    /// A sub-agent's chat's lineage: the agents that called it (`Chat::lineage`).
    pub(super) callers: Vec<LineageStep>,
    /// Set once another node took the turn over: nothing more is saved from here.
    lost: Arc<AtomicBool>,
}

impl<'a> Driver<'a> {
    pub(super) async fn load(
        rt: &'a Runtime,
        id: TurnId,
        cancel: CancellationToken,
    ) -> Result<Driver<'a>, RuntimeError> {
        let turn = rt.turn(id).await?;
        let agent = rt.find_agent(turn.world, &turn.agent.to_string()).await?;
        let dir = rt.world_dir(turn.world);
        let callers = rt.chat(turn.world, turn.chat).await?.lineage;
        Ok(Driver {
            rt,
            turn,
            agent,
            dir,
            cancel,
            callers,
            lost: Arc::new(AtomicBool::new(false)),
        })
    }

    pub(super) fn principal(&self) -> Principal {
        crate::runtime::agent_principal(&self.agent)
    }

    /// The chat of the conversation a person follows: this one, or for a sub-agent the chat
    /// of the agent that called first. Its holds are raised there, and grants made "for this
    /// chat" there cover its calls.
    pub(super) fn conversation(&self) -> ChatId {
        self.callers
            .first()
            .and_then(|s| s.chat)
            .unwrap_or(self.turn.chat)
    }

    /// This agent's place in a lineage: its callers, then itself, with its `call` of the
    /// next agent.
    pub(super) fn lineage_through(&self, call: Option<&str>) -> Vec<LineageStep> {
        let mut lineage = self.callers.clone();
        lineage.push(LineageStep {
            name: self.agent.name.clone(),
            agent: Some(self.agent.id),
            chat: Some(self.turn.chat),
            tool_call_id: call.map(str::to_owned),
        });
        lineage
    }

    /// The lineage of the holds of this turn's own calls: none, unless an agent called it.
    pub(super) fn hold_lineage(&self) -> Vec<LineageStep> {
        if self.callers.is_empty() {
            Vec::new()
        } else {
            self.lineage_through(None)
        }
    }

    pub(super) fn event(&self, payload: EventPayload) -> EventDraft {
        self.rt
            .event(self.turn.world, Some(self.turn.chat.to_string()), payload)
    }

    /// Saves the turn (at the next version) with other writes and events, atomically.
    pub(super) async fn save(
        &mut self,
        mut writes: Vec<Write>,
        events: Vec<EventDraft>,
    ) -> Result<(), Stop> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(Stop::Lost);
        }
        self.turn.version += 1;
        let chat = *self.turn.chat.as_uuid();
        writes.insert(
            0,
            put(
                RecordKind::Turn,
                *self.turn.id.as_uuid(),
                Some(chat),
                None,
                self.turn.version,
                &self.turn,
            )
            .map_err(|e| Stop::Failed(e.to_string()))?,
        );
        let result = self.rt.commit(writes, events).await;
        if result.is_err() {
            self.turn.version -= 1;
        }
        match result {
            Ok(()) => Ok(()),
            Err(CommitError::Conflict(Conflict::StaleRecord { .. })) => Err(Stop::Lost),
            Err(e) => Err(Stop::Failed(format!("could not save the turn: {e}"))),
        }
    }

    /// A call that was running when the last process stopped: its outcome is unknown, and it
    /// is not run again.
    async fn recover_interrupted(&mut self) -> Result<(), Stop> {
        let mut events = Vec::new();
        let turn = self.turn.id;
        for rec in self
            .turn
            .calls
            .iter_mut()
            .filter(|c| c.state == CallState::Running)
        {
            let result = ToolResult::Interrupted {
                note: "Holdpoint stopped while this tool was running: it may or may not have had its effect, and it was not run again".into(),
            };
            events.push(finished(turn, rec, result));
        }
        if events.is_empty() {
            return Ok(());
        }
        // Waiting while a call ran: a remote agent's confirmation, raised from inside that call
        // (turn/remote.rs). Its answer can no longer reach the remote agent: withdrawn.
        let held = self.turn.calls.iter().any(|c| c.state == CallState::Held);
        if self.turn.status == TurnStatus::Waiting && !held {
            if let Some(batch) = self.turn.batch.take() {
                let reason = "Holdpoint stopped while the call that asked for it ran";
                let by = Actor::of(Source::System);
                if let Err(e) = self.rt.engine().withdraw_batch(batch, &by, reason).await {
                    tracing::warn!(turn = %self.turn.id, error = %e, "could not withdraw a remote agent's confirmation");
                }
            }
            self.turn.status = TurnStatus::Running;
        }
        let events = events.into_iter().map(|p| self.event(p)).collect();
        self.save(vec![], events).await
    }

    async fn step(&mut self) -> Result<(), Stop> {
        let calls = &self.turn.calls;
        if calls.is_empty() {
            return self.think().await;
        }
        if calls.iter().any(|c| c.state == CallState::Proposed) {
            return self.gate().await;
        }
        // Calls policy allowed run at once; held ones once the whole batch is decided.
        let ready = |c: &CallRecord| c.state == CallState::Ready;
        if let Some(i) = calls.iter().position(|c| ready(c) && c.hold.is_none()) {
            return self.run(i).await;
        }
        if calls.iter().any(|c| c.state == CallState::Held) {
            return self.wait().await;
        }
        if let Some(i) = calls.iter().position(ready) {
            return self.run(i).await;
        }
        self.conclude().await
    }

    /// Gives the LLM one result per call, in call order.
    async fn conclude(&mut self) -> Result<(), Stop> {
        let (writes, events) = self.tool_messages()?;
        self.turn.calls.clear();
        self.turn.batch = None;
        self.turn.status = TurnStatus::Running;
        self.save(writes, events).await
    }

    fn tool_messages(&self) -> Result<(Vec<Write>, Vec<EventDraft>), Stop> {
        let mut writes = Vec::new();
        let mut events = Vec::new();
        let chat = *self.turn.chat.as_uuid();
        for rec in &self.turn.calls {
            let Some(result) = &rec.result else { continue };
            let content = serde_json::to_string(result).map_err(|e| Stop::Failed(e.to_string()))?;
            let message = Message {
                role: MessageRole::Tool,
                content: Some(content),
                tool_calls: vec![],
                tool_call_id: Some(rec.call.id.clone()),
                turn: Some(self.turn.id),
                at: self.rt.now(),
            };
            writes.push(
                put(
                    RecordKind::Message,
                    Uuid::now_v7(),
                    Some(chat),
                    None,
                    1,
                    &message,
                )
                .map_err(|e| Stop::Failed(e.to_string()))?,
            );
            events.push(self.event(EventPayload::MessageCreated { message }));
        }
        Ok((writes, events))
    }

    /// Ends the turn: withdraws its pending holds, reports every call not done as not
    /// executed (so the conversation stays whole for the next turn), and records why.
    pub(super) async fn abandon(&mut self, stop: Stop) {
        if self.lost.load(Ordering::SeqCst) {
            return;
        }
        // A cancel is recorded as whoever asked for it, a stop as the person who chose it;
        // any other end as Holdpoint's.
        let by = match &stop {
            Stop::Canceled => self.rt.take_canceler(self.turn.id),
            Stop::StoppedByPerson(by) => by.clone(),
            _ => Actor::of(Source::System),
        };
        let (status, reason, payload) = match stop {
            Stop::Lost => return,
            Stop::Canceled => (
                TurnStatus::Canceled,
                "the turn was canceled".to_owned(),
                EventPayload::TurnCanceled { turn: self.turn.id },
            ),
            Stop::StoppedByPerson(_) => (
                TurnStatus::Stopped,
                "a person stopped the turn".to_owned(),
                EventPayload::TurnStopped { turn: self.turn.id },
            ),
            Stop::Failed(error) => {
                tracing::warn!(turn = %self.turn.id, %error, "turn failed");
                (
                    TurnStatus::Failed,
                    error.clone(),
                    EventPayload::TurnFailed {
                        turn: self.turn.id,
                        error,
                    },
                )
            }
        };
        if let Some(batch) = self.turn.batch
            && let Err(e) = self.rt.engine().withdraw_batch(batch, &by, &reason).await
        {
            tracing::warn!(turn = %self.turn.id, error = %e, "could not withdraw the turn's holds");
        }
        let mut events = Vec::new();
        let turn = self.turn.id;
        for rec in self
            .turn
            .calls
            .iter_mut()
            .filter(|c| c.state != CallState::Done)
        {
            events.push(finished(
                turn,
                rec,
                ToolResult::NotExecuted {
                    reason: reason.clone(),
                },
            ));
        }
        let mut events: Vec<EventDraft> = events.into_iter().map(|p| self.event(p)).collect();
        let (mut writes, messages) = self.tool_messages().unwrap_or_default();
        events.extend(messages);
        events.push(self.rt.event_by(
            &by,
            self.turn.world,
            Some(self.turn.chat.to_string()),
            payload,
        ));
        writes.push(Write::DeleteRecord {
            kind: RecordKind::ActiveTurn,
            id: *self.turn.id.as_uuid(),
        });
        self.turn.calls.clear();
        self.turn.batch = None;
        self.turn.status = status;
        self.turn.finished_at = Some(self.rt.now());
        if status == TurnStatus::Failed {
            self.turn.error = Some(reason);
        }
        // A second attempt, should the first lose a race with a final save of the driver.
        for _ in 0..3 {
            match self.save(writes.clone(), events.clone()).await {
                Ok(()) | Err(Stop::Lost) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        tracing::error!(turn = %self.turn.id, "could not record the end of a turn");
    }
}
