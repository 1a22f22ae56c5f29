//! [`TenantStore`]: one tenant's `/memories` inside a shared base store.

use super::{
    Change, DeleteIf, DeleteOptions, DirEntry, FileContent, FileReader, Lock, MemoryStore,
    Metadata, Quota, RenameOptions, StoreError, StoreResult, UpdateOptions, Updated, Version,
    WriteOptions,
};
use crate::path::MemoryPath;
use crate::tenant::TenantId;

// The two leaf modules keep their limits apart; a base store's paths hold a
// tenant's 1,024 bytes under `/<id>`, which `from_stored` must accept.
const _: () = assert!(
    crate::path::MAX_STORED_PATH_BYTES
        == crate::path::MAX_PATH_BYTES + 1 + crate::tenant::MAX_TENANT_ID_BYTES
);

/// One tenant's store inside a shared base store: the tenant's
/// `/memories/x` is the base's `/memories/<tenant>/x`. Paths are validated
/// before they get here and hold no `..`, so a tenant can never name
/// another tenant's files; errors name tenant-relative paths only.
///
/// ```
/// use std::sync::Arc;
///
/// use claude_memory::{InMemoryStore, MemoryTool, TenantId, TenantStore};
/// use serde_json::json;
///
/// let base = Arc::new(InMemoryStore::new());
/// let alice = MemoryTool::new(TenantStore::new(Arc::clone(&base), TenantId::parse("alice")?));
/// let bob = MemoryTool::new(TenantStore::new(Arc::clone(&base), TenantId::parse("bob")?));
/// alice.dispatch(&json!({"command": "create", "path": "/memories/a.md", "file_text": "hi"}));
/// // Bob's /memories is his own: Alice's file is not there.
/// let view = bob.dispatch(&json!({"command": "view", "path": "/memories/a.md"}));
/// assert!(view.is_error);
/// # Ok::<(), claude_memory::tenant::TenantError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TenantStore<S> {
    base: S,
    tenant: TenantId,
}

impl<S: MemoryStore> TenantStore<S> {
    /// The store of `tenant` inside `base`.
    pub fn new(base: S, tenant: TenantId) -> Self {
        TenantStore { base, tenant }
    }

    /// The tenant.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The base store.
    pub fn base(&self) -> &S {
        &self.base
    }

    fn inner(&self, path: &MemoryPath) -> MemoryPath {
        path.with_prefix(self.tenant.as_str())
    }

    /// Rewrites the base's paths in an error back to the tenant's view
    /// (a path limit too: the tenant's prefix is not the caller's).
    fn outer(&self, error: StoreError) -> StoreError {
        let prefix = self.tenant.as_str();
        match error.map_paths(|p| p.strip_prefix(prefix)) {
            StoreError::PathTooLong { path, limit } => StoreError::PathTooLong {
                path,
                limit: limit.saturating_sub(1 + prefix.len()),
            },
            other => other,
        }
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for TenantStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        if path.is_root() {
            return Ok(Some(Metadata {
                kind: crate::store::EntryKind::Directory,
                len: 0,
                modified: None,
            }));
        }
        self.base.stat(&self.inner(path)).map_err(|e| self.outer(e))
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        self.base
            .read(&self.inner(path), limit)
            .map_err(|e| self.outer(e))
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        self.base.open(&self.inner(path)).map_err(|e| self.outer(e))
    }

    /// Forwarded with a quota's scope moved into the tenant's directory,
    /// so the base counts (atomically, if it can) this tenant's files only.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        if path.is_root() {
            return Err(StoreError::write_to_root(path, options.mode));
        }
        let scope = options.quota.map(|q| (self.inner(q.scope), q.max_bytes));
        let options = WriteOptions {
            quota: scope.as_ref().map(|(scope, max_bytes)| Quota {
                scope,
                max_bytes: *max_bytes,
            }),
            ..options
        };
        self.base
            .write_opts(&self.inner(path), data, options)
            .map_err(|e| self.outer(e))
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        match self.base.list(&self.inner(dir)) {
            // The tenant's root exists from the start, empty.
            Err(StoreError::NotFound { .. }) if dir.is_root() => Ok(Vec::new()),
            other => other.map_err(|e| self.outer(e)),
        }
    }

    /// The base store's: a tenant holds no more files than the whole store.
    fn max_files(&self) -> Option<u64> {
        self.base.max_files()
    }

    /// Forwarded: the tree's paths are relative to `dir`, so the base's
    /// answer for the tenant's directory is this store's.
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<super::Tree>> {
        match self.base.list_tree(&self.inner(dir)) {
            // The tenant's root exists from the start, empty.
            Err(StoreError::NotFound { .. }) if dir.is_root() => Ok(Some(super::Tree::new())),
            other => other.map_err(|e| self.outer(e)),
        }
    }

    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        if path.is_root() {
            return match options.condition {
                DeleteIf::Exists => Err(StoreError::delete_root(path)),
                _ => Ok(false),
            };
        }
        self.base
            .delete_opts(&self.inner(path), options)
            .map_err(|e| self.outer(e))
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: RenameOptions<'_>,
    ) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        if to.is_root() {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        self.base
            .rename_opts(&self.inner(from), &self.inner(to), options)
            .map_err(|e| self.outer(e))
    }

    /// Forwarded like [`write_opts`](Self::write_opts).
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        let scope = options.quota.map(|q| (self.inner(q.scope), q.max_bytes));
        let options = UpdateOptions {
            quota: scope.as_ref().map(|(scope, max_bytes)| Quota {
                scope,
                max_bytes: *max_bytes,
            }),
            ..options
        };
        self.base
            .update_opts(&self.inner(path), options, change)
            .map_err(|e| self.outer(e))
    }

    /// The base store's lock (a tenant's writers share it).
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.base
            .exclusive(&self.inner(path), f)
            .map_err(|e| self.outer(e))
    }
}
