//! The store's write lock, on every platform: an in-process mutex around
//! the lock file (`.claude-memory.lock` in the root) plus the OS file lock
//! on it (`flock` on Unix, `LockFileEx` on Windows, both through std's
//! `File::lock`), held while the guard lives. A store opened read-only has
//! no lock file, and every write is refused with a read-only error.

use std::fs::File;
use std::io;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{self, ThreadId};

use crate::path::MemoryPath;
use crate::store::{Op, StoreError, StoreResult};

/// The lock file of a writable store, or none for a read-only one.
#[derive(Debug)]
pub(super) struct StoreLock(Option<Shared>);

/// The lock file, and which thread holds it how many times over.
#[derive(Debug)]
struct Shared {
    file: File,
    owner: Mutex<Owner>,
    /// Signalled when the lock is let go.
    free: Condvar,
}

#[derive(Debug, Default)]
struct Owner {
    thread: Option<ThreadId>,
    depth: usize,
}

impl StoreLock {
    /// The lock of a store whose lock file is `file` (`None`: read-only).
    pub(super) fn new(file: Option<File>) -> Self {
        StoreLock(file.map(|file| Shared {
            file,
            owner: Mutex::new(Owner::default()),
            free: Condvar::new(),
        }))
    }

    /// Whether the store was opened read-only.
    pub(super) fn is_read_only(&self) -> bool {
        self.0.is_none()
    }

    /// Takes the lock for a change of `path` (named in the error). The
    /// thread that holds it may take it again (re-entrant, so
    /// [`MemoryStore::exclusive`](crate::MemoryStore::exclusive) can hold
    /// it across the store's own calls); any other thread waits, and any
    /// other handle or process waits on the `flock`.
    pub(super) fn acquire(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        let Some(shared) = &self.0 else {
            let e = io::Error::new(
                io::ErrorKind::ReadOnlyFilesystem,
                "the store was opened read-only",
            );
            return Err(StoreError::io(Op::Lock, path, e));
        };
        let me = thread::current().id();
        let mut owner = shared.owner.lock().unwrap_or_else(PoisonError::into_inner);
        if owner.thread == Some(me) {
            owner.depth += 1;
            return Ok(WriteLock { shared });
        }
        while owner.thread.is_some() {
            owner = shared
                .free
                .wait(owner)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // The OS lock is taken while this thread is the owner, outside
        // the mutex: waiting for another process must not stop this
        // process's threads from finding out that they have to wait.
        owner.thread = Some(me);
        owner.depth = 1;
        drop(owner);
        if let Err(e) = shared.file.lock() {
            shared.let_go(false);
            return Err(StoreError::io(Op::Lock, path, e));
        }
        Ok(WriteLock { shared })
    }
}

impl Shared {
    /// One hold less; the last lets the OS lock go (if it was taken) and
    /// wakes a waiting thread.
    fn let_go(&self, locked: bool) {
        let mut owner = self.owner.lock().unwrap_or_else(PoisonError::into_inner);
        owner.depth = owner.depth.saturating_sub(1);
        if owner.depth == 0 {
            if locked {
                // A drop cannot report an error; the OS lock also ends
                // when the store closes its lock file.
                let _ = self.file.unlock();
            }
            owner.thread = None;
            self.free.notify_one();
        }
    }
}

/// Held while a change runs; releases the OS lock when the last hold of
/// its thread is dropped.
pub(super) struct WriteLock<'a> {
    shared: &'a Shared,
}

impl Drop for WriteLock<'_> {
    fn drop(&mut self) {
        self.shared.let_go(true);
    }
}
