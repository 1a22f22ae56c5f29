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

/// After the OS lock is taken: `Ok(None)` if the lock file's name still
/// names the file locked, else the file it names now (made again if a
/// local process deleted it), to lock instead.
pub(super) type Recheck = Box<dyn Fn(&File) -> io::Result<Option<File>> + Send + Sync>;

/// The lock file, and which thread holds it how many times over.
struct Shared {
    /// Only the owning thread touches it (the mutex is never waited on).
    file: Mutex<File>,
    recheck: Option<Recheck>,
    owner: Mutex<Owner>,
    /// Signalled when the lock is let go.
    free: Condvar,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

/// How many times a lock file found replaced is opened and locked again
/// before giving up (a local process replacing it in a loop).
const RELOCKS: usize = 16;

#[derive(Debug, Default)]
struct Owner {
    thread: Option<ThreadId>,
    depth: usize,
}

impl StoreLock {
    /// The lock of a store whose lock file is `file` (`None`: read-only),
    /// with no recheck (Windows, where a lock file deleted while held is
    /// not looked for yet).
    #[cfg_attr(unix, allow(dead_code))]
    pub(super) fn new(file: Option<File>) -> Self {
        Self::with_recheck(file, None)
    }

    /// As [`new`](Self::new), with a check run after each OS lock: a lock
    /// file a local process deleted or replaced while another handle held
    /// it would otherwise let this handle lock a different file, and two
    /// handles would write at once.
    pub(super) fn with_recheck(file: Option<File>, recheck: Option<Recheck>) -> Self {
        StoreLock(file.map(|file| Shared {
            file: Mutex::new(file),
            recheck,
            owner: Mutex::new(Owner::default()),
            free: Condvar::new(),
        }))
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
        if let Err(e) = shared.lock_os() {
            shared.let_go(false);
            return Err(StoreError::io(Op::Lock, path, e));
        }
        Ok(WriteLock { shared })
    }

    /// The lock if it is free now (or this thread already holds it through
    /// this handle), else `None` at once: for work that can wait for a
    /// later call, such as removing a crash's leftovers during a listing.
    /// It never waits, so a thread that holds another handle's lock on
    /// the same store cannot wait for itself.
    pub(super) fn try_acquire(&self) -> Option<WriteLock<'_>> {
        let shared = self.0.as_ref()?;
        let me = thread::current().id();
        let mut owner = shared.owner.lock().unwrap_or_else(PoisonError::into_inner);
        if owner.thread == Some(me) {
            owner.depth += 1;
            return Some(WriteLock { shared });
        }
        if owner.thread.is_some() {
            return None;
        }
        owner.thread = Some(me);
        owner.depth = 1;
        drop(owner);
        if shared.try_lock_os() {
            Some(WriteLock { shared })
        } else {
            shared.let_go(false);
            None
        }
    }
}

impl Shared {
    /// Takes the OS lock on the lock file if no one holds it, and keeps it
    /// only if the lock file's name still names that file (else: not now).
    fn try_lock_os(&self) -> bool {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.try_lock().is_err() {
            return false;
        }
        let Some(recheck) = &self.recheck else {
            return true;
        };
        match recheck(&file) {
            Ok(None) => true,
            // Replaced: keep the new file for the next try, as `lock_os`.
            Ok(Some(now)) => {
                let _ = file.unlock();
                *file = now;
                false
            }
            Err(_) => {
                let _ = file.unlock();
                false
            }
        }
    }

    /// Takes the OS lock on the lock file, and (with a recheck) again on
    /// the file its name names now, until the two are the same.
    fn lock_os(&self) -> io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..RELOCKS {
            file.lock()?;
            let Some(recheck) = &self.recheck else {
                return Ok(());
            };
            match recheck(&file) {
                Ok(None) => return Ok(()),
                Ok(Some(now)) => {
                    let _ = file.unlock();
                    *file = now;
                }
                Err(e) => {
                    let _ = file.unlock();
                    return Err(e);
                }
            }
        }
        Err(io::Error::other(
            "the store's lock file keeps being replaced",
        ))
    }

    /// One hold less; the last lets the OS lock go (if it was taken) and
    /// wakes a waiting thread.
    fn let_go(&self, locked: bool) {
        let mut owner = self.owner.lock().unwrap_or_else(PoisonError::into_inner);
        owner.depth = owner.depth.saturating_sub(1);
        if owner.depth == 0 {
            if locked {
                // A drop cannot report an error; the OS lock also ends
                // when the store closes its lock file.
                let _ = self
                    .file
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .unlock();
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
