//! Messages API glue: find the memory calls in a response, answer them in
//! order, and typed blocks for programs that prefer types to `Value`.
//!
//! Everything here works on plain [`serde_json::Value`], so it fits any
//! HTTP client or Anthropic client crate: serialize its response to a
//! `Value`, or deserialize our blocks into its types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The memory tool's `name` in requests and `tool_use` blocks.
pub const TOOL_NAME: &str = "memory";

/// The memory tool's `type` in a request's `tools`.
pub const TOOL_TYPE: &str = "memory_20250818";

/// The tool definition to put in a Messages API request's `tools`:
/// `{"type": "memory_20250818", "name": "memory"}`. The API supplies the
/// schema, so there is none here.
pub fn tool_definition() -> Value {
    json!({"type": TOOL_TYPE, "name": TOOL_NAME})
}

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

/// Every `tool_use` block in a response, memory or not, in order: each
/// needs exactly one `tool_result` in the next `user` message.
pub fn tool_uses(response: &Value) -> impl Iterator<Item = &Value> {
    content_blocks(response).iter().filter(|b| is_tool_use(b))
}

/// Whether a `tool_use` block calls the memory tool.
pub fn is_memory_call(block: &Value) -> bool {
    is_tool_use(block) && is_memory(block)
}

/// The `tool_result` for a call nobody runs (a tool this program does not
/// have): an error the model can read and act on, so the next request stays
/// valid (the API refuses a `tool_use` without its `tool_result`) and the
/// model learns the tool is not there instead of waiting for it.
pub fn unavailable_tool_result(block: &Value) -> Value {
    let name = block.get("name").and_then(Value::as_str).unwrap_or("");
    let mut result = crate::ToolResult::error(crate::render::tool_unavailable(name));
    result.tool_use_id = block.get("id").and_then(Value::as_str).map(str::to_owned);
    result.to_json()
}

/// The `user` message that carries `tool_results` back to the API.
pub fn tool_results_message(tool_results: Vec<Value>) -> Value {
    json!({"role": "user", "content": tool_results})
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
    /// Fields this crate does not model, kept for an exact round trip
    /// (never `type`, which the tag writes once).
    #[serde(
        flatten,
        serialize_with = "untagged_extra::serialize",
        deserialize_with = "untagged_extra::tool_use"
    )]
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
    /// Fields this crate does not model (`cache_control`, …; never
    /// `type`, which the tag writes once).
    #[serde(
        flatten,
        serialize_with = "untagged_extra::serialize",
        deserialize_with = "untagged_extra::tool_result"
    )]
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

/// The `extra` map of a tagged block without the tag: serde hands a
/// flattened map every unknown key *including* the `type` tag (which it
/// does not check for a struct), so the tag would be written twice
/// (`{"type":…,…,"type":…}`, which serde_json itself refuses to read back)
/// and a block of another type would be taken for this one. Here the tag
/// is checked and taken out.
mod untagged_extra {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::{Map, Value};

    pub(super) fn serialize<S: Serializer>(
        extra: &Map<String, Value>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(extra.iter().filter(|(key, _)| *key != "type"))
    }

    pub(super) fn tool_use<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Map<String, Value>, D::Error> {
        tagged(deserializer, "tool_use")
    }

    pub(super) fn tool_result<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Map<String, Value>, D::Error> {
        tagged(deserializer, "tool_result")
    }

    fn tagged<'de, D: Deserializer<'de>>(
        deserializer: D,
        tag: &str,
    ) -> Result<Map<String, Value>, D::Error> {
        let mut extra = Map::deserialize(deserializer)?;
        match extra.remove("type") {
            Some(Value::String(t)) if t == tag => Ok(extra),
            Some(other) => Err(D::Error::custom(format_args!(
                "expected a block of type `{tag}`, found type {other}"
            ))),
            None => Err(D::Error::missing_field("type")),
        }
    }
}
