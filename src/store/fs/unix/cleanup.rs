//! The store's temporary files: how they are named, and how those a
//! crashed writer left behind are removed.
//!
//! A write first goes to a temporary file in the target's directory, named
//! `.claude-memory.tmp.{pid}.{n}` (under the reserved prefix, so no memory
//! path can name it and listings never show it). The writer removes it on
//! failure; only a crash leaves one. A listing of its directory removes it
//! then: opening a store never walks the whole tree, so a call's cost does
//! not grow with the store.

use std::os::fd::BorrowedFd;

use super::{FilesystemStore, sys};
use crate::path::MemoryPath;

const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// The name of this process's `n`th temporary file.
pub(super) fn temp_name(n: u64) -> String {
    format!("{TEMP_PREFIX}{}.{n}", std::process::id())
}

/// Whether `name` is a temporary file's.
pub(super) fn is_temp(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// Removes the temporary files `names` that a listing of `dir` (at
/// `path`) found. Under the write lock no live writer holds one (each
/// writes its temporary file and renames it under the lock), so those
/// still there were left by a crash. Best effort: the listing stands
/// whatever happens here, and a read-only handle removes nothing.
pub(super) fn remove_leftovers(
    store: &FilesystemStore,
    dir: BorrowedFd<'_>,
    path: &MemoryPath,
    names: &[String],
) {
    if store.lock.is_read_only() {
        return;
    }
    let Ok(_lock) = store.lock(path) else {
        return;
    };
    for name in names {
        // Gone already (renamed by the writer we waited for): fine.
        let _ = sys::unlink(dir, name.as_str());
    }
}
