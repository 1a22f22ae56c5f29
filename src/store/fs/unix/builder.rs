//! [`FilesystemStoreBuilder`]: the options of a Unix filesystem store, and
//! opening one.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};

use super::super::lock::StoreLock;
use super::{FilesystemStore, LOCK_FILE, sys};

/// Options for [`FilesystemStore`]; see [`FilesystemStore::builder`].
#[derive(Debug, Clone)]
pub struct FilesystemStoreBuilder {
    pub(super) root: PathBuf,
    pub(super) durable: bool,
    pub(super) openat2: bool,
    pub(super) create: bool,
    pub(super) read_only: bool,
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

    /// Whether to create the root directory if it is missing (default
    /// `true`). Off, a missing root is an error of kind
    /// [`io::ErrorKind::NotFound`], so a mistyped path is not taken for a
    /// new, empty store.
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Opens an existing store for reading only (default `false`): the
    /// root must exist, and nothing is created or written on open, not
    /// even the lock file, nor is a crashed writer's temporary file
    /// removed. Every write, delete or rename then fails with an I/O error
    /// of kind [`io::ErrorKind::ReadOnlyFilesystem`]. Works on a store
    /// the process may not write to.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Creates the root (mode 0700) if missing (unless
    /// [`create(false)`](Self::create) or [`read_only`](Self::read_only))
    /// and opens it. Nothing below the root is read: temporary files a
    /// crashed writer left go when a listing of their directory finds them.
    pub fn open(self) -> io::Result<FilesystemStore> {
        // A regular file where the root should be: say so, rather than the
        // "File exists" that creating the directory would report.
        if std::fs::metadata(&self.root).is_ok_and(|m| !m.is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", self.root.display()),
            ));
        }
        if self.create && !self.read_only {
            let mut builder = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.recursive(true).create(&self.root)?;
        }
        let root = sys::open_root(&self.root)?;
        let lock = if self.read_only {
            None
        } else {
            let lock = sys::open_lock_file(root.as_fd(), LOCK_FILE)?;
            if !sys::file_type(lock.as_fd())?.is_file() {
                return Err(io::Error::other(
                    "the store's lock file is not a regular file",
                ));
            }
            Some(File::from(lock))
        };
        let recheck = match &lock {
            Some(_) => Some(lock_recheck(sys::dup_dir(root.as_fd())?)),
            None => None,
        };
        let lock = StoreLock::with_recheck(lock, recheck);
        let store = FilesystemStore {
            root_path: self.root,
            root,
            durable: self.durable,
            lock,
            temp_counter: AtomicU64::new(0),
            use_openat2: AtomicBool::new(self.openat2 && cfg!(target_os = "linux")),
        };
        Ok(store)
    }
}

/// The check after each `flock` (see [`StoreLock::with_recheck`]): the
/// name `.claude-memory.lock` in the root must still be the file locked
/// (same device and inode); if a local process deleted or replaced it, the
/// name is opened again (made if missing, no link followed, a regular
/// file) and that file is locked instead.
fn lock_recheck(root: std::os::fd::OwnedFd) -> super::super::lock::Recheck {
    Box::new(move |locked: &File| {
        let ours = rustix::fs::fstat(locked)?;
        match rustix::fs::statat(&root, LOCK_FILE, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(now) if now.st_ino == ours.st_ino && now.st_dev == ours.st_dev => return Ok(None),
            // Gone, or another file: open what the name says now.
            Ok(_) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let lock = match sys::open_lock_file(root.as_fd(), LOCK_FILE) {
            Ok(lock) => lock,
            // The root itself is gone (removed from under the store): no
            // handle can make a lock file there either, so the file held
            // still excludes them all, and the write reports what fails.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !sys::file_type(lock.as_fd())?.is_file() {
            return Err(io::Error::other(
                "the store's lock file is not a regular file",
            ));
        }
        Ok(Some(File::from(lock)))
    })
}
