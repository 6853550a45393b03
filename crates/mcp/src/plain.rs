//! The upstreams' tools and results as plain data (JSON and Holdpoint's protocol types), for
//! the parts of Holdpoint that do not speak MCP themselves: the agents of the server's
//! runtime.

use holdpoint_core::mcp::split_tool_name;
use holdpoint_protocol::{McpCallOutput, McpTool, McpToolInfo, ToolAnnotations};
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Value, json};

use crate::upstream::{UpstreamError, Upstreams};

/// A tool's annotations as policy reads them.
pub(crate) fn annotations(tool: &Tool) -> Option<ToolAnnotations> {
    tool.annotations.as_ref().map(|a| ToolAnnotations {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
    })
}

impl Upstreams {
    /// Every tool offered, as plain data.
    pub fn tool_infos(&self) -> Vec<McpToolInfo> {
        self.tools()
            .iter()
            .map(|t| McpToolInfo {
                name: t.tool.name.to_string(),
                mcp: McpTool {
                    server: t.server.clone(),
                    tool: t.upstream_name.clone(),
                },
                description: t.tool.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.tool.input_schema).clone()),
                annotations: annotations(&t.tool),
                requires_approval: t.requires_approval,
            })
            .collect()
    }

    /// Calls the tool agents call `name` (`server__tool`) with exactly `arguments` (a JSON
    /// object).
    pub async fn call_plain(
        &self,
        name: &str,
        arguments: &Value,
    ) -> Result<McpCallOutput, UpstreamError> {
        let failed = |message: String| UpstreamError::Call {
            server: split_tool_name(name).map_or(name, |(s, _)| s).to_owned(),
            message,
        };
        let tool = match self.tool(name) {
            Some(tool) => tool,
            None => {
                return Err(self
                    .unavailable(name)
                    .unwrap_or_else(|| failed(format!("it does not offer the tool {name:?}"))));
            }
        };
        let Value::Object(arguments) = arguments else {
            return Err(failed("the arguments are not a JSON object".into()));
        };
        let never = tokio_util::sync::CancellationToken::new();
        let result = self.call(&tool, arguments.clone(), None, &never).await?;
        Ok(output(result))
    }
}

fn output(result: CallToolResult) -> McpCallOutput {
    McpCallOutput {
        content: result
            .content
            .iter()
            .map(|block| {
                serde_json::to_value(block).map_or_else(
                    |e| json!({"type": "unreadable", "error": e.to_string()}),
                    without_binary,
                )
            })
            .collect(),
        structured_content: result.structured_content,
        is_error: result.is_error.unwrap_or(false),
    }
}

/// A content block with its base64 data replaced by a note of its size.
fn without_binary(mut block: Value) -> Value {
    let note = |data: &Value| {
        json!(format!(
            "{} bytes of base64 data, not shown",
            data.as_str().map_or(0, str::len)
        ))
    };
    if let Some(obj) = block.as_object_mut()
        && let Some(data) = obj.remove("data")
    {
        obj.insert("data_omitted".into(), note(&data));
    }
    if let Some(resource) = block.get_mut("resource").and_then(Value::as_object_mut)
        && let Some(blob) = resource.remove("blob")
    {
        resource.insert("blob_omitted".into(), note(&blob));
    }
    block
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rmcp::model::ContentBlock;

    use super::*;

    #[test]
    fn text_is_kept_and_binary_data_is_replaced_by_its_size() {
        let result = CallToolResult::error(vec![
            ContentBlock::text("no such file"),
            ContentBlock::image("aGVsbG8=", "image/png"),
        ]);
        let out = output(result);
        assert!(out.is_error);
        assert_eq!(out.content[0]["text"], "no such file");
        assert_eq!(out.content[1]["type"], "image");
        assert_eq!(out.content[1]["mimeType"], "image/png");
        assert_eq!(
            out.content[1]["data_omitted"],
            "8 bytes of base64 data, not shown"
        );
        assert!(out.content[1].get("data").is_none());
    }
}
