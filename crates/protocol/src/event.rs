//! Events: entries of the append-only, hash-chained log. The same entries feed live streams,
//! webhooks and a hold's history.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Actor, Agent, AgentId, Chat, ChatId, Grant, GrantId, Hold, HoldId, Message, Outcome,
    PendingAnswer, RuleRef, Timestamp, TokenInfo, ToolAnnotations, ToolCall, ToolResult, TurnId,
    Vote, Webhook, World, WorldId,
};

/// One entry of the log, as committed.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// Position in the log, from 1, without gaps.
    pub seq: u64,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldId>,
    pub actor: Actor,
    pub payload: EventPayload,
    /// SHA-256 (hex) of this entry's canonical body, which includes the previous entry's hash.
    pub hash: String,
}

/// What happened. The `type` tag names the event on the wire and in the log.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type")]
pub enum EventPayload {
    /// A hold was raised (and is shown to people).
    #[serde(rename = "hold.created")]
    HoldCreated { hold: Box<Hold> },
    /// A hold is still pending and its deadline approaches.
    #[serde(rename = "hold.reminded")]
    HoldReminded { deadline: Timestamp },
    /// One approval was counted towards a quorum.
    #[serde(rename = "hold.voted")]
    HoldVoted {
        vote: Vote,
        approvals: u32,
        quorum: u32,
    },
    /// An answer was chosen and waits for the confirm step.
    #[serde(rename = "hold.awaiting_confirm")]
    HoldAwaitingConfirm { answer: PendingAnswer },
    /// A person (or a non-interactive default) decided the hold.
    #[serde(rename = "hold.decided")]
    HoldDecided { outcome: Outcome },
    /// The deadline passed; the configured outcome was applied.
    #[serde(rename = "hold.expired")]
    HoldExpired { outcome: Outcome },
    /// The hold was withdrawn (its turn was cancelled, or its agent withdrew it).
    #[serde(rename = "hold.withdrawn")]
    HoldWithdrawn { outcome: Outcome },
    /// Policy allowed a call without asking.
    #[serde(rename = "call.allowed")]
    CallAllowed {
        tool: String,
        digest: String,
        /// The call's arguments, so a candidate policy can be replayed over recorded calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<Object>)]
        arguments: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<ToolAnnotations>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        decided_by: DecidedBy,
    },
    /// Policy denied a call without asking.
    #[serde(rename = "call.denied")]
    CallDenied {
        tool: String,
        digest: String,
        /// The call's arguments, so a candidate policy can be replayed over recorded calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<Object>)]
        arguments: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<ToolAnnotations>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        decided_by: DecidedBy,
    },
    #[serde(rename = "grant.created")]
    GrantCreated { grant: Grant },
    #[serde(rename = "grant.revoked")]
    GrantRevoked { grant: GrantId },
    /// A policy changed: a world's own (a new `version`), or the base file reloaded (no
    /// `world`). `digest` is the SHA-256 of the text now in force.
    #[serde(rename = "policy.changed")]
    PolicyChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        world: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<u64>,
        digest: String,
    },
    #[serde(rename = "world.created")]
    WorldCreated { world: World },
    #[serde(rename = "world.updated")]
    WorldUpdated { world: World },
    #[serde(rename = "world.deleted")]
    WorldDeleted { world: WorldId },
    #[serde(rename = "agent.created")]
    AgentCreated { agent: Box<Agent> },
    #[serde(rename = "agent.updated")]
    AgentUpdated { agent: Box<Agent> },
    #[serde(rename = "agent.deleted")]
    AgentDeleted { agent: AgentId },
    #[serde(rename = "chat.created")]
    ChatCreated { chat: Chat },
    /// A chat's title or agent changed.
    #[serde(rename = "chat.updated")]
    ChatUpdated { chat: Chat },
    #[serde(rename = "chat.deleted")]
    ChatDeleted { chat: ChatId },
    /// An API token was created (never with its secret).
    #[serde(rename = "token.created")]
    TokenCreated { token: TokenInfo },
    /// An API token was revoked; its browser sessions ended with it.
    #[serde(rename = "token.revoked")]
    TokenRevoked { token: TokenInfo },
    /// A URL was subscribed to a world's hold events (never with the signing secret).
    #[serde(rename = "webhook.created")]
    WebhookCreated { webhook: Webhook },
    /// A webhook subscription was deleted, with its deliveries.
    #[serde(rename = "webhook.deleted")]
    WebhookDeleted { webhook: Webhook },
    /// A message was added to a chat (a user's, the agent's answer, a tool result).
    #[serde(rename = "message.created")]
    MessageCreated { message: Message },
    /// A user message started a turn.
    #[serde(rename = "turn.started")]
    TurnStarted { turn: TurnId },
    /// Text the agent is writing, as it streams (pieces, in order).
    #[serde(rename = "turn.text")]
    TurnText { turn: TurnId, text: String },
    /// The LLM proposed a tool call.
    #[serde(rename = "turn.tool_call")]
    TurnToolCall { turn: TurnId, call: ToolCall },
    /// A tool call started running.
    #[serde(rename = "turn.tool_started")]
    TurnToolStarted {
        turn: TurnId,
        call: String,
        name: String,
    },
    /// A tool call's result is final (whether or not it ran).
    #[serde(rename = "turn.tool_finished")]
    TurnToolFinished {
        turn: TurnId,
        call: String,
        result: ToolResult,
    },
    /// The agent gave its final answer.
    #[serde(rename = "turn.finished")]
    TurnFinished { turn: TurnId },
    /// The turn could not go on (an unreachable LLM, say); `error` says what to fix.
    #[serde(rename = "turn.failed")]
    TurnFailed { turn: TurnId, error: String },
    #[serde(rename = "turn.canceled")]
    TurnCanceled { turn: TurnId },
    /// A person denied a call and stopped the turn; the LLM is not called again.
    #[serde(rename = "turn.stopped")]
    TurnStopped { turn: TurnId },
}

impl EventPayload {
    /// The event's type name, as on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventPayload::HoldCreated { .. } => "hold.created",
            EventPayload::HoldReminded { .. } => "hold.reminded",
            EventPayload::HoldVoted { .. } => "hold.voted",
            EventPayload::HoldAwaitingConfirm { .. } => "hold.awaiting_confirm",
            EventPayload::HoldDecided { .. } => "hold.decided",
            EventPayload::HoldExpired { .. } => "hold.expired",
            EventPayload::HoldWithdrawn { .. } => "hold.withdrawn",
            EventPayload::CallAllowed { .. } => "call.allowed",
            EventPayload::CallDenied { .. } => "call.denied",
            EventPayload::GrantCreated { .. } => "grant.created",
            EventPayload::GrantRevoked { .. } => "grant.revoked",
            EventPayload::PolicyChanged { .. } => "policy.changed",
            EventPayload::WorldCreated { .. } => "world.created",
            EventPayload::WorldUpdated { .. } => "world.updated",
            EventPayload::WorldDeleted { .. } => "world.deleted",
            EventPayload::AgentCreated { .. } => "agent.created",
            EventPayload::AgentUpdated { .. } => "agent.updated",
            EventPayload::AgentDeleted { .. } => "agent.deleted",
            EventPayload::ChatCreated { .. } => "chat.created",
            EventPayload::ChatUpdated { .. } => "chat.updated",
            EventPayload::ChatDeleted { .. } => "chat.deleted",
            EventPayload::TokenCreated { .. } => "token.created",
            EventPayload::TokenRevoked { .. } => "token.revoked",
            EventPayload::WebhookCreated { .. } => "webhook.created",
            EventPayload::WebhookDeleted { .. } => "webhook.deleted",
            EventPayload::MessageCreated { .. } => "message.created",
            EventPayload::TurnStarted { .. } => "turn.started",
            EventPayload::TurnText { .. } => "turn.text",
            EventPayload::TurnToolCall { .. } => "turn.tool_call",
            EventPayload::TurnToolStarted { .. } => "turn.tool_started",
            EventPayload::TurnToolFinished { .. } => "turn.tool_finished",
            EventPayload::TurnFinished { .. } => "turn.finished",
            EventPayload::TurnFailed { .. } => "turn.failed",
            EventPayload::TurnCanceled { .. } => "turn.canceled",
            EventPayload::TurnStopped { .. } => "turn.stopped",
        }
    }

    /// The final outcome, for the events that resolve a hold.
    pub fn resolution(&self) -> Option<&Outcome> {
        match self {
            EventPayload::HoldDecided { outcome }
            | EventPayload::HoldExpired { outcome }
            | EventPayload::HoldWithdrawn { outcome } => Some(outcome),
            _ => None,
        }
    }
}

/// What decided a call without a person.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum DecidedBy {
    Rule {
        rule: RuleRef,
    },
    Grant {
        grant: GrantId,
    },
    /// No rule matched; the policy mode decided (`manual`, `auto_approve`, `auto_deny`).
    Mode {
        mode: String,
    },
}

/// Policy's answer for a call, as recorded.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum CallVerdict {
    Allow,
    Ask,
    Deny,
}

impl CallVerdict {
    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
