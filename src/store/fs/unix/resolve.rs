//! Path resolution beneath the store's root handle: from a [`MemoryPath`]
//! to a handle on the directory holding its last component.
//!
//! On Linux one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` call does
//! it; where that is unavailable (old kernels, sandboxes, or switched off by
//! the builder), the path is walked one `openat(O_NOFOLLOW)` per directory.
//! Either way no host path is ever built, and a symbolic link anywhere on
//! the way is refused rather than followed. Writes create missing parent
//! directories on the same walk, and remove them again if the write fails.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
#[cfg(target_os = "linux")]
use std::sync::atomic::Ordering;

use rustix::io::Errno;

use super::FilesystemStore;
use super::sys::{self, Entry, io_error};
use crate::path::MemoryPath;
use crate::store::{Op, StoreError, StoreResult};

/// Retries of one walk step that keeps finding its directory created and
/// removed by someone else.
const MAX_ATTEMPTS: usize = 16;

/// A directory handle: the root (borrowed) or one opened beneath it.
pub(super) enum DirFd<'a> {
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
pub(super) enum Parent<'a> {
    Dir(DirFd<'a>),
    /// A directory on the way does not exist; all before it are real.
    Missing,
    /// The ancestor with this many components is a file.
    File(usize),
}

/// Directories a write created on its way, so a failed write can remove
/// them again: the handle of the directory the first one was made in, and
/// the names of the chain made from there (each inside the one before).
/// One handle, however many levels were made.
#[derive(Default)]
pub(super) struct Made {
    first: Option<OwnedFd>,
    names: Vec<String>,
}

impl FilesystemStore {
    /// Opens the directory holding `path`'s last component, beneath the
    /// root, refusing symbolic links.
    pub(super) fn parent(&self, path: &MemoryPath) -> StoreResult<Parent<'_>> {
        let Some((_, parents)) = path.components().split_last() else {
            return Ok(Parent::Dir(DirFd::Root(self.root.as_fd())));
        };
        if parents.is_empty() {
            return Ok(Parent::Dir(DirFd::Root(self.root.as_fd())));
        }
        #[cfg(target_os = "linux")]
        if self.use_openat2.load(Ordering::Relaxed) {
            match sys::open_dir_beneath(self.root.as_fd(), &parents.join("/")) {
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

    /// The parent directory, created if missing.
    pub(super) fn make_parent(&self, path: &MemoryPath) -> StoreResult<(DirFd<'_>, Made)> {
        let Some((_, parents)) = path.components().split_last() else {
            return Ok((DirFd::Root(self.root.as_fd()), Made::default()));
        };
        match self.walk(path, parents, true)? {
            (Parent::Dir(fd), made) => Ok((fd, made)),
            (Parent::File(depth), _) => Err(StoreError::parent_not_directory(path, depth)),
            (Parent::Missing, _) => Err(StoreError::NotFound { path: path.clone() }),
        }
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
    ) -> StoreResult<(Parent<'_>, Made)> {
        let mut made = Made::default();
        let mut cur = DirFd::Root(self.root.as_fd());
        for (i, name) in dirs.iter().enumerate() {
            let mut attempts = 0;
            let next = loop {
                attempts += 1;
                if attempts > MAX_ATTEMPTS {
                    remove_made(&made);
                    return Err(io_error(Op::CreateDirectory, path, Errno::AGAIN));
                }
                match sys::open_dir(&cur, name.as_str()) {
                    Ok(fd) => break fd,
                    // Missing, and this walk makes what is missing.
                    Err(Errno::NOENT) if create => match sys::make_dir(&cur, name) {
                        Ok(()) => {
                            if self.durable
                                && let Err(e) = sys::sync_dir(path, &cur)
                            {
                                remove_made(&made);
                                return Err(e);
                            }
                            if made.first.is_none() {
                                // Without a second handle it cannot be
                                // removed if the write fails; it then
                                // stays, empty.
                                made.first = sys::dup_dir(&cur).ok();
                            }
                            if made.first.is_some() {
                                made.names.push(name.clone());
                            }
                        }
                        // Someone else made it meanwhile: open theirs.
                        Err(Errno::EXIST) => {}
                        Err(e) => {
                            remove_made(&made);
                            return Err(io_error(Op::CreateDirectory, path, e));
                        }
                    },
                    // Missing, and this walk only looks.
                    Err(Errno::NOENT) => return Ok((Parent::Missing, made)),
                    // Interrupted by a signal: try again.
                    Err(Errno::INTR) => {}
                    // Anything else (a link, a file, no permission): look at
                    // what is there to say which.
                    Err(e) => {
                        remove_made(&made);
                        return match sys::entry_at(cur.as_fd(), name) {
                            Ok(Entry::Symlink) => Err(StoreError::Symlink { path: path.clone() }),
                            Ok(Entry::Absent) => Ok((Parent::Missing, Made::default())),
                            Ok(Entry::Dir) => Err(io_error(Op::OpenDirectory, path, e)),
                            Ok(_) => Ok((Parent::File(i + 1), Made::default())),
                            Err(e) => Err(io_error(Op::Stat, path, e)),
                        };
                    }
                }
            };
            cur = DirFd::Owned(next);
        }
        Ok((Parent::Dir(cur), made))
    }
}

/// Removes directories a failed write created, innermost first, holding
/// at most two handles: each is reached again from the first one's parent.
/// Best effort: the write's own error is the one to report, and a
/// directory someone has put something in meanwhile must stay (`rmdir`).
pub(super) fn remove_made(made: &Made) {
    let Some(first) = &made.first else {
        return;
    };
    for last in (0..made.names.len()).rev() {
        let mut cur: Option<OwnedFd> = None;
        let mut reached = true;
        for name in &made.names[..last] {
            let next = match &cur {
                None => sys::open_dir(first, name.as_str()),
                Some(fd) => sys::open_dir(fd, name.as_str()),
            };
            match next {
                Ok(fd) => cur = Some(fd),
                Err(_) => {
                    reached = false;
                    break;
                }
            }
        }
        if !reached {
            continue;
        }
        let name = made.names[last].as_str();
        let _ = match &cur {
            None => sys::remove_dir(first, name),
            Some(fd) => sys::remove_dir(fd, name),
        };
    }
}
