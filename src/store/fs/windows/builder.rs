//! [`FilesystemStoreBuilder`]: the options of a Windows filesystem store,
//! and opening one.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use super::super::lock::StoreLock;
use super::{FilesystemStore, LOCK_FILE, host};

/// Options for [`FilesystemStore`]; see [`FilesystemStore::builder`].
#[derive(Debug, Clone)]
pub struct FilesystemStoreBuilder {
    pub(super) root: PathBuf,
    pub(super) durable: bool,
    pub(super) create: bool,
    pub(super) read_only: bool,
}

impl FilesystemStoreBuilder {
    /// Whether to flush files to stable storage on every write (default
    /// `true`; `FlushFileBuffers`). Turning it off trades crash durability
    /// for speed; writes stay atomic.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Linux only; accepted and ignored elsewhere.
    #[doc(hidden)]
    pub fn use_openat2(self, _on: bool) -> Self {
        self
    }

    /// Whether to create the root directory if it is missing (default
    /// `true`). Off, a missing root is an error of kind
    /// [`io::ErrorKind::NotFound`].
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Opens an existing store for reading only (default `false`): nothing
    /// is created or written on open, and every write, delete or rename
    /// fails with an I/O error of kind [`io::ErrorKind::ReadOnlyFilesystem`].
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Creates the root if missing (unless [`create(false)`](Self::create)
    /// or [`read_only`](Self::read_only)) and opens it. Nothing below the
    /// root is read: temporary files a crashed writer left go when a
    /// listing of their directory finds them.
    pub fn open(self) -> io::Result<FilesystemStore> {
        if self.create && !self.read_only {
            std::fs::create_dir_all(&self.root)?;
        }
        let (root_pin, root) = host::open_root(&self.root)?;
        let lock = if self.read_only {
            None
        } else {
            Some(host::open_lock_file(&root, LOCK_FILE)?)
        };
        let lock = StoreLock::new(lock);
        let store = FilesystemStore {
            root_path: self.root,
            host_root: root,
            _root_pin: root_pin,
            durable: self.durable,
            lock,
            temp_counter: AtomicU64::new(0),
        };
        Ok(store)
    }
}
