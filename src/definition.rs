//! `MemoryToolDefinition`: the memory tool's entry in a request's `tools`,
//! with every optional field the GA tool (`memory_20250818`) takes.
//!
//! [`tool_definition`](crate::tool_definition) gives the bare
//! `{"type": "memory_20250818", "name": "memory"}`; this builder adds
//! `cache_control`, `defer_loading` (tool search), `strict`,
//! `input_examples` and `allowed_callers`. Fields left unset are not
//! written at all (the API treats an absent field as its default, and a
//! `null` is not always accepted), so the JSON is exactly what was asked
//! for, keys in a fixed order: `type`, `name`, then the rest
//! alphabetically.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::api::{TOOL_NAME, TOOL_TYPE};

/// Who may call the tool (`allowed_callers`): the model directly, or code
/// the model runs in the code-execution tool (programmatic tool calling).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllowedCaller {
    /// `"direct"`: the model's own `tool_use` blocks.
    Direct,
    /// `"code_execution_20250825"`: code run by that code-execution tool.
    CodeExecution20250825,
    /// A caller this release does not name (a newer code-execution tool
    /// version), written as given.
    Other(String),
}

impl AllowedCaller {
    /// The string the API takes.
    pub fn as_str(&self) -> &str {
        match self {
            AllowedCaller::Direct => "direct",
            AllowedCaller::CodeExecution20250825 => "code_execution_20250825",
            AllowedCaller::Other(s) => s,
        }
    }
}

/// The memory tool's definition with its optional fields; serialize it (or
/// call [`to_json`](Self::to_json)) into the request's `tools`.
///
/// ```
/// use claude_memory::{AllowedCaller, MemoryToolDefinition};
/// use serde_json::json;
///
/// let definition = MemoryToolDefinition::new()
///     .cache_control(json!({"type": "ephemeral"}))
///     .defer_loading(true)
///     .allowed_callers([AllowedCaller::Direct]);
/// assert_eq!(
///     serde_json::to_string(&definition).unwrap(),
///     r#"{"type":"memory_20250818","name":"memory","allowed_callers":["direct"],"cache_control":{"type":"ephemeral"},"defer_loading":true}"#
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryToolDefinition {
    allowed_callers: Option<Vec<AllowedCaller>>,
    cache_control: Option<Value>,
    defer_loading: Option<bool>,
    input_examples: Option<Vec<Value>>,
    strict: Option<bool>,
}

impl MemoryToolDefinition {
    /// The bare definition: `{"type": "memory_20250818", "name": "memory"}`.
    pub fn new() -> Self {
        Self::default()
    }

    /// `allowed_callers`: who may call the tool. Without it the API's
    /// default applies (the model directly).
    pub fn allowed_callers(mut self, callers: impl IntoIterator<Item = AllowedCaller>) -> Self {
        self.allowed_callers = Some(callers.into_iter().collect());
        self
    }

    /// `cache_control` (for example `{"type": "ephemeral"}`), so the
    /// tools prefix can be cached.
    pub fn cache_control(mut self, cache_control: Value) -> Self {
        self.cache_control = Some(cache_control);
        self
    }

    /// `defer_loading`: with tool search, the tool stays out of the
    /// initial prompt until a search returns it.
    pub fn defer_loading(mut self, defer: bool) -> Self {
        self.defer_loading = Some(defer);
        self
    }

    /// Adds one of `input_examples`: an example `input` (a memory command
    /// such as `{"command": "view", "path": "/memories"}`) shown to the
    /// model.
    pub fn input_example(mut self, input: Value) -> Self {
        self.input_examples.get_or_insert_with(Vec::new).push(input);
        self
    }

    /// `strict`: the API guarantees that inputs match the tool's schema.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = Some(strict);
        self
    }

    /// The definition as JSON. (As a `Value` the keys follow serde_json's
    /// map order; `serde_json::to_string(&definition)` keeps the fixed
    /// order described in the module docs.)
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for MemoryToolDefinition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", TOOL_TYPE)?;
        map.serialize_entry("name", TOOL_NAME)?;
        if let Some(callers) = &self.allowed_callers {
            let callers: Vec<&str> = callers.iter().map(AllowedCaller::as_str).collect();
            map.serialize_entry("allowed_callers", &callers)?;
        }
        if let Some(cache_control) = &self.cache_control {
            map.serialize_entry("cache_control", cache_control)?;
        }
        if let Some(defer) = self.defer_loading {
            map.serialize_entry("defer_loading", &defer)?;
        }
        if let Some(examples) = &self.input_examples {
            map.serialize_entry("input_examples", examples)?;
        }
        if let Some(strict) = self.strict {
            map.serialize_entry("strict", &strict)?;
        }
        map.end()
    }
}

impl From<MemoryToolDefinition> for Value {
    fn from(definition: MemoryToolDefinition) -> Value {
        definition.to_json()
    }
}
