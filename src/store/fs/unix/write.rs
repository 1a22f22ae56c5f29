//! The write path of the Unix filesystem store: a temporary file beside
//! the target, fsynced and renamed into place, under the write lock.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;

use super::super::version::content_version;
use super::resolve::{DirFd, Parent, remove_made};
use super::sys::{Entry, entry_at, io_error};
use super::{FilesystemStore, cleanup, sys};
use crate::path::MemoryPath;
use crate::store::{
    Change, MemoryStore, Op, Quota, StoreError, StoreResult, Updated, Version, WriteMode,
};

impl FilesystemStore {
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
        let temp = cleanup::temp_name(n);
        let fd = match sys::create_new(dir, &temp) {
            // A crashed writer's file under this name (its pid reused): a
            // write runs under the lock, so no live writer holds it.
            Err(rustix::io::Errno::EXIST) => {
                let _ = sys::unlink(dir, temp.as_str());
                sys::create_new(dir, &temp)
            }
            made => made,
        }
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
                sys::rename_no_replace(dir.as_fd(), &temp, dir.as_fd(), name, path)?;
            } else {
                sys::rename_replace(dir, &temp, name).map_err(|e| io_error(Op::Write, path, e))?;
            }
            Ok(())
        })();
        if result.is_err() {
            // Best effort: the write's own error is the one to report.
            let _ = sys::unlink(dir, temp.as_str());
            return result;
        }
        self.sync(path, dir)
    }

    /// `write_opts`, with its quota if any, under the write lock.
    pub(super) fn write_checked(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Option<Quota<'_>>,
    ) -> StoreResult<Version> {
        let _lock = self.lock(path)?;
        let Some(name) = path.name() else {
            return Err(StoreError::write_to_root(path, mode));
        };
        // Every check before anything is created, so a refused write leaves
        // no stray directories.
        let (existing, parent_file, parent) = match self.parent(path)? {
            Parent::File(depth) => (Entry::Absent, Some(depth), None),
            Parent::Missing => (Entry::Absent, None, None),
            Parent::Dir(dir) => (
                entry_at(dir.as_fd(), name).map_err(|e| io_error(Op::Stat, path, e))?,
                None,
                Some(dir),
            ),
        };
        // A FIFO, socket or device is no memory entry: it is treated as
        // missing, and the write replaces it.
        let special = matches!(existing, Entry::Other);
        let existing = if special { Entry::Absent } else { existing };
        if let Some(quota) = quota {
            let replaced = match (&existing, mode) {
                (Entry::Symlink, _) => return Err(StoreError::Symlink { path: path.clone() }),
                (Entry::Absent, _) => 0,
                (_, WriteMode::Create) => {
                    return Err(StoreError::AlreadyExists { path: path.clone() });
                }
                (Entry::File(stat), _) => stat.st_size as u64,
                _ => 0,
            };
            quota.check_walked(self, path, replaced, data.len() as u64)?;
        }
        if let Some(depth) = parent_file {
            return Err(StoreError::parent_not_directory(path, depth));
        }
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
        // The parent found above is reused (the lock keeps it in place);
        // only a missing one is made.
        let (dir, made) = match parent {
            Some(dir) => (dir, Default::default()),
            None => self.make_parent(path)?,
        };
        let no_replace = mode == WriteMode::Create && !special;
        if let Err(e) = self.install(path, &dir, name, data, no_replace) {
            remove_made(&made);
            return Err(e);
        }
        Ok(content_version(data))
    }

    /// `update_opts`, with its quota if any, under the write lock.
    pub(super) fn update_checked(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Option<Quota<'_>>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let _lock = self.lock(path)?;
        let (dir, current) = self.read_in_dir(path, limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
        if let Some(quota) = quota {
            let (old, new_len) = (current.data.len() as u64, new.len() as u64);
            quota.check_walked(self, path, old, new_len)?;
        }
        let name = path.name().unwrap_or_default();
        // The file cannot have changed under the lock, except by a writer
        // that ignores it: then `current` is still what this edit is based
        // on, and the rename replaces the entry atomically.
        self.install(path, &dir, name, &new, false)?;
        Ok(Updated::Written(new))
    }

    pub(super) fn sync(&self, path: &MemoryPath, dir: &impl AsFd) -> StoreResult<()> {
        if self.durable {
            sys::sync_dir(path, dir)?;
        }
        Ok(())
    }
}
