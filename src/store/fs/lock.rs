//! The store's write lock, on every platform: an in-process mutex around
//! the lock file (`.claude-memory.lock` in the root) plus the OS file lock
//! on it (`flock` on Unix, `LockFileEx` on Windows, both through std's
//! `File::lock`), held while the guard lives. A store opened read-only has
//! no lock file, and every write is refused with a read-only error.

use std::fs::File;
use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::path::MemoryPath;
use crate::store::{Op, StoreError, StoreResult};

/// The lock file of a writable store, or none for a read-only one.
#[derive(Debug)]
pub(super) struct StoreLock(Option<Mutex<File>>);

impl StoreLock {
    /// The lock of a store whose lock file is `file` (`None`: read-only).
    pub(super) fn new(file: Option<File>) -> Self {
        StoreLock(file.map(Mutex::new))
    }

    /// Whether the store was opened read-only.
    pub(super) fn is_read_only(&self) -> bool {
        self.0.is_none()
    }

    /// Takes the lock for a change of `path` (named in the error).
    pub(super) fn acquire(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        let Some(lock) = &self.0 else {
            let e = io::Error::new(
                io::ErrorKind::ReadOnlyFilesystem,
                "the store was opened read-only",
            );
            return Err(StoreError::io(Op::Lock, path, e));
        };
        let file = lock.lock().unwrap_or_else(PoisonError::into_inner);
        file.lock().map_err(|e| StoreError::io(Op::Lock, path, e))?;
        Ok(WriteLock { file })
    }
}

/// Held while a change runs; releases the OS lock when dropped.
pub(super) struct WriteLock<'a> {
    file: MutexGuard<'a, File>,
}

impl Drop for WriteLock<'_> {
    fn drop(&mut self) {
        // A drop cannot report an error; the OS lock also ends when the
        // store closes its lock file.
        let _ = self.file.unlock();
    }
}
