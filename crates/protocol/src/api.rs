//! Bodies of the REST API that are not engine or runtime records.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    CallVerdict, Deadline, DecidedBy, DecisionKind, Event, Hold, HoldRequest, MarkdownNode,
    Message, Role, RuleRef, Timestamp, TokenId, ToolAnnotations, TurnId, Verdict, WebhookId,
};

/// Every error the API returns.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_input`, `not_found`, `already_decided`, …
    pub code: String,
    /// What went wrong and what to do, for a person.
    pub message: String,
    /// More, depending on the code: the `field` at fault, the recorded decision, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// The answer of the probes `/healthz` and `/readyz`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` (the process is up) or `ready` (its storage answers).
    pub status: String,
}

/// Who is calling.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionInfo {
    pub name: String,
    pub role: Role,
    /// The one world this credential may use, if it is limited to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// For browser sessions: send it as `X-CSRF-Token` with every request that changes
    /// something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
}

/// An API token, without its secret.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TokenInfo {
    pub id: TokenId,
    /// The person or agent it belongs to.
    pub name: String,
    pub role: Role,
    /// The name of the one world the token is limited to; absent for a token of every world,
    /// and for one whose world was deleted (then `world_deleted` is true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// The token was limited to a world that has since been deleted: it stays limited to
    /// that world, so it sees no world at all.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub world_deleted: bool,
    pub created_at: Timestamp,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// 1 to 100 characters (white space around it is dropped), no control characters.
    #[schema(
        max_length = 100,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    pub role: Role,
    /// Limits the token to one world (by id or name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
}

/// A new token: its secret is shown this once.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreatedToken {
    pub token: String,
    pub info: TokenInfo,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    pub text: String,
}

/// The turn a message started.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnStarted {
    pub turn: TurnId,
}

/// A message with its position (for paging).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ChatMessage {
    pub position: u64,
    pub message: Message,
    /// An assistant message's text as Markdown, rendered safely: a tree of nodes to build as
    /// elements, never HTML (raw HTML in the text is text here). Absent for other messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered: Option<Vec<MarkdownNode>>,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessagesPage {
    pub items: Vec<ChatMessage>,
    /// Pass as `after` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// A page of a webhook's deliveries, oldest first.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveriesPage {
    pub items: Vec<WebhookDelivery>,
    /// Pass as `after` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// A hold with every event about it.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HoldDetail {
    pub hold: Hold,
    pub history: Vec<Event>,
}

/// The file a `write_file` approval would write, as it is now in its world's working
/// directory (`GET /api/v1/holds/{hold}/file`), for people to see the difference the call
/// makes. It is read when asked, so it may change before the call runs.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HoldFile {
    /// The call's `path`, relative to the world's working directory.
    pub path: String,
    /// Whether a file is there now; `false`: the call makes a new file.
    pub exists: bool,
    /// The file's size in bytes (0 when it does not exist).
    pub bytes: u64,
    /// The file's text, when it exists, is UTF-8 and is no larger than the server's file limit
    /// (`too_large` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The file is larger than the limit, so its text is not sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_large: bool,
}

/// Holds an agent raises in a world: approvals (through policy) and questions.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewHolds {
    /// The caller's own conversation: any name up to 200 bytes without control characters; it
    /// need not be one of Holdpoint's chats. Holds are listed and filtered by it, and "approve
    /// for this chat" grants apply within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub chat: Option<String>,
    /// At least one; at most `limits.batch` (64 by default).
    #[schema(min_items = 1)]
    pub items: Vec<HoldRequest>,
}

/// The media type of a raise answered in two lines (`Accept: application/x-ndjson`): first its
/// [`GateResponse`](crate::GateResponse), then its [`RaiseSynced`].
pub const RAISE_LINES: &str = "application/x-ndjson";

/// The last line of a raise answered in two lines ([`RAISE_LINES`]). The first, the raise's
/// `GateResponse`, comes as soon as the record of calls allowed at once is written where a
/// crash of Holdpoint's process cannot lose it, before it is durable against a crash of the
/// machine; this line comes once it is. A client may forward an allowed call meanwhile, and
/// should answer its own caller only after this line (Holdpoint's MCP gateway does).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RaiseSynced {
    /// True once the record is durable. False when it could not be made durable: the record
    /// may be lost, and the server refuses further writes; `error` says why.
    pub synced: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// The result of waiting on a hold.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WaitResult {
    /// Whether the hold is decided (its `outcome` is set); `false` when the wait timed out
    /// first. The hold keeps its own deadline either way.
    pub decided: bool,
    pub hold: Hold,
}

/// Applying the fail-closed default to a hold, for a client that cannot ask anyone.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyDefault {
    /// Why no one was asked (`no terminal`, say); recorded with the outcome. At most 4096
    /// bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Withdraw {
    /// Not only white space; at most 4096 bytes; no control characters but line breaks and
    /// tabs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 4096,
        pattern = "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f][^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*$"
    )]
    pub reason: Option<String>,
}

/// A tool call to explain.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainRequest {
    pub world: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
}

/// What policy (with grants) decides for a call, and why.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Explanation {
    pub decision: CallVerdict,
    pub decided_by: DecidedBy,
    /// The policy layer that decided: `world` when the world's own policy did (a rule of its,
    /// or its mode), else `base` (the server's policy file, or one of its locked rules).
    pub layer: crate::PolicyLayer,
    /// Every rule that matched, in policy order.
    pub matched: Vec<MatchedRule>,
    /// How the hold would be raised, when the decision is to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<AskInfo>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MatchedRule {
    pub rule: RuleRef,
    pub action: CallVerdict,
}

/// How a hold would be raised.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AskInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    pub deadline: Deadline,
    pub on_timeout: Verdict,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    pub quorum: u32,
    pub offers: Vec<DecisionKind>,
}

/// The policy in force (`GET /api/v1/policy`): what happens when no rule matches, the
/// deadlines, every rule as data in the file's order, and the file's text as it was loaded.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivePolicy {
    /// When no rule matches: `manual` (ask a person), `auto_approve` or `auto_deny`.
    pub mode: String,
    /// A hold's deadline when neither its rule nor its tool sets one.
    pub default_deadline: Deadline,
    /// The longest deadline a request may ask for.
    pub max_deadline: Deadline,
    /// How long before a deadline people are reminded.
    pub remind_before: Deadline,
    pub rules: Vec<PolicyRule>,
    /// The policy file's text; absent when the server runs without a policy file (then every
    /// call asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One rule of the policy, as the file wrote it.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PolicyRule {
    /// Its position in the file, from 0 (`rules[0]`).
    pub index: usize,
    /// Its name; `rules[N]` when the file gives none.
    pub name: String,
    pub action: CallVerdict,
    /// Tool names or globs it applies to.
    pub tools: Vec<String>,
    /// Tests on values inside the arguments; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgCondition>,
    /// A shell command the arguments must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandCondition>,
    /// Tool annotations the call must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// For `ask` rules: how the hold is raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<RuleAsk>,
    /// A rule of the base policy that no world's policy can loosen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub locked: bool,
}

/// A test on the value at `pointer` in a call's arguments.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ArgCondition {
    /// A JSON pointer (RFC 6901) into the arguments; `""` is the whole arguments.
    pub pointer: String,
    /// `equals`, `prefix`, `glob` or `regex`.
    pub test: String,
    /// What the test compares with: any JSON for `equals`, else a string.
    pub value: Value,
    /// The condition holds when the test fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not: bool,
}

/// A shell command a rule matches: its program and leading arguments (literals or globs),
/// and flags it must have anywhere among its arguments, each in any of its spellings.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommandCondition {
    /// Where the command line is in the arguments (a JSON pointer).
    pub pointer: String,
    pub program: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Each a flag's spellings as the policy writes them: `-r|-R|--recursive`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// What an `ask` rule sets; what it leaves out comes from the tool's settings, then the
/// policy's defaults.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuleAsk {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<Verdict>,
    /// Only these people may decide (anyone with a person's role when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// How many approvals it takes.
    pub quorum: u32,
    /// The decisions its holds offer.
    pub offers: Vec<DecisionKind>,
}

/// A page of the event log.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventsPage {
    pub events: Vec<Event>,
    /// Where the next page starts: pass it as `after` (oldest first), or as `before` (newest
    /// first; 0 there means the start of the log was reached). A page may hold fewer events
    /// than asked, none even, with more to come: the log is read a bounded stretch at a time
    /// for the filters the store has no index for (`type`, `actor`).
    pub next: u64,
}

/// The result of walking the audit chain.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditReport {
    pub intact: bool,
    pub events: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_bad_event: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Holds whose stored state was compared with what the log says of them.
    #[serde(default)]
    pub holds_checked: u64,
    /// Active grants the store serves, each compared with the log (and every grant the log
    /// has active looked for among them).
    #[serde(default)]
    pub grants_checked: u64,
    /// Messages of the chats the store serves (what each agent was told, tool results among
    /// them), each matched with the event that created it.
    #[serde(default)]
    pub messages_checked: u64,
    /// Turns the store serves, each compared with the log: its calls' recorded results and how
    /// it ended.
    #[serde(default)]
    pub turns_checked: u64,
    /// What the store serves that the log does not say (at most 100 listed; `intact` is then
    /// false).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<AuditMismatch>,
    /// How many mismatches were found in all, listed or not.
    #[serde(default)]
    pub mismatched: u64,
}

/// Something the store serves that differs from what the audit log says of it: an edit made
/// to the stored state behind Holdpoint's back.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditMismatch {
    /// `hold`, `grant`, `message` or `turn`.
    pub kind: String,
    /// The hold's, grant's, message's or turn's id.
    pub id: String,
    /// What differs.
    pub reason: String,
}

/// A webhook subscription.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Webhook {
    pub id: WebhookId,
    pub world: String,
    pub url: String,
    /// Event types delivered (`hold.created`, `hold.reminded`, `hold.decided`, `hold.expired`,
    /// `hold.withdrawn`).
    pub events: Vec<String>,
    pub created_at: Timestamp,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// An `http://` or `https://` URL.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://")]
    pub url: String,
    /// Defaults to hold.created, hold.reminded, hold.decided and hold.expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
}

/// A new webhook: its signing secret is shown this once.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    /// Every attempt failed.
    Failed,
}

/// One event sent (or being sent) to a webhook.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WebhookDelivery {
    pub id: uuid::Uuid,
    pub webhook: WebhookId,
    /// The event's position in the log.
    pub event: u64,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    /// HTTP status of the last attempt, if it got an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub updated_at: Timestamp,
}

/// An error with the chain of what caused it, for messages people read: "error sending
/// request: client error (Connect): connection refused". Causes that repeat the text so far
/// are left out.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}
