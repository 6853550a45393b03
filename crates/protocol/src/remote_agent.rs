//! Remote A2A agents a world calls as tools (`a2a_agents` in a world's settings): where each
//! is, the headers sent to it, and how long it may take.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One remote A2A agent, offered to the world's agents as the tool `a2a__NAME`. Its Agent Card
/// says where it answers and which version of A2A it speaks (1.0, or 0.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteAgentConfig {
    /// The Agent Card's URL (`…/.well-known/agent-card.json`), or the agent's base URL, where
    /// the card is looked for at `/.well-known/agent-card.json`.
    #[schema(pattern = "^https?://")]
    pub url: String,
    /// Headers sent with every request, the card's too (`Authorization`, say). Secrets: their
    /// values are never shown back (the API shows `(hidden)`), nor given to agents.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long the remote agent may take over one request (`"120s"`, `"5m"`, from 1s to 24h):
    /// reading its card, or a message's whole answer; the time a person takes to decide what it
    /// asks is not counted. 120s when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}
