//! Expiry: remove memory files not written for a while, then the
//! directories that leaves empty.
//!
//! "Used" means *written* (created, edited or overwritten): that is what
//! every backend records reliably (file modification times; reads do not
//! update access times on most mounts), and counting reads would turn every
//! `view`, including the directory views Claude starts each session with,
//! into a write that keeps everything alive forever.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::path::MemoryPath;
use crate::store::{
    Flow, MemoryStore, MemoryStoreExt as _, Metadata, Order, Step, StoreError, StoreResult, walk,
};

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
///
/// A file is removed with [`DeleteIf::FileWhere`](crate::store::DeleteIf::FileWhere), only if it is
/// still the file the walk listed (same size and modification time): one
/// rewritten between the walk and the delete is kept (and counted in
/// [`kept_files`](ExpiryReport::kept_files)). That check is atomic with the
/// delete on every store of this crate (under the store's lock, or in one
/// transaction), and a directory goes only if it is empty at that instant
/// ([`DeleteIf::EmptyDir`](crate::store::DeleteIf::EmptyDir)).
pub fn expire<S: MemoryStore + ?Sized>(
    store: &S,
    older_than: Duration,
    now: SystemTime,
) -> StoreResult<ExpiryReport> {
    sweep(store, older_than, now, None)
}

/// What [`expire`] would remove now, changing nothing: the same files (and
/// the directories every one of whose entries would go), the same report.
pub fn preview<S: MemoryStore + ?Sized>(
    store: &S,
    older_than: Duration,
    now: SystemTime,
) -> StoreResult<ExpiryReport> {
    sweep(store, older_than, now, Some(&mut HashSet::new()))
}

/// The one walk behind [`expire`] and [`preview`]: `preview` is the set
/// of paths that would be gone when previewing, `None` when removing.
fn sweep<S: MemoryStore + ?Sized>(
    store: &S,
    older_than: Duration,
    now: SystemTime,
    mut preview: Option<&mut HashSet<MemoryPath>>,
) -> StoreResult<ExpiryReport> {
    let cutoff = now
        .checked_sub(older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut report = ExpiryReport::default();
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        match step {
            Step::File { dir, entry, .. } if entry.modified.is_some_and(|m| m < cutoff) => {
                let Some(child) = dir.join(&entry.name) else {
                    return Ok(Flow::Continue); // not a memory path: not ours to remove
                };
                if let Some(gone) = preview.as_deref_mut() {
                    gone.insert(child.clone());
                    report.removed_files.push((child, entry.len));
                    return Ok(Flow::Continue);
                }
                // Decided on the listing; deleted only if, at that instant,
                // it is still the file that was decided on (same size and
                // modification time, so still before the cutoff): one
                // another agent has rewritten meanwhile is kept.
                let (len, modified) = (entry.len, entry.modified);
                let mut still_old = |m: &Metadata| m.len == len && m.modified == modified;
                match store.delete_file_if(&child, &mut still_old) {
                    Ok(true) => report.removed_files.push((child, entry.len)),
                    // Rewritten meanwhile: kept.
                    Ok(false) if store.stat(&child)?.is_some() => report.kept_files += 1,
                    // Removed by someone else meanwhile: gone all the same.
                    Ok(false) | Err(StoreError::NotFound { .. }) => {
                        report.removed_files.push((child, entry.len));
                    }
                    Err(e) => return Err(e),
                }
            }
            Step::File { .. } => report.kept_files += 1,
            Step::Leave { path, depth } if depth > 0 => {
                let removed = match preview.as_deref_mut() {
                    // Empty once every entry in it would be gone.
                    Some(gone) => {
                        let empty = store
                            .list(path)?
                            .iter()
                            .all(|e| path.join(&e.name).is_some_and(|c| gone.contains(&c)));
                        if empty {
                            gone.insert(path.clone());
                        }
                        empty
                    }
                    // Only if it is empty at that instant (`rmdir`): a file
                    // another agent just put there stays.
                    None => store.remove_empty_dir(path)?,
                };
                if removed {
                    report.removed_dirs.push(path.clone());
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    })?;
    Ok(report)
}
