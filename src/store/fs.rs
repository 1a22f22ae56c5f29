//! `FilesystemStore`: memory files as real files under one root directory.
//!
//! Writes go to a temporary file in the target's directory, are fsynced,
//! renamed into place and the directory fsynced, so a crash leaves the old
//! or the new content. Mutations run under a lock (an in-process mutex plus
//! an advisory `flock` on `.claude-memory.lock` in the root) so that
//! create-if-absent, compare-and-swap and rename-without-overwrite hold
//! across threads and across processes sharing the root.
//!
//! Containment: every path is walked component by component with
//! `symlink_metadata`, and a symbolic link anywhere is refused (or, for
//! `delete`/`rename`, a final link is acted on itself). These checks are not
//! race-proof against another process swapping a directory for a symlink
//! between check and use; see the README's safety model.

use std::collections::hash_map::DefaultHasher;
use std::fs::{self, File, OpenOptions};
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{
    DirEntry, EntryKind, FileContent, MemoryStore, Metadata, StoreError, StoreResult, Version,
    WriteMode,
};
use crate::path::{MemoryPath, RESERVED_PREFIX};

const LOCK_FILE: &str = ".claude-memory.lock";
const TEMP_PREFIX: &str = ".claude-memory.tmp.";

/// A store rooted at a host directory, which stands for `/memories`.
#[derive(Debug)]
pub struct FilesystemStore {
    root: PathBuf,
    durable: bool,
    lock: Mutex<File>,
    temp_counter: AtomicU64,
}

/// Options for [`FilesystemStore`]; see [`FilesystemStore::builder`].
#[derive(Debug, Clone)]
pub struct FilesystemStoreBuilder {
    root: PathBuf,
    durable: bool,
}

impl FilesystemStoreBuilder {
    /// Whether to fsync files and directories on every write (default
    /// `true`). Turning it off trades crash durability for speed; writes
    /// stay atomic.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Creates the root (mode 0700) if missing and opens the store.
    pub fn open(self) -> io::Result<FilesystemStore> {
        create_dir_all_private(&self.root)?;
        let root = fs::canonicalize(&self.root)?;
        let lock_path = root.join(LOCK_FILE);
        if fs::symlink_metadata(&lock_path).is_ok_and(|m| !m.is_file()) {
            return Err(io::Error::other(
                "the store's lock file is not a regular file",
            ));
        }
        let lock = private_options()
            .read(true)
            .write(true)
            .create(true)
            .open(&lock_path)?;
        Ok(FilesystemStore {
            root,
            durable: self.durable,
            lock: Mutex::new(lock),
            temp_counter: AtomicU64::new(0),
        })
    }
}

/// Holds both the in-process mutex and the cross-process file lock.
struct WriteLock<'a> {
    file: MutexGuard<'a, File>,
}

impl Drop for WriteLock<'_> {
    fn drop(&mut self) {
        // Closing would release it too; unlock now so the next waiter runs.
        let _ = self.file.unlock();
    }
}

/// What a component-by-component walk found.
enum Walk {
    /// The path exists; `meta` is not followed (may be a symlink only when
    /// the caller allowed a final link).
    Found { host: PathBuf, meta: fs::Metadata },
    /// Nothing there; existing ancestors are real directories.
    Missing,
    /// The ancestor with this many components is a file (or other non-dir).
    ParentFile(usize),
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
        }
    }

    /// The canonical host directory standing for `/memories`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        let file = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        file.lock().map_err(|e| StoreError::io("lock", path, e))?;
        Ok(WriteLock { file })
    }

    /// Walks `path` from the root without following links. A symlink is
    /// [`StoreError::Symlink`], except a final one when `final_link_ok`.
    fn walk(&self, path: &MemoryPath, final_link_ok: bool) -> StoreResult<Walk> {
        let mut host = self.root.clone();
        let n = path.components().len();
        if n == 0 {
            let meta = fs::symlink_metadata(&host).map_err(|e| StoreError::io("stat", path, e))?;
            return Ok(Walk::Found { host, meta });
        }
        for (i, c) in path.components().iter().enumerate() {
            host.push(c);
            let last = i + 1 == n;
            let meta = match fs::symlink_metadata(&host) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Walk::Missing),
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                    return Ok(Walk::ParentFile(i));
                }
                Err(e) => return Err(StoreError::io("stat", path, e)),
            };
            if meta.file_type().is_symlink() && !(last && final_link_ok) {
                return Err(StoreError::Symlink { path: path.clone() });
            }
            if last {
                return Ok(Walk::Found { host, meta });
            }
            if !meta.is_dir() {
                return Ok(Walk::ParentFile(i + 1));
            }
        }
        Ok(Walk::Missing)
    }

    /// The host path of `path`, without any checks.
    fn host_path(&self, path: &MemoryPath) -> PathBuf {
        let mut host = self.root.clone();
        host.extend(path.components());
        host
    }

    /// Creates the missing ancestors of `path` (mode 0700), refusing links
    /// and files on the way. Returns the directories it made, outermost
    /// first, so a failed write can remove them again.
    fn make_parents(&self, path: &MemoryPath) -> StoreResult<Vec<PathBuf>> {
        let mut made = Vec::new();
        let mut host = self.root.clone();
        let Some((_, parents)) = path.components().split_last() else {
            return Ok(made);
        };
        for (i, c) in parents.iter().enumerate() {
            host.push(c);
            match fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    remove_dirs(&made);
                    return Err(StoreError::Symlink { path: path.clone() });
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    remove_dirs(&made);
                    return Err(parent_error(path, i + 1));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if let Err(e) = private_dir_builder().create(&host) {
                        remove_dirs(&made);
                        return Err(StoreError::io("create directory", path, e));
                    }
                    made.push(host.clone());
                }
                Err(e) => {
                    remove_dirs(&made);
                    return Err(StoreError::io("stat", path, e));
                }
            }
        }
        if self.durable {
            for dir in &made {
                if let Some(parent) = dir.parent() {
                    sync_dir(parent).map_err(|e| StoreError::io("sync", path, e))?;
                }
            }
        }
        Ok(made)
    }

    /// Writes `data` to a fresh temporary file beside `target` and renames
    /// it over `target`. The temporary file never outlives the call.
    fn replace(&self, path: &MemoryPath, target: &Path, data: &[u8]) -> StoreResult<()> {
        let dir = target.parent().unwrap_or(&self.root);
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!("{TEMP_PREFIX}{}.{n}", std::process::id()));
        let result = (|| {
            let mut f = private_options().write(true).create_new(true).open(&temp)?;
            f.write_all(data)?;
            if self.durable {
                f.sync_all()?;
            }
            drop(f);
            fs::rename(&temp, target)?;
            if self.durable {
                sync_dir(dir)?;
            }
            Ok(())
        })();
        result.map_err(|e: io::Error| {
            let _ = fs::remove_file(&temp);
            StoreError::io("write", path, e)
        })
    }

    fn sync_parent(&self, path: &MemoryPath, host: &Path) -> StoreResult<()> {
        match host.parent() {
            Some(parent) if self.durable => {
                sync_dir(parent).map_err(|e| StoreError::io("sync", path, e))
            }
            _ => Ok(()),
        }
    }
}

impl MemoryStore for FilesystemStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        Ok(match self.walk(path, false)? {
            Walk::Found { meta, .. } if meta.is_dir() => Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
            }),
            Walk::Found { meta, .. } if meta.is_file() => Some(Metadata {
                kind: EntryKind::File,
                len: meta.len(),
            }),
            _ => None,
        })
    }

    fn read(&self, path: &MemoryPath) -> StoreResult<FileContent> {
        let host = match self.walk(path, false)? {
            Walk::Found { meta, .. } if meta.is_dir() => {
                return Err(StoreError::IsADirectory { path: path.clone() });
            }
            Walk::Found { host, meta } if meta.is_file() => host,
            _ => return Err(StoreError::NotFound { path: path.clone() }),
        };
        let mut data = Vec::new();
        File::open(&host)
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(|e| StoreError::io("read", path, e))?;
        let version = content_version(&data);
        Ok(FileContent { data, version })
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        let _lock = self.lock(path)?;
        if path.is_root() {
            return Err(match mode {
                WriteMode::Create => StoreError::AlreadyExists { path: path.clone() },
                _ => StoreError::IsADirectory { path: path.clone() },
            });
        }
        let target = match (self.walk(path, false)?, mode) {
            (Walk::ParentFile(depth), _) => return Err(parent_error(path, depth)),
            (Walk::Found { .. }, WriteMode::Create) => {
                return Err(StoreError::AlreadyExists { path: path.clone() });
            }
            (Walk::Found { meta, .. }, _) if !meta.is_file() => {
                return Err(StoreError::IsADirectory { path: path.clone() });
            }
            (Walk::Found { host, .. }, WriteMode::Update(expected)) => {
                let mut current = Vec::new();
                File::open(&host)
                    .and_then(|mut f| f.read_to_end(&mut current))
                    .map_err(|e| StoreError::io("read", path, e))?;
                if content_version(&current) != expected {
                    return Err(StoreError::Conflict { path: path.clone() });
                }
                host
            }
            (Walk::Missing, WriteMode::Update(_)) => {
                return Err(StoreError::NotFound { path: path.clone() });
            }
            (Walk::Found { host, .. }, _) => host,
            (Walk::Missing, _) => self.host_path(path),
        };
        let made = self.make_parents(path)?;
        if let Err(e) = self.replace(path, &target, data) {
            remove_dirs(&made);
            return Err(e);
        }
        Ok(content_version(data))
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let host = match self.walk(dir, false)? {
            Walk::Found { host, meta } if meta.is_dir() => host,
            Walk::Found { .. } => return Err(StoreError::NotADirectory { path: dir.clone() }),
            _ => return Err(StoreError::NotFound { path: dir.clone() }),
        };
        let io_err = |e| StoreError::io("list", dir, e);
        let mut entries = Vec::new();
        for entry in fs::read_dir(&host).map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: no memory path can name it
            };
            if name.starts_with(RESERVED_PREFIX) {
                continue;
            }
            let file_type = entry.file_type().map_err(io_err)?;
            let (kind, len) = if file_type.is_dir() {
                (EntryKind::Directory, 0)
            } else if file_type.is_file() {
                match entry.metadata() {
                    Ok(m) => (EntryKind::File, m.len()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err(e)),
                }
            } else {
                continue; // symlinks, sockets, fifos: never listed
            };
            entries.push(DirEntry { name, kind, len });
        }
        Ok(entries)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        if path.is_root() {
            return Err(StoreError::Invalid {
                path: path.clone(),
                reason: "the root cannot be deleted",
            });
        }
        let _lock = self.lock(path)?;
        let (host, meta) = match self.walk(path, true)? {
            Walk::Found { host, meta } => (host, meta),
            _ => return Err(StoreError::NotFound { path: path.clone() }),
        };
        // `remove_dir_all` does not follow links inside the tree.
        let result = if meta.is_dir() {
            fs::remove_dir_all(&host)
        } else {
            fs::remove_file(&host)
        };
        result.map_err(|e| StoreError::io("delete", path, e))?;
        self.sync_parent(path, &host)
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        if from.is_root() || to.is_strictly_inside(from) {
            return Err(StoreError::Invalid {
                path: from.clone(),
                reason: "cannot move the root, or a directory into itself",
            });
        }
        let _lock = self.lock(from)?;
        let from_host = match self.walk(from, true)? {
            Walk::Found { host, .. } => host,
            _ => return Err(StoreError::NotFound { path: from.clone() }),
        };
        if to.is_root() {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        let to_host = match self.walk(to, true)? {
            Walk::Found { .. } => return Err(StoreError::AlreadyExists { path: to.clone() }),
            Walk::ParentFile(depth) => return Err(parent_error(to, depth)),
            Walk::Missing => self.host_path(to),
        };
        let made = self.make_parents(to)?;
        if let Err(e) = fs::rename(&from_host, &to_host) {
            remove_dirs(&made);
            return Err(StoreError::io("rename", from, e));
        }
        self.sync_parent(from, &from_host)?;
        self.sync_parent(to, &to_host)
    }
}

fn parent_error(path: &MemoryPath, depth: usize) -> StoreError {
    let parent = path.ancestors().nth(depth).unwrap_or_else(MemoryPath::root);
    StoreError::ParentNotDirectory {
        path: path.clone(),
        parent,
    }
}

/// A content hash: equal content, equal version, whatever wrote it.
fn content_version(data: &[u8]) -> Version {
    let mut h = DefaultHasher::new();
    h.write(data);
    Version::new((u128::from(h.finish()) << 64) | data.len() as u128)
}

/// Removes directories a failed write created, innermost first.
fn remove_dirs(made: &[PathBuf]) {
    for dir in made.iter().rev() {
        let _ = fs::remove_dir(dir);
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

fn private_options() -> OpenOptions {
    #[allow(unused_mut)]
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

fn private_dir_builder() -> fs::DirBuilder {
    #[allow(unused_mut)]
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b
}

fn create_dir_all_private(dir: &Path) -> io::Result<()> {
    private_dir_builder().recursive(true).create(dir)
}
