//! Expiry: remove memory files not written for a while, then the
//! directories that leaves empty.
//!
//! "Used" means *written* (created, edited or overwritten): that is what
//! every backend records reliably (file modification times; reads do not
//! update access times on most mounts), and counting reads would turn every
//! `view`, including the directory views Claude starts each session with,
//! into a write that keeps everything alive forever.

use std::time::{Duration, SystemTime};

use crate::path::MemoryPath;
use crate::store::{EntryKind, MemoryStore, StoreError, StoreResult};

/// What [`expire`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Files removed, with their sizes.
    pub removed_files: Vec<(MemoryPath, u64)>,
    /// Directories removed because they were left empty.
    pub removed_dirs: Vec<MemoryPath>,
    /// Files kept.
    pub kept_files: usize,
}

impl ExpiryReport {
    /// Bytes freed.
    pub fn removed_bytes(&self) -> u64 {
        self.removed_files.iter().map(|(_, n)| n).sum()
    }
}

/// Removes every file last written before `now - older_than`, then the
/// directories that leaves empty (never the root). Files whose backend
/// reports no modification time are kept. Works on any [`MemoryStore`].
pub fn expire<S: MemoryStore + ?Sized>(
    store: &S,
    older_than: Duration,
    now: SystemTime,
) -> StoreResult<ExpiryReport> {
    let cutoff = now
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut report = ExpiryReport::default();
    sweep(store, &MemoryPath::root(), cutoff, &mut report)?;
    Ok(report)
}

/// Sweeps `dir`; returns whether it is empty afterwards.
fn sweep<S: MemoryStore + ?Sized>(
    store: &S,
    dir: &MemoryPath,
    cutoff: SystemTime,
    report: &mut ExpiryReport,
) -> StoreResult<bool> {
    let entries = store.list(dir)?;
    let mut left = entries.len();
    for entry in entries {
        let Some(child) = dir.join(&entry.name) else {
            continue; // not a memory path: not ours to remove
        };
        let removed = match entry.kind {
            EntryKind::File if entry.modified.is_some_and(|m| m < cutoff) => {
                match store.delete(&child) {
                    Ok(()) | Err(StoreError::NotFound { .. }) => {
                        report.removed_files.push((child, entry.len));
                        true
                    }
                    Err(e) => return Err(e),
                }
            }
            EntryKind::File => {
                report.kept_files += 1;
                false
            }
            EntryKind::Directory => {
                // Only remove it if it is still empty now.
                if sweep(store, &child, cutoff, report)? && store.list(&child)?.is_empty() {
                    store.delete(&child)?;
                    report.removed_dirs.push(child);
                    true
                } else {
                    false
                }
            }
        };
        left -= usize::from(removed);
    }
    Ok(left == 0)
}
