//! Reading a whole store into a [`Backup`].

use crate::path::MemoryPath;
use crate::store::{Flow, MemoryStore, Order, Step, StoreResult, walk};

use super::format::{Backup, Entry};

impl Backup {
    /// Every file of `store` (hidden ones included; UTF-8 files as `text`,
    /// others as `base64`) with its modification time, and every empty
    /// directory, in path order. Only reads the store.
    pub fn of_store<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Backup> {
        let mut files = Vec::new();
        // For each open directory, how many entries were found below it.
        let mut found: Vec<usize> = Vec::new();
        walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
            match step {
                Step::Enter { .. } => {
                    if let Some(n) = found.last_mut() {
                        *n += 1;
                    }
                    found.push(0);
                }
                Step::File { dir, entry, .. } => {
                    // A name no memory path can spell cannot be restored.
                    if let Some(child) = dir.join(&entry.name) {
                        let data = store.read(&child, u64::MAX)?.data;
                        files.push(Entry::file(child.normalized(), data, entry.modified));
                        if let Some(n) = found.last_mut() {
                            *n += 1;
                        }
                    }
                }
                Step::Leave { path, depth } => {
                    if found.pop() == Some(0) && depth > 0 {
                        files.push(Entry::directory(path.normalized()));
                    }
                }
            }
            Ok(Flow::Continue)
        })?;
        Ok(Backup::new(files))
    }
}
