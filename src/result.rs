//! What a command returns, and its `tool_result` JSON block.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use crate::base64;

use crate::render::ModelError;

/// An image format `view` can return as an image block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// `image/png`
    Png,
    /// `image/jpeg`
    Jpeg,
}

impl ImageFormat {
    /// The MIME type sent to the API.
    pub fn media_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
        }
    }

    /// The format of a file named `name` holding `data`, if its extension
    /// says image and its bytes agree.
    pub(crate) fn detect(name: &str, data: &[u8]) -> Option<Self> {
        let ends_with = |ext: &str| {
            name.len() >= ext.len()
                && name.as_bytes()[name.len() - ext.len()..].eq_ignore_ascii_case(ext.as_bytes())
        };
        if ends_with(".png") && data.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if (ends_with(".jpg") || ends_with(".jpeg")) && data.starts_with(&[0xFF, 0xD8, 0xFF])
        {
            Some(ImageFormat::Jpeg)
        } else {
            None
        }
    }
}

/// One content block of a tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text for the model.
    Text(String),
    /// An image file's bytes (sent base64-encoded).
    Image {
        /// PNG or JPEG.
        format: ImageFormat,
        /// The raw bytes.
        data: Vec<u8>,
    },
}

impl Content {
    /// The API's JSON content block.
    pub fn to_json(&self) -> Value {
        match self {
            Content::Text(text) => json!({"type": "text", "text": text}),
            Content::Image { format, data } => json!({
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": format.media_type(),
                    "data": base64::encode(data),
                },
            }),
        }
    }
}

/// The answer to one memory tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The `id` of the `tool_use` block answered, when the input was one.
    pub tool_use_id: Option<String>,
    /// The content blocks (one text block, or one image block).
    pub content: Vec<Content>,
    /// True on any failure; the model sees the text either way.
    pub is_error: bool,
}

impl ToolResult {
    pub(crate) fn ok(content: Content) -> Self {
        ToolResult {
            tool_use_id: None,
            content: vec![content],
            is_error: false,
        }
    }

    /// A failed call's result: its text comes from `render.rs` only.
    pub(crate) fn error(text: ModelError) -> Self {
        ToolResult {
            tool_use_id: None,
            content: vec![Content::Text(text.into())],
            is_error: true,
        }
    }

    /// The text of the result, if it is a single text block.
    pub fn text(&self) -> Option<&str> {
        match self.content.as_slice() {
            [Content::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The `tool_result` block to send back to the API:
    /// `{"type":"tool_result","tool_use_id":…,"content":…,"is_error":true}`.
    ///
    /// `content` is a string for a single text block and an array of blocks
    /// otherwise; `tool_use_id` is present when known; `is_error` only when
    /// true. (Serializing the `ToolResult` itself gives the same JSON with
    /// the keys in that order.)
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", "tool_result")?;
        if let Some(id) = &self.tool_use_id {
            map.serialize_entry("tool_use_id", id)?;
        }
        match self.text() {
            Some(text) => map.serialize_entry("content", text)?,
            None => {
                let blocks: Vec<Value> = self.content.iter().map(Content::to_json).collect();
                map.serialize_entry("content", &blocks)?;
            }
        }
        if self.is_error {
            map.serialize_entry("is_error", &true)?;
        }
        map.end()
    }
}

impl ToolResult {
    /// The typed `tool_result` block (`tool_use_id` empty if unknown).
    pub fn to_block(&self) -> crate::api::ToolResultBlock {
        let content = match self.text() {
            Some(text) => crate::api::ToolResultContent::Text(text.to_owned()),
            None => crate::api::ToolResultContent::Blocks(
                self.content
                    .iter()
                    .map(|c| match (c, c.to_json()) {
                        (Content::Text(text), _) => crate::api::ContentBlock::Text {
                            text: text.clone(),
                            extra: serde_json::Map::new(),
                        },
                        (Content::Image { .. }, json) => crate::api::ContentBlock::Image {
                            source: json["source"].clone(),
                            extra: serde_json::Map::new(),
                        },
                    })
                    .collect(),
            ),
        };
        crate::api::ToolResultBlock {
            tool_use_id: self.tool_use_id.clone().unwrap_or_default(),
            content: Some(content),
            is_error: self.is_error.then_some(true),
            extra: serde_json::Map::new(),
        }
    }
}
