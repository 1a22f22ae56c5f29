//! `FilesystemStore`: memory files as real files under one root directory,
//! reached only through a directory handle, never through a host path.
//!
//! - **Containment.** The root is opened once; every path is resolved
//!   beneath that handle with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//!   on Linux, or component by component with `openat(O_NOFOLLOW)` where
//!   that is unavailable. A symbolic link anywhere on the way is refused,
//!   whether it was planted beforehand or swapped in mid-call, and the final
//!   step is always an `*at` call on a directory handle, so a rename or swap
//!   of any directory (the root included) cannot redirect it.
//! - **Atomicity and durability.** A write goes to a temporary file in the
//!   target's directory, is fsynced, renamed into place, and the directory
//!   fsynced. Temporary files are named `.claude-memory.tmp.*` and removed on
//!   failure, and after a crash when a listing of their directory finds
//!   them (never by a walk at open, which would grow with the store).
//! - **Concurrency.** Mutations run under an in-process mutex plus an
//!   advisory `flock` on `.claude-memory.lock` in the root, so compare-and-
//!   swap edits, create-if-absent and rename-without-overwrite hold across
//!   threads and processes. Creates and renames also use
//!   `renameat2(RENAME_NOREPLACE)`, so they never overwrite even a file
//!   written by a program that ignores the lock.
//!
//! The store is split along those lines: this module holds the store's
//! logic (the type, the write lock and the [`MemoryStore`]
//! implementation); `builder` its options and opening; `write` the
//! temporary-file-and-rename write path; `resolve` turns a memory path into a directory handle
//! beneath the root (creating parents for writes); `sys` wraps the raw
//! `*at` calls and maps their `errno` values to [`StoreError`];
//! `version` derives the compare-and-swap version from content; `cleanup`
//! names temporary files and removes those a crash left when a listing
//! finds them.

mod builder;
mod cleanup;
mod resolve;
mod sys;
mod tree;
mod write;

pub use self::builder::FilesystemStoreBuilder;

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};

use rustix::fs::{self as rfs, FileType};
use rustix::io::Errno;

use self::resolve::{DirFd, Parent, remove_made};
use self::sys::{Entry, entry_at, io_error, modified};
use super::lock::{StoreLock, WriteLock};
use super::version::content_version;
use crate::path::MemoryPath;
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader, Lock,
    MemoryStore, Metadata, Op, RenameOptions, StoreError, StoreResult, UpdateOptions, Updated,
    Version, WriteOptions,
};

const LOCK_FILE: &str = ".claude-memory.lock";

/// A store rooted at a host directory, which stands for `/memories`.
///
/// ```
/// use claude_memory::{FilesystemStore, MemoryTool};
/// use serde_json::json;
///
/// let dir = std::env::temp_dir().join(format!("claude-memory-doc-{}", std::process::id()));
/// let tool = MemoryTool::new(FilesystemStore::open(&dir)?);
/// let created = tool.dispatch(&json!({"command": "create", "path": "/memories/a.md",
///                                     "file_text": "kept on disk\n"}));
/// assert!(!created.is_error);
/// assert_eq!(std::fs::read_to_string(dir.join("a.md"))?, "kept on disk\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FilesystemStore {
    /// For display only; never used to reach a file after `open`.
    root_path: PathBuf,
    root: OwnedFd,
    durable: bool,
    /// `None` when opened [read-only](FilesystemStoreBuilder::read_only).
    lock: StoreLock,
    temp_counter: AtomicU64,
    /// Cleared when the kernel lacks `openat2` (read on Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    use_openat2: AtomicBool,
}
/// Holds both the in-process mutex and the cross-process file lock.
impl FilesystemStore {
    /// Opens (creating if needed) a durable store at `root`.
    pub fn open(root: impl AsRef<Path>) -> io::Result<Self> {
        Self::builder(root).open()
    }

    /// A builder, for options such as [`FilesystemStoreBuilder::durable`].
    pub fn builder(root: impl AsRef<Path>) -> FilesystemStoreBuilder {
        FilesystemStoreBuilder {
            root: root.as_ref().to_path_buf(),
            durable: true,
            openat2: true,
            create: true,
            read_only: false,
        }
    }

    /// The host directory this store was opened at (for display: the store
    /// itself keeps using the directory it opened, even if this path is
    /// later renamed or replaced).
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    fn lock(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        self.lock.acquire(path)
    }

    /// Opens a regular file for reading without following a link; refuses
    /// directories, special files and hard-linked files.
    /// Also returns the directory it is in, for a write back.
    fn open_file(&self, path: &MemoryPath) -> StoreResult<(DirFd<'_>, File, rfs::Stat)> {
        let not_found = || StoreError::NotFound { path: path.clone() };
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        let dir = match self.parent(path)? {
            Parent::Dir(fd) => fd,
            _ => return Err(not_found()),
        };
        let name = path.name().unwrap_or_default();
        let fd = sys::open_for_read(&dir, name, path)?;
        let stat = rfs::fstat(&fd).map_err(|e| io_error(Op::Stat, path, e))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile if stat.st_nlink > 1 => {
                Err(StoreError::HardLink { path: path.clone() })
            }
            FileType::RegularFile => Ok((dir, File::from(fd), stat)),
            FileType::Directory => Err(StoreError::IsADirectory { path: path.clone() }),
            _ => Err(not_found()),
        }
    }

    /// Reads a file of at most `limit` bytes, and the directory it is in.
    fn read_in_dir(&self, path: &MemoryPath, limit: u64) -> StoreResult<(DirFd<'_>, FileContent)> {
        let (dir, file, stat) = self.open_file(path)?;
        let too_large = |len| StoreError::TooLarge {
            path: path.clone(),
            len,
        };
        if stat.st_size as u64 > limit {
            return Err(too_large(stat.st_size as u64));
        }
        let mut data = Vec::with_capacity(stat.st_size as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| StoreError::io(Op::Read, path, e))?;
        if data.len() as u64 > limit {
            return Err(too_large(data.len() as u64));
        }
        let version = content_version(&data);
        Ok((dir, FileContent { data, version }))
    }
}

impl MemoryStore for FilesystemStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        let Some(name) = path.name() else {
            return Ok(Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            }));
        };
        let dir = match self.parent(path)? {
            Parent::Dir(fd) => fd,
            _ => return Ok(None),
        };
        match entry_at(dir.as_fd(), name).map_err(|e| io_error(Op::Stat, path, e))? {
            Entry::File(stat) => Ok(Some(Metadata {
                kind: EntryKind::File,
                len: stat.st_size as u64,
                modified: modified(&stat),
            })),
            Entry::Dir => Ok(Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            })),
            Entry::Symlink => Err(StoreError::Symlink { path: path.clone() }),
            Entry::Absent | Entry::Other => Ok(None),
        }
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.read_in_dir(path, limit).map(|(_, content)| content)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        // A file below a subdirectory: one `openat2` from the root where
        // the kernel has it (a view needs no handle on the directory).
        #[cfg(target_os = "linux")]
        if path.components().len() > 1
            && self.use_openat2.load(std::sync::atomic::Ordering::Relaxed)
            && let Ok(fd) = sys::open_file_beneath(self.root.as_fd(), &path.components().join("/"))
        {
            let stat = rfs::fstat(&fd).map_err(|e| io_error(Op::Stat, path, e))?;
            return match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile if stat.st_nlink > 1 => {
                    Err(StoreError::HardLink { path: path.clone() })
                }
                FileType::RegularFile => Ok(FileReader {
                    len: stat.st_size as u64,
                    reader: Box::new(File::from(fd)),
                }),
                FileType::Directory => Err(StoreError::IsADirectory { path: path.clone() }),
                _ => Err(StoreError::NotFound { path: path.clone() }),
            };
        }
        let (_, file, stat) = self.open_file(path)?;
        Ok(FileReader {
            len: stat.st_size as u64,
            reader: Box::new(file),
        })
    }

    /// A quota is totalled under the write lock, so no writer of this
    /// store (thread or process) can write between the check and the
    /// write. Only a write with a quota walks the tree.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.write_checked(path, data, options.mode, options.quota)
    }

    /// Runs `change` once, under the store's write lock (the in-process
    /// mutex and the `flock`), so a concurrent edit from any thread or
    /// process of this machine waits instead of conflicting; a quota is
    /// checked under the same lock.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_checked(path, options.limit, options.quota, change)
    }

    fn list(&self, dir_path: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let fd = match dir_path.name() {
            None => DirFd::Root(self.root.as_fd()),
            Some(name) => {
                let parent = match self.parent(dir_path)? {
                    Parent::Dir(fd) => fd,
                    _ => {
                        return Err(StoreError::NotFound {
                            path: dir_path.clone(),
                        });
                    }
                };
                match sys::open_dir(&parent, name) {
                    Ok(fd) => DirFd::Owned(fd),
                    Err(e) => {
                        return Err(match entry_at(parent.as_fd(), name) {
                            Ok(Entry::Symlink) => StoreError::Symlink {
                                path: dir_path.clone(),
                            },
                            // A FIFO, socket or device: no memory entry.
                            Ok(Entry::Absent | Entry::Other) => StoreError::NotFound {
                                path: dir_path.clone(),
                            },
                            Ok(Entry::File(_)) => StoreError::NotADirectory {
                                path: dir_path.clone(),
                            },
                            _ => io_error(Op::List, dir_path, e),
                        });
                    }
                }
            }
        };
        let io_err = |e| io_error(Op::List, dir_path, e);
        let mut entries = Vec::new();
        let mut temps = Vec::new();
        sys::for_each_entry(fd.as_fd(), |name, file_type| {
            let Ok(name) = name.to_str() else {
                return Ok(()); // not UTF-8: no memory path can name it
            };
            if crate::path::is_reserved(name) {
                if cleanup::is_temp(name) {
                    temps.push(name.to_owned());
                }
                return Ok(());
            }
            let (kind, len, modified) = match file_type {
                FileType::Directory => (EntryKind::Directory, 0, None),
                FileType::RegularFile => match entry_at(fd.as_fd(), name)? {
                    Entry::File(stat) => (EntryKind::File, stat.st_size as u64, modified(&stat)),
                    Entry::Dir => (EntryKind::Directory, 0, None),
                    _ => return Ok(()),
                },
                _ => return Ok(()), // symlinks, sockets, fifos: never listed
            };
            entries.push(DirEntry {
                name: name.to_owned(),
                kind,
                len,
                modified,
            });
            Ok(())
        })
        .map_err(io_err)?;
        if !temps.is_empty() {
            cleanup::remove_leftovers(self, fd.as_fd(), &temps);
        }
        Ok(entries)
    }

    /// The entry is examined and removed under the write lock; an empty
    /// directory goes by `rmdir`, which the kernel refuses for a
    /// directory that is not empty at that instant.
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let mut condition = options.condition;
        let exists = matches!(condition, DeleteIf::Exists);
        let missing = || match exists {
            true => Err(StoreError::NotFound { path: path.clone() }),
            false => Ok(false),
        };
        let Some(name) = path.name() else {
            return match exists {
                true => Err(StoreError::delete_root(path)),
                false => Ok(false),
            };
        };
        let _lock = self.lock(path)?;
        let dir = match self.parent(path)? {
            Parent::Dir(fd) => fd,
            _ => return missing(),
        };
        let entry = entry_at(dir.as_fd(), name).map_err(|e| io_error(Op::Delete, path, e))?;
        let result = match (&mut condition, entry) {
            // A FIFO, socket or device is no memory entry: missing.
            (_, Entry::Absent | Entry::Other) => return missing(),
            (DeleteIf::Exists, Entry::Dir) => tree::remove_tree(dir.as_fd(), name),
            (DeleteIf::Exists, _) => sys::unlink(&dir, name),
            (DeleteIf::EmptyDir, Entry::Dir) => match sys::remove_dir(&dir, name) {
                Err(Errno::NOTEMPTY | Errno::EXIST)
                    if cleanup::clear_if_only_leftovers(dir.as_fd(), name) =>
                {
                    sys::remove_dir(&dir, name)
                }
                Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOENT | Errno::NOTDIR) => {
                    return Ok(false);
                }
                other => other,
            },
            (DeleteIf::FileWhere(still), Entry::File(stat)) => {
                let metadata = Metadata {
                    kind: EntryKind::File,
                    len: stat.st_size as u64,
                    modified: modified(&stat),
                };
                if !still(&metadata) {
                    return Ok(false);
                }
                match sys::unlink(&dir, name) {
                    Err(Errno::NOENT) => return Ok(false),
                    other => other,
                }
            }
            _ => return Ok(false),
        };
        result.map_err(|e| io_error(Op::Delete, path, e))?;
        self.sync(path, &dir)?;
        Ok(true)
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _: RenameOptions<'_>,
    ) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let from_name = from.name().unwrap_or_default();
        let _lock = self.lock(from)?;
        let from_dir = match self.parent(from)? {
            Parent::Dir(fd) => fd,
            _ => return Err(StoreError::NotFound { path: from.clone() }),
        };
        // A FIFO, socket or device is no memory entry: missing.
        if let Entry::Absent | Entry::Other =
            entry_at(from_dir.as_fd(), from_name).map_err(|e| io_error(Op::Stat, from, e))?
        {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        // Measured under the lock, so no writer of this store can deepen
        // the tree between the check and the move.
        let below = tree::deepest_below(from_dir.as_fd(), from_name)
            .map_err(|e| io_error(Op::Stat, from, e))?;
        let Some(to_name) = to.name() else {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        };
        // A FIFO, socket or device at the destination is no memory entry:
        // it is treated as missing, and the move replaces it.
        let mut special = false;
        match self.parent(to)? {
            Parent::File(depth) => return Err(StoreError::parent_not_directory(to, depth)),
            Parent::Dir(dir) => {
                match entry_at(dir.as_fd(), to_name).map_err(|e| io_error(Op::Stat, to, e))? {
                    Entry::Absent => {}
                    Entry::Other => special = true,
                    _ => return Err(StoreError::AlreadyExists { path: to.clone() }),
                }
            }
            Parent::Missing => {}
        }
        StoreError::check_depth(from, to, below)?;
        let (to_dir, made) = self.make_parent(to)?;
        if special {
            match sys::unlink(&to_dir, to_name) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(io_error(Op::Rename, to, e)),
            }
        }
        if let Err(e) =
            sys::rename_no_replace(from_dir.as_fd(), from_name, to_dir.as_fd(), to_name, to)
        {
            remove_made(&made);
            return Err(e);
        }
        // One fsync when both names are in the same directory.
        if from.parent() != to.parent() {
            self.sync(from, &from_dir)?;
        }
        self.sync(to, &to_dir)
    }

    /// Holds the write lock (the in-process mutex and the OS file lock on
    /// the lock file) for the whole of `f`, whose own writes on this
    /// thread take it again: every other writer of this directory, in any
    /// process or handle, waits. A store opened read-only refuses, as it
    /// refuses every change.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _lock = self.lock(path)?;
        f(Lock::Held)
    }
}
