//! Listing holds: filters and cursor pagination.

use serde::{Deserialize, Serialize};

use crate::{BatchId, HoldKind, HoldStatus};

/// Which holds by status.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
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
pub enum Order {
    /// Oldest first (the inbox order).
    #[default]
    Oldest,
    Newest,
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
    pub order: Order,
    /// The `next` cursor of the previous page.
    pub cursor: Option<String>,
    /// Page size; the engine bounds it.
    pub limit: usize,
}

/// One page of results and the cursor of the next, if there is more.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}
