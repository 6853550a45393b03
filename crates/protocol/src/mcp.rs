//! MCP servers as configured: in the configuration file (`[mcp.servers.NAME]`) and in a
//! world's settings (`mcp_servers`), one shape for both; and which server and tool an approval
//! of an MCP tool is about.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolAnnotations;

/// One MCP server Holdpoint connects to: started as a child process (`command`) or reached
/// over streamable HTTP (`url`). Its tools are offered as `NAME__tool`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// stdio: the program to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: variables set for it, on top of the environment Holdpoint was started with.
    /// Secrets: their values are never shown back (the API and the CLI show `(hidden)`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Streamable HTTP: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP: headers sent with every request (`Authorization`, say). Secrets: their
    /// values are never shown back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The tools offered, by their upstream names; every tool the server lists when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Tools that always need a person's approval, whatever policy and grants say (deny rules
    /// still deny). Must be among `tools` when `tools` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require_approval: Vec<String>,
    /// How long one call may wait for the server's answer (`"60s"`, `"5m"`, from 100ms to
    /// 24h); then the call fails and the server is told to cancel it. 60s when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<String>,
    /// The largest message the server may send (`"1MiB"`, `"512KiB"`, or bytes; from 64KiB to
    /// 256MiB); a larger one is refused without being read into memory. 1MiB when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<String>,
}

/// How an upstream is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum UpstreamTransport<'a> {
    Stdio {
        command: &'a str,
        args: &'a [String],
        env: &'a BTreeMap<String, String>,
    },
    Http {
        url: &'a str,
        headers: &'a BTreeMap<String, String>,
    },
}

impl UpstreamConfig {
    /// How the server is reached; `None` for a configuration with neither or both of
    /// `command` and `url` (which the checks refuse).
    pub fn transport(&self) -> Option<UpstreamTransport<'_>> {
        match (&self.command, &self.url) {
            (Some(command), None) => Some(UpstreamTransport::Stdio {
                command,
                args: &self.args,
                env: &self.env,
            }),
            (None, Some(url)) => Some(UpstreamTransport::Http {
                url,
                headers: &self.headers,
            }),
            _ => None,
        }
    }

    /// Whether the upstream tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }

    /// Whether every call of `tool` needs a person.
    pub fn requires_approval(&self, tool: &str) -> bool {
        self.require_approval.iter().any(|t| t == tool)
    }
}

/// The MCP server and tool an approval is about: what a hold's card shows. The approval's
/// `tool` is then `server__tool`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpTool {
    /// The server's name, as configured.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
}

/// An MCP tool offered to Holdpoint's agents, under the name they see (`server__tool`): what
/// the MCP connections give the runtime, which speaks no MCP itself.
#[derive(Clone, Debug, PartialEq)]
pub struct McpToolInfo {
    /// `server__tool`.
    pub name: String,
    /// The server, and the tool's own name there.
    pub mcp: McpTool,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// Hints from its server, which policy rules may match.
    pub annotations: Option<ToolAnnotations>,
    /// Every call needs a person (`require_approval`).
    pub requires_approval: bool,
}

/// What a call of an MCP tool returned, as its server gave it. Content blocks are MCP's JSON
/// objects, except that binary data (an image's or audio's `data`, an embedded resource's
/// `blob`) is replaced by a note of its size: an LLM reads text.
#[derive(Clone, Debug, PartialEq)]
pub struct McpCallOutput {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    /// The server reported an error (`isError`).
    pub is_error: bool,
}
