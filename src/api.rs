//! Messages API glue: find the memory calls in a response, answer them in
//! order, and typed blocks for programs that prefer types to `Value`.
//!
//! Everything here works on plain [`serde_json::Value`], so it fits any
//! HTTP client or Anthropic client crate: serialize its response to a
//! `Value`, or deserialize our blocks into its types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::dispatch::MemoryTool;
use crate::result::{Content, ToolResult};
use crate::store::MemoryStore;

/// The memory tool's `name` in requests and `tool_use` blocks.
pub const TOOL_NAME: &str = "memory";

/// The memory tool's `type` in a request's `tools`.
pub const TOOL_TYPE: &str = "memory_20250818";

/// The tool definition with a `cache_control` (for example
/// `{"type": "ephemeral"}`), so the tools prefix can be cached.
pub fn tool_definition_with_cache_control(cache_control: Value) -> Value {
    json!({"type": TOOL_TYPE, "name": TOOL_NAME, "cache_control": cache_control})
}

/// The content blocks of a response: its `content` array, or `response`
/// itself if it is already an array.
pub fn content_blocks(response: &Value) -> &[Value] {
    match response {
        Value::Array(blocks) => blocks,
        Value::Object(message) => message
            .get("content")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
        _ => &[],
    }
}

fn is_tool_use(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_use")
}

fn is_memory(block: &Value) -> bool {
    block.get("name").and_then(Value::as_str) == Some(TOOL_NAME)
}

/// The memory tool's `tool_use` blocks in a response, in order.
pub fn memory_tool_uses(response: &Value) -> impl Iterator<Item = &Value> {
    content_blocks(response)
        .iter()
        .filter(|b| is_tool_use(b) && is_memory(b))
}

/// The other tools' `tool_use` blocks in a response, in order: the
/// caller's to run.
pub fn other_tool_uses(response: &Value) -> impl Iterator<Item = &Value> {
    content_blocks(response)
        .iter()
        .filter(|b| is_tool_use(b) && !is_memory(b))
}

/// The `user` message that carries `tool_results` back to the API.
pub fn tool_results_message(tool_results: Vec<Value>) -> Value {
    json!({"role": "user", "content": tool_results})
}

impl<S: MemoryStore> MemoryTool<S> {
    /// Runs every memory `tool_use` block of a Messages API response (or
    /// of its `content` array) and returns their `tool_result` blocks in
    /// the order of the calls. Calls run one after another, so two calls on
    /// one file never interleave. Other tools' blocks are left to the
    /// caller ([`other_tool_uses`]).
    pub fn run_tool_uses(&self, response: &Value) -> Vec<Value> {
        memory_tool_uses(response)
            .map(|block| self.dispatch(block).to_json())
            .collect()
    }

    /// The next `user` message for a response whose only tool calls are
    /// memory calls: `{"role": "user", "content": [tool_result, …]}`.
    /// With other tools in play, use [`run_tool_uses`](Self::run_tool_uses)
    /// and add their results to the same message.
    pub fn reply(&self, response: &Value) -> Value {
        tool_results_message(self.run_tool_uses(response))
    }

    /// Runs a typed `tool_use` block.
    pub fn run_block(&self, block: &ToolUseBlock) -> ToolResultBlock {
        let mut result = self.dispatch(&block.input);
        result.tool_use_id = Some(block.id.clone());
        result.to_block()
    }
}

/// A `tool_use` content block, as the API sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_use")]
pub struct ToolUseBlock {
    /// The call's id, echoed as `tool_use_id`.
    pub id: String,
    /// The tool's name (`memory`).
    pub name: String,
    /// The call's input: a [`Command`](crate::Command) as JSON.
    pub input: Value,
    /// Fields this crate does not model, kept for an exact round trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `tool_result` content block, as the API takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "tool_result")]
pub struct ToolResultBlock {
    /// The id of the `tool_use` block answered.
    pub tool_use_id: String,
    /// A string, or content blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ToolResultContent>,
    /// `true` on failure; absent (not `false`) on success when built here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Fields this crate does not model (`cache_control`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `content` of a `tool_result` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<ContentBlock>),
}

/// A text or image block inside a `tool_result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// `{"type": "text", "text": …}`
    Text {
        /// The text.
        text: String,
        /// Fields this crate does not model.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// `{"type": "image", "source": {…}}`
    Image {
        /// Where the image's bytes are.
        source: Value,
        /// Fields this crate does not model.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl ToolResult {
    /// The typed `tool_result` block (`tool_use_id` empty if unknown).
    pub fn to_block(&self) -> ToolResultBlock {
        let content = match self.text() {
            Some(text) => ToolResultContent::Text(text.to_owned()),
            None => ToolResultContent::Blocks(
                self.content
                    .iter()
                    .map(|c| match (c, c.to_json()) {
                        (Content::Text(text), _) => ContentBlock::Text {
                            text: text.clone(),
                            extra: Map::new(),
                        },
                        (Content::Image { .. }, json) => ContentBlock::Image {
                            source: json["source"].clone(),
                            extra: Map::new(),
                        },
                    })
                    .collect(),
            ),
        };
        ToolResultBlock {
            tool_use_id: self.tool_use_id.clone().unwrap_or_default(),
            content: Some(content),
            is_error: self.is_error.then_some(true),
            extra: Map::new(),
        }
    }
}
