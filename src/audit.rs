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
