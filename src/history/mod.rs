//! Memory history: every change kept, attributable and reversible.
//!
//! [`HistoryStore`] wraps any [`MemoryStore`](crate::MemoryStore) (filesystem, in-memory,
//! SQLite, PostgreSQL, a tenant's store) and records a [`Revision`] for
//! every successful change — create, `str_replace`, `insert`, delete,
//! rename — into a [`HistoryLog`] kept outside the live namespace (the
//! reserved directory `.claude-memory-history/` of a filesystem store, the
//! reserved table `claude_memory_history` of a database), so no view,
//! listing or model path ever reaches it and the store size limit counts
//! live files only.
//!
//! Each version holds a monotonic id, the path (both paths for a rename),
//! the operation, the time, the actor (the store's label and the per-call
//! actor, such as the `tool_use` id, which [`MemoryTool`](crate::MemoryTool)
//! passes in each change's [`Context`](crate::store::Context)), the content's sha256
//! and size, and the content (for a delete, the content removed). A file
//! keeps its [`file`](Revision::file) id across renames.
//!
//! **Atomic with the change.** A change's versions are appended *before*
//! the change (write-ahead) and dropped again if the change fails. Opening
//! a `HistoryStore` compares every live file with its latest version:
//! a trailing version whose change never happened (a crash between the
//! two steps) is dropped, and a change without a version (a file edited
//! outside the history, or a version lost to a power cut) is recorded as a
//! `repair` version; [`HistoryStore::repair_report`] says what was done.
//! A writer already open that finds versions other writers appended checks
//! them against the store the same way before it records its own change,
//! so the versions of a writer killed before its change are dropped, never
//! built on.
//!
//! ```
//! use claude_memory::history::{HistoryStore, MemoryLog, Query};
//! use claude_memory::{InMemoryStore, MemoryTool};
//! use serde_json::json;
//!
//! let store = HistoryStore::open(InMemoryStore::new(), MemoryLog::new())?.with_label("agent");
//! let tool = MemoryTool::new(store);
//! tool.dispatch(&json!({"type": "tool_use", "id": "toolu_1", "name": "memory",
//!     "input": {"command": "create", "path": "/memories/a.md", "file_text": "v1\n"}}));
//! tool.dispatch(&json!({"type": "tool_use", "id": "toolu_2", "name": "memory",
//!     "input": {"command": "str_replace", "path": "/memories/a.md",
//!               "old_str": "v1", "new_str": "v2"}}));
//! let history = tool.store();
//! let versions = history.versions(&Query::default())?;
//! assert_eq!(versions.len(), 2);
//! assert_eq!(versions[1].call.as_deref(), Some("toolu_2"));
//! history.revert(versions[0].id)?; // a new version, with v1's content
//! assert_eq!(history.versions(&Query::default())?.len(), 3);
//! # Ok::<(), claude_memory::history::HistoryError>(())
//! ```

mod catch_up;
#[cfg(feature = "cloud")]
mod cloud_log;
mod file_log;
mod index;
mod journal_dir;
mod journal_line;
mod log;
#[cfg(feature = "managed")]
mod managed;
mod memory_log;
mod ops;
mod repair;
#[cfg(feature = "encryption")]
mod sealed_log;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
mod store;
mod version;
mod versions;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(feature = "cloud")]
#[cfg_attr(docsrs, doc(cfg(feature = "cloud")))]
pub use self::cloud_log::CloudLog;
pub use self::file_log::{FileLog, HISTORY_DIR};
pub use self::log::{Filter, HistoryLog, Order, file_of};
pub use self::memory_log::{DEFAULT_MEMORY_LOG_CAP, MemoryLog};
#[cfg(feature = "encryption")]
#[cfg_attr(docsrs, doc(cfg(feature = "encryption")))]
pub use self::sealed_log::{LogSealer, SealedLog};
#[cfg(feature = "postgres")]
pub use self::sql::PostgresLog;
#[cfg(feature = "sqlite")]
pub use self::sql::SqliteLog;
pub use self::store::{DEFAULT_FILE_LIMIT, HistoryStore, MAX_CALL_LEN};
pub use self::version::{
    ChangeOp, DEFAULT_LIMIT, HistoryError, Query, RepairReport, RestoreReport, Retention, Revision,
    SkipReason,
};
pub use self::versions::{RevertReport, Version, VersionId, Versions};

pub(crate) fn to_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub(crate) fn from_nanos(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
}

/// A time as RFC 3339 with milliseconds, for notes and listings; a time
/// humantime cannot print (before 1970, after 9999) as seconds from the
/// epoch, never a panic.
pub fn format_time(t: SystemTime) -> String {
    const YEAR_10000: u64 = 253_402_300_800;
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) if d.as_secs() < YEAR_10000 => humantime::format_rfc3339_millis(t).to_string(),
        Ok(d) => format!("{}s after the epoch", d.as_secs()),
        Err(e) => format!("{}s before the epoch", e.duration().as_secs()),
    }
}

pub use crate::store::sha256_hex;

/// A unified diff of two texts (3 lines of context), `""` if they are
/// equal: what `diff` prints, for any history.
pub fn unified_diff(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

/// A path string below `prefix` (or equal to it).
pub(crate) fn under(path: &str, prefix: &str) -> bool {
    prefix == crate::path::ROOT
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `text` with every control character (C0, DEL, C1) and backslash
/// written as an escape (`\n`, `\t`, `\x1b`, `\u{9b}`), so nothing a
/// model wrote can move an operator's cursor or forge a row when a
/// history listing, diff or report is printed.
pub fn escape(text: &str) -> String {
    escaped(text, false)
}

/// [`escape`] for a file's content, shown as lines: newlines and tabs
/// stay (a content line cannot forge a listing row), a backslash stays
/// as it is; every other control character (`ESC`, `CR`, …) is escaped.
pub fn escape_text(text: &str) -> String {
    escaped(text, true)
}

fn escaped(text: &str, lines: bool) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' if lines => out.push(c),
            '\\' if lines => out.push(c),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}
