//! The write path of the Windows filesystem store: parents created (and
//! pinned) on the way, and a temporary file flushed and moved into place.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::host::{self, Dir, Pinned, io_error};
use super::{FilesystemStore, TEMP_PREFIX};
use crate::path::MemoryPath;
use crate::store::{Op, StoreError, StoreResult};

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
    /// open then removes it).
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
        let mut file = host::create_new(dir, &temp).map_err(|e| io_error(Op::Write, path, e))?;
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
