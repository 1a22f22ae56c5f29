//! `HistoryStore` as a [`MemoryStore`]: every primitive forwarded to the
//! wrapped store, the changing ones recorded as versions first.

use super::store::HistoryStore;
use crate::path::MemoryPath;
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, FileContent, FileReader, Lock, MemoryStore,
    MemoryStoreExt, Metadata, RenameOptions, StoreError, StoreResult, UpdateOptions, Updated,
    Version, WriteOptions,
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

    /// The wrapped store checks a quota.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.write_recorded(path, data, options, || {
            self.inner.write_opts(path, data, options)
        })
    }

    /// The wrapped store's update (which checks a quota), with the new
    /// content's version appended inside it (see `update_recorded`).
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(options.context, path, change, |c| {
            self.inner.update_opts(path, options, c)
        })
    }

    /// A `deleted` version of each file that goes, kept only if the
    /// wrapped store did delete it. An empty directory holds no file: it
    /// goes with no version.
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let DeleteOptions {
            mut condition,
            context,
        } = options;
        if path.is_root() || matches!(condition, DeleteIf::EmptyDir) {
            return self
                .inner
                .delete_opts(path, DeleteOptions { condition, context });
        }
        self.serialized(path, |index| {
            let versions = self.leaving_all(context, index, path, None)?;
            let DeleteIf::FileWhere(still) = &mut condition else {
                let deleted = || self.inner.delete(path);
                return self.change(index, path, versions, deleted).map(|()| true);
            };
            // "Not deleted" goes through `change` as an error, so the
            // version is dropped, then comes back as `false`.
            let outcome = self.change(index, path, versions, || {
                match self.inner.delete_file_if(path, &mut **still) {
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

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: RenameOptions<'_>,
    ) -> StoreResult<()> {
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
            let versions = self.leaving_all(options.context, index, from, Some(to))?;
            self.change(index, from, versions, || self.inner.rename(from, to))
        })
    }

    /// Runs `f` with no lock of its own: each change through a history
    /// store is serialized under its log's lock (and then the wrapped
    /// store's), and holding the wrapped store's lock around `f` would
    /// take the two in the other order.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f(Lock::Absent)
    }
}
