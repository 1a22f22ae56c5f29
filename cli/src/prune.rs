//! `prune --older-than AGE [--dry-run]`.

use std::time::{Duration, SystemTime};

use claude_memory::expiry::{expire, preview};
use claude_memory::human_size;

use crate::output::{Outcome, count, failed, out};

pub fn prune(tool: &crate::Tool, age: Duration, dry_run: bool) -> Outcome {
    let now = SystemTime::now();
    let report = if dry_run {
        preview(tool.store(), age, now)
    } else {
        expire(tool.store(), age, now)
    }
    .map_err(failed)?;
    let verb = if dry_run { "would remove" } else { "removed" };
    for (path, size) in &report.removed_files {
        out(format_args!(
            "{verb} {} ({})",
            path.normalized(),
            human_size(*size)
        ))?;
    }
    for dir in &report.removed_dirs {
        out(format_args!("{verb} empty directory {}", dir.normalized()))?;
    }
    out(format_args!(
        "{verb} {} ({}) and {}; {} {}",
        count(report.removed_files.len(), "file", "files"),
        human_size(report.removed_bytes()),
        count(report.removed_dirs.len(), "directory", "directories"),
        if dry_run { "would keep" } else { "kept" },
        count(report.kept_files, "file", "files"),
    ))
}
