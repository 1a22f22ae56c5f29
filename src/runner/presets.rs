//! The optional context-management presets a runner can add to every
//! request: context editing (`clear_tool_uses_20250919`, the memory tool's
//! results kept) and server-side compaction (`compact_20260112`), each with
//! the beta header it needs.

use serde_json::{Map, Value, json};

use crate::api::TOOL_NAME;

/// The `anthropic-beta` value context editing needs.
pub const CONTEXT_MANAGEMENT_BETA: &str = "context-management-2025-06-27";

/// The `anthropic-beta` value server-side compaction needs.
pub const COMPACTION_BETA: &str = "compact-2026-01-12";

/// Context editing: the API clears old tool results as the context grows,
/// except the memory tool's (`exclude_tools: ["memory"]`): what the model
/// read from memory is what it would otherwise call again for. Unset fields
/// are left to the API's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextEditing {
    trigger_input_tokens: Option<u64>,
    keep_tool_uses: Option<u64>,
    clear_at_least_input_tokens: Option<u64>,
    exclude_tools: Vec<String>,
}

impl ContextEditing {
    /// The edit with the API's defaults, the memory tool excluded.
    pub fn new() -> Self {
        Self::default()
    }

    /// `trigger`: clear once the input reaches this many tokens.
    pub fn trigger_input_tokens(mut self, tokens: u64) -> Self {
        self.trigger_input_tokens = Some(tokens);
        self
    }

    /// `keep`: the most recent tool uses kept whole.
    pub fn keep_tool_uses(mut self, uses: u64) -> Self {
        self.keep_tool_uses = Some(uses);
        self
    }

    /// `clear_at_least`: clear at least this many tokens when clearing (so
    /// a cache prefix is not broken for a small gain).
    pub fn clear_at_least_input_tokens(mut self, tokens: u64) -> Self {
        self.clear_at_least_input_tokens = Some(tokens);
        self
    }

    /// Keeps another tool's results too (the memory tool's always are).
    pub fn exclude_tool(mut self, name: impl Into<String>) -> Self {
        self.exclude_tools.push(name.into());
        self
    }

    /// The edit, as it goes into `context_management.edits`.
    pub fn to_json(&self) -> Value {
        let mut edit = Map::new();
        edit.insert("type".into(), json!("clear_tool_uses_20250919"));
        if let Some(tokens) = self.trigger_input_tokens {
            edit.insert(
                "trigger".into(),
                json!({"type": "input_tokens", "value": tokens}),
            );
        }
        if let Some(uses) = self.keep_tool_uses {
            edit.insert("keep".into(), json!({"type": "tool_uses", "value": uses}));
        }
        if let Some(tokens) = self.clear_at_least_input_tokens {
            edit.insert(
                "clear_at_least".into(),
                json!({"type": "input_tokens", "value": tokens}),
            );
        }
        let mut excluded = vec![Value::from(TOOL_NAME)];
        excluded.extend(
            self.exclude_tools
                .iter()
                .filter(|n| *n != TOOL_NAME)
                .map(|n| Value::from(n.as_str())),
        );
        edit.insert("exclude_tools".into(), Value::Array(excluded));
        Value::Object(edit)
    }
}

/// Server-side compaction: the API summarizes the conversation when it
/// grows past a threshold and puts a `compaction` block in the response;
/// the runner sends it back as it is, and (with
/// [`pause_after_compaction`](Self::pause_after_compaction)) resumes after
/// a `compaction` stop.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Compaction {
    trigger_input_tokens: Option<u64>,
    pause_after_compaction: Option<bool>,
    instructions: Option<String>,
}

impl Compaction {
    /// The edit with the API's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// `trigger`: compact once the input reaches this many tokens.
    pub fn trigger_input_tokens(mut self, tokens: u64) -> Self {
        self.trigger_input_tokens = Some(tokens);
        self
    }

    /// `pause_after_compaction`: the API stops with `stop_reason:
    /// "compaction"` after compacting (the runner resumes at once; a
    /// caller's own loop could add messages first).
    pub fn pause_after_compaction(mut self, pause: bool) -> Self {
        self.pause_after_compaction = Some(pause);
        self
    }

    /// `instructions`: what the summary must keep.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The edit, as it goes into `context_management.edits`.
    pub fn to_json(&self) -> Value {
        let mut edit = Map::new();
        edit.insert("type".into(), json!("compact_20260112"));
        if let Some(tokens) = self.trigger_input_tokens {
            edit.insert(
                "trigger".into(),
                json!({"type": "input_tokens", "value": tokens}),
            );
        }
        if let Some(pause) = self.pause_after_compaction {
            edit.insert("pause_after_compaction".into(), json!(pause));
        }
        if let Some(text) = &self.instructions {
            edit.insert("instructions".into(), json!(text));
        }
        Value::Object(edit)
    }
}
