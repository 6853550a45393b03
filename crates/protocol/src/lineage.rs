//! Where a call comes from when an agent called another to make it: the agents between the
//! conversation a person follows and the one whose call is held.

use serde::{Deserialize, Serialize};

use crate::{AgentId, ChatId};

/// One agent on the way from a conversation to a held call.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LineageStep {
    /// The agent's name; a remote A2A agent's is the name its world calls it by (`bank`).
    pub name: String,
    /// A Holdpoint agent's id; absent for a remote A2A agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    /// The chat the agent works in; absent for a remote A2A agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatId>,
    /// Its call of the next agent of the lineage (`a2a__NAME`); absent for the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// The lineage in words, outermost first: `helper → researcher`.
pub fn lineage_text(lineage: &[LineageStep]) -> String {
    lineage
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(" → ")
}
