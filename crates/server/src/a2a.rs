//! Holdpoint's agents as A2A agents (`/a2a/{world}/{agent}`): a task is a turn, its context
//! the chat. A turn that stops at holds is an `input-required` task whose status message
//! carries them (`holdpoint_a2a::held_parts`); a reply to it decides them, as the person whose
//! token sent it — an agent's token never decides, and its reply is refused with the reason
//! while the holds wait for a person. The same holds are in the inbox, the CLI and the API:
//! the first decision wins, and a decision made elsewhere moves the task on.
//!
//! Everything goes through `service`, as the REST routes do; this module only maps turns,
//! holds and events to A2A's tasks, messages and stream events.

use holdpoint_a2a::jsonrpc::{self, Method, Request, RpcError, Version};
use holdpoint_a2a::{Target, held_parts, reply_decisions, v03};
use holdpoint_core::store::EventFilter;
use holdpoint_core::{EventStream, roles};
use holdpoint_protocol::a2a::{
    A2aMessage, A2aRole, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, Part,
    SendMessageParams, StreamResponse, Task, TaskArtifactUpdateEvent, TaskParams, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};
use holdpoint_protocol::{
    Agent, Chat, ChatId, EventPayload, Hold, HoldQuery, MessageRole, NewChat, Order, StatusFilter,
    Turn, TurnId, TurnStatus, World,
};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::app::App;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::service;

/// The client a person's A2A replies are recorded as decided through.
const VIA: &str = "A2A";

/// One agent's A2A endpoint, as one caller reaches it.
#[derive(Clone)]
pub(crate) struct Endpoint {
    app: App,
    caller: Caller,
    world: World,
    agent: Agent,
}

/// What a request is answered with: one JSON-RPC response, or a stream of them.
pub(crate) enum Answer {
    One(Value),
    Stream(mpsc::Receiver<Value>),
}

impl Endpoint {
    /// The endpoint of `agent` (id or name) in `world` (id or name), as `caller` may see it.
    pub(crate) async fn open(
        app: &App,
        caller: &Caller,
        world: &str,
        agent: &str,
    ) -> Result<Endpoint, ApiError> {
        let world = app.world(caller, world).await?;
        let agent = app.runtime().find_agent(world.id, agent).await?;
        Ok(Endpoint {
            app: app.clone(),
            caller: caller.clone(),
            world,
            agent,
        })
    }

    /// The endpoint's path, by the world's and the agent's names.
    pub(crate) fn path(&self) -> String {
        format!("/a2a/{}/{}", self.world.name, self.agent.name)
    }

    /// The agent's card, its endpoint at `url`: one skill for the agent, one per tool.
    pub(crate) async fn card(&self, url: String) -> Result<AgentCard, ApiError> {
        let tools = self.app.runtime().agent_tools(&self.agent).await?;
        let description = describe(&self.agent);
        let mut skills = vec![AgentSkill {
            id: self.agent.name.clone(),
            name: self.agent.name.clone(),
            description: description.clone(),
            tags: vec!["holdpoint".into()],
        }];
        skills.extend(tools.into_iter().map(|t| AgentSkill {
            id: format!("{}-{}", self.agent.name, t.name),
            name: t.name,
            description: t.description,
            tags: vec!["tool".into()],
        }));
        let mut schemes = Map::new();
        schemes.insert(
            "bearer".into(),
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A Holdpoint token (hp_…): a person's may decide holds, an agent's never does"}}),
        );
        Ok(AgentCard {
            name: self.agent.name.clone(),
            description,
            supported_interfaces: vec![AgentInterface {
                url: url.clone(),
                protocol_binding: "JSONRPC".into(),
                protocol_version: "1.0".into(),
            }],
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: AgentCapabilities {
                streaming: true,
                push_notifications: false,
            },
            security_schemes: schemes,
            security_requirements: vec![json!({"schemes": {"bearer": {}}})],
            default_input_modes: vec!["text/plain".into(), "application/json".into()],
            default_output_modes: vec!["text/plain".into(), "application/json".into()],
            skills,
            url,
            protocol_version: "0.3.0".into(),
            preferred_transport: "JSONRPC".into(),
            security: vec![json!({"bearer": []})],
        })
    }

    /// Answers one request.
    pub(crate) async fn answer(&self, request: Request) -> Answer {
        let (id, version) = (request.id.clone(), request.version);
        let result = match request.method {
            Method::SendMessage | Method::SendStreamingMessage => {
                self.send(request.params, request.method.streams(), version)
                    .await
            }
            Method::GetTask => self.get(request.params, version).await,
            Method::CancelTask => self.cancel(request.params, version).await,
            Method::SubscribeToTask => self.subscribe(request.params, version).await,
        };
        match result {
            Ok(Reply::Value(v)) => Answer::One(jsonrpc::result(&id, v)),
            Ok(Reply::Events(rx)) => Answer::Stream(wrap(rx, id, version)),
            Err(e) => Answer::One(jsonrpc::error(&id, &e, version)),
        }
    }

    async fn send(
        &self,
        params: Value,
        streaming: bool,
        version: Version,
    ) -> Result<Reply, RpcError> {
        let params: SendMessageParams = parse(params)?;
        let message = params.message;
        if message.role != A2aRole::User {
            return Err(RpcError::invalid_params(
                "message.role",
                "a message to an agent is ROLE_USER's",
            ));
        }
        let config = params.configuration.unwrap_or_default();
        // The turn a reply answers: named by taskId, or the one waiting in the context.
        let (chat, waiting) = match (&message.task_id, &message.context_id) {
            (Some(task), context) => {
                let turn = self.turn(task).await?;
                if context
                    .as_deref()
                    .is_some_and(|c| c != turn.chat.to_string())
                {
                    return Err(RpcError::invalid_params(
                        "message.contextId",
                        "is not the context of the task",
                    ));
                }
                let chat = self.chat(turn.chat).await?;
                match turn.status {
                    // Holds are committed before the turn records that it waits on them.
                    _ if self.waits(&turn).await => (chat, Some(turn)),
                    TurnStatus::Running | TurnStatus::Waiting => {
                        return Err(RpcError::unsupported(format!(
                            "task {task} is working: follow it with SubscribeToTask, or cancel it"
                        )));
                    }
                    _ => {
                        return Err(RpcError::unsupported(format!(
                            "task {task} is in a terminal state ({}): send without taskId, in the same contextId, to start another",
                            <&str>::from(state(turn.status))
                        )));
                    }
                }
            }
            (None, Some(context)) => {
                let id: ChatId = context.parse().map_err(|_| {
                    RpcError::invalid_params("message.contextId", "is no context of this agent")
                })?;
                let chat = self.chat(id).await?;
                let active = self
                    .app
                    .runtime()
                    .active_turn(chat.id)
                    .await
                    .map_err(|e| rpc(e.into()))?;
                let waiting = match active {
                    Some(t) => {
                        let turn = self
                            .app
                            .runtime()
                            .turn(t)
                            .await
                            .map_err(|e| rpc(e.into()))?;
                        self.waits(&turn).await.then_some(turn)
                    }
                    None => None,
                };
                (chat, waiting)
            }
            (None, None) => (self.new_chat(&message).await?, None),
        };
        // Followed from before anything changes, so nothing is missed.
        let events = self.events(chat.id).await?;
        let (turn, resumed) = match waiting {
            Some(turn) => {
                self.decide(&turn, &message).await?;
                (turn, true)
            }
            None => {
                let text = text_of(&message)?;
                let turn = service::chats::send(
                    &self.app,
                    &self.caller,
                    &self.world.id.to_string(),
                    chat.id,
                    &text,
                )
                .await
                .map_err(rpc)?;
                (turn, false)
            }
        };
        if streaming {
            let (tx, rx) = mpsc::channel(64);
            let this = self.clone();
            tokio::spawn(async move {
                let first = if resumed {
                    StreamResponse::StatusUpdate(update(&turn, TaskState::Working, None, None))
                } else {
                    StreamResponse::Task(this.snapshot(&turn, None).await)
                };
                if tx.send(out(&first, version)).await.is_ok() {
                    this.follow(events, turn.id, tx, version, true).await;
                }
            });
            return Ok(Reply::Events(rx));
        }
        let task = if config.return_immediately {
            self.snapshot(&turn, None).await
        } else {
            let (tx, mut rx) = mpsc::channel(64);
            let this = self.clone();
            let id = turn.id;
            let follow =
                tokio::spawn(async move { this.follow(events, id, tx, version, true).await });
            while rx.recv().await.is_some() {}
            let answer = follow.await.ok().flatten();
            let turn = self.turn(&turn.id.to_string()).await?;
            self.snapshot(&turn, answer).await
        };
        let answer = StreamResponse::Task(task);
        Ok(Reply::Value(match version {
            Version::V1 => serde_json::to_value(&answer).unwrap_or(Value::Null),
            Version::V03 => v03::response_out(&answer),
        }))
    }

    /// Decides the holds `turn` waits on as `message` says, as the caller: a person.
    async fn decide(&self, turn: &Turn, message: &A2aMessage) -> Result<(), RpcError> {
        let pending = self.pending(turn.chat).await?;
        let decisions = reply_decisions(&message.parts, &pending)
            .map_err(|e| RpcError::invalid_params(&e.field, e.message))?;
        if !roles::may_decide(self.caller.principal.role) {
            return Err(RpcError::unsupported(
                "only a person decides holds: this reply came with an agent's token, and agents never decide; the holds wait for a person (the inbox, the CLI, the API, or a reply with an approver's token)",
            )
            .with_data(json!({"reason": "agents_never_decide"})));
        }
        let who = self.caller.principal.clone().via(Some(VIA.to_owned()));
        for (Target::Hold(id), decision) in decisions {
            let key = format!("a2a:{}:{id}", message.message_id);
            match service::holds::decide(&self.app, &self.caller, &who, id, decision, Some(&key))
                .await
            {
                Ok(_) => {}
                // Decided elsewhere meanwhile: the first decision stands, and the task moves on.
                Err(e) if e.code == "already_decided" => {}
                Err(e) => return Err(rpc(e)),
            }
        }
        Ok(())
    }

    async fn get(&self, params: Value, version: Version) -> Result<Reply, RpcError> {
        let params: TaskParams = parse(params)?;
        let turn = self.turn(&params.id).await?;
        Ok(Reply::Value(task_value(
            &self.snapshot(&turn, None).await,
            version,
        )))
    }

    async fn cancel(&self, params: Value, version: Version) -> Result<Reply, RpcError> {
        let params: TaskParams = parse(params)?;
        let turn = self.turn(&params.id).await?;
        if !turn.status.is_active() {
            return Err(RpcError::not_cancelable(format!(
                "task {} is over ({})",
                params.id,
                <&str>::from(state(turn.status))
            )));
        }
        let turn =
            service::chats::cancel(&self.app, &self.caller, &self.world.id.to_string(), turn.id)
                .await
                .map_err(rpc)?;
        Ok(Reply::Value(task_value(
            &self.snapshot(&turn, None).await,
            version,
        )))
    }

    async fn subscribe(&self, params: Value, version: Version) -> Result<Reply, RpcError> {
        let params: TaskParams = parse(params)?;
        let turn = self.turn(&params.id).await?;
        let events = self.events(turn.chat).await?;
        let turn = self.turn(&params.id).await?;
        if !turn.status.is_active() {
            return Err(RpcError::unsupported(format!(
                "task {} is in a terminal state ({})",
                params.id,
                <&str>::from(state(turn.status))
            )));
        }
        let (tx, rx) = mpsc::channel(64);
        let this = self.clone();
        tokio::spawn(async move {
            let first = StreamResponse::Task(this.snapshot(&turn, None).await);
            if tx.send(out(&first, version)).await.is_ok() {
                // The snapshot shows the holds it waits on: follow it until it goes on.
                this.follow(events, turn.id, tx, version, false).await;
            }
        });
        Ok(Reply::Events(rx))
    }

    /// Sends the turn's progress as stream events until it ends or waits for a person; the
    /// agent's answer, when it gave one. With `waiting_ends`, a turn that already waits on
    /// holds ends it at once.
    async fn follow(
        &self,
        mut events: EventStream,
        id: TurnId,
        tx: mpsc::Sender<Value>,
        version: Version,
        waiting_ends: bool,
    ) -> Option<String> {
        let shutdown = self.app.shutdown().clone();
        // Holds may already wait (a reply that decided only some of them).
        if waiting_ends
            && let Ok(turn) = self.app.runtime().turn(id).await
            && let Some(last) = self.input_required(&turn).await
        {
            let _ = tx.send(out(&last, version)).await;
            return None;
        }
        // The agent's answer, from the message that records it (read once here, not again
        // from the chat's history).
        let mut answer: Option<String> = None;
        let mut chunks = 0usize;
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return answer,
                () = tx.closed() => return answer,
                e = events.next() => match e {
                    Ok(e) => e,
                    Err(_) => return answer,
                },
            };
            let turn_of = |t: &TurnId| *t == id;
            let (response, last) = match &event.payload {
                EventPayload::MessageCreated { message }
                    if message.turn == Some(id) && message.role == MessageRole::Assistant =>
                {
                    if let Some(text) = &message.content {
                        answer = Some(text.clone());
                    }
                    (None, false)
                }
                EventPayload::TurnText { turn, text } if turn_of(turn) => {
                    chunks += 1;
                    (
                        Some(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                            task_id: id.to_string(),
                            context_id: event.chat.clone().unwrap_or_default(),
                            artifact: Artifact {
                                artifact_id: format!("{id}-answer"),
                                name: Some("answer".into()),
                                parts: vec![Part::text(text.clone())],
                            },
                            append: chunks > 1,
                            last_chunk: false,
                        })),
                        false,
                    )
                }
                EventPayload::TurnToolCall { turn, call } if turn_of(turn) => {
                    let Ok(turn) = self.app.runtime().turn(id).await else {
                        return answer;
                    };
                    let data = json!({"tool_call": {"id": call.id, "name": call.name, "arguments": call.arguments}});
                    (
                        Some(StreamResponse::StatusUpdate(update(
                            &turn,
                            TaskState::Working,
                            Some(vec![Part::data(data)]),
                            None,
                        ))),
                        false,
                    )
                }
                EventPayload::TurnToolFinished { turn, call, result } if turn_of(turn) => {
                    let Ok(turn) = self.app.runtime().turn(id).await else {
                        return answer;
                    };
                    let data = json!({"tool_result": {"id": call, "result": result}});
                    (
                        Some(StreamResponse::StatusUpdate(update(
                            &turn,
                            TaskState::Working,
                            Some(vec![Part::data(data)]),
                            None,
                        ))),
                        false,
                    )
                }
                EventPayload::HoldCreated { .. } => {
                    // A batch is committed whole: once one of its holds is seen, all are.
                    let Ok(turn) = self.app.runtime().turn(id).await else {
                        return answer;
                    };
                    match self.input_required(&turn).await {
                        Some(r) => (Some(r), true),
                        None => (None, false),
                    }
                }
                EventPayload::TurnFinished { turn }
                | EventPayload::TurnFailed { turn, .. }
                | EventPayload::TurnCanceled { turn }
                | EventPayload::TurnStopped { turn }
                    if turn_of(turn) =>
                {
                    let Ok(turn) = self.app.runtime().turn(id).await else {
                        return answer;
                    };
                    let task = self.snapshot(&turn, answer.clone()).await;
                    if let Some(artifact) = task.artifacts.first() {
                        let last = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                            task_id: task.id.clone(),
                            context_id: task.context_id.clone(),
                            artifact: artifact.clone(),
                            append: false,
                            last_chunk: true,
                        });
                        if tx.send(out(&last, version)).await.is_err() {
                            return answer;
                        }
                    }
                    (
                        Some(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                            task_id: task.id,
                            context_id: task.context_id,
                            status: task.status,
                            metadata: None,
                        })),
                        true,
                    )
                }
                _ => (None, false),
            };
            if let Some(response) = response
                && tx.send(out(&response, version)).await.is_err()
            {
                return answer;
            }
            if last {
                return answer;
            }
        }
    }

    /// Whether `turn` waits on holds.
    async fn waits(&self, turn: &Turn) -> bool {
        self.input_required(turn).await.is_some()
    }

    /// The input-required update of a turn waiting on holds, if it waits on any.
    async fn input_required(&self, turn: &Turn) -> Option<StreamResponse> {
        if !turn.status.is_active() {
            return None;
        }
        let pending = self.pending(turn.chat).await.ok()?;
        if pending.is_empty() {
            return None;
        }
        let (parts, metadata) = held_parts(&pending);
        Some(StreamResponse::StatusUpdate(update(
            turn,
            TaskState::InputRequired,
            Some(parts),
            Some(metadata),
        )))
    }

    /// The task of `turn` as it stands; `answer` is the agent's, if known (else read from the
    /// chat).
    async fn snapshot(&self, turn: &Turn, answer: Option<String>) -> Task {
        let mut status = TaskStatus {
            state: state(turn.status),
            message: None,
            timestamp: Some(self.app.now().to_string()),
        };
        let mut artifacts = Vec::new();
        match turn.status {
            TurnStatus::Running | TurnStatus::Waiting => {
                if let Some(StreamResponse::StatusUpdate(u)) = self.input_required(turn).await {
                    status = u.status;
                }
            }
            TurnStatus::Failed | TurnStatus::Stopped => {
                let why = turn
                    .error
                    .clone()
                    .unwrap_or_else(|| "a person denied a call and stopped the turn".into());
                status.message = Some(agent_message(turn, vec![Part::text(why)]));
            }
            _ => {}
        }
        let answer = match answer {
            Some(a) => Some(a),
            None => self.answer_text(turn).await,
        };
        if let Some(answer) = answer {
            artifacts.push(Artifact {
                artifact_id: format!("{}-answer", turn.id),
                name: Some("answer".into()),
                parts: vec![Part::text(answer)],
            });
        }
        Task {
            id: turn.id.to_string(),
            context_id: turn.chat.to_string(),
            status,
            artifacts,
            history: Vec::new(),
            metadata: None,
        }
    }

    /// The agent's last text in the turn: its answer, once it has given one.
    async fn answer_text(&self, turn: &Turn) -> Option<String> {
        self.app.runtime().answer(turn).await.ok().flatten()
    }

    /// The holds open in `chat` (a turn raises a batch at a time: one page holds it).
    async fn pending(&self, chat: ChatId) -> Result<Vec<Hold>, RpcError> {
        // Read as the engine, not as the caller: an agent reads the holds of its own task,
        // though listing holds is people's.
        let query = HoldQuery {
            world: Some(self.world.id.to_string()),
            chat: Some(chat.to_string()),
            status: StatusFilter::Open,
            kind: None,
            batch: None,
            agent: None,
            tool: None,
            order: Order::default(),
            cursor: None,
            limit: None,
        };
        let page = self
            .app
            .engine()
            .holds(&query)
            .await
            .map_err(|e| rpc(e.into()))?;
        Ok(page.items)
    }

    async fn events(&self, chat: ChatId) -> Result<EventStream, RpcError> {
        self.app
            .engine()
            .events(
                None,
                EventFilter {
                    world: Some(self.world.id.to_string()),
                    chat: Some(chat.to_string()),
                    hold: None,
                },
            )
            .await
            .map_err(|e| rpc(e.into()))
    }

    /// A turn of this agent the caller may see, by its task id.
    async fn turn(&self, task: &str) -> Result<Turn, RpcError> {
        let id: TurnId = task.parse().map_err(|_| RpcError::task_not_found(task))?;
        let turn = service::chats::turn(&self.app, &self.caller, &self.world.id.to_string(), id)
            .await
            .map_err(|_| RpcError::task_not_found(task))?;
        if turn.agent != self.agent.id {
            return Err(RpcError::task_not_found(task));
        }
        self.chat(turn.chat)
            .await
            .map_err(|_| RpcError::task_not_found(task))?;
        Ok(turn)
    }

    /// A chat of this agent the caller may use: people any, an agent's token those it started.
    async fn chat(&self, id: ChatId) -> Result<Chat, RpcError> {
        let unknown = || {
            RpcError::invalid_params(
                "message.contextId",
                format!("{id} is no context of this agent"),
            )
        };
        let chat = service::chats::get(&self.app, &self.caller, &self.world.id.to_string(), id)
            .await
            .map_err(|_| unknown())?;
        let own = chat.started_by.as_ref().is_some_and(|by| {
            by.name.as_deref() == Some(self.caller.principal.name.as_str())
                && by.role == Some(self.caller.principal.role)
        });
        if chat.agent != self.agent.id || (self.caller.is_agent() && !own) {
            return Err(unknown());
        }
        Ok(chat)
    }

    async fn new_chat(&self, message: &A2aMessage) -> Result<Chat, RpcError> {
        let text = text_of(message)?;
        let mut title: String = text.chars().take(60).collect();
        if title.trim().is_empty() {
            title = format!("A2A with {}", self.agent.name);
        }
        let new = NewChat {
            agent: self.agent.id.to_string(),
            title: Some(title.trim().to_owned()),
        };
        service::chats::create(&self.app, &self.caller, &self.world.id.to_string(), new)
            .await
            .map_err(rpc)
    }
}

enum Reply {
    Value(Value),
    Events(mpsc::Receiver<Value>),
}

/// Each event of a stream as a whole JSON-RPC response.
fn wrap(mut rx: mpsc::Receiver<Value>, id: Value, _version: Version) -> mpsc::Receiver<Value> {
    let (tx, out) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(v) = rx.recv().await {
            if tx.send(jsonrpc::result(&id, v)).await.is_err() {
                return;
            }
        }
    });
    out
}

fn out(response: &StreamResponse, version: Version) -> Value {
    match version {
        Version::V1 => serde_json::to_value(response).unwrap_or(Value::Null),
        Version::V03 => v03::response_out(response),
    }
}

fn task_value(task: &Task, version: Version) -> Value {
    match version {
        Version::V1 => serde_json::to_value(task).unwrap_or(Value::Null),
        Version::V03 => v03::task_out(task),
    }
}

fn update(
    turn: &Turn,
    state: TaskState,
    parts: Option<Vec<Part>>,
    metadata: Option<Map<String, Value>>,
) -> TaskStatusUpdateEvent {
    TaskStatusUpdateEvent {
        task_id: turn.id.to_string(),
        context_id: turn.chat.to_string(),
        status: TaskStatus {
            state,
            message: parts.map(|p| agent_message(turn, p)),
            timestamp: None,
        },
        metadata: metadata.filter(|m| !m.is_empty()),
    }
}

fn agent_message(turn: &Turn, parts: Vec<Part>) -> A2aMessage {
    A2aMessage {
        message_id: uuid::Uuid::new_v4().to_string(),
        context_id: Some(turn.chat.to_string()),
        task_id: Some(turn.id.to_string()),
        role: A2aRole::Agent,
        parts,
        metadata: None,
    }
}

/// A turn's state as a task's: a turn stopped by a person's denial is rejected.
fn state(status: TurnStatus) -> TaskState {
    match status {
        TurnStatus::Running => TaskState::Working,
        TurnStatus::Waiting => TaskState::InputRequired,
        TurnStatus::Finished => TaskState::Completed,
        TurnStatus::Stopped => TaskState::Rejected,
        TurnStatus::Failed => TaskState::Failed,
        TurnStatus::Canceled => TaskState::Canceled,
    }
}

/// What a message says to the agent: its text parts, and its data parts as JSON.
fn text_of(message: &A2aMessage) -> Result<String, RpcError> {
    let pieces: Vec<String> = message
        .parts
        .iter()
        .filter_map(|p| match (&p.text, &p.data) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(d)) => Some(d.to_string()),
            _ => None,
        })
        .collect();
    let text = pieces.join("\n");
    if text.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "message.parts",
            "needs text or data for the agent (files are not read)",
        ));
    }
    Ok(text)
}

fn describe(agent: &Agent) -> String {
    let first = agent
        .system_prompt
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .trim();
    let mut d: String = first.chars().take(300).collect();
    if d.is_empty() {
        d = format!("The Holdpoint agent {}", agent.name);
    }
    d
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        RpcError::invalid_params(if path == "." { "" } else { &path }, e.inner().to_string())
    })
}

/// A service error as JSON-RPC's.
fn rpc(e: ApiError) -> RpcError {
    use axum::http::StatusCode;
    let field = e
        .details
        .as_ref()
        .and_then(|d| d["field"].as_str())
        .unwrap_or_default()
        .to_owned();
    match e.status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
            RpcError::invalid_params(&field, e.message)
        }
        s if s.is_server_error() => RpcError::internal(e.message),
        _ => RpcError::unsupported(e.message).with_data(json!({"code": e.code})),
    }
}
