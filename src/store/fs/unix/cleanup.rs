//! The store's temporary files: how they are named, and how those a
//! crashed writer left behind are removed.
//!
//! A write first goes to a temporary file in the target's directory, named
//! `.claude-memory.tmp.{pid}.{n}` (under the reserved prefix, so no memory
//! path can name it and listings never show it). The writer removes it on
//! failure; only a crash leaves one. A listing of its directory removes it
//! then: opening a store never walks the whole tree, so a call's cost does
//! not grow with the store.

use std::os::fd::{AsFd, BorrowedFd};

use super::{FilesystemStore, sys};

const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// The name of this process's `n`th temporary file.
pub(super) fn temp_name(n: u64) -> String {
    format!("{TEMP_PREFIX}{}.{n}", std::process::id())
}

/// Whether `name` is a temporary file's.
pub(super) fn is_temp(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// Removes the temporary files `names` that a listing of `dir` found.
/// Under the write lock no live writer holds one (each writes its
/// temporary file and renames it under the lock), so those still there
/// were left by a crash. Only if the lock is free now: a listing never
/// waits for it (a writer's own file is most likely what it saw), and the
/// next listing tries again. A read-only handle removes nothing.
pub(super) fn remove_leftovers(store: &FilesystemStore, dir: BorrowedFd<'_>, names: &[String]) {
    let Some(_lock) = store.lock.try_acquire() else {
        return;
    };
    for name in names {
        // Gone already (renamed since the listing): fine.
        let _ = sys::unlink(dir, name.as_str());
    }
}

/// Removes the temporary files a crash left in directory `name` of
/// `parent` if they are all it holds: whether it holds nothing now. For
/// a delete of an empty directory, under the write lock, so a directory
/// holding only leftovers goes as the empty directory it is.
pub(super) fn clear_if_only_leftovers(parent: BorrowedFd<'_>, name: &str) -> bool {
    let Ok(dir) = sys::open_dir(parent, name) else {
        return false;
    };
    let (mut temps, mut other) = (Vec::new(), false);
    let listed = sys::for_each_entry(dir.as_fd(), |entry, _| {
        match entry.to_str() {
            Ok(n) if is_temp(n) => temps.push(n.to_owned()),
            _ => other = true,
        }
        Ok(())
    });
    if listed.is_err() || other || temps.is_empty() {
        return false;
    }
    temps.iter().all(|t| sys::unlink(&dir, t.as_str()).is_ok())
}
