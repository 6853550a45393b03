//! Reading the answer: server-sent events of chunks (or, from servers that ignore `stream`,
//! one JSON document), with tool-call fragments accumulated by index.

use std::time::Duration;

use futures_util::StreamExt;
use holdpoint_protocol::ToolCall;
use serde::Deserialize;
use serde_json::Value;

use crate::{Completion, LlmError, Usage};

/// One chunk. Every field is optional: servers differ in what they send.
#[derive(Deserialize, Default)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    /// Servers answering without streaming.
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize, Default)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize, Default)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// Usually a string; some servers send an object when not streaming.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// The most tool calls one answer may hold (far more than any model asks for at once).
const MAX_TOOL_CALLS: usize = 1024;

#[derive(Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Builds the completion from chunks.
#[derive(Default)]
struct Accumulator {
    text: String,
    calls: Vec<Partial>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Accumulator {
    fn chunk(
        &mut self,
        chunk: Chunk,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        if let Some(e) = chunk.error {
            let message = e
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| e.to_string(), str::to_owned);
            return Err(LlmError::Reported { message });
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            });
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta.or(choice.message) {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    on_text(&text);
                    self.text.push_str(&text);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.call(call)?;
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(())
    }

    fn call(&mut self, delta: CallDelta) -> Result<(), LlmError> {
        // By index when given; else by id; else a new call.
        let slot = match (delta.index, &delta.id) {
            // Indexes count the answer's calls from 0: a larger one would only make room for
            // calls that never come (and `usize::MAX` for none at all).
            (Some(i), _) if i >= MAX_TOOL_CALLS => {
                return Err(LlmError::Malformed {
                    message: format!(
                        "a tool call's index is {i}; an answer has at most {MAX_TOOL_CALLS} tool calls"
                    ),
                });
            }
            (Some(i), _) => i,
            (None, Some(id)) => self
                .calls
                .iter()
                .position(|c| c.id.as_ref() == Some(id))
                .unwrap_or(self.calls.len()),
            (None, None) => self.calls.len().saturating_sub(1),
        };
        if slot >= self.calls.len() {
            self.calls.resize_with(slot + 1, Partial::default);
        }
        let p = &mut self.calls[slot];
        if let Some(id) = delta.id.filter(|i| !i.is_empty()) {
            p.id = Some(id);
        }
        if let Some(f) = delta.function {
            if let Some(name) = f.name {
                p.name.push_str(&name);
            }
            match f.arguments {
                Some(Value::String(s)) => p.arguments.push_str(&s),
                Some(Value::Null) | None => {}
                Some(other) => p.arguments.push_str(&other.to_string()),
            }
        }
        Ok(())
    }

    fn finish(self) -> Completion {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, p)| !p.name.is_empty())
            .map(|(i, p)| ToolCall {
                id: p.id.unwrap_or_else(|| format!("call_{i}")),
                name: p.name,
                arguments: if p.arguments.trim().is_empty() {
                    "{}".into()
                } else {
                    p.arguments
                },
            })
            .collect();
        Completion {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

fn malformed(e: serde_json::Error, data: &str) -> LlmError {
    let shown: String = data.chars().take(120).collect();
    LlmError::Malformed {
        message: format!("{e} in {shown:?}"),
    }
}

/// A server that answered with one JSON document.
pub fn whole(body: &[u8], on_text: &mut (dyn FnMut(&str) + Send)) -> Result<Completion, LlmError> {
    let chunk: Chunk =
        serde_json::from_slice(body).map_err(|e| malformed(e, &String::from_utf8_lossy(body)))?;
    let mut acc = Accumulator::default();
    acc.chunk(chunk, on_text)?;
    Ok(acc.finish())
}

/// A streamed answer: `data:` lines of JSON chunks, ending with `data: [DONE]`.
pub(crate) async fn read(
    response: reqwest::Response,
    idle: Duration,
    on_text: &mut (dyn FnMut(&str) + Send),
) -> Result<Completion, LlmError> {
    let mut body = response.bytes_stream();
    let mut reader = StreamReader::default();
    loop {
        let next = tokio::time::timeout(idle, body.next())
            .await
            .map_err(|_| LlmError::Stalled { waited: idle })?;
        match next {
            Some(Ok(bytes)) => {
                if let Some(done) = reader.push(&bytes, on_text)? {
                    return Ok(done);
                }
            }
            Some(Err(e)) => {
                return Err(LlmError::ConnectionLost {
                    message: e.to_string(),
                });
            }
            None => return reader.end(),
        }
    }
}

/// Reads a streamed answer from its bytes as they arrive, whatever pieces they come in.
#[derive(Default)]
pub struct StreamReader {
    buffer: Vec<u8>,
    acc: Accumulator,
}

impl StreamReader {
    /// Takes the next bytes of the body; the completion once `data: [DONE]` has come.
    pub fn push(
        &mut self,
        bytes: &[u8],
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Option<Completion>, LlmError> {
        self.buffer.extend_from_slice(bytes);
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let data = data.trim_start();
            if data == "[DONE]" {
                return Ok(Some(std::mem::take(&mut self.acc).finish()));
            }
            if data.is_empty() {
                continue;
            }
            let chunk: Chunk = serde_json::from_str(data).map_err(|e| malformed(e, data))?;
            self.acc.chunk(chunk, on_text)?;
        }
        Ok(None)
    }

    /// The body ended without `[DONE]`: complete only if the server said it had finished.
    pub fn end(self) -> Result<Completion, LlmError> {
        if self.acc.finish_reason.is_some() {
            Ok(self.acc.finish())
        } else {
            Err(LlmError::ConnectionLost {
                message: "the stream ended before the answer was complete".into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(chunks: &[Value]) -> (Completion, Vec<String>) {
        let mut acc = Accumulator::default();
        let mut pieces = Vec::new();
        for c in chunks {
            acc.chunk(
                serde_json::from_value(c.clone()).unwrap(),
                &mut |t: &str| pieces.push(t.to_owned()),
            )
            .unwrap();
        }
        (acc.finish(), pieces)
    }

    #[test]
    fn interleaved_fragments_accumulate_by_index() {
        let (c, _) = feed(&[
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "write_file", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read_", "arguments": "{\"pa"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{\"path\":"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "file", "arguments": "th\":\"a\"}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "\"b\"}"}}]}, "finish_reason": "tool_calls"}]}),
        ]);
        assert_eq!(
            c.tool_calls,
            vec![
                ToolCall {
                    id: "a".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"a\"}".into()
                },
                ToolCall {
                    id: "b".into(),
                    name: "write_file".into(),
                    arguments: "{\"path\":\"b\"}".into()
                },
            ]
        );
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn sparse_chunks_are_accepted() {
        let (c, pieces) = feed(&[
            json!({}),
            json!({"choices": [{"delta": {"role": "assistant"}}]}),
            json!({"choices": [{"delta": {"content": "Hel"}}]}),
            json!({"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"name": "t"}}]}}]}),
        ]);
        assert_eq!(
            (c.text.as_str(), pieces),
            ("Hello", vec!["Hel".to_owned(), "lo".to_owned()])
        );
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2
            })
        );
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "t".into(),
                arguments: "{}".into()
            }]
        );
    }

    #[test]
    fn an_error_chunk_is_reported() {
        let mut acc = Accumulator::default();
        let err = acc
            .chunk(
                serde_json::from_value(json!({"error": {"message": "model overloaded"}})).unwrap(),
                &mut |_: &str| {},
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the LLM reported an error: model overloaded"
        );
    }

    #[test]
    fn a_tool_call_index_beyond_any_answer_is_malformed() {
        // The llm_stream fuzz target crashed on these: the index made room for that many calls,
        // which overflowed at `usize::MAX` and exhausted memory below it.
        for index in [u64::MAX, 100_000_000_000, 1024] {
            let mut reader = StreamReader::default();
            let body = format!(
                "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"function\":{{\"name\":\"x\"}}}}]}}}}]}}\n\n"
            );
            let err = reader.push(body.as_bytes(), &mut |_: &str| {}).unwrap_err();
            assert!(
                matches!(&err, LlmError::Malformed { message } if message.contains(&format!("index is {index}"))),
                "{err}"
            );
        }
        let (c, _) = feed(&[
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1023, "function": {"name": "last"}}]}}]}),
        ]);
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].name, "last");
    }

    #[test]
    fn a_whole_json_answer_is_read() {
        let body = json!({"choices": [{"message": {"content": "hi", "tool_calls": [{"id": "x", "function": {"name": "t", "arguments": {"a": 1}}}]}, "finish_reason": "tool_calls"}]});
        let c = whole(body.to_string().as_bytes(), &mut |_: &str| {}).unwrap();
        assert_eq!(c.text, "hi");
        assert_eq!(c.tool_calls[0].arguments, "{\"a\":1}");
    }
}
