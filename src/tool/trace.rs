//! The `tracing` feature: one span per command, `memory_command`, with the
//! command, the path(s) as sent, the outcome and the duration. Never file
//! content: neither what is written nor what a view returns.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::command::Command;
use crate::result::ToolResult;

/// The command's span; entered for the command's run, so a store's own
/// events nest in it.
pub(super) fn span(command: &Command) -> Span {
    let (path, new_path) = command.paths();
    tracing::info_span!(
        "memory_command",
        command = command.name(),
        path,
        new_path,
        is_error = Empty,
        duration_us = Empty,
    )
}

/// Records the outcome and the time taken on the command's span.
pub(super) fn finish(span: &Span, result: &ToolResult, elapsed: Duration) {
    span.record("is_error", result.is_error);
    span.record(
        "duration_us",
        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
    );
}
