//! The write path of the Windows filesystem store: parents created (and
//! pinned) on the way, and a temporary file flushed and moved into place.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::super::version::content_version;
use super::host::{self, Dir, Entry, Pinned, io_error};
use super::{FilesystemStore, Parent, TEMP_PREFIX};
use crate::path::MemoryPath;
use crate::store::{
    Change, MemoryStore, Op, StoreError, StoreResult, UpdateOptions, Updated, Version, WriteMode,
    WriteOptions,
};

/// Directories a write created on its way (host paths, outermost first),
/// so a failed write can remove them again.
#[derive(Default)]
pub(super) struct Made(Vec<PathBuf>);

impl Made {
    /// Best effort, innermost first; `RemoveDirectoryW` leaves a directory
    /// someone has put something in meanwhile.
    pub(super) fn remove(&self) {
        for path in self.0.iter().rev() {
            let _ = host::remove_dir(path);
        }
    }
}

impl FilesystemStore {
    /// The parent directory, created (and pinned) if missing.
    pub(super) fn make_parent(&self, path: &MemoryPath) -> StoreResult<(Dir, Made)> {
        let parents = match path.components().split_last() {
            Some((_, parents)) => parents,
            None => &[],
        };
        let mut made = Made::default();
        let mut dir = Dir::root(&self.host_root);
        for (i, name) in parents.iter().enumerate() {
            let fail = |made: &Made, e: StoreError| {
                made.remove();
                Err(e)
            };
            let mut pinned = host::pin_dir(&dir, name);
            if let Ok(Pinned::Missing) = pinned {
                match std::fs::create_dir(dir.join(name)) {
                    Ok(()) => made.0.push(dir.join(name)),
                    // Someone else made it meanwhile: use theirs.
                    Err(e) if host::is_exists(&e) => {}
                    Err(e) => return fail(&made, io_error(Op::CreateDirectory, path, e)),
                }
                pinned = host::pin_dir(&dir, name);
            }
            match pinned {
                Ok(Pinned::Dir(pin)) => dir.push(name, pin),
                Ok(Pinned::Missing) => {
                    return fail(&made, StoreError::NotFound { path: path.clone() });
                }
                Ok(Pinned::NotDir) => {
                    return fail(&made, StoreError::parent_not_directory(path, i + 1));
                }
                Ok(Pinned::Reparse) => {
                    return fail(&made, StoreError::Symlink { path: path.clone() });
                }
                Err(e) => return fail(&made, io_error(Op::OpenDirectory, path, e)),
            }
        }
        Ok((dir, made))
    }

    /// Writes `data` to a new temporary file in `dir` and moves it to
    /// `name`: without replacing anything when `no_replace`. The temporary
    /// file never outlives the call (unless removing it fails; the next
    /// listing of its directory then removes it).
    pub(super) fn install(
        &self,
        path: &MemoryPath,
        dir: &Dir,
        name: &str,
        data: &[u8],
        no_replace: bool,
    ) -> StoreResult<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = format!("{TEMP_PREFIX}{}.{n}", std::process::id());
        let temp_path = dir.join(&temp);
        let mut file = match host::create_new(dir, &temp) {
            // A crashed writer's file under this name (its pid reused): a
            // write runs under the lock, so no live writer holds it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = host::remove_file(&temp_path);
                host::create_new(dir, &temp)
            }
            made => made,
        }
        .map_err(|e| io_error(Op::Write, path, e))?;
        let result = (|| -> StoreResult<()> {
            file.write_all(data)
                .map_err(|e| StoreError::io(Op::Write, path, e))?;
            if self.durable {
                file.sync_all()
                    .map_err(|e| StoreError::io(Op::Sync, path, e))?;
            }
            drop(file);
            let target = dir.join(name);
            if no_replace {
                match host::hard_link(&temp_path, &target) {
                    Ok(()) => {}
                    Err(e) if host::is_exists(&e) => {
                        return Err(StoreError::AlreadyExists { path: path.clone() });
                    }
                    Err(e) => return Err(io_error(Op::Write, path, e)),
                }
            } else {
                host::rename(&temp_path, &target).map_err(|e| io_error(Op::Write, path, e))?;
            }
            Ok(())
        })();
        // After a link, or a failure, the temporary name is still there.
        if no_replace || result.is_err() {
            let _ = host::remove_file(&temp_path);
        }
        result
    }
}

impl FilesystemStore {
    /// `write_opts`, with its quota if any, under the write lock.
    pub(super) fn write_checked(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        let mode = options.mode;
        let _lock = self.lock(path)?;
        let Some(name) = path.name() else {
            return Err(StoreError::write_to_root(path, mode));
        };
        // A parent that is a file is reported after the quota, as every
        // store orders its checks (see `MemoryStore::write_opts`).
        let mut parent_file = None;
        let existing = if Self::unreachable(path) {
            Entry::Absent
        } else {
            match self.parent(path)? {
                Parent::File(depth) => {
                    parent_file = Some(depth);
                    Entry::Absent
                }
                Parent::Missing => Entry::Absent,
                Parent::Dir(dir) => self.entry(&dir, name, Op::Stat, path)?,
            }
        };
        if let Some(quota) = options.quota {
            let replaced = match (&existing, mode) {
                (Entry::Reparse { .. }, _) => {
                    return Err(StoreError::Symlink { path: path.clone() });
                }
                (Entry::Absent, _) => 0,
                (_, WriteMode::Create) => {
                    return Err(StoreError::AlreadyExists { path: path.clone() });
                }
                (Entry::File(meta), _) => meta.len(),
                _ => 0,
            };
            quota.check_walked(self, path, replaced, data.len() as u64)?;
        }
        if let Some(depth) = parent_file {
            return Err(StoreError::parent_not_directory(path, depth));
        }
        match (existing, mode) {
            (Entry::Reparse { .. }, _) => return Err(StoreError::Symlink { path: path.clone() }),
            (Entry::Absent, WriteMode::Update(_)) => {
                return Err(StoreError::NotFound { path: path.clone() });
            }
            (Entry::Absent, _) => Self::check_names(path)?,
            (_, WriteMode::Create) => return Err(StoreError::AlreadyExists { path: path.clone() }),
            (Entry::Dir, _) => return Err(StoreError::IsADirectory { path: path.clone() }),
            (Entry::File(_), WriteMode::Overwrite) => {}
            (Entry::File(_), WriteMode::Update(expected)) => {
                let current = self.read(path, u64::MAX)?;
                if current.version != expected {
                    return Err(StoreError::Conflict { path: path.clone() });
                }
            }
        }
        let (dir, made) = self.make_parent(path)?;
        if let Err(e) = self.install(path, &dir, name, data, mode == WriteMode::Create) {
            made.remove();
            return Err(e);
        }
        Ok(content_version(data))
    }

    /// `update_opts`: `change` once, and its quota if any, under the
    /// write lock.
    pub(super) fn update_checked(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let _lock = self.lock(path)?;
        let (dir, current) = self.read_in_dir(path, options.limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
        if let Some(quota) = options.quota {
            let (old, new_len) = (current.data.len() as u64, new.len() as u64);
            quota.check_walked(self, path, old, new_len)?;
        }
        let name = path.name().unwrap_or_default();
        self.install(path, &dir, name, &new, false)?;
        Ok(Updated::Written(new))
    }
}
