//! Events: entries of the append-only, hash-chained log. The same entries feed live streams,
//! webhooks and a hold's history.

use std::sync::Arc;

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
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(EventType),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(doc = "An event's `type`, as on the wire (`EventPayload::type_name`).")]
pub enum EventPayload {
    /// A hold was raised (and is shown to people).
    #[serde(rename = "hold.created")]
    #[strum_discriminants(strum(serialize = "hold.created"))]
    // Shared, not owned: the event, the store's write and the raiser's answer carry the same
    // hold, and this node's recent holds keep it, without a copy each.
    HoldCreated { hold: Arc<Hold> },
    /// A hold is still pending and its deadline approaches.
    #[serde(rename = "hold.reminded")]
    #[strum_discriminants(strum(serialize = "hold.reminded"))]
    HoldReminded { deadline: Timestamp },
    /// One approval was counted towards a quorum.
    #[serde(rename = "hold.voted")]
    #[strum_discriminants(strum(serialize = "hold.voted"))]
    HoldVoted {
        vote: Vote,
        approvals: u32,
        quorum: u32,
    },
    /// An answer was chosen and waits for the confirm step.
    #[serde(rename = "hold.awaiting_confirm")]
    #[strum_discriminants(strum(serialize = "hold.awaiting_confirm"))]
    HoldAwaitingConfirm { answer: PendingAnswer },
    /// A person (or a non-interactive default) decided the hold.
    #[serde(rename = "hold.decided")]
    #[strum_discriminants(strum(serialize = "hold.decided"))]
    HoldDecided { outcome: Outcome },
    /// The deadline passed; the configured outcome was applied.
    #[serde(rename = "hold.expired")]
    #[strum_discriminants(strum(serialize = "hold.expired"))]
    HoldExpired { outcome: Outcome },
    /// The hold was withdrawn (its turn was cancelled, or its agent withdrew it).
    #[serde(rename = "hold.withdrawn")]
    #[strum_discriminants(strum(serialize = "hold.withdrawn"))]
    HoldWithdrawn { outcome: Outcome },
    /// Policy allowed a call without asking.
    #[serde(rename = "call.allowed")]
    #[strum_discriminants(strum(serialize = "call.allowed"))]
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
    #[strum_discriminants(strum(serialize = "call.denied"))]
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
    #[strum_discriminants(strum(serialize = "grant.created"))]
    GrantCreated { grant: Grant },
    #[serde(rename = "grant.revoked")]
    #[strum_discriminants(strum(serialize = "grant.revoked"))]
    GrantRevoked { grant: GrantId },
    /// A policy changed: a world's own (a new `version`), or the base file reloaded (no
    /// `world`). `digest` is the SHA-256 of the text now in force.
    #[serde(rename = "policy.changed")]
    #[strum_discriminants(strum(serialize = "policy.changed"))]
    PolicyChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        world: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<u64>,
        digest: String,
    },
    #[serde(rename = "world.created")]
    #[strum_discriminants(strum(serialize = "world.created"))]
    WorldCreated { world: World },
    #[serde(rename = "world.updated")]
    #[strum_discriminants(strum(serialize = "world.updated"))]
    WorldUpdated { world: World },
    #[serde(rename = "world.deleted")]
    #[strum_discriminants(strum(serialize = "world.deleted"))]
    WorldDeleted { world: WorldId },
    #[serde(rename = "agent.created")]
    #[strum_discriminants(strum(serialize = "agent.created"))]
    AgentCreated { agent: Box<Agent> },
    #[serde(rename = "agent.updated")]
    #[strum_discriminants(strum(serialize = "agent.updated"))]
    AgentUpdated { agent: Box<Agent> },
    #[serde(rename = "agent.deleted")]
    #[strum_discriminants(strum(serialize = "agent.deleted"))]
    AgentDeleted { agent: AgentId },
    #[serde(rename = "chat.created")]
    #[strum_discriminants(strum(serialize = "chat.created"))]
    ChatCreated { chat: Chat },
    /// A chat's title or agent changed.
    #[serde(rename = "chat.updated")]
    #[strum_discriminants(strum(serialize = "chat.updated"))]
    ChatUpdated { chat: Chat },
    #[serde(rename = "chat.deleted")]
    #[strum_discriminants(strum(serialize = "chat.deleted"))]
    ChatDeleted { chat: ChatId },
    /// An API token was created (never with its secret).
    #[serde(rename = "token.created")]
    #[strum_discriminants(strum(serialize = "token.created"))]
    TokenCreated { token: TokenInfo },
    /// An API token was revoked; its browser sessions ended with it.
    #[serde(rename = "token.revoked")]
    #[strum_discriminants(strum(serialize = "token.revoked"))]
    TokenRevoked { token: TokenInfo },
    /// A URL was subscribed to a world's hold events (never with the signing secret).
    #[serde(rename = "webhook.created")]
    #[strum_discriminants(strum(serialize = "webhook.created"))]
    WebhookCreated { webhook: Webhook },
    /// A webhook subscription was deleted, with its deliveries.
    #[serde(rename = "webhook.deleted")]
    #[strum_discriminants(strum(serialize = "webhook.deleted"))]
    WebhookDeleted { webhook: Webhook },
    /// A message was added to a chat (a user's, the agent's answer, a tool result).
    #[serde(rename = "message.created")]
    #[strum_discriminants(strum(serialize = "message.created"))]
    MessageCreated { message: Message },
    /// A user message started a turn.
    #[serde(rename = "turn.started")]
    #[strum_discriminants(strum(serialize = "turn.started"))]
    TurnStarted { turn: TurnId },
    /// Text the agent is writing, as it streams (pieces, in order).
    #[serde(rename = "turn.text")]
    #[strum_discriminants(strum(serialize = "turn.text"))]
    TurnText { turn: TurnId, text: String },
    /// The LLM proposed a tool call.
    #[serde(rename = "turn.tool_call")]
    #[strum_discriminants(strum(serialize = "turn.tool_call"))]
    TurnToolCall { turn: TurnId, call: ToolCall },
    /// A tool call started running.
    #[serde(rename = "turn.tool_started")]
    #[strum_discriminants(strum(serialize = "turn.tool_started"))]
    TurnToolStarted {
        turn: TurnId,
        call: String,
        name: String,
    },
    /// Text a running tool call streams while it runs (a remote A2A agent's answer as it
    /// comes, or its question), pieces in order. Shown to people; the LLM gets the call's
    /// result (`turn.tool_finished`) only.
    #[serde(rename = "turn.tool_text")]
    #[strum_discriminants(strum(serialize = "turn.tool_text"))]
    TurnToolText {
        turn: TurnId,
        call: String,
        text: String,
    },
    /// A tool call's result is final (whether or not it ran).
    #[serde(rename = "turn.tool_finished")]
    #[strum_discriminants(strum(serialize = "turn.tool_finished"))]
    TurnToolFinished {
        turn: TurnId,
        call: String,
        result: ToolResult,
    },
    /// The agent gave its final answer.
    #[serde(rename = "turn.finished")]
    #[strum_discriminants(strum(serialize = "turn.finished"))]
    TurnFinished { turn: TurnId },
    /// The turn could not go on (an unreachable LLM, say); `error` says what to fix.
    #[serde(rename = "turn.failed")]
    #[strum_discriminants(strum(serialize = "turn.failed"))]
    TurnFailed { turn: TurnId, error: String },
    #[serde(rename = "turn.canceled")]
    #[strum_discriminants(strum(serialize = "turn.canceled"))]
    TurnCanceled { turn: TurnId },
    /// A person denied a call and stopped the turn; the LLM is not called again.
    #[serde(rename = "turn.stopped")]
    #[strum_discriminants(strum(serialize = "turn.stopped"))]
    TurnStopped { turn: TurnId },
}

impl EventPayload {
    /// The event's type name, as on the wire.
    pub fn type_name(&self) -> &'static str {
        EventType::from(self).as_str()
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

impl EventType {
    /// Its name on the wire, as serde writes it (the `wire_names` test compares them).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the event ends a hold's wait: its payload has the hold's `outcome`
    /// (`EventPayload::resolution`).
    pub fn resolves_hold(self) -> bool {
        matches!(
            self,
            EventType::HoldDecided | EventType::HoldExpired | EventType::HoldWithdrawn
        )
    }

    /// Whether the event changes a hold (raises it, reminds, counts a vote, waits for a
    /// confirm step, or ends it).
    pub fn changes_hold(self) -> bool {
        matches!(
            self,
            EventType::HoldCreated
                | EventType::HoldReminded
                | EventType::HoldVoted
                | EventType::HoldAwaitingConfirm
        ) || self.resolves_hold()
    }
}

/// What decided a call without a person.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(DecidedByKind),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "What decided a call: `DecidedBy`'s `by`, as on the wire.")]
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
