//! Notices of holds sent to people over channels (email, Slack), as the API lists them.

use serde::{Deserialize, Serialize};

use crate::{DeliveryStatus, HoldId, Timestamp};

/// A hold's notice to one person over one channel: sent at least once, retried with backoff
/// while the channel fails, every attempt counted.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Notice {
    pub id: uuid::Uuid,
    pub hold: HoldId,
    /// `email` or `slack`.
    pub channel: String,
    /// Where it goes: an email address, or a Slack member or channel id.
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
    /// Why it was sent: the hold's first notice, a reminder, an escalation to a next group
    /// when nobody decided in time, or the last notice before the deadline.
    #[serde(default)]
    pub purpose: NoticePurpose,
    /// Escalations: which step of its route's `escalate_to` (from 1); 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub round: u32,
    /// Slack: the message it posted, which is updated in place once the hold is decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<PostedMessage>,
}

/// A message a notice posted to Slack: its conversation and timestamp, which name it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PostedMessage {
    pub channel: String,
    pub ts: String,
}

/// Why a notice was sent (`[[channels.routes]]`: docs/channels.md).
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum NoticePurpose {
    /// When the hold was raised.
    #[default]
    First,
    /// At the hold's reminder time, while it is undecided.
    Reminder,
    /// To a route's next group, when nobody decided within its `escalate_after`.
    Escalation,
    /// A route's `last_notice` before the deadline, saying what the deadline will do.
    Last,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Every notice of a hold, oldest first.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NoticesPage {
    pub items: Vec<Notice>,
}
