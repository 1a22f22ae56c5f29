//! `FilesystemStore` on Windows: memory files as real files under one root
//! directory, with the guarantees of the Unix store where Windows allows
//! them (docs/safety.md says where they differ).
//!
//! - **Containment.** The root is opened once and kept open without
//!   `FILE_SHARE_DELETE`, so it cannot be renamed, deleted or replaced
//!   while the store lives. Every directory a command works in is pinned
//!   the same way, with each directory above it, before anything inside it
//!   is touched (see `host`), and each entry is opened as itself
//!   (`FILE_FLAG_OPEN_REPARSE_POINT`): symbolic links, junctions and every
//!   other reparse point are refused where Unix refuses a symbolic link.
//! - **Atomicity and durability.** A write goes to a temporary file beside
//!   its target, flushed (`FlushFileBuffers`) and then renamed into place;
//!   creates and renames of files link the new name (`CreateHardLinkW`,
//!   which never replaces) and then remove the old one, so they never
//!   overwrite. Windows has no call that flushes a directory's entries;
//!   NTFS journals them.
//! - **Concurrency.** Mutations run under an in-process mutex plus a
//!   `LockFileEx` lock on `.claude-memory.lock` in the root.
//! - **Names.** Names Windows cannot store (`CON`, `a.`, `a:b`, …) are
//!   refused with [`StoreError::UnsupportedName`].

mod builder;
mod host;
mod names;
mod walk;
mod write;

pub use self::builder::FilesystemStoreBuilder;

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use self::host::{Dir, Entry, Pinned, io_error};
use self::walk::deepest_below;
use super::lock::{StoreLock, WriteLock};
use super::version::content_version;
use crate::path::MemoryPath;
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader, Lock,
    MemoryStore, Metadata, Op, RenameOptions, StoreError, StoreResult, UpdateOptions, Updated,
    Version, WriteOptions,
};

const LOCK_FILE: &str = ".claude-memory.lock";
const TEMP_PREFIX: &str = ".claude-memory.tmp.";

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
/// # drop(tool);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FilesystemStore {
    /// For display only.
    root_path: PathBuf,
    /// The root's verbatim host path with every link resolved: it names
    /// the directory `_root_pin` holds open, and cannot change while held.
    host_root: PathBuf,
    _root_pin: File,
    durable: bool,
    /// `None` when opened [read-only](FilesystemStoreBuilder::read_only).
    lock: StoreLock,
    temp_counter: AtomicU64,
}

/// Holds both the in-process mutex and the cross-process file lock.
/// Where the parent directory of a path is.
enum Parent {
    Dir(Dir),
    /// A directory on the way does not exist; all before it are real.
    Missing,
    /// The ancestor with this many components is a file.
    File(usize),
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
            create: true,
            read_only: false,
        }
    }

    /// The host directory this store was opened at (for display).
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    fn lock(&self, path: &MemoryPath) -> StoreResult<WriteLock<'_>> {
        self.lock.acquire(path)
    }

    /// Refuses a path with a component Windows cannot store, for commands
    /// that would create it.
    fn check_names(path: &MemoryPath) -> StoreResult<()> {
        for name in path.components() {
            if let Some(reason) = names::unsupported(name) {
                return Err(StoreError::UnsupportedName {
                    path: path.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Whether some component cannot exist in this store (so a lookup
    /// finds nothing, as on Unix, instead of reaching a device).
    fn unreachable(path: &MemoryPath) -> bool {
        path.components()
            .iter()
            .any(|name| names::unsupported(name).is_some())
    }

    /// Pins the directory holding `path`'s last component, refusing
    /// reparse points on the way.
    fn parent(&self, path: &MemoryPath) -> StoreResult<Parent> {
        let parents = match path.components().split_last() {
            Some((_, parents)) => parents,
            None => &[],
        };
        let mut dir = Dir::root(&self.host_root);
        for (i, name) in parents.iter().enumerate() {
            match host::pin_dir(&dir, name).map_err(|e| io_error(Op::OpenDirectory, path, e))? {
                Pinned::Dir(pin) => dir.push(name, pin),
                Pinned::Missing => return Ok(Parent::Missing),
                Pinned::NotDir => return Ok(Parent::File(i + 1)),
                Pinned::Reparse => return Err(StoreError::Symlink { path: path.clone() }),
            }
        }
        Ok(Parent::Dir(dir))
    }

    fn entry(&self, dir: &Dir, name: &str, op: Op, path: &MemoryPath) -> StoreResult<Entry> {
        host::entry_at(dir, name).map_err(|e| io_error(op, path, e))
    }

    /// Opens a regular file for reading, refusing reparse points,
    /// directories and hard-linked files. Also returns the (pinned)
    /// directory it is in, for a write back.
    fn open_file(&self, path: &MemoryPath) -> StoreResult<(Dir, File, std::fs::Metadata)> {
        let not_found = || StoreError::NotFound { path: path.clone() };
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        if Self::unreachable(path) {
            return Err(not_found());
        }
        let dir = match self.parent(path)? {
            Parent::Dir(dir) => dir,
            _ => return Err(not_found()),
        };
        let name = path.name().unwrap_or_default();
        let file = match host::open_for_read(&dir, name) {
            Ok(file) => file,
            Err(e) if host::is_not_found(&e) => return Err(not_found()),
            Err(e) => return Err(io_error(Op::Open, path, e)),
        };
        let meta = file.metadata().map_err(|e| io_error(Op::Stat, path, e))?;
        if host::is_reparse(&meta) {
            return Err(StoreError::Symlink { path: path.clone() });
        }
        if meta.is_dir() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        if !meta.is_file() {
            return Err(not_found());
        }
        // A create or rename of this store gives a file a second name for
        // an instant (link, then unlink): look again before refusing.
        let mut attempts = 0;
        while host::links(&file).map_err(|e| io_error(Op::Stat, path, e))? > 1 {
            attempts += 1;
            if attempts > 5 {
                return Err(StoreError::HardLink { path: path.clone() });
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok((dir, file, meta))
    }

    /// Reads a file of at most `limit` bytes, and the directory it is in.
    fn read_in_dir(&self, path: &MemoryPath, limit: u64) -> StoreResult<(Dir, FileContent)> {
        let (dir, file, meta) = self.open_file(path)?;
        let too_large = |len| StoreError::TooLarge {
            path: path.clone(),
            len,
        };
        if meta.len() > limit {
            return Err(too_large(meta.len()));
        }
        let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(limit.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| StoreError::io(Op::Read, path, e))?;
        if data.len() as u64 > limit {
            return Err(too_large(data.len() as u64));
        }
        let version = content_version(&data);
        Ok((dir, FileContent { data, version }))
    }

    /// Removes the temporary files `names` that a listing of `dir` found.
    /// Under the write lock no live writer holds one (each writes its
    /// temporary file and renames it under the lock), so those still there
    /// were left by a crash. Only if the lock is free now: a listing never
    /// waits for it, and the next listing tries again. A read-only handle
    /// removes nothing.
    fn remove_leftovers(&self, dir: &Dir, names: &[String]) {
        let Some(_lock) = self.lock.try_acquire() else {
            return;
        };
        for name in names {
            // Gone already (renamed since the listing): fine.
            let _ = host::remove_file(&dir.path.join(name));
        }
    }

    /// Removes the temporary files a crash left in the directory at
    /// `target` if they are all it holds: whether it holds nothing now.
    /// For a delete of an empty directory, under the write lock.
    fn clear_if_only_leftovers(target: &std::path::Path) -> bool {
        let (mut temps, mut other) = (Vec::new(), false);
        let listed = host::for_each_entry(target, |name, meta| {
            match name.to_str() {
                Some(n) if n.starts_with(TEMP_PREFIX) && meta.is_file() => {
                    temps.push(n.to_owned());
                }
                _ => other = true,
            }
            Ok(())
        });
        if listed.is_err() || other || temps.is_empty() {
            return false;
        }
        temps
            .iter()
            .all(|t| host::remove_file(&target.join(t)).is_ok())
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
        if Self::unreachable(path) {
            return Ok(None);
        }
        let dir = match self.parent(path)? {
            Parent::Dir(dir) => dir,
            _ => return Ok(None),
        };
        match self.entry(&dir, name, Op::Stat, path)? {
            Entry::File(meta) => Ok(Some(Metadata {
                kind: EntryKind::File,
                len: meta.len(),
                modified: meta.modified().ok(),
            })),
            Entry::Dir => Ok(Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            })),
            Entry::Reparse { .. } => Err(StoreError::Symlink { path: path.clone() }),
            Entry::Absent => Ok(None),
        }
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.read_in_dir(path, limit).map(|(_, content)| content)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        let (_, file, meta) = self.open_file(path)?;
        Ok(FileReader {
            len: meta.len(),
            reader: Box::new(file),
        })
    }

    /// A quota is totalled under the write lock, so no writer of this
    /// store can write between the check and the write.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.write_checked(path, data, options)
    }

    /// Runs `change` once, under the store's write lock, and checks a
    /// quota under it too.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_checked(path, options, change)
    }

    fn list(&self, dir_path: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let not_found = || StoreError::NotFound {
            path: dir_path.clone(),
        };
        let dir = match dir_path.name() {
            None => Dir::root(&self.host_root),
            Some(_) if Self::unreachable(dir_path) => return Err(not_found()),
            Some(name) => {
                let mut parent = match self.parent(dir_path)? {
                    Parent::Dir(dir) => dir,
                    _ => return Err(not_found()),
                };
                match host::pin_dir(&parent, name).map_err(|e| io_error(Op::List, dir_path, e))? {
                    Pinned::Dir(pin) => parent.push(name, pin),
                    Pinned::Missing => return Err(not_found()),
                    Pinned::NotDir => {
                        return Err(StoreError::NotADirectory {
                            path: dir_path.clone(),
                        });
                    }
                    Pinned::Reparse => {
                        return Err(StoreError::Symlink {
                            path: dir_path.clone(),
                        });
                    }
                }
                parent
            }
        };
        let mut entries = Vec::new();
        let mut temps = Vec::new();
        host::for_each_entry(&dir.path, |name, meta| {
            let Some(name) = name.to_str() else {
                return Ok(()); // not Unicode: no memory path can name it
            };
            if name.starts_with(TEMP_PREFIX) && meta.is_file() && !host::is_reparse(meta) {
                temps.push(name.to_owned());
            }
            if crate::path::is_reserved(name) || host::is_reparse(meta) {
                return Ok(()); // links and junctions: never listed
            }
            let (kind, len, modified) = if meta.is_dir() {
                (EntryKind::Directory, 0, None)
            } else if meta.is_file() {
                (EntryKind::File, meta.len(), meta.modified().ok())
            } else {
                return Ok(());
            };
            entries.push(DirEntry {
                name: name.to_owned(),
                kind,
                len,
                modified,
            });
            Ok(())
        })
        .map_err(|e| io_error(Op::List, dir_path, e))?;
        if !temps.is_empty() {
            self.remove_leftovers(&dir, &temps);
        }
        Ok(entries)
    }

    /// The entry is examined and removed under the write lock; an empty
    /// directory goes by `RemoveDirectoryW`, which refuses a directory
    /// that is not empty at that instant.
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
        if Self::unreachable(path) {
            return missing();
        }
        let dir = match self.parent(path)? {
            Parent::Dir(dir) => dir,
            _ => return missing(),
        };
        let target = dir.join(name);
        let result = match (&mut condition, self.entry(&dir, name, Op::Delete, path)?) {
            (_, Entry::Absent) => return missing(),
            (DeleteIf::Exists, Entry::Dir) => host::remove_tree(&target),
            // The link or junction itself, never its target.
            (DeleteIf::Exists, Entry::Reparse { dir: true }) => host::remove_dir(&target),
            (DeleteIf::Exists, Entry::Reparse { dir: false } | Entry::File(_)) => {
                host::remove_file(&target)
            }
            (DeleteIf::EmptyDir, Entry::Dir) => match host::remove_dir(&target) {
                Err(e) if host::is_not_empty(&e) && Self::clear_if_only_leftovers(&target) => {
                    host::remove_dir(&target)
                }
                Err(e) if host::is_not_empty(&e) || host::is_not_found(&e) => return Ok(false),
                other => other,
            },
            (DeleteIf::FileWhere(still), Entry::File(meta)) => {
                let metadata = Metadata {
                    kind: EntryKind::File,
                    len: meta.len(),
                    modified: meta.modified().ok(),
                };
                if !still(&metadata) {
                    return Ok(false);
                }
                match host::remove_file(&target) {
                    Err(e) if host::is_not_found(&e) => return Ok(false),
                    other => other,
                }
            }
            _ => return Ok(false),
        };
        result.map_err(|e| io_error(Op::Delete, path, e))?;
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
        if Self::unreachable(from) {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        let from_dir = match self.parent(from)? {
            Parent::Dir(dir) => dir,
            _ => return Err(StoreError::NotFound { path: from.clone() }),
        };
        let from_entry = self.entry(&from_dir, from_name, Op::Stat, from)?;
        let below = match from_entry {
            Entry::Absent => return Err(StoreError::NotFound { path: from.clone() }),
            Entry::Dir => {
                // Pinned while measured, so the walk cannot be led away.
                let mut top = Dir::root(&from_dir.path);
                match host::pin_dir(&from_dir, from_name)
                    .map_err(|e| io_error(Op::Stat, from, e))?
                {
                    Pinned::Dir(pin) => top.push(from_name, pin),
                    _ => return Err(StoreError::NotFound { path: from.clone() }),
                }
                deepest_below(&top.path).map_err(|e| io_error(Op::Stat, from, e))?
            }
            _ => 0,
        };
        let Some(to_name) = to.name() else {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        };
        if !Self::unreachable(to) {
            match self.parent(to)? {
                Parent::File(depth) => return Err(StoreError::parent_not_directory(to, depth)),
                Parent::Dir(dir) => {
                    if !matches!(self.entry(&dir, to_name, Op::Stat, to)?, Entry::Absent) {
                        return Err(StoreError::AlreadyExists { path: to.clone() });
                    }
                }
                Parent::Missing => {}
            }
        }
        Self::check_names(to)?;
        StoreError::check_depth(from, to, below)?;
        let (to_dir, made) = self.make_parent(to)?;
        let source = from_dir.join(from_name);
        let target = to_dir.join(to_name);
        let moved = match from_entry {
            // A regular file: a new name that never replaces, then the old
            // name goes.
            Entry::File(_) => match host::hard_link(&source, &target) {
                Ok(()) => host::remove_file(&source).map_err(|e| io_error(Op::Rename, from, e)),
                Err(e) if host::is_exists(&e) => {
                    Err(StoreError::AlreadyExists { path: to.clone() })
                }
                Err(e) => Err(io_error(Op::Rename, to, e)),
            },
            // A directory or a link: Windows has no rename that refuses an
            // existing target, so this relies on the check above, made
            // under the store lock (a directory is never replaced; a file
            // created meanwhile by a writer ignoring the lock could be).
            _ => match host::rename(&source, &target) {
                Ok(()) => Ok(()),
                Err(e) if host::is_exists(&e) => {
                    Err(StoreError::AlreadyExists { path: to.clone() })
                }
                Err(e) => Err(io_error(Op::Rename, to, e)),
            },
        };
        if let Err(e) = moved {
            made.remove();
            return Err(e);
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::FilesystemStore;
    use crate::path::MemoryPath;
    use crate::store::{MemoryStore, MemoryStoreExt, StoreError, WriteMode};

    fn store() -> (tempfile::TempDir, FilesystemStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = FilesystemStore::open(dir.path().join("root")).unwrap();
        (dir, store)
    }

    fn path(p: &str) -> MemoryPath {
        MemoryPath::parse(p).unwrap()
    }

    #[test]
    fn unsupported_names_are_refused_with_a_reason() {
        let (_dir, store) = store();
        for p in [
            "/memories/CON",
            "/memories/a./b.md",
            "/memories/x:y.md",
            "/memories/nul.txt",
        ] {
            match store.write(&path(p), b"x", WriteMode::Create) {
                Err(StoreError::UnsupportedName { .. }) => {}
                other => panic!("{p}: {other:?}"),
            }
            assert!(store.stat(&path(p)).unwrap().is_none());
        }
        assert!(store.list(&MemoryPath::root()).unwrap().is_empty());
    }

    #[test]
    fn names_differing_in_case_are_one_entry() {
        let (_dir, store) = store();
        store
            .write(&path("/memories/a.md"), b"x", WriteMode::Create)
            .unwrap();
        match store.write(&path("/memories/A.md"), b"y", WriteMode::Create) {
            Err(StoreError::AlreadyExists { .. }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(store.read(&path("/memories/a.md"), 10).unwrap().data, b"x");
    }
}
