//! Memo tables for name encryption, bounded.
//!
//! Name encryption is deterministic (AES-SIV under one name key for the
//! store's lifetime), so the stored form of a plaintext path, and the
//! plaintext of a stored name in a directory, are pure functions of their
//! inputs: remembering them changes no answer, only skips the work. The
//! profile of a directory view had AES-SIV, base32 and
//! the path checks of the 52-character stored names as most of the
//! wrapper's cost; a hit costs one hash lookup instead.
//!
//! Each table holds at most [`MAX_ENTRIES`] entries and is emptied when it
//! is full (a few hundred KB at most, whatever the store holds). What it
//! holds is plaintext names, which this process already holds while it
//! handles them; nothing of it is ever written anywhere.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::path::MemoryPath;

/// Entries per table before it is emptied.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// Plaintext path -> stored path, and stored directory -> (stored name
/// -> plaintext name).
#[derive(Default)]
pub(crate) struct NameMemo {
    /// Shared, so a hit costs a reference count, not a copy of the path.
    paths: Mutex<HashMap<String, Arc<MemoryPath>>>,
    names: Mutex<Names>,
}

#[derive(Default)]
struct Names {
    entries: usize,
    dirs: HashMap<String, HashMap<String, String>>,
}

impl NameMemo {
    pub(crate) fn path(&self, plain: &str) -> Option<Arc<MemoryPath>> {
        lock(&self.paths).get(plain).cloned()
    }

    pub(crate) fn put_path(&self, plain: String, stored: Arc<MemoryPath>) {
        let mut map = lock(&self.paths);
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(plain, stored);
    }

    pub(crate) fn name(&self, dir: &str, stored: &str) -> Option<String> {
        lock(&self.names).dirs.get(dir)?.get(stored).cloned()
    }

    pub(crate) fn put_name(&self, dir: &str, stored: &str, plain: String) {
        let mut names = lock(&self.names);
        if names.entries >= MAX_ENTRIES {
            names.dirs.clear();
            names.entries = 0;
        }
        let fresh = names
            .dirs
            .entry(dir.to_owned())
            .or_default()
            .insert(stored.to_owned(), plain)
            .is_none();
        if fresh {
            names.entries += 1;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
