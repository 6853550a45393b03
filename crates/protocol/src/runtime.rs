//! The agent runtime's records: worlds, agents, chats, messages and turns, and the results
//! tool calls report to the LLM.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Actor, AgentId, BatchId, ChatId, ChosenOption, HoldId, LineageStep, OutcomeStatus,
    RemoteAgentConfig, Route, Timestamp, TurnId, UpstreamConfig, WorldId,
};

/// A workspace: its agents, chats, skills and a working directory for tools.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct World {
    pub id: WorldId,
    /// Unique among worlds.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The world's own MCP servers by name, beside those of the configuration file (a name
    /// in both: the world's replaces the file's, in this world). Their tools are offered to
    /// the world's agents as `NAME__tool`. As the API shows them, the values of `env` and
    /// `headers` read `(hidden)`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, UpstreamConfig>,
    /// Remote A2A agents by name, offered to the world's agents as the tools `a2a__NAME`. As
    /// the API shows them, the values of `headers` read `(hidden)`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub a2a_agents: BTreeMap<String, RemoteAgentConfig>,
    /// The world's own notice routes: who its holds are sent to by email and on Slack, and
    /// when again, beside the configuration file's `[[channels.routes]]` (both apply). They
    /// match this world's holds only, so none names a `world`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notice_routes: Vec<Route>,
    pub created_at: Timestamp,
    pub version: u64,
}

/// Where an agent's LLM is: any OpenAI-compatible chat completions endpoint.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// Up to the API version, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    #[schema(pattern = "^\\s*https?://")]
    pub base_url: String,
    /// 1 to 200 bytes, not only white space.
    #[schema(max_length = 200, pattern = "\\S")]
    pub model: String,
    /// The environment variable that holds the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Za-z0-9_]+$")]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request (OpenRouter's `HTTP-Referer`, say): each
    /// name an HTTP token of 1 to 100 characters, each value at most 8192 bytes without
    /// control characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(schema_with = crate::schema::llm_headers)]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 2.0)]
    pub temperature: Option<f64>,
}

/// A named LLM configuration with its instructions and tools.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Agent {
    pub id: AgentId,
    pub world: WorldId,
    /// Unique within the world.
    pub name: String,
    pub llm: LlmSettings,
    pub system_prompt: String,
    /// The tools it may call (names or globs); `None` means every built-in tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// LLM calls per turn before the turn ends.
    pub max_steps: u32,
    pub created_at: Timestamp,
    pub version: u64,
}

/// One conversation in a world, with one agent.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Chat {
    pub id: ChatId,
    pub world: WorldId,
    pub agent: AgentId,
    pub title: String,
    pub created_at: Timestamp,
    /// Who started it (absent in chats started before it was kept): an agent's credential may
    /// go on only with the chats it started (over A2A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<Actor>,
    /// A sub-agent's chat: the agents that called it, from the conversation a person follows
    /// (the first step's chat, where its holds are shown) to the one whose call it answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<LineageStep>,
    pub version: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
    Tool,
}

/// A tool call as the LLM made it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the LLM wrote them (JSON text, possibly invalid).
    pub arguments: String,
}

/// One message of a chat, in the shape LLMs are sent.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Message {
    pub role: MessageRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnId>,
    pub at: Timestamp,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum TurnStatus {
    /// Calling the LLM, or running tools.
    Running,
    /// Waiting for holds to be decided.
    Waiting,
    Finished,
    /// A person denied a call and stopped the turn.
    Stopped,
    Failed,
    Canceled,
}

impl TurnStatus {
    pub fn is_active(self) -> bool {
        matches!(self, TurnStatus::Running | TurnStatus::Waiting)
    }
}

/// Where a tool call of the current step stands.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum CallState {
    /// Proposed by the LLM, not yet decided.
    Proposed,
    /// Waiting for its hold.
    Held,
    /// Allowed (by policy or a person); about to run.
    Ready,
    /// Recorded as started: if the process dies now, the outcome is unknown.
    Running,
    /// Its result is final.
    Done,
}

/// How a call that runs was allowed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ApprovedBy {
    /// A policy rule or the policy's mode allowed it without asking.
    Policy,
    /// A standing grant from an earlier "approve always" or "approve for this chat".
    Grant,
    /// A person approved it.
    Person,
    /// Nobody answered in time and the hold's timeout outcome approved it.
    Timeout,
    /// A skill a person allowed for the rest of the chat.
    Session,
}

impl ApprovedBy {
    /// Its name on the wire, as serde writes it (see the `wire_names` test).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for ApprovedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call of a turn's current step.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CallRecord {
    pub call: ToolCall,
    pub state: CallState,
    /// The arguments that run (after an edit, the edited ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldId>,
    /// How a call that runs was allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<ApprovedBy>,
    /// A person edited the arguments before approving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResult>,
}

/// An agent's work on one user message.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Turn {
    pub id: TurnId,
    pub world: WorldId,
    pub chat: ChatId,
    pub agent: AgentId,
    pub status: TurnStatus,
    /// LLM calls made so far.
    pub step: u32,
    /// The tool calls of the current step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRecord>,
    /// The batch of holds the current step raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    pub version: u64,
}

/// What a tool call reports to the LLM: always exactly one per call, always saying what
/// happened. Sent to the LLM as this JSON object.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ToolResultStatus),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "A tool result's `status`, as on the wire.")]
pub enum ToolResult {
    /// The tool ran. `arguments` is set when a person edited them: they are what ran.
    Executed {
        output: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Value>,
        /// How it was allowed.
        approved_by: ApprovedBy,
    },
    /// The tool ran and failed.
    Failed { error: String },
    /// A person denied the call; it did not run.
    DeniedByPerson {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        decided_by: Vec<String>,
    },
    /// Nobody decided: a client that could not ask anyone (no terminal, say) applied the
    /// fail-closed default, which denies. The call did not run; asked again, a person may
    /// allow it. `applied_by` names whose client applied the default.
    DeniedByDefault {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        applied_by: Vec<String>,
    },
    /// Policy denied the call; it did not run.
    DeniedByPolicy { rule: String },
    /// Nobody decided before the deadline. `applied` is what applied instead: `deny` (the
    /// call did not run), a skill question's fallback option, or `no_answer` (a question
    /// nobody answered, with no default or `no` option: no option was chosen).
    TimedOut { applied: String },
    /// The call did not run because the turn stopped or the hold was withdrawn.
    NotExecuted { reason: String },
    /// The process stopped while the tool ran: it may or may not have had its effect, and it
    /// was not run again.
    Interrupted { note: String },
    /// The arguments were not valid for the tool; nothing was asked or run.
    InvalidArguments { error: String },
    /// A question's answer.
    Answer {
        outcome: OutcomeStatus,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        options: Vec<ChosenOption>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        decided_by: Vec<String>,
        /// The options are the question's fail-closed default, applied by a client that could
        /// not ask anyone (`decided_by` names whose): no person chose them.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_default: bool,
    },
}

/// A new world.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWorld {
    /// 1 to 64 letters, digits, `_`, `-` or `.`, starting with a letter or digit; not a UUID
    /// (worlds are found by id or name).
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub description: Option<String>,
    /// The world's own MCP servers by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, UpstreamConfig>,
    /// Remote A2A agents by name (1 to 40 letters, digits, - and _, without `__`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub a2a_agents: BTreeMap<String, RemoteAgentConfig>,
    /// The world's own notice routes (checked against the server's `[channels]`: a bad one is
    /// 422 naming `notice_routes[N].FIELD`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notice_routes: Vec<Route>,
}

/// Changes to a world; what is left out stays.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorldChanges {
    /// As a new world's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub description: Option<String>,
    /// MCP servers to add or replace (each named one as a whole), or to remove (a name given
    /// `null` instead of a server); the world's other servers stay as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, UpstreamConfig>>)]
    pub mcp_servers: Option<BTreeMap<String, Option<UpstreamConfig>>>,
    /// Remote A2A agents to add or replace (each named one as a whole), or to remove (a name
    /// given `null`); the world's others stay as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, RemoteAgentConfig>>)]
    pub a2a_agents: Option<BTreeMap<String, Option<RemoteAgentConfig>>>,
    /// The world's notice routes, the whole list replaced (`[]` removes them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice_routes: Option<Vec<Route>>,
}

/// A new agent.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAgent {
    /// As a world's: 1 to 64 letters, digits, `_`, `-` or `.`, not a UUID.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    pub name: String,
    pub llm: LlmSettings,
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub system_prompt: String,
    /// Tool names or globs (globset's syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// LLM calls per turn; 20 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 200)]
    pub max_steps: Option<u32>,
}

/// Changes to an agent; what is left out stays.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentChanges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 65536)]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 200)]
    pub max_steps: Option<u32>,
}

/// Changes to a chat; what is left out stays.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatChanges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    pub title: Option<String>,
    /// Another of the world's agents (by id or name) takes the conversation over from the
    /// next message on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// A new chat with one of the world's agents (by id or name).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewChat {
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    pub title: Option<String>,
}
