//! Tools from outside the runtime: the MCP servers of a world, offered to its agents next to
//! the built-in tools. The runtime knows them only through [`ExternalTools`], which the server
//! implements with its MCP connections (this crate does not speak MCP).
//!
//! Their calls go through the same gate as built-in ones: the arguments are checked against
//! the tool's input schema, policy sees the tool's annotations, grants and holds apply, and a
//! call is saved as running before it runs, so one interrupted by a crash is reported as such
//! and never run twice.

use async_trait::async_trait;
use holdpoint_llm::ToolSpec;
use holdpoint_protocol::{McpTool, ToolAnnotations, World};
use serde_json::{Value, json};

/// One tool offered from outside, under the name agents see (`server__tool`).
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalTool {
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

/// What a call returned, as its server gave it: the content blocks (as JSON objects, see
/// docs/mcp.md for how blocks that are not text are represented) and whether the server
/// reported an error.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalOutput {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: bool,
}

impl ExternalOutput {
    /// The call's output as the LLM reads it (the tool result's `output`).
    pub(crate) fn to_json(&self) -> Value {
        let mut output = json!({ "content": self.content, "isError": self.is_error });
        if let Some(structured) = &self.structured_content {
            output["structuredContent"] = structured.clone();
        }
        output
    }
}

/// Where a world's external tools come from, plugged in when the runtime is built.
#[async_trait]
pub trait ExternalTools: Send + Sync + std::fmt::Debug {
    /// The tools offered in `world`. Servers that cannot be reached are left out (and said
    /// so in the server's log): the agent still has the others.
    async fn tools(&self, world: &World) -> Vec<ExternalTool>;

    /// Calls `tool` (a name [`ExternalTools::tools`] gave) with exactly `arguments`. An error
    /// is a call that could not be made or did not complete (the server is gone, say).
    async fn call(
        &self,
        world: &World,
        tool: &str,
        arguments: &Value,
    ) -> Result<ExternalOutput, String>;
}

impl ExternalTool {
    pub(crate) fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.input_schema.clone(),
        }
    }
}
