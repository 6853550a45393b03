//! Listing holds: filters and cursor pagination.

use serde::{Deserialize, Serialize};

use crate::{BatchId, HoldId, HoldKind, HoldStatus};

/// Which holds by status.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::EnumDiscriminants)]
#[strum_discriminants(
    name(StatusFilterName),
    derive(Hash, strum::IntoStaticStr, strum::VariantArray)
)]
#[strum_discriminants(strum(serialize_all = "snake_case"))]
#[strum_discriminants(doc = "A status filter's name (`Is` stands for any `HoldStatus`'s own).")]
pub enum StatusFilter {
    /// Still open: `pending` or `awaiting_confirm`.
    #[default]
    Open,
    /// Decided in any way.
    Resolved,
    /// Every hold.
    Any,
    /// Exactly this status.
    Is(HoldStatus),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Order {
    /// Oldest first (the inbox order).
    #[default]
    Oldest,
    Newest,
    /// Soonest deadline first, then the holds with no deadline; oldest first among equals.
    /// Open holds only.
    Urgent,
}

/// A page request for holds. Every combination is served by an index of the store.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HoldQuery {
    pub world: Option<String>,
    /// Only with `world`.
    pub chat: Option<String>,
    pub status: StatusFilter,
    pub kind: Option<HoldKind>,
    pub batch: Option<BatchId>,
    /// Holds whose `agent` is exactly this.
    pub agent: Option<String>,
    /// Approvals of exactly this tool (a question has no tool).
    pub tool: Option<String>,
    pub order: Order,
    /// The `next` cursor of the previous page.
    pub cursor: Option<String>,
    /// Page size, from 1 to the engine's largest page; its default page when `None`.
    pub limit: Option<usize>,
}

/// One page of results and the cursor of the next, if there is more.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// How many holds are open (`pending` or `awaiting_confirm`), in all and by world and kind:
/// `GET /api/v1/holds/counts`. Counted by the store, not by reading the holds.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HoldCounts {
    /// Every open hold the caller may see.
    pub pending: u64,
    /// By world (its id) and kind: only the pairs with an open hold, ordered by world, then
    /// kind.
    pub worlds: Vec<HoldCount>,
}

/// The open holds of one kind in one world.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HoldCount {
    /// The world's id.
    pub world: String,
    pub kind: HoldKind,
    pub pending: u64,
}

/// The query string of `GET /api/v1/holds`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HoldsParams {
    /// A world, by id or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// A chat (needs `world`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    /// `pending` (the default: open holds), `resolved`, `any`, or one status (`approved`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(
        pattern = "^(pending|open|resolved|any|all|awaiting_confirm|approved|denied|answered|confirmed|canceled|timed_out)$"
    )]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HoldKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchId>,
    /// Holds whose `agent` is exactly this (for the runtime's agents, the agent's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Approvals of exactly this tool (`server__tool` for MCP tools); never a question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `oldest` (the default) or `newest` first, or `urgent`: soonest deadline first, holds
    /// with no deadline last, oldest first among equals (open holds only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    /// The `next` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// From 1 to 500; 50 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<usize>,
}

/// The query string of `GET /api/v1/audit/events`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// Events after this position (0: from the start); oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
    /// `oldest` (the default: from `after` on) or `newest` first (from `before` back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    /// With `order=newest`: events before this position (absent: from the newest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 9223372036854775807_u64)]
    pub before: Option<u64>,
    /// Only events of this type (`hold.decided`, `grant.created`, …).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Only events whose actor is this person, agent or token (by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// A world, by id or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldId>,
    /// From 1 to 1000; 100 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

/// The query string of a listing paged by position: a chat's messages, a webhook's deliveries.
#[derive(
    Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    /// The `next` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
    /// From 1 to 1000; 100 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

/// The query string of `GET /api/v1/holds/{hold}/wait`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// Such as `30s` (the default) or `2m`; at most the server's limit (2 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// `true`: the caller raised the hold and waits for it until it is decided (the MCP
    /// gateway, `holdpoint ask`). Should nobody wait on it for `server.waiter_grace` after
    /// that, it is withdrawn: its raiser stopped waiting, so its call can no longer run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attend: Option<bool>,
}

/// The query string of `GET /api/v1/events`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamParams {
    /// Only this world's events (id or name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// Only this chat's events (with `world`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    /// Replay from after this position (as `Last-Event-ID` does). Without either, the stream
    /// starts with what is committed from now on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(minimum = 0, maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
}

/// The form of the sign-in page, `POST /signin` (`application/x-www-form-urlencoded`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SignInForm {
    /// A person's token (admin or approver).
    pub token: String,
}

/// The query string of `GET /login`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LoginParams {
    /// A person's token (admin or approver).
    pub token: String,
}
