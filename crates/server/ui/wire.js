// Holdpoint's wire names, generated from the enums of `holdpoint-protocol` by
// crates/server/tests/suite/ui_wire.rs. Do not edit: change the Rust enums, then run
//   HOLDPOINT_UPDATE_WIRE=1 cargo test -p holdpoint-server --test api wire_js
// and commit this file (the test fails while it differs).
//
// Each object maps the Rust name of a variant to its name on the wire
// (`HoldKind.Approval === "approval"`); the typedef of the same name is the union of
// those names, for the type check (`@param {import("./wire.js").HoldKind} kind`).

/** @typedef {"hold.created" | "hold.reminded" | "hold.voted" | "hold.awaiting_confirm" | "hold.decided" | "hold.expired" | "hold.withdrawn" | "call.allowed" | "call.denied" | "grant.created" | "grant.revoked" | "policy.changed" | "world.created" | "world.updated" | "world.deleted" | "agent.created" | "agent.updated" | "agent.deleted" | "chat.created" | "chat.updated" | "chat.deleted" | "token.created" | "token.revoked" | "webhook.created" | "webhook.deleted" | "message.created" | "turn.started" | "turn.text" | "turn.tool_call" | "turn.tool_started" | "turn.tool_text" | "turn.tool_finished" | "turn.finished" | "turn.failed" | "turn.canceled" | "turn.stopped"} EventType */
/** An event's `type`. */
export const EventType = Object.freeze({
  HoldCreated: "hold.created",
  HoldReminded: "hold.reminded",
  HoldVoted: "hold.voted",
  HoldAwaitingConfirm: "hold.awaiting_confirm",
  HoldDecided: "hold.decided",
  HoldExpired: "hold.expired",
  HoldWithdrawn: "hold.withdrawn",
  CallAllowed: "call.allowed",
  CallDenied: "call.denied",
  GrantCreated: "grant.created",
  GrantRevoked: "grant.revoked",
  PolicyChanged: "policy.changed",
  WorldCreated: "world.created",
  WorldUpdated: "world.updated",
  WorldDeleted: "world.deleted",
  AgentCreated: "agent.created",
  AgentUpdated: "agent.updated",
  AgentDeleted: "agent.deleted",
  ChatCreated: "chat.created",
  ChatUpdated: "chat.updated",
  ChatDeleted: "chat.deleted",
  TokenCreated: "token.created",
  TokenRevoked: "token.revoked",
  WebhookCreated: "webhook.created",
  WebhookDeleted: "webhook.deleted",
  MessageCreated: "message.created",
  TurnStarted: "turn.started",
  TurnText: "turn.text",
  TurnToolCall: "turn.tool_call",
  TurnToolStarted: "turn.tool_started",
  TurnToolText: "turn.tool_text",
  TurnToolFinished: "turn.tool_finished",
  TurnFinished: "turn.finished",
  TurnFailed: "turn.failed",
  TurnCanceled: "turn.canceled",
  TurnStopped: "turn.stopped",
});

/**
 * Every event type, in the API's order.
 * @type {readonly EventType[]}
 */
export const EVENT_TYPES = Object.freeze([
  "hold.created",
  "hold.reminded",
  "hold.voted",
  "hold.awaiting_confirm",
  "hold.decided",
  "hold.expired",
  "hold.withdrawn",
  "call.allowed",
  "call.denied",
  "grant.created",
  "grant.revoked",
  "policy.changed",
  "world.created",
  "world.updated",
  "world.deleted",
  "agent.created",
  "agent.updated",
  "agent.deleted",
  "chat.created",
  "chat.updated",
  "chat.deleted",
  "token.created",
  "token.revoked",
  "webhook.created",
  "webhook.deleted",
  "message.created",
  "turn.started",
  "turn.text",
  "turn.tool_call",
  "turn.tool_started",
  "turn.tool_text",
  "turn.tool_finished",
  "turn.finished",
  "turn.failed",
  "turn.canceled",
  "turn.stopped",
]);

/**
 * The events that change a hold (`EventType::changes_hold`).
 * @type {readonly EventType[]}
 */
export const HOLD_EVENT_TYPES = Object.freeze([
  "hold.created",
  "hold.reminded",
  "hold.voted",
  "hold.awaiting_confirm",
  "hold.decided",
  "hold.expired",
  "hold.withdrawn",
]);

/**
 * The events that end a hold's wait; their payload has its `outcome` (`EventType::resolves_hold`).
 * @type {readonly EventType[]}
 */
export const RESOLVING_EVENT_TYPES = Object.freeze([
  "hold.decided",
  "hold.expired",
  "hold.withdrawn",
]);

/** @typedef {"approval" | "question"} HoldKind */
/** What a hold asks: `spec.kind`. */
export const HoldKind = Object.freeze({
  Approval: "approval",
  Question: "question",
});

/** @typedef {"pending" | "awaiting_confirm" | "approved" | "denied" | "answered" | "confirmed" | "canceled" | "timed_out"} HoldStatus */
/** A hold's `status`. */
export const HoldStatus = Object.freeze({
  Pending: "pending",
  AwaitingConfirm: "awaiting_confirm",
  Approved: "approved",
  Denied: "denied",
  Answered: "answered",
  Confirmed: "confirmed",
  Canceled: "canceled",
  TimedOut: "timed_out",
});

/**
 * The statuses of a hold still open (`HoldStatus::is_open`).
 * @type {readonly HoldStatus[]}
 */
export const OPEN_HOLD_STATUSES = Object.freeze([
  "pending",
  "awaiting_confirm",
]);

/** @typedef {"open" | "resolved" | "any"} StatusFilter */
/** The `status` filter of a listing of holds, besides each `HoldStatus`. */
export const StatusFilter = Object.freeze({
  Open: "open",
  Resolved: "resolved",
  Any: "any",
});

/** @typedef {"oldest" | "newest" | "urgent"} Order */
/** The `order` of a listing. */
export const Order = Object.freeze({
  Oldest: "oldest",
  Newest: "newest",
  Urgent: "urgent",
});

/** @typedef {"approve_once" | "approve_chat" | "approve_always_args" | "approve_always_tool" | "deny" | "deny_stop" | "edit" | "answer" | "confirm" | "cancel"} DecisionKind */
/** The decisions a hold offers (`offers`). */
export const DecisionKind = Object.freeze({
  ApproveOnce: "approve_once",
  ApproveChat: "approve_chat",
  ApproveAlwaysArgs: "approve_always_args",
  ApproveAlwaysTool: "approve_always_tool",
  Deny: "deny",
  DenyStop: "deny_stop",
  Edit: "edit",
  Answer: "answer",
  Confirm: "confirm",
  Cancel: "cancel",
});

/**
 * What an approval can offer.
 * @type {readonly DecisionKind[]}
 */
export const APPROVAL_DECISIONS = Object.freeze([
  "approve_once",
  "approve_chat",
  "approve_always_args",
  "approve_always_tool",
  "deny",
  "deny_stop",
  "edit",
]);

/**
 * What a question can offer.
 * @type {readonly DecisionKind[]}
 */
export const QUESTION_DECISIONS = Object.freeze([
  "answer",
  "confirm",
  "cancel",
]);

/** @typedef {"approve" | "deny" | "deny_stop" | "edit" | "answer" | "confirm" | "cancel"} DecisionAction */
/** A decision's `action`. */
export const DecisionAction = Object.freeze({
  Approve: "approve",
  Deny: "deny",
  DenyStop: "deny_stop",
  Edit: "edit",
  Answer: "answer",
  Confirm: "confirm",
  Cancel: "cancel",
});

/** @typedef {"once" | "chat" | "always_args" | "always_tool"} ApproveScope */
/** How far an approval reaches: `scope`. */
export const ApproveScope = Object.freeze({
  Once: "once",
  Chat: "chat",
  AlwaysArgs: "always_args",
  AlwaysTool: "always_tool",
});

/**
 * The `scope` an approval sends, by the decision kind it is offered as.
 * @type {Readonly<Partial<Record<DecisionKind, ApproveScope>>>}
 */
export const SCOPE_OF_DECISION = Object.freeze({
  approve_once: "once",
  approve_chat: "chat",
  approve_always_args: "always_args",
  approve_always_tool: "always_tool",
});

/** @typedef {"resolved" | "vote_recorded" | "awaiting_confirm" | "already_decided"} DecideOutcome */
/** What a decision did: `result`. */
export const DecideOutcome = Object.freeze({
  Resolved: "resolved",
  VoteRecorded: "vote_recorded",
  AwaitingConfirm: "awaiting_confirm",
  AlreadyDecided: "already_decided",
});

/** @typedef {"deny" | "approve" | "choose" | "no_answer"} TimeoutAction */
/** What applies at a hold's deadline: `on_timeout.action`. */
export const TimeoutAction = Object.freeze({
  Deny: "deny",
  Approve: "approve",
  Choose: "choose",
  NoAnswer: "no_answer",
});

/** @typedef {"approved" | "denied" | "answered" | "confirmed" | "canceled" | "timed_out"} OutcomeStatus */
/** A decided hold's `outcome.status`. */
export const OutcomeStatus = Object.freeze({
  Approved: "approved",
  Denied: "denied",
  Answered: "answered",
  Confirmed: "confirmed",
  Canceled: "canceled",
  TimedOut: "timed_out",
});

/** @typedef {"approve" | "deny"} Verdict */
/** An approval's `outcome.verdict`. */
export const Verdict = Object.freeze({
  Approve: "approve",
  Deny: "deny",
});

/** @typedef {"person" | "agent" | "timeout" | "system" | "default" | "policy"} Source */
/** What kind of actor did something: `source`. */
export const Source = Object.freeze({
  Person: "person",
  Agent: "agent",
  Timeout: "timeout",
  System: "system",
  Default: "default",
  Policy: "policy",
});

/** @typedef {"admin" | "approver" | "agent"} Role */
/** What a credential may do: `role`. */
export const Role = Object.freeze({
  Admin: "admin",
  Approver: "approver",
  Agent: "agent",
});

/**
 * The roles of people, who sign in and decide (`Role::is_person`).
 * @type {readonly Role[]}
 */
export const PERSON_ROLES = Object.freeze([
  "admin",
  "approver",
]);

/** @typedef {"chat" | "always_args" | "always_tool"} GrantScope */
/** How far a grant reaches: `scope`. */
export const GrantScope = Object.freeze({
  Chat: "chat",
  AlwaysArgs: "always_args",
  AlwaysTool: "always_tool",
});

/** @typedef {"allow" | "ask" | "deny"} CallVerdict */
/** Policy's answer for a call. */
export const CallVerdict = Object.freeze({
  Allow: "allow",
  Ask: "ask",
  Deny: "deny",
});

/** @typedef {"rule" | "grant" | "mode"} DecidedBy */
/** What decided a call without a person: `decided_by.by`. */
export const DecidedBy = Object.freeze({
  Rule: "rule",
  Grant: "grant",
  Mode: "mode",
});

/** @typedef {"base" | "world"} PolicyLayer */
/** A rule's policy `layer`. */
export const PolicyLayer = Object.freeze({
  Base: "base",
  World: "world",
});

/** @typedef {"pending" | "delivered" | "failed"} DeliveryStatus */
/** A webhook delivery's or a notice's `status`. */
export const DeliveryStatus = Object.freeze({
  Pending: "pending",
  Delivered: "delivered",
  Failed: "failed",
});

/** @typedef {"first" | "reminder" | "escalation" | "last"} NoticePurpose */
/** Why a notice was sent: `purpose`. */
export const NoticePurpose = Object.freeze({
  First: "first",
  Reminder: "reminder",
  Escalation: "escalation",
  Last: "last",
});

/** @typedef {"user" | "assistant" | "tool"} MessageRole */
/** A chat message's `role`. */
export const MessageRole = Object.freeze({
  User: "user",
  Assistant: "assistant",
  Tool: "tool",
});

/** @typedef {"running" | "waiting" | "finished" | "stopped" | "failed" | "canceled"} TurnStatus */
/** A turn's `status`. */
export const TurnStatus = Object.freeze({
  Running: "running",
  Waiting: "waiting",
  Finished: "finished",
  Stopped: "stopped",
  Failed: "failed",
  Canceled: "canceled",
});

/**
 * The statuses of a turn still going on (`TurnStatus::is_active`).
 * @type {readonly TurnStatus[]}
 */
export const ACTIVE_TURN_STATUSES = Object.freeze([
  "running",
  "waiting",
]);

/** @typedef {"proposed" | "held" | "ready" | "running" | "done"} CallState */
/** Where a tool call of a turn stands: `state`. */
export const CallState = Object.freeze({
  Proposed: "proposed",
  Held: "held",
  Ready: "ready",
  Running: "running",
  Done: "done",
});

/** @typedef {"policy" | "grant" | "person" | "timeout" | "session"} ApprovedBy */
/** How a call that runs was allowed: `approved_by`. */
export const ApprovedBy = Object.freeze({
  Policy: "policy",
  Grant: "grant",
  Person: "person",
  Timeout: "timeout",
  Session: "session",
});

/** @typedef {"executed" | "failed" | "denied_by_person" | "denied_by_default" | "denied_by_policy" | "timed_out" | "not_executed" | "interrupted" | "invalid_arguments" | "answer"} ToolResultStatus */
/** A tool result's `status`. */
export const ToolResultStatus = Object.freeze({
  Executed: "executed",
  Failed: "failed",
  DeniedByPerson: "denied_by_person",
  DeniedByDefault: "denied_by_default",
  DeniedByPolicy: "denied_by_policy",
  TimedOut: "timed_out",
  NotExecuted: "not_executed",
  Interrupted: "interrupted",
  InvalidArguments: "invalid_arguments",
  Answer: "answer",
});

/** @typedef {"text" | "code" | "line_break" | "rule" | "paragraph" | "heading" | "emphasis" | "strong" | "strikethrough" | "block_quote" | "code_block" | "list" | "item" | "link" | "table" | "table_row" | "table_cell"} MarkdownNodeType */
/** A node of rendered Markdown: `type`. */
export const MarkdownNodeType = Object.freeze({
  Text: "text",
  Code: "code",
  LineBreak: "line_break",
  Rule: "rule",
  Paragraph: "paragraph",
  Heading: "heading",
  Emphasis: "emphasis",
  Strong: "strong",
  Strikethrough: "strikethrough",
  BlockQuote: "block_quote",
  CodeBlock: "code_block",
  List: "list",
  Item: "item",
  Link: "link",
  Table: "table",
  TableRow: "table_row",
  TableCell: "table_cell",
});
