//! Grants: approvals remembered from "for this chat" and "always" decisions, for good or
//! for a while.

use serde::{Deserialize, Serialize};

use crate::{GrantId, HoldId, Timestamp};

/// How far a grant reaches.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum GrantScope {
    /// The same tool with the same arguments, in one chat.
    Chat,
    /// The same tool with the same arguments, anywhere in the world.
    AlwaysArgs,
    /// The tool with any arguments, anywhere in the world.
    AlwaysTool,
}

/// A remembered approval. Consulted after deny rules and before asking.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Grant {
    pub id: GrantId,
    pub scope: GrantScope,
    pub world: String,
    /// Set for chat grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    pub tool: String,
    /// Argument digest, for grants bound to arguments (`chat`, `always_args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub created_by: String,
    pub created_at: Timestamp,
    /// The hold whose decision created this grant.
    pub from_hold: HoldId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// When the grant stops matching (from "approve for N minutes"); absent: until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Whether `expires_at` has passed (set when grants are listed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
}
