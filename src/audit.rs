//! Audit: one event per command, for logs and metrics.

use std::time::Duration;

/// What happened in one call. Content (file text, `old_str`, result text)
/// is included only when the sink asks for it
/// ([`AuditSink::include_content`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent<'a> {
    /// The command (`view`, `create`, …), or `None` if the input did not
    /// name a valid one.
    pub command: Option<&'a str>,
    /// The path as sent (`old_path` for rename).
    pub path: Option<&'a str>,
    /// `new_path`, for rename.
    pub new_path: Option<&'a str>,
    /// Whether the result was an error.
    pub is_error: bool,
    /// Bytes of text sent to be written (create, str_replace, insert), or
    /// returned (view).
    pub bytes: u64,
    /// Time spent in the handler.
    pub duration: Duration,
    /// The handler's tenant label, if set.
    pub tenant: Option<&'a str>,
    /// The result text, only if the sink includes content.
    pub result_text: Option<&'a str>,
}

/// Receives an [`AuditEvent`] for every call of a
/// [`MemoryTool`](crate::MemoryTool) it is attached to.
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use claude_memory::audit::{AuditEvent, AuditSink};
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<String>>);
///
/// impl AuditSink for Log {
///     fn record(&self, e: &AuditEvent<'_>) {
///         let line = format!("{:?} {:?} error={}", e.command, e.path, e.is_error);
///         self.0.lock().map(|mut log| log.push(line)).ok();
///     }
/// }
///
/// let log = Arc::new(Log::default());
/// let tool = MemoryTool::new(InMemoryStore::new()).with_audit(Arc::clone(&log));
/// tool.dispatch(&json!({"command": "view", "path": "/memories/missing.md"}));
/// assert_eq!(*log.0.lock().unwrap(), ["Some(\"view\") Some(\"/memories/missing.md\") error=true"]);
/// ```
pub trait AuditSink: Send + Sync {
    /// Records one event. Called on the calling thread, after the command.
    fn record(&self, event: &AuditEvent<'_>);

    /// Whether events carry the result text (which may quote file
    /// content). Default: no.
    fn include_content(&self) -> bool {
        false
    }
}

impl<T: AuditSink + ?Sized> AuditSink for std::sync::Arc<T> {
    fn record(&self, event: &AuditEvent<'_>) {
        (**self).record(event)
    }

    fn include_content(&self) -> bool {
        (**self).include_content()
    }
}
