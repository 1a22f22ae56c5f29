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
mod ext;
#[cfg(any(unix, windows))]
mod fs;
// Compiled everywhere, so its tests run on every platform.
#[cfg(feature = "managed")]
pub(crate) mod managed;
mod memory;
#[cfg(feature = "cloud")]
pub(crate) mod object;
mod op;
mod options;
pub(crate) mod retry;
#[cfg(any(feature = "cloud", feature = "managed", feature = "postgres"))]
pub(crate) mod runtime;
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
pub use ext::MemoryStoreExt;
#[cfg(any(unix, windows))]
pub use fs::{FilesystemStore, FilesystemStoreBuilder};
#[cfg(feature = "managed")]
pub use managed::{ManagedBuilder, ManagedError, ManagedStore};
#[cfg(feature = "managed")]
pub(crate) use managed::{ServiceVersion, TOO_MANY};
pub use memory::InMemoryStore;
#[cfg(feature = "cloud")]
pub use object::{CloudBuilder, CloudError, CloudScheme, CloudStore, parse_cloud_url};
pub use op::Op;
pub use options::{
    Context, DeleteIf, DeleteOptions, Lock, Quota, RenameOptions, UpdateOptions, WriteMode,
    WriteOptions,
};
#[cfg(feature = "postgres")]
pub use sql::{PostgresBuilder, PostgresError, PostgresStore};
#[cfg(feature = "sqlite")]
pub use sql::{SqliteError, SqliteStore};
pub use tenant::TenantStore;
pub use walk::{Flow, Order, Step, Tree, walk};

/// The name of an encrypted store's key record at its root (see `crypt`):
/// known to every build, so one without encryption still sees that a
/// store is encrypted and refuses it.
pub(crate) const KEY_RECORD: &str = "_claude-memory-keys";

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

/// Returned by an [`MemoryStore::update_opts`] closure to write nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

/// The closure of [`MemoryStore::update_opts`]: current bytes in, new bytes (or
/// [`Abort`]) out.
pub type Change<'a> = dyn FnMut(&[u8]) -> Result<Vec<u8>, Abort> + 'a;

/// What [`MemoryStore::update_opts`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Updated {
    /// The closure's bytes were written; here they are back.
    Written(Vec<u8>),
    /// The closure returned [`Abort`]; nothing was written.
    Aborted,
}

/// How many times the default [`MemoryStore::update_opts`] recomputes an edit
/// after a compare-and-swap conflict before giving up.
pub const UPDATE_ATTEMPTS: u32 = 12;

/// Primitive storage operations under the virtual `/memories` root.
///
/// Eleven methods, five of them provided; the everyday forms of the
/// option-taking ones are in [`MemoryStoreExt`].
///
/// Contract, checked by the `conformance` suite (feature `conformance`) for
/// every backend:
///
/// - `write` is atomic: readers see the old content or the new, never a mix;
///   missing parent directories are created, and a parent that is a file is
///   [`StoreError::ParentNotDirectory`] naming that parent.
/// - `rename_opts` never overwrites; missing parents of the destination are
///   created only after the checks pass.
/// - `delete_opts` with [`DeleteIf::Exists`] removes a directory with
///   everything below it.
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
/// own implementation: `update_opts` falls back to a compare-and-swap
/// loop in place of a store's locked read-modify-write, `open` reads a
/// whole file instead of streaming it, and `exclusive` holds no lock.
/// Where forwarding would be wrong (a wrapper showing only part of the
/// inner store cannot forward `list_tree` as it is), write the
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

    /// The most files this store holds, where the store itself refuses a
    /// create past it, atomically with the create
    /// ([`StoreError::TooManyFiles`]): a managed memory store's 2,000
    /// memories. A handler whose [`Config::max_files`](crate::Config)
    /// is no lower then leaves the count to the store, instead of counting
    /// the store's files before every create. `None` (the default): the
    /// store holds any number.
    fn max_files(&self) -> Option<u64> {
        None
    }

    /// Writes a whole file atomically; returns the new version.
    ///
    /// With a [`quota`](WriteOptions::quota): if the files below its scope
    /// would hold more than its cap after the write (the bytes of a file
    /// it replaces subtracted), nothing is written and the answer is
    /// [`StoreError::StoreFull`] with the total the write would have made
    /// ([`Quota::check`]). The check is atomic with the write, so
    /// concurrent writers never take the scope over its cap together.
    /// Order of checks: with [`WriteMode::Create`], an existing entry is
    /// [`StoreError::AlreadyExists`] first; then the quota; then the
    /// write's others ([`StoreError::IsADirectory`],
    /// [`StoreError::ParentNotDirectory`], a compare-and-swap conflict).
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version>;

    /// Read-modify-write of one file that never loses a concurrent update:
    /// `change` gets the current bytes (a file of at most
    /// [`limit`](UpdateOptions::limit) bytes) and returns the new ones, or
    /// [`Abort`]. The default reads, then writes with
    /// [`WriteMode::Update`] and the quota, and on a conflict backs off and
    /// calls `change` again on the fresh content, up to
    /// [`UPDATE_ATTEMPTS`] times ([`StoreError::Conflict`] after that).
    /// Stores with a write lock may instead run `change` under it, once.
    ///
    /// `change` may call this store's read-only methods (`stat`, `read`,
    /// `list`), never its writing ones.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
            let file = self.read(path, options.limit)?;
            let Ok(new) = change(&file.data) else {
                return Ok(Some(Updated::Aborted));
            };
            let write = WriteOptions {
                mode: WriteMode::Update(file.version),
                quota: options.quota,
                context: options.context,
            };
            match self.write_opts(path, &new, write) {
                Ok(_) => Ok(Some(Updated::Written(new))),
                Err(StoreError::Conflict { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?
        .ok_or_else(|| StoreError::Conflict { path: path.clone() })
    }

    /// Removes the entry at `path` if the options' condition holds at that
    /// instant, in one atomic step: whether it did. Never the root.
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool>;

    /// Moves a file or directory. Checks, in order: source missing
    /// ([`StoreError::NotFound`]), destination exists
    /// ([`StoreError::AlreadyExists`]), a destination parent is a file
    /// ([`StoreError::ParentNotDirectory`]), an entry below the source
    /// would get a path longer than `to`'s [`limit`](MemoryPath::limit)
    /// ([`StoreError::PathTooLong`]: check it with
    /// [`StoreError::check_depth`] under the same lock as the move).
    /// Nothing moves when a check fails.
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: RenameOptions<'_>,
    ) -> StoreResult<()>;

    /// Runs `f` holding this store's write lock, where the store has one
    /// that every writer of it takes, in every process and through every
    /// handle: `f` gets [`Lock::Held`], its own calls on this thread take
    /// the lock again, and every other writer waits until `f` returns.
    /// `path` names the change in a lock error.
    ///
    /// For a wrapper that makes one change out of several calls, such as
    /// the encrypted store's `rename` (a copy under new names, then the
    /// source deleted), so no other writer sees or changes the half-made
    /// state. The filesystem store holds its lock file (the in-process
    /// mutex and the `flock`); the SQL stores hold one transaction with
    /// the write lock, which `f`'s own changes join, so `f`'s changes
    /// also commit whole or not at all. The default runs `f` with
    /// [`Lock::Absent`]: right for a store whose writers share no lock
    /// that can be held across calls (the in-memory and cloud stores),
    /// and `f` then knows that what it finds may be another writer's
    /// change still under way.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f(Lock::Absent)
    }
}

/// Lowercase hex sha256 of `data`: history's content hashes (a
/// [`Revision`](crate::history::Revision)'s `sha256`), and the managed
/// memory stores' `content_sha256`.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(data))
}

/// Lowercase hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
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
            fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
                (**self).list(dir)
            }
            fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<walk::Tree>> {
                (**self).list_tree(dir)
            }
            fn max_files(&self) -> Option<u64> {
                (**self).max_files()
            }
            fn write_opts(&self, path: &MemoryPath, data: &[u8], options: WriteOptions<'_>) -> StoreResult<Version> {
                (**self).write_opts(path, data, options)
            }
            fn update_opts(
                &self,
                path: &MemoryPath,
                options: UpdateOptions<'_>,
                change: &mut Change<'_>,
            ) -> StoreResult<Updated> {
                (**self).update_opts(path, options, change)
            }
            fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
                (**self).delete_opts(path, options)
            }
            fn rename_opts(&self, from: &MemoryPath, to: &MemoryPath, options: RenameOptions<'_>) -> StoreResult<()> {
                (**self).rename_opts(from, to, options)
            }
            fn exclusive(
                &self,
                path: &MemoryPath,
                f: &mut dyn FnMut(Lock) -> StoreResult<()>,
            ) -> StoreResult<()> {
                (**self).exclusive(path, f)
            }
        }
    )*};
}

forward_store!(&S, Box<S>, Arc<S>);
