//! Remote A2A agents a world calls as tools (`a2a_agents` in a world's settings): where each
//! is, the headers sent to it, and how long it may take; or the world's own agent a name
//! stands for (a sub-agent, called without HTTP).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One agent offered to the world's agents as the tool `a2a__NAME`: a remote A2A agent (`url`),
/// whose Agent Card says where it answers and which version of A2A it speaks (1.0, or 0.3), or
/// an agent of the same world (`agent`). Exactly one of the two is given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteAgentConfig {
    /// The Agent Card's URL (`…/.well-known/agent-card.json`), or the agent's base URL, where
    /// the card is looked for at `/.well-known/agent-card.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^https?://")]
    pub url: Option<String>,
    /// An agent of the same world (its name or id), run as a sub-agent in a chat of its own
    /// under the caller's: its holds are shown in the caller's chat with their lineage, and
    /// withdrawn when the caller's turn is canceled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Headers sent with every request (a remote agent's), the card's too (`Authorization`, say). Secrets: their
    /// values are never shown back (the API shows `(hidden)`), nor given to agents.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long the remote agent may take over one request (`"120s"`, `"5m"`, from 1s to 24h):
    /// reading its card, or a message's whole answer; the time a person takes to decide what it
    /// asks is not counted. 120s when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}
