//! `MemoryTool`: JSON in, `ToolResult` out. All command logic lives in this
//! folder, on top of the store's primitives, so every backend answers
//! alike: one file per command (`view`, `create`, `edit` for `str_replace`
//! and `insert`, `delete`, `rename`), the checks every write passes
//! (`checks`), and the Messages API response helpers (`responses`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::audit::{AuditEvent, AuditSink};
use crate::command::{COMMANDS, Command};
use crate::config::Config;
use crate::path::MemoryPath;
use crate::policy::ContentPolicy;
use crate::render::{self, ModelError};
use crate::result::{Content, ToolResult};
use crate::store::{Context, MemoryStore};

mod checks;
mod create;
mod delete;
mod edit;
mod rename;
mod responses;
mod slim;
#[cfg(feature = "tracing")]
mod trace;
mod view;

/// The memory tool handler: runs Claude's memory commands against a store.
///
/// Cheap to share: all methods take `&self`, and it is `Send + Sync` when
/// the store is, so one handler can serve many threads (or
/// `tokio::task::spawn_blocking` calls).
///
/// ```
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// let tool = MemoryTool::new(InMemoryStore::new());
/// let block = json!({"type": "tool_use", "id": "toolu_1", "name": "memory",
///                    "input": {"command": "view", "path": "/memories"}});
/// let result = tool.dispatch(&block);
/// assert!(!result.is_error);
/// assert_eq!(result.to_json()["tool_use_id"], "toolu_1");
///
/// // Every bad input is an error result, never a panic:
/// let result = tool.dispatch(&json!({"command": "view", "path": "/etc/passwd"}));
/// assert!(result.is_error);
/// ```
#[derive(Clone)]
pub struct MemoryTool<S> {
    store: S,
    config: Config,
    policy: Option<Arc<dyn ContentPolicy>>,
    audit: Option<Arc<dyn AuditSink>>,
    tenant: Option<String>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for MemoryTool<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTool")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("policy", &self.policy.is_some())
            .field("audit", &self.audit.is_some())
            .field("tenant", &self.tenant)
            .finish()
    }
}

/// A command's outcome before it becomes a [`ToolResult`]; the error is the
/// rendered model-facing text.
type Outcome = Result<Content, ModelError>;

impl<S: MemoryStore> MemoryTool<S> {
    /// A handler with the default [`Config`].
    pub fn new(store: S) -> Self {
        Self::with_config(store, Config::default())
    }

    /// A handler with the given limits and policies.
    pub fn with_config(store: S, config: Config) -> Self {
        MemoryTool {
            store,
            config,
            policy: None,
            audit: None,
            tenant: None,
        }
    }

    /// Checks the new content of every write with `policy` (see
    /// [`SecretDetector`](crate::policy::SecretDetector)).
    pub fn with_policy(mut self, policy: impl ContentPolicy + 'static) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Sends an [`AuditEvent`](crate::audit::AuditEvent) for every call to
    /// `sink`.
    pub fn with_audit(mut self, sink: impl AuditSink + 'static) -> Self {
        self.audit = Some(Arc::new(sink));
        self
    }

    /// Labels audit events with a tenant.
    pub fn with_tenant_label(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The store this handler runs against.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs one call. `input` is either a `tool_use` block
    /// (`{"type":"tool_use","id":…,"input":{…}}`, whose `id` is echoed as
    /// `tool_use_id`) or a bare `input` object. Never panics: every problem
    /// is a result with `is_error: true`.
    pub fn dispatch(&self, input: &Value) -> ToolResult {
        let Some(object) = input.as_object() else {
            return ToolResult::error(render::invalid_input("expected a JSON object"));
        };
        if object.get("type").and_then(Value::as_str) != Some("tool_use") {
            return self.dispatch_input(input, None);
        }
        let id = object.get("id").and_then(Value::as_str).map(str::to_owned);
        let mut result = match object.get("input") {
            // The block's id is the per-call actor of any history version.
            Some(inner @ Value::Object(_)) => self.dispatch_input(inner, id.as_deref()),
            _ => ToolResult::error(render::invalid_input(
                "the tool_use block's `input` must be a JSON object",
            )),
        };
        result.tool_use_id = id;
        result
    }

    /// [`dispatch`](Self::dispatch) on JSON text; unparseable text is an
    /// `Error: Invalid input: …` result.
    pub fn dispatch_json(&self, json: &str) -> ToolResult {
        match serde_json::from_str::<slim::Slim>(json) {
            Ok(slim::Slim(value)) => self.dispatch(&value),
            Err(e) => ToolResult::error(render::invalid_input(&e.to_string())),
        }
    }

    /// Runs an already-parsed command.
    pub fn execute(&self, command: &Command) -> ToolResult {
        self.execute_call(command, None)
    }

    /// Runs an already-parsed command for the call `call` (a `tool_use`
    /// block's id), which a history keeps with each version it records.
    pub fn execute_call(&self, command: &Command, call: Option<&str>) -> ToolResult {
        let context = Context { call, note: None };
        let started = Instant::now();
        #[cfg(feature = "tracing")]
        let span = trace::span(command);
        #[cfg(feature = "tracing")]
        let _entered = span.enter();
        let outcome = match command {
            Command::View { path, view_range } => self.view(path, *view_range),
            Command::Create { path, file_text } => self.create(path, file_text, context),
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => {
                let new_str = new_str.as_deref().unwrap_or("");
                self.str_replace(path, old_str, new_str, context)
            }
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(path, *insert_line, insert_text, context),
            Command::Delete { path } => self.delete(path, context),
            Command::Rename { old_path, new_path } => self.rename(old_path, new_path, context),
        };
        let result = match outcome {
            Ok(content) => ToolResult::ok(content),
            Err(text) => ToolResult::error(text),
        };
        #[cfg(feature = "tracing")]
        trace::finish(&span, &result, started.elapsed());
        if let Some(sink) = &self.audit {
            let (path, new_path) = command.paths();
            let sent = match command {
                Command::Create { file_text, .. } => file_text.len(),
                Command::StrReplace { new_str, .. } => new_str.as_deref().map_or(0, str::len),
                Command::Insert { insert_text, .. } => insert_text.len(),
                _ => 0,
            };
            let returned = match (command, result.content.first()) {
                (Command::View { .. }, Some(Content::Text(t))) => t.len(),
                (Command::View { .. }, Some(Content::Image { data, .. })) => data.len(),
                _ => 0,
            };
            let text = sink.include_content().then(|| result.text()).flatten();
            sink.record(&AuditEvent {
                command: Some(command.name()),
                path: Some(path),
                new_path,
                is_error: result.is_error,
                bytes: (sent + returned) as u64,
                duration: started.elapsed(),
                tenant: self.tenant.as_deref(),
                result_text: text,
            });
        }
        result
    }

    pub(crate) fn dispatch_input(&self, input: &Value, call: Option<&str>) -> ToolResult {
        let Some(object) = input.as_object() else {
            return ToolResult::error(render::invalid_input("expected a JSON object"));
        };
        match Command::from_input(object) {
            Ok(command) => self.execute_call(&command, call),
            Err(text) => {
                let result = ToolResult::error(text);
                if let Some(sink) = &self.audit {
                    let command = object.get("command").and_then(Value::as_str);
                    sink.record(&AuditEvent {
                        command: command.filter(|c| COMMANDS.contains(c)),
                        path: None,
                        new_path: None,
                        is_error: true,
                        bytes: 0,
                        duration: Duration::ZERO,
                        tenant: self.tenant.as_deref(),
                        result_text: sink.include_content().then(|| result.text()).flatten(),
                    });
                }
                result
            }
        }
    }
}

/// Validates a path from the model; the error is the model-facing text.
fn parse(raw: &str) -> Result<MemoryPath, ModelError> {
    MemoryPath::parse(raw).map_err(|e| render::invalid_path(raw, &e))
}
