//! The agent loop, driven for you: [`Runner`] (sync) and `AsyncRunner`
//! (feature `tokio`) send requests through a function you give them
//! (request JSON in, response JSON out: any HTTP client, no client chosen
//! for you), run the tool calls and stop where the Messages API says to.
//!
//! - `stop_reason: "tool_use"`: every `tool_use` block gets exactly one
//!   `tool_result`, in the order of the calls, in one `user` message.
//!   Memory calls run through the [`MemoryTool`](crate::MemoryTool), one
//!   after another (never concurrently, so two edits in one turn cannot
//!   race); other tools run as the closures registered for them; a call to
//!   a tool nobody registered gets an error result the model can read.
//! - `"pause_turn"` (a server tool paused a long turn) and `"compaction"`
//!   (the server compacted the context and paused): the response is sent
//!   back as it is, as the last assistant message, to continue.
//! - `"end_turn"`, `"stop_sequence"`, `"max_tokens"`, `"refusal"`,
//!   `"model_context_window_exceeded"` and any other value (or none):
//!   the run stops and hands back the final response and every message.
//! - At most [`max_iterations`](Runner::max_iterations) requests per run
//!   (default 50), so an unattended loop always ends.
//! - Optional presets: [`ContextEditing`] (`clear_tool_uses_20250919`, the
//!   memory tool excluded) and [`Compaction`] (`compact_20260112`), each
//!   with its `anthropic-beta` value in [`Request::betas`].
//!
//! ```
//! use claude_memory::runner::{Request, Runner, StopReason, Stopped};
//! use claude_memory::{InMemoryStore, MemoryTool};
//! use serde_json::{Value, json};
//!
//! let runner = Runner::new(
//!     MemoryTool::new(InMemoryStore::new()),
//!     json!({"model": "claude-sonnet-4-5", "max_tokens": 1024}),
//! );
//! // A recorded exchange stands in for the HTTP call here.
//! let mut replies = vec![
//!     json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Saved."}]}),
//!     json!({"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "toolu_1",
//!            "name": "memory", "input": {"command": "create",
//!            "path": "/memories/prefs.md", "file_text": "Email follow-ups.\n"}}]}),
//! ];
//! let send = |_request: &Request| -> Result<Value, std::convert::Infallible> {
//!     Ok(replies.pop().unwrap_or_default())
//! };
//! let run = runner
//!     .run(vec![json!({"role": "user", "content": "Remember: email follow-ups."})], send)
//!     .unwrap();
//! assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
//! assert_eq!(run.messages.len(), 4); // user, assistant, user (tool_result), assistant
//! assert_eq!(run.response["content"][0]["text"], "Saved.");
//! ```

use std::fmt;

use serde_json::{Map, Value, json};

use crate::api::{TOOL_NAME, content_blocks, tool_results_message};
use crate::definition::MemoryToolDefinition;

#[cfg(feature = "tokio")]
mod asynchronous;
mod presets;
mod sync;

#[cfg(feature = "tokio")]
pub use asynchronous::AsyncRunner;
pub use presets::{COMPACTION_BETA, CONTEXT_MANAGEMENT_BETA, Compaction, ContextEditing};
pub use sync::Runner;

/// The runner's default [`max_iterations`](Runner::max_iterations).
pub const DEFAULT_MAX_ITERATIONS: usize = 50;

/// One request for your function to send: `POST /v1/messages` with
/// `body` as JSON and, when [`anthropic_beta`](Self::anthropic_beta) is
/// `Some`, that `anthropic-beta` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request body: your base fields, `tools` and `messages` (and
    /// `context_management` with a preset).
    pub body: Value,
    /// The beta features the body uses (empty without presets).
    pub betas: Vec<&'static str>,
}

impl Request {
    /// The `anthropic-beta` header value: the betas, comma-separated, or
    /// `None` when there are none.
    pub fn anthropic_beta(&self) -> Option<String> {
        (!self.betas.is_empty()).then(|| self.betas.join(","))
    }
}

/// Why the model stopped (`stop_reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// `end_turn`: the model finished.
    EndTurn,
    /// `stop_sequence`: one of the request's stop sequences.
    StopSequence,
    /// `max_tokens`: the response hit the request's `max_tokens`.
    MaxTokens,
    /// `refusal`: the model declined.
    Refusal,
    /// `model_context_window_exceeded`: the context window is full.
    ModelContextWindowExceeded,
    /// `tool_use` (a run never stops on it, except at `max_iterations`).
    ToolUse,
    /// `pause_turn` (resumed; a run never stops on it, except at
    /// `max_iterations`).
    PauseTurn,
    /// `compaction` (resumed; a run never stops on it, except at
    /// `max_iterations`).
    Compaction,
    /// A value this release does not know (the run stops), or `""` when
    /// the response had none.
    Other(String),
}

impl StopReason {
    /// The response's `stop_reason`.
    pub fn of(response: &Value) -> StopReason {
        match response.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn") => StopReason::EndTurn,
            Some("stop_sequence") => StopReason::StopSequence,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some("model_context_window_exceeded") => StopReason::ModelContextWindowExceeded,
            Some("tool_use") => StopReason::ToolUse,
            Some("pause_turn") => StopReason::PauseTurn,
            Some("compaction") => StopReason::Compaction,
            Some(other) => StopReason::Other(other.to_owned()),
            None => StopReason::Other(String::new()),
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The model stopped (anything but `tool_use`, `pause_turn` and
    /// `compaction`).
    Model(StopReason),
    /// [`max_iterations`](Runner::max_iterations) requests were sent and
    /// the last response still asked to go on. The messages end ready for
    /// the next request (tool results answered), so a new run can resume.
    MaxIterations,
}

/// A finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The last response, as your function returned it.
    pub response: Value,
    /// The whole conversation: your messages, then every assistant message
    /// and `tool_result` message, to store or to continue.
    pub messages: Vec<Value>,
    /// Why the run ended.
    pub stopped: Stopped,
    /// Requests sent.
    pub iterations: usize,
}

/// A run that could not go on. Each variant keeps the messages so far,
/// so the caller can store them or retry.
#[derive(Debug)]
pub enum RunError<E> {
    /// Your function failed.
    Send {
        /// Its error.
        source: E,
        /// The messages up to the failed request.
        messages: Vec<Value>,
    },
    /// The response was not a message (no `content` array): an API error
    /// body, for example.
    NotAMessage {
        /// The response, as returned.
        response: Value,
        /// The messages up to the request.
        messages: Vec<Value>,
    },
}

impl<E> RunError<E> {
    /// The messages so far.
    pub fn messages(&self) -> &[Value] {
        match self {
            RunError::Send { messages, .. } | RunError::NotAMessage { messages, .. } => messages,
        }
    }
}

impl<E: fmt::Display> fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Send { source, .. } => write!(f, "sending the request failed: {source}"),
            RunError::NotAMessage { .. } => f.write_str("the response is not a message"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Send { source, .. } => Some(source),
            RunError::NotAMessage { .. } => None,
        }
    }
}

/// What both runners share: the request they build and the decisions
/// they make on each response.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    base: Map<String, Value>,
    definition: MemoryToolDefinition,
    definitions: Vec<Value>,
    max_iterations: usize,
    context_editing: Option<ContextEditing>,
    compaction: Option<Compaction>,
}

/// What to do after a response.
pub(crate) enum Next {
    /// Answer these `tool_use` blocks (in order), then send again.
    Run(Vec<Value>),
    /// Send again as is (`pause_turn`, `compaction`).
    Resend,
    /// The run is over.
    Stop(StopReason),
}

impl Setup {
    pub(crate) fn new(base: Value) -> Self {
        let base = match base {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Setup {
            base,
            definition: MemoryToolDefinition::new(),
            definitions: Vec::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            context_editing: None,
            compaction: None,
        }
    }

    pub(crate) fn set_definition(&mut self, definition: MemoryToolDefinition) {
        self.definition = definition;
    }

    /// Adds another tool's definition, unless its name is the memory
    /// tool's or one already registered (the API refuses a request naming
    /// a tool twice; the first registration stays). Says whether it was
    /// added, so the runner keeps a handler only for a definition it sends.
    pub(crate) fn add_definition(&mut self, definition: Value) -> bool {
        let name = tool_name(&definition);
        if name == TOOL_NAME || self.definitions.iter().any(|d| tool_name(d) == name) {
            return false;
        }
        self.definitions.push(definition);
        true
    }

    /// `0` counts as `1`: a run always sends its first request (there is
    /// no response to return without one).
    pub(crate) fn set_max_iterations(&mut self, n: usize) {
        self.max_iterations = n.max(1);
    }

    pub(crate) fn max_iterations(&self) -> usize {
        self.max_iterations
    }

    pub(crate) fn set_context_editing(&mut self, edit: ContextEditing) {
        self.context_editing = Some(edit);
    }

    pub(crate) fn set_compaction(&mut self, edit: Compaction) {
        self.compaction = Some(edit);
    }

    /// The request for the conversation so far: the base fields, then
    /// `tools` (the base's own, such as server tools, then the memory
    /// tool, then the registered tools), `messages` and, with a preset,
    /// `context_management.edits` (the base's own edits first).
    pub(crate) fn request(&self, messages: &[Value]) -> Request {
        let mut body = self.base.clone();
        let mut tools = match body.remove("tools") {
            Some(Value::Array(tools)) => tools,
            _ => Vec::new(),
        };
        // A base that already names the memory tool (as the hand-written
        // loop's `tools` does) or a registered tool would send it twice,
        // which the API refuses: the runner's own definitions win.
        tools.retain(|t| {
            let name = tool_name(t);
            name != TOOL_NAME && !self.definitions.iter().any(|d| tool_name(d) == name)
        });
        tools.push(self.definition.to_json());
        tools.extend(self.definitions.iter().cloned());
        body.insert("tools".into(), Value::Array(tools));
        body.insert("messages".into(), Value::Array(messages.to_vec()));
        let mut betas = Vec::new();
        let mut edits = Vec::new();
        if let Some(edit) = &self.context_editing {
            edits.push(edit.to_json());
            betas.push(CONTEXT_MANAGEMENT_BETA);
        }
        if let Some(edit) = &self.compaction {
            edits.push(edit.to_json());
            betas.push(COMPACTION_BETA);
        }
        if !edits.is_empty() {
            let mut management = match body.remove("context_management") {
                Some(Value::Object(map)) => map,
                _ => Map::new(),
            };
            let mut all = match management.remove("edits") {
                Some(Value::Array(own)) => own,
                _ => Vec::new(),
            };
            all.extend(edits);
            management.insert("edits".into(), Value::Array(all));
            body.insert("context_management".into(), Value::Object(management));
        }
        Request {
            body: Value::Object(body),
            betas,
        }
    }

    /// Takes a response into the conversation (as the next assistant
    /// message) and says what comes next; `None` if it is not a message.
    pub(crate) fn take(&self, messages: &mut Vec<Value>, response: &Value) -> Option<Next> {
        let content = response.get("content").filter(|c| c.is_array())?;
        messages.push(json!({"role": "assistant", "content": content}));
        Some(match StopReason::of(response) {
            StopReason::ToolUse => {
                let calls: Vec<Value> = content_blocks(response)
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .cloned()
                    .collect();
                // `tool_use` without a call: nothing to answer, and sending
                // again would only repeat it.
                match calls.is_empty() {
                    true => Next::Stop(StopReason::ToolUse),
                    false => Next::Run(calls),
                }
            }
            StopReason::PauseTurn | StopReason::Compaction => Next::Resend,
            other => Next::Stop(other),
        })
    }

    /// Appends the `tool_result` message (if there were calls).
    pub(crate) fn answer(messages: &mut Vec<Value>, results: Vec<Value>) {
        if !results.is_empty() {
            messages.push(tool_results_message(results));
        }
    }
}

/// A tool definition's (or call's) name, `""` when it has none.
pub(crate) fn tool_name(value: &Value) -> &str {
    value.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The error result of a call that has no string `id`: it is not run (its
/// result could not be matched to it, and the API would refuse the turn).
pub(crate) fn without_id(call: &Value) -> Option<Value> {
    match call.get("id").and_then(Value::as_str) {
        Some(_) => None,
        None => Some(
            crate::ToolResult::error(crate::render::invalid_input("the tool_use block has no id"))
                .to_json(),
        ),
    }
}

/// A call's tool name, `None` for the memory tool.
pub(crate) fn other_tool(block: &Value) -> Option<&str> {
    let name = block.get("name").and_then(Value::as_str).unwrap_or("");
    (name != TOOL_NAME).then_some(name)
}

/// The `tool_result` of another tool's call from its closure's answer.
pub(crate) fn tool_result(block: &Value, answer: Result<String, String>) -> Value {
    let mut result = Map::new();
    result.insert("type".into(), json!("tool_result"));
    if let Some(id) = block.get("id").and_then(Value::as_str) {
        result.insert("tool_use_id".into(), json!(id));
    }
    let is_error = answer.is_err();
    let (Ok(text) | Err(text)) = answer;
    result.insert("content".into(), json!(text));
    if is_error {
        result.insert("is_error".into(), json!(true));
    }
    Value::Object(result)
}
