//! `HistoryStore` as a [`MemoryStore`]: every primitive forwarded to the
//! wrapped store, the changing ones recorded as versions first.

use super::store::HistoryStore;
use crate::path::MemoryPath;
use crate::store::{
    Change, DirEntry, FileContent, FileReader, MemoryStore, Metadata, Quota, StoreError,
    StoreResult, Updated, Version, WriteMode,
};

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for HistoryStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.inner.open(path)
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        self.write_recorded(path, data, mode, || self.inner.write(path, data, mode))
    }

    /// As [`write`](Self::write); the inner store checks the cap.
    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        self.write_recorded(path, data, mode, || {
            self.inner.write_within(path, data, mode, quota)
        })
    }

    /// As [`update`](Self::update); the inner store checks the cap.
    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(path, change, |c| {
            self.inner.update_within(path, limit, quota, c)
        })
    }

    /// A `deleted` version of the file, kept only if the inner store did
    /// delete it.
    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        if path.is_root() {
            return self.inner.delete_file_if(path, still);
        }
        self.serialized(path, |index| {
            let versions = self.leaving_all(index, path, None)?;
            // "Not deleted" goes through `change` as an error, so the
            // version is dropped, then comes back as `false`.
            let outcome = self.change(index, path, versions, || {
                match self.inner.delete_file_if(path, still) {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(StoreError::NotFound { path: path.clone() }),
                    Err(e) => Err(e),
                }
            });
            match outcome {
                Ok(()) => Ok(true),
                Err(StoreError::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }

    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<crate::store::Tree>> {
        self.inner.list_tree(dir)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        if path.is_root() {
            return self.inner.delete(path);
        }
        self.serialized(path, |index| {
            let versions = self.leaving_all(index, path, None)?;
            self.change(index, path, versions, || self.inner.delete(path))
        })
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        if from.is_root() || to.is_root() || to.is_strictly_inside(from) {
            return self.inner.rename(from, to);
        }
        self.serialized(from, |index| {
            match self.inner.stat(to) {
                Ok(None) => {}
                // Something is there (a symbolic link too): the store refuses.
                Ok(Some(_)) | Err(StoreError::Symlink { .. }) => {
                    return self.inner.rename(from, to);
                }
                Err(e) => return Err(e),
            }
            let versions = self.leaving_all(index, from, Some(to))?;
            self.change(index, from, versions, || self.inner.rename(from, to))
        })
    }

    /// The inner store's update, with the new content's version appended
    /// inside it (see `update_recorded`).
    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(path, change, |c| self.inner.update(path, limit, c))
    }

    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        self.inner.remove_empty_dir(path)
    }

    /// The live files only: versions are outside the store's namespace.
    fn total_size(&self) -> StoreResult<u64> {
        self.inner.total_size()
    }

    /// Runs `f` with no lock of its own: each change through a history
    /// store is serialized under its log's lock (and then the wrapped
    /// store's), and holding the wrapped store's lock around `f` would
    /// take the two in the other order.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut() -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f()
    }

    /// No: [`exclusive`](Self::exclusive) takes no lock here.
    fn locks_writers(&self) -> bool {
        false
    }
}
