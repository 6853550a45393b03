//! Holdpoint's vocabulary: the data that crosses every boundary (engine, store, API, live
//! streams, CLI, MCP). Plain data with serde derives; no behaviour beyond formatting and parsing.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod a2a;
mod api;
mod decision;
mod event;
mod grant;
mod hold;
mod ids;
mod lineage;
mod markdown;
mod mcp;
mod notice;
mod policy;
mod principal;
mod query;
mod remote_agent;
mod request;
mod route;
mod runtime;
mod schema;
pub mod sse;
mod time;

pub use api::{
    ActivePolicy, ApplyDefault, ArgCondition, AskInfo, AuditMismatch, AuditReport, ChatMessage,
    CommandCondition, CreatedToken, CreatedWebhook, DeliveriesPage, DeliveryStatus, ErrorBody,
    ErrorDetail, EventsPage, ExplainRequest, Explanation, Health, HoldDetail, HoldFile,
    MatchedRule, MessagesPage, NewHolds, NewToken, NewWebhook, PolicyRule, RAISE_LINES,
    RaiseSynced, RuleAsk, SendMessage, SessionInfo, TokenInfo, TurnStarted, WaitResult, Webhook,
    WebhookDelivery, Withdraw, error_chain,
};
pub use decision::{
    ApproveScope, DecideBatchRequest, DecideBatchResult, DecideOutcome, DecideResult, Decision,
    DecisionAction, DecisionKind, SeenHold,
};
pub use event::{CallVerdict, DecidedBy, DecidedByKind, Event, EventPayload, EventType};
pub use grant::{Grant, GrantScope};
pub use hold::{
    ApprovalSpec, ChosenOption, Hold, HoldKind, HoldSpec, HoldStatus, OnTimeout, Outcome,
    OutcomeStatus, PendingAnswer, QuestionOption, QuestionSpec, RuleRef, TimeoutAction,
    ToolAnnotations, Verdict, Vote,
};
pub use ids::{
    AgentId, BatchId, ChatId, GrantId, HoldId, ParseIdError, TokenId, TurnId, WebhookId, WorldId,
};
pub use lineage::{LineageStep, lineage_text};
pub use markdown::{MarkdownNode, MarkdownNodeType};
pub use mcp::{McpCallOutput, McpTool, McpToolInfo, UpstreamConfig, UpstreamTransport};
pub use notice::{Notice, NoticePurpose, NoticesPage, PostedMessage};
pub use policy::{
    PolicyLayer, PolicyReloaded, PolicyVersion, ReplayChange, ReplayExample, ReplayReport,
    ReplayRequest, SetPolicy, SuggestedRule, WorldPolicy, WorldPolicyState,
};
pub use principal::{Actor, Principal, Role, Source, VIA_MAX};
pub use query::{
    EventsParams, HoldCount, HoldCounts, HoldQuery, HoldsParams, LoginParams, Order, Page,
    PageParams, SignInForm, StatusFilter, StatusFilterName, StreamParams, WaitParams,
};
pub use remote_agent::RemoteAgentConfig;
pub use request::{
    ApprovalRequest, GateRequest, GateResponse, GateResult, HoldRequest, QuestionRequest,
};
pub use route::{Route, RouteAnnotations};
pub use runtime::{
    Agent, AgentChanges, ApprovedBy, CallRecord, CallState, Chat, ChatChanges, LlmSettings,
    Message, MessageRole, NewAgent, NewChat, NewWorld, ToolCall, ToolResult, ToolResultStatus,
    Turn, TurnStatus, World, WorldChanges,
};
pub use time::{Deadline, ParseDeadlineError, Timestamp};

/// Lists an enum's variants (`T::VARIANTS`): the wire names of the enums that derive it are
/// listed from it, by the tests and by the generator of the web interface's `wire.js`.
pub use strum::VariantArray;
