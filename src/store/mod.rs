//! The storage seam: a small set of primitives every backend implements.
//!
//! Backends do not know the six commands, render no text and never see a
//! raw path string. The handler ([`MemoryTool`](crate::MemoryTool)) builds
//! every command out of these primitives, so all backends answer byte for
//! byte alike.

mod cause;
#[cfg(feature = "encryption")]
#[cfg_attr(docsrs, doc(cfg(feature = "encryption")))]
pub mod crypt;
mod error;
#[cfg(any(unix, windows))]
mod fs;
// Compiled everywhere, so its tests run on every platform.
mod memory;
#[cfg(feature = "cloud")]
mod object;
mod op;
pub(crate) mod retry;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod sql;
mod tenant;
pub mod walk;
#[cfg(all(test, not(windows)))]
#[path = "fs/windows/names.rs"]
mod windows_names;

use std::io::Read;
use std::sync::Arc;
use std::time::SystemTime;

pub use error::{RemoteCause, StoreError, StoreResult};
#[cfg(any(unix, windows))]
pub use fs::{FilesystemStore, FilesystemStoreBuilder};
pub use memory::InMemoryStore;
#[cfg(feature = "cloud")]
pub use object::{CloudBuilder, CloudError, CloudLog, CloudScheme, CloudStore, parse_cloud_url};
pub use op::Op;
#[cfg(feature = "postgres")]
pub use sql::{PostgresBuilder, PostgresError, PostgresStore};
#[cfg(feature = "sqlite")]
pub use sql::{SqliteError, SqliteStore};
pub use tenant::TenantStore;
pub use walk::{Flow, Order, Step, Tree, walk};

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

/// A size cap on part of a store, for [`MemoryStore::write_within`] and
/// [`MemoryStore::update_within`]: the bytes of every file below `scope`
/// (hidden ones included) may not exceed `max_bytes` after the write.
///
/// `scope` is the root for a whole store, or (in a shared base) the
/// directory of one tenant; the path written must be below it.
#[derive(Debug, Clone, Copy)]
pub struct Quota<'a> {
    /// The directory whose files are counted (it need not exist yet).
    pub scope: &'a MemoryPath,
    /// The most bytes its files may hold after the write.
    pub max_bytes: u64,
}

/// Bytes of the files below `scope`, 0 if it does not exist (yet) or is
/// not a directory: the default quota measure.
pub(crate) fn bytes_below<S: MemoryStore + ?Sized>(
    store: &S,
    scope: &MemoryPath,
) -> StoreResult<u64> {
    match walk::total_size(store, scope) {
        Err(StoreError::NotFound { .. } | StoreError::NotADirectory { .. }) => Ok(0),
        other => other,
    }
}

/// The error for a write that would take `quota`'s scope to `total` bytes,
/// if that is over its limit.
pub(crate) fn check_quota(path: &MemoryPath, total: u64, quota: Quota<'_>) -> StoreResult<()> {
    if total > quota.max_bytes {
        return Err(StoreError::StoreFull {
            path: path.clone(),
            total,
            limit: quota.max_bytes,
        });
    }
    Ok(())
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

    /// Every entry below directory `dir`, at every depth, read at once,
    /// as [`list`](Self::list) of each directory would give them: for the
    /// read-only walks of a whole tree (directory views, statistics:
    /// [`walk::walk_skipping_unlistable`]), which then make one call
    /// instead of one per directory. `Ok(None)` (the default) where the
    /// store has no such shortcut, or the tree is too large to hold at
    /// once: the walk lists each directory. Fails as `list(dir)` would.
    ///
    /// The SQL stores answer in one query (up to 10,000 entries).
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<walk::Tree>> {
        let _ = dir;
        Ok(None)
    }

    /// Removes a file, or a directory and all below it. Never the root.
    fn delete(&self, path: &MemoryPath) -> StoreResult<()>;

    /// Moves a file or directory. Checks, in order: source missing
    /// ([`StoreError::NotFound`]), destination exists
    /// ([`StoreError::AlreadyExists`]), a destination parent is a file
    /// ([`StoreError::ParentNotDirectory`]), an entry below the source
    /// would get a path longer than `to`'s [`limit`](MemoryPath::limit)
    /// ([`StoreError::PathTooLong`]: check it with
    /// [`StoreError::check_depth`] under the same lock as the move).
    /// Nothing moves when a check fails.
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
        retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
            let file = self.read(path, limit)?;
            let Ok(new) = change(&file.data) else {
                return Ok(Some(Updated::Aborted));
            };
            match self.write(path, &new, WriteMode::Update(file.version)) {
                Ok(_) => Ok(Some(Updated::Written(new))),
                Err(StoreError::Conflict { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?
        .ok_or_else(|| StoreError::Conflict { path: path.clone() })
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

    /// [`write`](Self::write) under a size cap: if the files below
    /// `quota.scope` would hold more than `quota.max_bytes` bytes after the
    /// write (the bytes of a file it replaces subtracted), nothing is
    /// written and the answer is [`StoreError::StoreFull`] with the total
    /// the write would have made.
    ///
    /// Order of checks: with [`WriteMode::Create`], an existing entry is
    /// [`StoreError::AlreadyExists`] first; then the quota; then the
    /// write's other checks ([`StoreError::IsADirectory`],
    /// [`StoreError::ParentNotDirectory`], a compare-and-swap conflict, …).
    ///
    /// The check must be atomic with the write, so that concurrent writers
    /// can never take the scope over its cap together. The default is
    /// **not**: it totals the scope with the [tree walk](walk::total_size),
    /// then writes, so two writers can both pass the check. A store with a
    /// write lock (or transactions) must override it; the in-memory and
    /// filesystem stores do.
    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        let existing = self.stat(path)?;
        let replaced = match (&existing, mode) {
            // `write` answers "already exists" (or wins a race and writes).
            (Some(_), WriteMode::Create) => return self.write(path, data, mode),
            (Some(m), _) if m.kind == EntryKind::File => m.len,
            _ => 0,
        };
        let total = bytes_below(self, quota.scope)?;
        let after = total
            .saturating_sub(replaced)
            .saturating_add(data.len() as u64);
        check_quota(path, after, quota)?;
        self.write(path, data, mode)
    }

    /// [`update`](Self::update) under a size cap (see
    /// [`write_within`](Self::write_within)): `change` runs as in `update`;
    /// if its bytes would take the files below `quota.scope` over
    /// `quota.max_bytes`, nothing is written and the answer is
    /// [`StoreError::StoreFull`].
    ///
    /// The default is the compare-and-swap loop of the default `update`,
    /// writing with `write_within` and [`WriteMode::Update`]: it is atomic
    /// exactly when this store's `write_within` is. A store that runs
    /// `update` under a write lock should override it to check the quota
    /// under that lock too (the filesystem store does).
    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
            let file = self.read(path, limit)?;
            let Ok(new) = change(&file.data) else {
                return Ok(Some(Updated::Aborted));
            };
            match self.write_within(path, &new, WriteMode::Update(file.version), quota) {
                Ok(_) => Ok(Some(Updated::Written(new))),
                Err(StoreError::Conflict { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?
        .ok_or_else(|| StoreError::Conflict { path: path.clone() })
    }

    /// Removes the file at `path` only if, at that instant, it is still a
    /// file and `still` accepts its metadata: `Ok(true)` if removed,
    /// `Ok(false)` if it is gone, is not a file, or `still` said no.
    /// Expiry uses it to delete only a file that is still old, so a file
    /// another agent has just rewritten is kept.
    ///
    /// `still` may be called under the store's lock: it must not call the
    /// store. The default stats and then deletes, which another writer can
    /// race; every backend in this crate overrides it with one atomic step
    /// (a custom backend should too).
    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        match self.stat(path)? {
            Some(m) if m.kind == EntryKind::File && still(&m) => {}
            _ => return Ok(false),
        }
        match self.delete(path) {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Runs `f` holding this store's write lock, where the store has one
    /// that every writer of it takes, in every process and through every
    /// handle: `f`'s own calls on this thread take it again, and every
    /// other writer waits until `f` returns. `path` names the change in a
    /// lock error.
    ///
    /// For a wrapper that makes one change out of several calls, such as
    /// the encrypted store's `rename` (a copy under new names, then the
    /// source deleted), so no other writer sees or changes the half-made
    /// state. The filesystem store holds its lock file (the in-process
    /// mutex and the `flock`); the SQL stores hold one transaction with
    /// the write lock, which `f`'s own changes join, so `f`'s changes
    /// also commit whole or not at all. The default runs `f` with no
    /// lock: right for a store whose writers share no lock that can be
    /// held across calls (the in-memory and cloud stores, and a history
    /// store, whose changes are each serialized under its log's lock
    /// already).
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut() -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f()
    }

    /// Whether [`exclusive`](Self::exclusive) really holds every other
    /// writer off (the filesystem store, writable, and the SQL stores). A wrapper that would
    /// act on what it finds under the lock (the encrypted store finishing
    /// a move a killed process left) asks first: without the lock, what
    /// it finds may be another writer's change still under way.
    fn locks_writers(&self) -> bool {
        false
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
            fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<walk::Tree>> {
                (**self).list_tree(dir)
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
            fn write_within(
                &self,
                path: &MemoryPath,
                data: &[u8],
                mode: WriteMode,
                quota: Quota<'_>,
            ) -> StoreResult<Version> {
                (**self).write_within(path, data, mode, quota)
            }
            fn update_within(
                &self,
                path: &MemoryPath,
                limit: u64,
                quota: Quota<'_>,
                change: &mut Change<'_>,
            ) -> StoreResult<Updated> {
                (**self).update_within(path, limit, quota, change)
            }
            fn delete_file_if(
                &self,
                path: &MemoryPath,
                still: &mut dyn FnMut(&Metadata) -> bool,
            ) -> StoreResult<bool> {
                (**self).delete_file_if(path, still)
            }
            fn exclusive(
                &self,
                path: &MemoryPath,
                f: &mut dyn FnMut() -> StoreResult<()>,
            ) -> StoreResult<()> {
                (**self).exclusive(path, f)
            }
            fn locks_writers(&self) -> bool {
                (**self).locks_writers()
            }
        }
    )*};
}

forward_store!(&S, Box<S>, Arc<S>);
