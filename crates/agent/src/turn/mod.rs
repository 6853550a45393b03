//! The turn loop.
//!
//! A turn is driven as a sequence of steps, each persisted before the next begins, so that a
//! new process can pick the turn up where the last one stopped:
//!
//! 1. **think** — call the LLM with the conversation; record its answer and the tool calls it
//!    proposes (or finish, when it proposes none);
//! 2. **gate** — validate each call and let policy decide; calls to ask become holds of one
//!    batch. The engine is called with an idempotency key of the turn and step, so doing this
//!    again after a crash returns the same holds;
//! 3. **run** the calls policy allowed, at once; then **wait** for every hold of the batch;
//!    then run what was approved, with the arguments approved. A call is recorded as running
//!    before it runs: if the process dies meanwhile, the next one reports it as interrupted
//!    and does not run it again;
//! 4. **conclude** — give the LLM exactly one result per call, in call order, and think again.
//!
//! Every save is checked against the turn's version, so two drivers of one turn (two nodes
//! resuming it, say) cannot both act: the one whose save fails stops.

mod outcome;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use holdpoint_core::Scope;
use holdpoint_core::audit::EventDraft;
use holdpoint_core::record::put;
use holdpoint_core::store::{CommitError, Conflict, RecordKind, Write};
use holdpoint_llm::ChatRequest;
use holdpoint_protocol::{
    Actor, Agent, ApprovalRequest, CallRecord, CallState, ChatId, DecidedBy, EventPayload,
    GateRequest, GateResult, HoldRequest, Message, MessageRole, Principal, Source, ToolResult,
    Turn, TurnId, TurnStatus, WorldId,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::tools::{self, Gate, ToolContext};

/// Longest user message.
const MAX_MESSAGE: usize = 64 * 1024;

/// Why a turn stopped being driven.
enum Stop {
    /// Another driver saved the turn first: it carries on.
    Lost,
    Canceled,
    /// A person denied a call with "deny and stop".
    StoppedByPerson,
    Failed(String),
}

impl From<RuntimeError> for Stop {
    fn from(e: RuntimeError) -> Self {
        Stop::Failed(e.to_string())
    }
}

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
            // One active turn per chat: the key is the chat.
            put(
                RecordKind::ActiveTurn,
                *turn.id.as_uuid(),
                None,
                Some(chat.to_string()),
                1,
                &turn.id,
            )?,
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
        self.spawn_turn(turn.id);
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
        let token = crate::runtime::lock(&self.inner.running).get(&id).cloned();
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

    /// Drives a turn in this process (once).
    pub(crate) fn spawn_turn(&self, id: TurnId) {
        let token = CancellationToken::new();
        {
            let mut running = crate::runtime::lock(&self.inner.running);
            if running.contains_key(&id) {
                return;
            }
            running.insert(id, token.clone());
        }
        let rt = self.clone();
        tokio::spawn(async move {
            rt.drive(id, token).await;
            crate::runtime::lock(&rt.inner.running).remove(&id);
        });
    }

    async fn drive(&self, id: TurnId, cancel: CancellationToken) {
        let mut d = match Driver::load(self, id, cancel).await {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(turn = %id, error = %e, "cannot resume a turn");
                return;
            }
        };
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

struct Driver<'a> {
    rt: &'a Runtime,
    turn: Turn,
    agent: Agent,
    dir: PathBuf,
    cancel: CancellationToken,
}

impl<'a> Driver<'a> {
    async fn load(
        rt: &'a Runtime,
        id: TurnId,
        cancel: CancellationToken,
    ) -> Result<Driver<'a>, RuntimeError> {
        let turn = rt.turn(id).await?;
        let agent = rt.find_agent(turn.world, &turn.agent.to_string()).await?;
        let dir = rt.world_dir(turn.world);
        Ok(Driver {
            rt,
            turn,
            agent,
            dir,
            cancel,
        })
    }

    fn principal(&self) -> Principal {
        crate::runtime::agent_principal(&self.agent)
    }

    fn event(&self, payload: EventPayload) -> EventDraft {
        self.rt
            .event(self.turn.world, Some(self.turn.chat.to_string()), payload)
    }

    /// Saves the turn (at the next version) with other writes and events, atomically.
    async fn save(&mut self, mut writes: Vec<Write>, events: Vec<EventDraft>) -> Result<(), Stop> {
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

    async fn think(&mut self) -> Result<(), Stop> {
        if self.turn.step >= self.agent.max_steps {
            return Err(Stop::Failed(format!(
                "the agent reached its limit of {} LLM calls in one turn (max_steps)",
                self.agent.max_steps
            )));
        }
        let history = self.rt.history(self.turn.chat).await?;
        let specs = tools::specs(&self.agent);
        let request = ChatRequest {
            settings: &self.agent.llm,
            system: &self.agent.system_prompt,
            messages: &history,
            tools: &specs,
        };
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let llm = self.rt.inner.llm.clone();
        let complete = async move {
            let mut on_text = |t: &str| {
                let _ = tx.send(t.to_owned());
            };
            llm.complete(request, &mut on_text).await
        };
        let both = async { tokio::join!(complete, self.stream_text(rx)) };
        let (completion, ()) = tokio::select! {
            () = self.cancel.cancelled() => return Err(Stop::Canceled),
            both = both => both,
        };
        let completion = completion.map_err(|e| Stop::Failed(e.to_string()))?;
        let now = self.rt.now();
        let message = Message {
            role: MessageRole::Assistant,
            content: (!completion.text.is_empty()).then_some(completion.text),
            tool_calls: completion.tool_calls.clone(),
            tool_call_id: None,
            turn: Some(self.turn.id),
            at: now,
        };
        let chat = *self.turn.chat.as_uuid();
        let mut writes = vec![
            put(
                RecordKind::Message,
                Uuid::now_v7(),
                Some(chat),
                None,
                1,
                &message,
            )
            .map_err(|e| Stop::Failed(e.to_string()))?,
        ];
        let mut events = vec![self.event(EventPayload::MessageCreated { message })];
        self.turn.step += 1;
        if completion.tool_calls.is_empty() {
            self.turn.status = TurnStatus::Finished;
            self.turn.finished_at = Some(now);
            writes.push(Write::DeleteRecord {
                kind: RecordKind::ActiveTurn,
                id: *self.turn.id.as_uuid(),
            });
            events.push(self.event(EventPayload::TurnFinished { turn: self.turn.id }));
        } else {
            for call in completion.tool_calls {
                events.push(self.event(EventPayload::TurnToolCall {
                    turn: self.turn.id,
                    call: call.clone(),
                }));
                self.turn.calls.push(CallRecord {
                    call,
                    state: CallState::Proposed,
                    arguments: None,
                    hold: None,
                    approved_by: None,
                    edited: false,
                    result: None,
                });
            }
        }
        self.save(writes, events).await
    }

    /// Records streamed text as `turn.text` events, a piece at most every `text_flush`.
    async fn stream_text(&self, mut rx: mpsc::UnboundedReceiver<String>) {
        let every = self.rt.inner.config.text_flush;
        let mut buffer = String::new();
        let mut since = Instant::now();
        loop {
            let next = if buffer.is_empty() {
                rx.recv().await
            } else {
                match tokio::time::timeout(every.saturating_sub(since.elapsed()), rx.recv()).await {
                    Ok(piece) => piece,
                    Err(_) => {
                        self.emit_text(std::mem::take(&mut buffer)).await;
                        since = Instant::now();
                        continue;
                    }
                }
            };
            match next {
                Some(piece) => {
                    if buffer.is_empty() {
                        since = Instant::now();
                    }
                    buffer.push_str(&piece);
                }
                None => {
                    if !buffer.is_empty() {
                        self.emit_text(buffer).await;
                    }
                    return;
                }
            }
        }
    }

    async fn emit_text(&self, text: String) {
        let event = self.event(EventPayload::TurnText {
            turn: self.turn.id,
            text,
        });
        if let Err(e) = self.rt.commit(vec![], vec![event]).await {
            tracing::warn!(turn = %self.turn.id, error = %e, "could not record streamed text");
        }
    }

    async fn gate(&mut self) -> Result<(), Stop> {
        let mut items = Vec::new();
        let mut slots = Vec::new();
        let mut events = Vec::new();
        let chat = self.turn.chat;
        let turn = self.turn.id;
        for i in 0..self.turn.calls.len() {
            if self.turn.calls[i].state != CallState::Proposed {
                continue;
            }
            match self.gate_item(i, chat).await? {
                Ok(Some(item)) => {
                    items.push(item);
                    slots.push(i);
                }
                Ok(None) => {}
                Err(result) => events.push(finished(turn, &mut self.turn.calls[i], result)),
            }
        }
        if !items.is_empty() {
            let request = GateRequest {
                world: self.turn.world.to_string(),
                chat: Some(chat.to_string()),
                agent: Some(self.agent.id.to_string()),
                items,
                idempotency_key: Some(format!("turn:{}:step:{}", self.turn.id, self.turn.step)),
            };
            let response = self
                .rt
                .engine()
                .gate(&self.principal(), request)
                .await
                .map_err(|e| Stop::Failed(e.to_string()))?;
            self.turn.batch = response.batch;
            for (i, result) in slots.into_iter().zip(response.results) {
                let rec = &mut self.turn.calls[i];
                match result {
                    GateResult::Allowed { decided_by, .. } => {
                        rec.state = CallState::Ready;
                        rec.approved_by = Some(
                            if matches!(decided_by, DecidedBy::Grant { .. }) {
                                "grant"
                            } else {
                                "policy"
                            }
                            .into(),
                        );
                    }
                    GateResult::Denied { decided_by, .. } => events.push(finished(
                        turn,
                        rec,
                        ToolResult::DeniedByPolicy {
                            rule: outcome::describe(&decided_by),
                        },
                    )),
                    GateResult::Held { hold } => {
                        rec.state = CallState::Held;
                        rec.hold = Some(hold.id);
                    }
                    GateResult::Invalid { field, message } => {
                        let error = if field.is_empty() {
                            message
                        } else {
                            format!("{field}: {message}")
                        };
                        events.push(finished(turn, rec, ToolResult::InvalidArguments { error }));
                    }
                }
            }
        }
        let events = events.into_iter().map(|p| self.event(p)).collect();
        self.save(vec![], events).await
    }

    /// What to ask the engine for call `i`: an item to gate, nothing (it may run), or the
    /// result it gets without asking.
    async fn gate_item(
        &mut self,
        i: usize,
        chat: ChatId,
    ) -> Result<Result<Option<HoldRequest>, ToolResult>, Stop> {
        let rec = &mut self.turn.calls[i];
        let id = rec.call.id.clone();
        let Some(def) = tools::find(&self.agent, &rec.call.name) else {
            let names: Vec<String> = tools::specs(&self.agent)
                .into_iter()
                .map(|t| t.name)
                .collect();
            return Ok(Err(ToolResult::InvalidArguments {
                error: format!(
                    "there is no tool named {:?}; the tools are {}",
                    rec.call.name,
                    names.join(", ")
                ),
            }));
        };
        let args: Value = match serde_json::from_str(&rec.call.arguments) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Ok(Err(ToolResult::InvalidArguments {
                    error: "the arguments must be a JSON object".into(),
                }));
            }
            Err(e) => {
                return Ok(Err(ToolResult::InvalidArguments {
                    error: format!("the arguments are not valid JSON: {e}"),
                }));
            }
        };
        rec.arguments = Some(args.clone());
        Ok(match def.gate {
            Gate::Policy | Gate::AlwaysAsk => Ok(Some(HoldRequest::Approval(ApprovalRequest {
                tool_call_id: Some(id),
                tool: def.name.into(),
                arguments: args,
                schema: Some((def.schema)()),
                annotations: None,
                description: None,
                deadline: None,
                always_ask: def.gate == Gate::AlwaysAsk,
                offers: None,
            }))),
            Gate::Question => tools::question(&id, &args)
                .map(|q| Some(HoldRequest::Question(q)))
                .map_err(|error| ToolResult::InvalidArguments { error }),
            Gate::Skill => {
                let name = args["name"].as_str().unwrap_or_default().to_owned();
                let session = self
                    .rt
                    .store()
                    .record_by_key(RecordKind::SkillSession, Some(*chat.as_uuid()), &name)
                    .await
                    .map_err(|e| Stop::Failed(e.to_string()))?;
                if session.is_some() {
                    let rec = &mut self.turn.calls[i];
                    rec.state = CallState::Ready;
                    rec.approved_by = Some("session".into());
                    return Ok(Ok(None));
                }
                tools::skill_question(&id, &self.dir, &args)
                    .map(|(_, q)| Some(HoldRequest::Question(q)))
                    .map_err(|error| ToolResult::Failed { error })
            }
        })
    }

    async fn run(&mut self, i: usize) -> Result<(), Stop> {
        let rec = &mut self.turn.calls[i];
        rec.state = CallState::Running;
        let (name, call_id) = (rec.call.name.clone(), rec.call.id.clone());
        let started = self.event(EventPayload::TurnToolStarted {
            turn: self.turn.id,
            call: call_id,
            name: name.clone(),
        });
        // Recorded before it runs: a crash from here on reports the call as interrupted.
        self.save(vec![], vec![started]).await?;
        let args = self.turn.calls[i].arguments.clone().unwrap_or(Value::Null);
        let ctx = ToolContext {
            runtime: self.rt,
            agent: &self.agent,
            dir: &self.dir,
            cancel: &self.cancel,
        };
        let output = tools::run(&ctx, &name, &args).await;
        let turn = self.turn.id;
        let rec = &mut self.turn.calls[i];
        let result = match output {
            Ok(output) => ToolResult::Executed {
                output,
                arguments: rec.edited.then(|| args.clone()),
                approved_by: rec.approved_by.clone().unwrap_or_else(|| "policy".into()),
            },
            Err(error) => ToolResult::Failed { error },
        };
        let event = finished(turn, rec, result);
        let event = self.event(event);
        self.save(vec![], vec![event]).await
    }

    /// Waits for the next hold of the batch and applies its outcome.
    async fn wait(&mut self) -> Result<(), Stop> {
        if self.turn.status != TurnStatus::Waiting {
            self.turn.status = TurnStatus::Waiting;
            self.save(vec![], vec![]).await?;
        }
        let Some(i) = self
            .turn
            .calls
            .iter()
            .position(|c| c.state == CallState::Held)
        else {
            return Ok(());
        };
        let Some(hold) = self.turn.calls[i].hold else {
            return Err(Stop::Failed("a held call has no hold".into()));
        };
        let scope = Scope::any();
        let outcome = loop {
            let wait = self
                .rt
                .engine()
                .wait(hold, Duration::from_secs(3600), &scope);
            tokio::select! {
                () = self.cancel.cancelled() => return Err(Stop::Canceled),
                r = wait => match r {
                    Ok(Some(outcome)) => break outcome,
                    Ok(None) => continue,
                    Err(e) => return Err(Stop::Failed(format!("waiting for hold {hold} failed: {e}"))),
                },
            }
        };
        let gate = tools::find(&self.agent, &self.turn.calls[i].call.name)
            .map_or(Gate::Policy, |d| d.gate);
        let turn = self.turn.id;
        let applied = outcome::apply(turn, &mut self.turn.calls[i], gate, &outcome);
        let mut writes = Vec::new();
        if let Some(skill) = applied.remember_skill {
            // "Yes, for this chat": remembered per world, chat and skill.
            let chat = *self.turn.chat.as_uuid();
            writes.push(
                put(
                    RecordKind::SkillSession,
                    Uuid::now_v7(),
                    Some(chat),
                    Some(skill.clone()),
                    1,
                    &skill,
                )
                .map_err(|e| Stop::Failed(e.to_string()))?,
            );
        }
        let events = applied
            .finished
            .into_iter()
            .map(|p| self.event(p))
            .collect();
        if !self.turn.calls.iter().any(|c| c.state == CallState::Held) {
            self.turn.status = TurnStatus::Running;
        }
        self.save(writes, events).await?;
        if applied.stop {
            return Err(Stop::StoppedByPerson);
        }
        Ok(())
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
    async fn abandon(&mut self, stop: Stop) {
        // A cancel is recorded as whoever asked for it; any other end as Holdpoint's.
        let by = match stop {
            Stop::Canceled => self.rt.take_canceler(self.turn.id),
            _ => Actor::of(Source::System),
        };
        let (status, reason, payload) = match stop {
            Stop::Lost => return,
            Stop::Canceled => (
                TurnStatus::Canceled,
                "the turn was cancelled".to_owned(),
                EventPayload::TurnCanceled { turn: self.turn.id },
            ),
            Stop::StoppedByPerson => (
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

/// Marks a call of `turn` done with `result`; the event that says so.
pub(crate) fn finished(turn: TurnId, rec: &mut CallRecord, result: ToolResult) -> EventPayload {
    rec.state = CallState::Done;
    rec.result = Some(result.clone());
    EventPayload::TurnToolFinished {
        turn,
        call: rec.call.id.clone(),
        result,
    }
}
