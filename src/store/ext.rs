//! Conveniences over [`MemoryStore`]'s primitives, for every store.

use super::{
    Change, DeleteIf, MemoryStore, Metadata, Quota, RenameOptions, StoreResult, UpdateOptions,
    Updated, Version, WriteMode, WriteOptions, walk,
};
use crate::path::MemoryPath;

/// The everyday forms of [`MemoryStore`]'s option-taking primitives,
/// implemented for every store: bring it into scope with
/// `use claude_memory::store::MemoryStoreExt;`.
pub trait MemoryStoreExt: MemoryStore {
    /// Writes a whole file atomically ([`MemoryStore::write_opts`] with no
    /// quota); returns the new version.
    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        self.write_opts(path, data, mode.into())
    }

    /// [`write`](Self::write) under a size cap, checked atomically with
    /// the write.
    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        let options = WriteOptions {
            quota: Some(quota),
            ..mode.into()
        };
        self.write_opts(path, data, options)
    }

    /// Read-modify-write of a file of at most `limit` bytes that never
    /// loses a concurrent update ([`MemoryStore::update_opts`]).
    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_opts(path, UpdateOptions::new(limit), change)
    }

    /// [`update`](Self::update) under a size cap.
    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let options = UpdateOptions {
            quota: Some(quota),
            ..UpdateOptions::new(limit)
        };
        self.update_opts(path, options, change)
    }

    /// Removes a file, or a directory and all below it
    /// ([`DeleteIf::Exists`]).
    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        self.delete_opts(path, DeleteIf::Exists.into()).map(|_| ())
    }

    /// Removes `path` if it is an empty directory at that instant
    /// ([`DeleteIf::EmptyDir`]): whether it did.
    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        self.delete_opts(path, DeleteIf::EmptyDir.into())
    }

    /// Removes `path` if it is a file `still` accepts at that instant
    /// ([`DeleteIf::FileWhere`]): whether it did.
    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        self.delete_opts(path, DeleteIf::FileWhere(still).into())
    }

    /// Moves a file or directory ([`MemoryStore::rename_opts`]).
    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        self.rename_opts(from, to, RenameOptions::default())
    }

    /// Total bytes of every file in the store, hidden ones included (a
    /// [walk](walk::total_size) of the whole tree).
    fn total_size(&self) -> StoreResult<u64> {
        walk::total_size(self, &MemoryPath::root())
    }
}

impl<S: MemoryStore + ?Sized> MemoryStoreExt for S {}
