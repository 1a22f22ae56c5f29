//! The storage seam: a small set of primitives every backend implements.
//!
//! Backends do not know the six commands, render no text and never see a
//! raw path string. [`dispatch`](crate::MemoryTool) builds every command out
//! of these primitives, so all backends answer byte for byte alike.

mod error;
#[cfg(unix)]
mod fs;
#[cfg(windows)]
#[path = "fs/windows/mod.rs"]
mod fs;
// Compiled everywhere, so its tests run on every platform.
mod memory;
mod op;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
mod tenant;
pub mod walk;
#[cfg(all(test, not(windows)))]
#[path = "fs/windows/names.rs"]
mod windows_names;

use std::io::Read;
use std::sync::Arc;
use std::time::SystemTime;

pub use error::{StoreError, StoreResult};
#[cfg(any(unix, windows))]
pub use fs::{FilesystemStore, FilesystemStoreBuilder};
pub use memory::InMemoryStore;
pub use op::Op;
#[cfg(feature = "postgres")]
pub use sql::{PostgresBuilder, PostgresError, PostgresStore};
#[cfg(feature = "sqlite")]
pub use sql::{SqliteError, SqliteStore};
pub use tenant::TenantStore;
pub use walk::{Flow, Order, Step, walk};

use crate::path::MemoryPath;

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
}

/// An opaque token identifying one state of a file's content, for
/// compare-and-swap writes ([`WriteMode::Update`]).
///
/// Backends choose what it encodes (a generation counter, a content hash, a
/// row version); two reads of an unchanged file give equal versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version(u128);

impl Version {
    /// Wraps a backend-defined value.
    pub const fn new(value: u128) -> Self {
        Version(value)
    }

    /// The backend-defined value.
    pub const fn get(self) -> u128 {
        self.0
    }
}

/// What [`MemoryStore::stat`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// File or directory.
    pub kind: EntryKind,
    /// Byte length for files, 0 for directories.
    pub len: u64,
    /// When a file's content was last written, if the backend knows.
    pub modified: Option<SystemTime>,
}

/// One child in a [`MemoryStore::list`] result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The child's name (one component).
    pub name: String,
    /// File or directory.
    pub kind: EntryKind,
    /// Byte length for files, 0 for directories.
    pub len: u64,
    /// When a file's content was last written, if the backend knows.
    pub modified: Option<SystemTime>,
}

/// A file's content and the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    /// The bytes.
    pub data: Vec<u8>,
    /// Pass to [`WriteMode::Update`] to write back only if unchanged.
    pub version: Version,
}

/// A file opened for streaming (see [`MemoryStore::open`]).
pub struct FileReader<'a> {
    /// The file's length when it was opened.
    pub len: u64,
    /// Its bytes.
    pub reader: Box<dyn Read + Send + 'a>,
}

impl std::fmt::Debug for FileReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileReader")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Returned by an [`MemoryStore::update`] closure to write nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

/// The closure of [`MemoryStore::update`]: current bytes in, new bytes (or
/// [`Abort`]) out.
pub type Change<'a> = dyn FnMut(&[u8]) -> Result<Vec<u8>, Abort> + 'a;

/// What [`MemoryStore::update`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Updated {
    /// The closure's bytes were written; here they are back.
    Written(Vec<u8>),
    /// The closure returned [`Abort`]; nothing was written.
    Aborted,
}

/// How many times the default [`MemoryStore::update`] recomputes an edit
/// after a compare-and-swap conflict before giving up.
pub const UPDATE_ATTEMPTS: u32 = 12;

/// Sleeps before retry `attempt` of a contended update: 100 µs doubling per
/// attempt, capped at 20 ms, times a random factor in [0.5, 1.5), so
/// contending writers spread out instead of colliding again.
fn backoff(attempt: u32) {
    use std::hash::{BuildHasher, RandomState};
    let base = std::time::Duration::from_micros(100).saturating_mul(1 << attempt.min(8));
    let base = base.min(std::time::Duration::from_millis(20));
    let jitter = RandomState::new().hash_one(attempt) % 1000;
    std::thread::sleep(base / 2 + base.mul_f64(jitter as f64 / 1000.0));
}

/// How [`MemoryStore::write`] treats an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Create only if nothing exists at the path (atomic create-if-absent);
    /// otherwise [`StoreError::AlreadyExists`].
    Create,
    /// Create or replace a file; a directory is [`StoreError::IsADirectory`].
    Overwrite,
    /// Replace the file only if it is still at this version; otherwise
    /// [`StoreError::Conflict`], or [`StoreError::NotFound`] if it is gone.
    Update(Version),
}

/// Primitive storage operations under the virtual `/memories` root.
///
/// Contract, checked by the `conformance` suite (feature `conformance`) for
/// every backend:
///
/// - `write` is atomic: readers see the old content or the new, never a mix;
///   missing parent directories are created, and a parent that is a file is
///   [`StoreError::ParentNotDirectory`] naming that parent.
/// - `rename` never overwrites; missing parents of the destination are
///   created only after the checks pass.
/// - `delete` removes a directory with everything below it.
/// - Names starting with [`RESERVED_PREFIX`](crate::path::RESERVED_PREFIX)
///   are the backend's own and never appear in `list`.
/// - The root always exists and is a directory.
///
/// Implementations must be safe to call from many threads at once.
///
/// # Wrappers
///
/// A store that wraps another (for logging, metrics, encryption) must
/// forward every method to the inner store, the provided ones included,
/// and not only the required ones. A provided method left out runs this
/// trait's generic default over the wrapper instead of the inner store's
/// own implementation: `update` falls back to a compare-and-swap loop in
/// place of a store's locked read-modify-write, `open` reads a whole file
/// instead of streaming it, and `total_size` walks every directory instead
/// of asking the store. Where forwarding would be wrong (a wrapper showing
/// only part of the inner store cannot forward `total_size`), write the
/// method out on purpose. Put `#[deny(clippy::missing_trait_methods)]` on
/// the `impl`, so a method added to this trait later fails the build until
/// the wrapper handles it too.
pub trait MemoryStore: Send + Sync {
    /// Kind and size of the entry at `path`, or `None` if nothing is there
    /// (including when an ancestor is a file).
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>>;

    /// The content of a file of at most `limit` bytes. A larger file is
    /// [`StoreError::TooLarge`] (checked before reading it whole), a
    /// directory [`StoreError::IsADirectory`].
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent>;

    /// Opens a file for streaming, so a view of a huge file never holds it
    /// whole. The default reads it with [`read`](Self::read); stores that
    /// can stream should override it.
    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        let file = self.read(path, u64::MAX)?;
        Ok(FileReader {
            len: file.data.len() as u64,
            reader: Box::new(std::io::Cursor::new(file.data)),
        })
    }

    /// Writes a whole file atomically; returns the new version.
    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version>;

    /// The children of a directory, in any order, hidden names included.
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>>;

    /// Removes a file, or a directory and all below it. Never the root.
    fn delete(&self, path: &MemoryPath) -> StoreResult<()>;

    /// Moves a file or directory. Checks, in order: source missing
    /// ([`StoreError::NotFound`]), destination exists
    /// ([`StoreError::AlreadyExists`]), a destination parent is a file
    /// ([`StoreError::ParentNotDirectory`]).
    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()>;

    /// Read-modify-write of one file that never loses a concurrent update:
    /// `change` gets the current bytes (a file of at most `limit` bytes)
    /// and returns the new ones, or [`Abort`]. The default reads, then
    /// writes with [`WriteMode::Update`], and on a conflict backs off and
    /// calls `change` again on the fresh content, up to
    /// [`UPDATE_ATTEMPTS`] times ([`StoreError::Conflict`] after that).
    /// Stores with a write lock may instead run `change` under it, once.
    ///
    /// `change` may call this store's read-only methods (`stat`, `read`,
    /// `list`, `total_size`), never its writing ones.
    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        for attempt in 0..UPDATE_ATTEMPTS {
            if attempt > 0 {
                backoff(attempt);
            }
            let file = self.read(path, limit)?;
            let Ok(new) = change(&file.data) else {
                return Ok(Updated::Aborted);
            };
            match self.write(path, &new, WriteMode::Update(file.version)) {
                Ok(_) => return Ok(Updated::Written(new)),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    /// Removes the directory at `path` only if it is empty at that instant
    /// (`rmdir` semantics): `Ok(true)` if removed, `Ok(false)` if it holds
    /// something, is gone, or is not a directory. Expiry uses it, so an
    /// entry another agent has just created in it is never removed.
    ///
    /// The default lists and then deletes, which another writer can race;
    /// every backend in this crate overrides it with one atomic step (a
    /// custom backend should too).
    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        if path.is_root() {
            return Ok(false);
        }
        match self.stat(path)? {
            Some(m) if m.kind == EntryKind::Directory => {}
            _ => return Ok(false),
        }
        if !self.list(path)?.is_empty() {
            return Ok(false);
        }
        match self.delete(path) {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Total bytes of every file in the store, hidden ones included. Used
    /// for the store size limit; backends may keep a running total.
    fn total_size(&self) -> StoreResult<u64> {
        walk::total_size(self, &MemoryPath::root())
    }
}

macro_rules! forward_store {
    ($($ty:ty),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        impl<S: MemoryStore + ?Sized> MemoryStore for $ty {
            fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
                (**self).stat(path)
            }
            fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
                (**self).read(path, limit)
            }
            fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
                (**self).open(path)
            }
            fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
                (**self).write(path, data, mode)
            }
            fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
                (**self).list(dir)
            }
            fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
                (**self).delete(path)
            }
            fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
                (**self).rename(from, to)
            }
            fn update(
                &self,
                path: &MemoryPath,
                limit: u64,
                change: &mut Change<'_>,
            ) -> StoreResult<Updated> {
                (**self).update(path, limit, change)
            }
            fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
                (**self).remove_empty_dir(path)
            }
            fn total_size(&self) -> StoreResult<u64> {
                (**self).total_size()
            }
        }
    )*};
}

forward_store!(&S, Box<S>, Arc<S>);
