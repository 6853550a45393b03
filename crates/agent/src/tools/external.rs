//! Tools from outside the runtime: the MCP servers of a world, offered to its agents next to
//! the built-in tools. The runtime knows them only through [`ExternalTools`], which the server
//! implements with its MCP connections (this crate does not speak MCP); tools and results
//! are protocol's plain `McpToolInfo` and `McpCallOutput`.
//!
//! Their calls go through the same gate as built-in ones: the arguments are checked against
//! the tool's input schema, policy sees the tool's annotations, grants and holds apply, and a
//! call is saved as running before it runs, so one interrupted by a crash is reported as such
//! and never run twice.

use async_trait::async_trait;
use holdpoint_llm::ToolSpec;
use holdpoint_protocol::{McpCallOutput, McpToolInfo, World};
use serde_json::{Value, json};

/// The call's output as the LLM reads it (the tool result's `output`).
pub(crate) fn output_json(output: &McpCallOutput) -> Value {
    let mut json = json!({ "content": output.content, "isError": output.is_error });
    if let Some(structured) = &output.structured_content {
        json["structuredContent"] = structured.clone();
    }
    json
}

/// Where a world's external tools come from, plugged in when the runtime is built.
#[async_trait]
pub trait ExternalTools: Send + Sync + std::fmt::Debug {
    /// The tools offered in `world`. Servers that cannot be reached are left out (and said
    /// so in the server's log): the agent still has the others.
    async fn tools(&self, world: &World) -> Vec<McpToolInfo>;

    /// Calls `tool` (a name [`ExternalTools::tools`] gave) with exactly `arguments`. An error
    /// is a call that could not be made or did not complete (the server is gone, say).
    async fn call(
        &self,
        world: &World,
        tool: &str,
        arguments: &Value,
    ) -> Result<McpCallOutput, String>;
}

/// The tool as the LLM is offered it.
pub(crate) fn spec(tool: &McpToolInfo) -> ToolSpec {
    ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: tool.input_schema.clone(),
    }
}
