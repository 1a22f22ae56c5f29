//! Reading a whole store into a [`Backup`].

use crate::path::MemoryPath;
use crate::store::{EntryKind, Flow, MemoryStore, Order, Step, StoreResult, walk};

use super::format::{Backup, Entry};

impl Backup {
    /// Every file of `store` (hidden ones included; UTF-8 files as `text`,
    /// others as `base64`) with its modification time, and every empty
    /// directory, in path order. Only reads the store.
    pub fn of_store<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Backup> {
        let mut files = Vec::new();
        let mut unspellable = Vec::new();
        // For each open directory, how many entries were found below it.
        let mut found: Vec<usize> = Vec::new();
        walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
            match step {
                Step::Enter { path, .. } => {
                    if let Some(n) = found.last_mut() {
                        *n += 1;
                    }
                    found.push(0);
                    // The walk leaves out directories no path can spell:
                    // name them, so the backup is not taken for complete.
                    for e in store.list(path)? {
                        if e.kind == EntryKind::Directory && path.join(&e.name).is_none() {
                            unspellable.push(format!("{}/{}/", path.normalized(), e.name));
                        }
                    }
                }
                Step::File { dir, entry, .. } => match dir.join(&entry.name) {
                    Some(child) => {
                        let data = store.read(&child, u64::MAX)?.data;
                        files.push(Entry::file(child.normalized(), data, entry.modified));
                        if let Some(n) = found.last_mut() {
                            *n += 1;
                        }
                    }
                    // A name no memory path can spell cannot be restored.
                    None => unspellable.push(format!("{}/{}", dir.normalized(), entry.name)),
                },
                Step::Leave { path, depth } => {
                    if found.pop() == Some(0) && depth > 0 {
                        files.push(Entry::directory(path.normalized()));
                    }
                }
            }
            Ok(Flow::Continue)
        })?;
        let mut backup = Backup::new(files);
        backup.unspellable = unspellable;
        Ok(backup)
    }
}
