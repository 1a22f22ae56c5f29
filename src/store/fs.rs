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
//!   failure, and on the next open after a crash.
//! - **Concurrency.** Mutations run under an in-process mutex plus an
//!   advisory `flock` on `.claude-memory.lock` in the root, so compare-and-
//!   swap edits, create-if-absent and rename-without-overwrite hold across
//!   threads and processes. Creates and renames also use
//!   `renameat2(RENAME_NOREPLACE)`, so they never overwrite even a file
//!   written by a program that ignores the lock.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{
    Change, DirEntry, EntryKind, FileContent, FileReader, MemoryStore, Metadata, Op, StoreError,
    StoreResult, Updated, Version, WriteMode,
};
use crate::path::{MemoryPath, RESERVED_PREFIX};

const LOCK_FILE: &str = ".claude-memory.lock";
const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// A store rooted at a host directory, which stands for `/memories`.
#[derive(Debug)]
pub struct FilesystemStore {
    /// For display only; never used to reach a file after `open`.
    root_path: PathBuf,
    root: OwnedFd,
    durable: bool,
    lock: Mutex<File>,
    temp_counter: AtomicU64,
    /// Cleared when the kernel lacks `openat2`.
    use_openat2: AtomicBool,
}

/// Options for [`FilesystemStore`]; see [`FilesystemStore::builder`].
#[derive(Debug, Clone)]
pub struct FilesystemStoreBuilder {
    root: PathBuf,
    durable: bool,
    openat2: bool,
}

impl FilesystemStoreBuilder {
    /// Whether to fsync files and directories on every write (default
    /// `true`). Turning it off trades crash durability for speed; writes
    /// stay atomic.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Whether to resolve paths with Linux's `openat2` (default: on Linux).
    /// Off, the store walks one `openat(O_NOFOLLOW)` per directory, as it
    /// does on kernels without `openat2`; tests use this to check that path.
    #[doc(hidden)]
    pub fn use_openat2(mut self, on: bool) -> Self {
        self.openat2 = on;
        self
    }

    /// Creates the root (mode 0700) if missing, opens it, and removes
    /// temporary files left by a crashed writer.
    pub fn open(self) -> io::Result<FilesystemStore> {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.recursive(true).create(&self.root)?;
        let root = rfs::open(
            self.root.as_path(),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let lock = rfs::openat(
            &root,
            LOCK_FILE,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::RUSR | Mode::WUSR,
        )?;
        if !FileType::from_raw_mode(rfs::fstat(&lock)?.st_mode).is_file() {
            return Err(io::Error::other(
                "the store's lock file is not a regular file",
            ));
        }
        let store = FilesystemStore {
            root_path: self.root,
            root,
            durable: self.durable,
            lock: Mutex::new(File::from(lock)),
            temp_counter: AtomicU64::new(0),
            use_openat2: AtomicBool::new(self.openat2 && cfg!(target_os = "linux")),
        };
        {
            let lock = store
                .lock(&MemoryPath::root())
                .map_err(|_| io::Error::other("cannot lock the store"))?;
            remove_temp_files(store.root.as_fd(), 0)?;
            drop(lock);
        }
        Ok(store)
    }
}

/// Holds both the in-process mutex and the cross-process file lock.
struct WriteLock<'a> {
    file: MutexGuard<'a, File>,
}

impl Drop for WriteLock<'_> {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A directory handle: the root (borrowed) or one opened beneath it.
enum DirFd<'a> {
    Root(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl AsFd for DirFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            DirFd::Root(fd) => *fd,
            DirFd::Owned(fd) => fd.as_fd(),
        }
    }
}

/// Where the parent directory of a path is.
enum Parent<'a> {
    Dir(DirFd<'a>),
    /// A directory on the way does not exist; all before it are real.
    Missing,
    /// The ancestor with this many components is a file.
    File(usize),
}

/// What is at a name inside a directory, not following links.
enum Entry {
    Absent,
    File(rfs::Stat),
    Dir,
    Symlink,
    Other,
}

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
        }
    }

    /// The host directory this store was opened at (for display: the store
    /// itself keeps using the directory it opened, even if this path is
    /// later renamed or replaced).
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    fn lock(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        let file = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        file.lock().map_err(|e| StoreError::io(Op::Lock, path, e))?;
        Ok(WriteLock { file })
    }

    /// Opens the directory holding `path`'s last component, beneath the
    /// root, refusing symbolic links.
    fn parent(&self, path: &MemoryPath) -> StoreResult<Parent<'_>> {
        let Some((_, parents)) = path.components().split_last() else {
            return Ok(Parent::Dir(DirFd::Root(self.root.as_fd())));
        };
        if parents.is_empty() {
            return Ok(Parent::Dir(DirFd::Root(self.root.as_fd())));
        }
        #[cfg(target_os = "linux")]
        if self.use_openat2.load(Ordering::Relaxed) {
            use rustix::fs::ResolveFlags;
            let resolve =
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            match rfs::openat2(
                &self.root,
                parents.join("/"),
                dir_flags(),
                Mode::empty(),
                resolve,
            ) {
                Ok(fd) => return Ok(Parent::Dir(DirFd::Owned(fd))),
                // Old kernel or a sandbox without openat2: walk from now on.
                Err(Errno::NOSYS) | Err(Errno::PERM) => {
                    self.use_openat2.store(false, Ordering::Relaxed)
                }
                // Anything else: the walk below says precisely what is wrong.
                Err(_) => {}
            }
        }
        self.walk(path, parents, false).map(|(parent, _)| parent)
    }

    /// Walks `dirs` from the root one `openat(O_NOFOLLOW)` at a time,
    /// creating missing directories (mode 0700) when `create`. Returns the
    /// last directory and the directories it made (each with its parent's
    /// handle), so a failed write can remove them again.
    fn walk(
        &self,
        path: &MemoryPath,
        dirs: &[String],
        create: bool,
    ) -> StoreResult<(Parent<'_>, Vec<(OwnedFd, String)>)> {
        let mut made: Vec<(OwnedFd, String)> = Vec::new();
        let mut cur = DirFd::Root(self.root.as_fd());
        for (i, name) in dirs.iter().enumerate() {
            let mut attempts = 0;
            let next = loop {
                attempts += 1;
                if attempts > 16 {
                    remove_made(&made);
                    return Err(io_error(Op::CreateDirectory, path, Errno::AGAIN));
                }
                match rfs::openat(&cur, name.as_str(), dir_flags(), Mode::empty()) {
                    Ok(fd) => break fd,
                    Err(Errno::NOENT) if create => {
                        match rfs::mkdirat(&cur, name.as_str(), Mode::RWXU) {
                            Ok(()) => {
                                if let Ok(parent) = dup_dir(&cur) {
                                    made.push((parent, name.clone()));
                                }
                            }
                            Err(Errno::EXIST) => {}
                            Err(e) => {
                                remove_made(&made);
                                return Err(io_error(Op::CreateDirectory, path, e));
                            }
                        }
                    }
                    Err(Errno::NOENT) => return Ok((Parent::Missing, made)),
                    Err(Errno::INTR) => {}
                    Err(e) => {
                        remove_made(&made);
                        return match entry_at(cur.as_fd(), name) {
                            Ok(Entry::Symlink) => Err(StoreError::Symlink { path: path.clone() }),
                            Ok(Entry::Absent) => Ok((Parent::Missing, Vec::new())),
                            Ok(Entry::Dir) => Err(io_error(Op::OpenDirectory, path, e)),
                            Ok(_) => Ok((Parent::File(i + 1), Vec::new())),
                            Err(e) => Err(io_error(Op::Stat, path, e)),
                        };
                    }
                }
            };
            cur = DirFd::Owned(next);
        }
        if self.durable {
            for (parent, _) in &made {
                rfs::fsync(parent).map_err(|e| io_error(Op::Sync, path, e))?;
            }
        }
        Ok((Parent::Dir(cur), made))
    }

    /// The parent directory, created if missing.
    fn make_parent(&self, path: &MemoryPath) -> StoreResult<(DirFd<'_>, Vec<(OwnedFd, String)>)> {
        let Some((_, parents)) = path.components().split_last() else {
            return Ok((DirFd::Root(self.root.as_fd()), Vec::new()));
        };
        match self.walk(path, parents, true)? {
            (Parent::Dir(fd), made) => Ok((fd, made)),
            (Parent::File(depth), _) => Err(StoreError::parent_not_directory(path, depth)),
            (Parent::Missing, _) => Err(StoreError::NotFound { path: path.clone() }),
        }
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
        // NONBLOCK: opening a FIFO someone planted must not hang.
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = match rfs::openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Err(not_found()),
            Err(Errno::LOOP) => return Err(StoreError::Symlink { path: path.clone() }),
            Err(e) => return Err(io_error(Op::Open, path, e)),
        };
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

    /// Writes `data` to a new temporary file in `dir` and moves it to
    /// `name`: without replacing anything when `no_replace`. The temporary
    /// file never outlives the call.
    fn install(
        &self,
        path: &MemoryPath,
        dir: &DirFd<'_>,
        name: &str,
        data: &[u8],
        no_replace: bool,
    ) -> StoreResult<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = format!("{TEMP_PREFIX}{}.{n}", std::process::id());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rfs::openat(dir, temp.as_str(), flags, Mode::RUSR | Mode::WUSR)
            .map_err(|e| io_error(Op::Write, path, e))?;
        let result = (|| -> StoreResult<()> {
            let mut file = File::from(fd);
            file.write_all(data)
                .map_err(|e| StoreError::io(Op::Write, path, e))?;
            if self.durable {
                file.sync_all()
                    .map_err(|e| StoreError::io(Op::Sync, path, e))?;
            }
            drop(file);
            if no_replace {
                rename_no_replace(dir.as_fd(), &temp, dir.as_fd(), name, path)?;
            } else {
                rfs::renameat(dir, temp.as_str(), dir, name)
                    .map_err(|e| io_error(Op::Write, path, e))?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = rfs::unlinkat(dir, temp.as_str(), AtFlags::empty());
            return result;
        }
        self.sync(path, dir)
    }

    fn sync(&self, path: &MemoryPath, dir: &impl AsFd) -> StoreResult<()> {
        if self.durable {
            rfs::fsync(dir).map_err(|e| io_error(Op::Sync, path, e))?;
        }
        Ok(())
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
        let (_, file, stat) = self.open_file(path)?;
        Ok(FileReader {
            len: stat.st_size as u64,
            reader: Box::new(file),
        })
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        let _lock = self.lock(path)?;
        let Some(name) = path.name() else {
            return Err(StoreError::write_to_root(path, mode));
        };
        // Every check before anything is created, so a refused write leaves
        // no stray directories.
        let existing = match self.parent(path)? {
            Parent::File(depth) => return Err(StoreError::parent_not_directory(path, depth)),
            Parent::Missing => Entry::Absent,
            Parent::Dir(dir) => {
                entry_at(dir.as_fd(), name).map_err(|e| io_error(Op::Stat, path, e))?
            }
        };
        match (existing, mode) {
            (Entry::Symlink, _) => return Err(StoreError::Symlink { path: path.clone() }),
            (Entry::Absent, WriteMode::Update(_)) => {
                return Err(StoreError::NotFound { path: path.clone() });
            }
            (Entry::Absent, _) => {}
            (_, WriteMode::Create) => return Err(StoreError::AlreadyExists { path: path.clone() }),
            (Entry::Dir | Entry::Other, _) => {
                return Err(StoreError::IsADirectory { path: path.clone() });
            }
            (Entry::File(_), WriteMode::Overwrite) => {}
            (Entry::File(_), WriteMode::Update(expected)) => {
                let current = match self.read(path, u64::MAX) {
                    Ok(current) => current,
                    Err(StoreError::NotFound { .. }) => {
                        return Err(StoreError::NotFound { path: path.clone() });
                    }
                    Err(e) => return Err(e),
                };
                if current.version != expected {
                    return Err(StoreError::Conflict { path: path.clone() });
                }
            }
        }
        let (dir, made) = self.make_parent(path)?;
        if let Err(e) = self.install(path, &dir, name, data, mode == WriteMode::Create) {
            remove_made(&made);
            return Err(e);
        }
        Ok(content_version(data))
    }

    /// Runs `change` once, under the store's write lock (the in-process
    /// mutex and the `flock`), so a concurrent edit from any thread or
    /// process of this machine waits instead of conflicting.
    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let _lock = self.lock(path)?;
        let (dir, current) = self.read_in_dir(path, limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
        let name = path.name().unwrap_or_default();
        // The file cannot have changed under the lock, except by a writer
        // that ignores it: then `current` is still what this edit is based
        // on, and the rename replaces the entry atomically.
        self.install(path, &dir, name, &new, false)?;
        Ok(Updated::Written(new))
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
                match rfs::openat(&parent, name, dir_flags(), Mode::empty()) {
                    Ok(fd) => DirFd::Owned(fd),
                    Err(e) => {
                        return Err(match entry_at(parent.as_fd(), name) {
                            Ok(Entry::Symlink) => StoreError::Symlink {
                                path: dir_path.clone(),
                            },
                            Ok(Entry::Absent) => StoreError::NotFound {
                                path: dir_path.clone(),
                            },
                            Ok(Entry::File(_) | Entry::Other) => StoreError::NotADirectory {
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
        for_each_entry(fd.as_fd(), |name, file_type| {
            let Ok(name) = name.to_str() else {
                return Ok(()); // not UTF-8: no memory path can name it
            };
            if name.starts_with(RESERVED_PREFIX) {
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
        Ok(entries)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        let Some(name) = path.name() else {
            return Err(StoreError::delete_root(path));
        };
        let _lock = self.lock(path)?;
        let dir = match self.parent(path)? {
            Parent::Dir(fd) => fd,
            _ => return Err(StoreError::NotFound { path: path.clone() }),
        };
        let result = match entry_at(dir.as_fd(), name).map_err(|e| io_error(Op::Delete, path, e))? {
            Entry::Absent => return Err(StoreError::NotFound { path: path.clone() }),
            Entry::Dir => remove_tree(dir.as_fd(), name, 0),
            _ => rfs::unlinkat(&dir, name, AtFlags::empty()),
        };
        result.map_err(|e| io_error(Op::Delete, path, e))?;
        self.sync(path, &dir)
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let from_name = from.name().unwrap_or_default();
        let _lock = self.lock(from)?;
        let from_dir = match self.parent(from)? {
            Parent::Dir(fd) => fd,
            _ => return Err(StoreError::NotFound { path: from.clone() }),
        };
        if let Entry::Absent =
            entry_at(from_dir.as_fd(), from_name).map_err(|e| io_error(Op::Stat, from, e))?
        {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        let Some(to_name) = to.name() else {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        };
        match self.parent(to)? {
            Parent::File(depth) => return Err(StoreError::parent_not_directory(to, depth)),
            Parent::Dir(dir) => {
                if !matches!(
                    entry_at(dir.as_fd(), to_name).map_err(|e| io_error(Op::Stat, to, e))?,
                    Entry::Absent
                ) {
                    return Err(StoreError::AlreadyExists { path: to.clone() });
                }
            }
            Parent::Missing => {}
        }
        let (to_dir, made) = self.make_parent(to)?;
        if let Err(e) = rename_no_replace(from_dir.as_fd(), from_name, to_dir.as_fd(), to_name, to)
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
}

/// A file's modification time from its `stat`.
fn modified(stat: &rfs::Stat) -> Option<std::time::SystemTime> {
    let secs = u64::try_from(stat.st_mtime).ok()?;
    let nanos = u32::try_from(stat.st_mtime_nsec).ok()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// Flags for opening a directory beneath another without following links.
fn dir_flags() -> OFlags {
    OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn io_error(op: Op, path: &MemoryPath, e: Errno) -> StoreError {
    StoreError::io(op, path, io::Error::from(e))
}

/// What is at `name` in `dir`, without following a link.
fn entry_at(dir: BorrowedFd<'_>, name: &str) -> Result<Entry, Errno> {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Entry::File(stat),
            FileType::Directory => Entry::Dir,
            FileType::Symlink => Entry::Symlink,
            _ => Entry::Other,
        }),
        Err(Errno::NOENT) | Err(Errno::NOTDIR) => Ok(Entry::Absent),
        Err(e) => Err(e),
    }
}

/// Renames without ever replacing the destination: `renameat2` with
/// `RENAME_NOREPLACE`, or (where the filesystem lacks it) `linkat` and
/// `unlinkat` for files; directories then rely on the store lock.
fn rename_no_replace(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
    path: &MemoryPath,
) -> StoreResult<()> {
    #[cfg(target_os = "linux")]
    match rfs::renameat_with(from_dir, from, to_dir, to, rfs::RenameFlags::NOREPLACE) {
        Ok(()) => return Ok(()),
        Err(Errno::EXIST) => return Err(StoreError::AlreadyExists { path: path.clone() }),
        Err(Errno::INVAL) | Err(Errno::NOSYS) => {}
        Err(e) => return Err(io_error(Op::Rename, path, e)),
    }
    let is_dir = matches!(entry_at(from_dir, from), Ok(Entry::Dir));
    if is_dir {
        return match entry_at(to_dir, to) {
            Ok(Entry::Absent) => {
                rfs::renameat(from_dir, from, to_dir, to).map_err(|e| io_error(Op::Rename, path, e))
            }
            Ok(_) => Err(StoreError::AlreadyExists { path: path.clone() }),
            Err(e) => Err(io_error(Op::Rename, path, e)),
        };
    }
    match rfs::linkat(from_dir, from, to_dir, to, AtFlags::empty()) {
        Ok(()) => rfs::unlinkat(from_dir, from, AtFlags::empty())
            .map_err(|e| io_error(Op::Rename, path, e)),
        Err(Errno::EXIST) => Err(StoreError::AlreadyExists { path: path.clone() }),
        Err(e) => Err(io_error(Op::Rename, path, e)),
    }
}

/// A handle on the same directory, for removing what a write created.
fn dup_dir(dir: &DirFd<'_>) -> Result<OwnedFd, Errno> {
    rfs::openat(dir, ".", dir_flags(), Mode::empty())
}

/// Removes directories a failed write created, innermost first.
fn remove_made(made: &[(OwnedFd, String)]) {
    for (parent, name) in made.iter().rev() {
        let _ = rfs::unlinkat(parent, name.as_str(), AtFlags::REMOVEDIR);
    }
}

/// Calls `f` with each entry of `dir` but `.` and `..`.
fn for_each_entry(
    dir: BorrowedFd<'_>,
    mut f: impl FnMut(&CStr, FileType) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut entries = rfs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let mut file_type = entry.file_type();
        if file_type == FileType::Unknown {
            file_type = match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e),
            };
        }
        f(name, file_type)?;
    }
    Ok(())
}

/// Deepest directory nesting the recursive helpers descend into.
const MAX_DEPTH: usize = 4096;

/// Removes the directory `name` in `parent` and everything below it,
/// through handles only: a directory swapped for a link mid-way is
/// unlinked, never followed.
fn remove_tree<P: rustix::path::Arg + Copy>(
    parent: BorrowedFd<'_>,
    name: P,
    depth: usize,
) -> Result<(), Errno> {
    let dir = match rfs::openat(parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
            return rfs::unlinkat(parent, name, AtFlags::empty());
        }
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if depth > MAX_DEPTH {
        return Err(Errno::NAMETOOLONG);
    }
    let mut children = Vec::new();
    for_each_entry(dir.as_fd(), |child, file_type| {
        children.push((child.to_owned(), file_type == FileType::Directory));
        Ok(())
    })?;
    for (child, is_dir) in children {
        let result = if is_dir {
            remove_tree(dir.as_fd(), child.as_c_str(), depth + 1)
        } else {
            rfs::unlinkat(&dir, child.as_c_str(), AtFlags::empty())
        };
        match result {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e),
        }
    }
    match rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes temporary files a crashed writer left, anywhere below `dir`.
/// Runs under the store lock, so no live writer's file is touched.
fn remove_temp_files(dir: BorrowedFd<'_>, depth: usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut subdirs = Vec::new();
    for_each_entry(dir, |name, file_type| {
        match file_type {
            FileType::Directory => subdirs.push(name.to_owned()),
            _ if name.to_bytes().starts_with(TEMP_PREFIX.as_bytes()) => {
                match rfs::unlinkat(dir, name, AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(e),
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    for name in subdirs {
        if let Ok(sub) = rfs::openat(dir, name.as_c_str(), dir_flags(), Mode::empty()) {
            remove_temp_files(sub.as_fd(), depth + 1)?;
        }
    }
    Ok(())
}

/// A content hash: equal content, equal version, whatever wrote it.
///
/// Versions are only compared within one process (an edit reads, then
/// compares under the lock), so the hash is keyed with a per-process random
/// seed: content cannot be crafted to collide. It folds 8 bytes per
/// multiply, several GB/s, since edits hash the file twice.
fn content_version(data: &[u8]) -> Version {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
    });
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let fold = |a: u64, b: u64| {
        let m = u128::from(a).wrapping_mul(u128::from(b));
        (m as u64) ^ ((m >> 64) as u64)
    };
    let mut h = seed ^ (data.len() as u64).wrapping_mul(K);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = fold(h ^ u64::from_le_bytes(b), K);
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = fold(h ^ u64::from_le_bytes(last), K ^ seed);
    h = fold(h, K.rotate_left(17));
    Version::new((u128::from(h) << 64) | data.len() as u128)
}

#[cfg(test)]
mod tests {
    use super::content_version;

    #[test]
    fn versions_tell_contents_apart() {
        let mut seen = std::collections::HashSet::new();
        let base = b"the quick brown fox jumps over the lazy dog".to_vec();
        for i in 0..base.len() {
            for bit in 0..8 {
                let mut v = base.clone();
                v[i] ^= 1 << bit;
                assert!(
                    seen.insert(content_version(&v)),
                    "collision at byte {i} bit {bit}"
                );
            }
        }
        assert!(seen.insert(content_version(&base)));
        assert_eq!(content_version(b"same"), content_version(b"same"));
        assert_ne!(content_version(b""), content_version(b"\0"));
        assert_ne!(content_version(b"a"), content_version(b"a\0"));
    }
}
