//! `prune --older-than AGE [--dry-run]`.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use claude_memory::expiry::{ExpiryReport, expire};
use claude_memory::path::MemoryPath;
use claude_memory::store::{Flow, Order, Step, StoreResult, walk};
use claude_memory::{MemoryStore, human_size};

use crate::output::{Outcome, count, failed, out};

pub fn prune(tool: &crate::Tool, age: Duration, dry_run: bool) -> Outcome {
    let now = SystemTime::now();
    let report = if dry_run {
        would_expire(tool.store(), age, now)
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

/// What [`expire`] would do, without changing anything: the same files
/// (written before the cutoff, named by a memory path), and the
/// directories every one of whose entries would go.
fn would_expire<S: MemoryStore + ?Sized>(
    store: &S,
    older_than: Duration,
    now: SystemTime,
) -> StoreResult<ExpiryReport> {
    let cutoff = now
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut report = ExpiryReport::default();
    let mut gone: HashSet<MemoryPath> = HashSet::new();
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        match step {
            Step::File { dir, entry, .. } if entry.modified.is_some_and(|m| m < cutoff) => {
                if let Some(child) = dir.join(&entry.name) {
                    gone.insert(child.clone());
                    report.removed_files.push((child, entry.len));
                }
            }
            Step::File { .. } => report.kept_files += 1,
            Step::Leave { path, depth } if depth > 0 => {
                // Empty once every file and directory in it would be gone.
                let empty = store
                    .list(path)?
                    .iter()
                    .all(|e| path.join(&e.name).is_some_and(|c| gone.contains(&c)));
                if empty {
                    gone.insert(path.clone());
                    report.removed_dirs.push(path.clone());
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    })?;
    Ok(report)
}
