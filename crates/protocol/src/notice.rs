//! Notices of holds sent to people over channels (email), as the API lists them.

use serde::{Deserialize, Serialize};

use crate::{DeliveryStatus, HoldId, Timestamp};

/// A hold's notice to one person over one channel: sent at least once, retried with backoff
/// while the channel fails, every attempt counted.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Notice {
    pub id: uuid::Uuid,
    pub hold: HoldId,
    /// `email`.
    pub channel: String,
    /// Where it goes: an email address.
    pub recipient: String,
    /// The name a decision through its links is recorded as.
    pub decides_as: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    /// Why the last attempt failed, while it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When it was handed to the mail server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Timestamp>,
    /// The decision made with one of its links, once one was (links work once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<String>,
}

/// Every notice of a hold, oldest first.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NoticesPage {
    pub items: Vec<Notice>,
}
