//! Where each SQL primitive runs: reads on a plain connection, mutations
//! in the tenant's locked transaction. `sql_store!` makes a backend a
//! [`MemoryStore`](crate::store::MemoryStore) with them; the checks and
//! statements themselves are [`Entries`]'s, in [`super::ops`].

use super::ops::Entries;
use super::{Backend, Commit, Fail, SqlStore};
use crate::path::MemoryPath;
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, Lock, Metadata,
    RenameOptions, StoreError, StoreResult, Tree, UpdateOptions, Updated, Version, WriteOptions,
};

/// Runs `f` on this tenant's entries through a plain connection.
fn reading<B: Backend, T>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    mut f: impl FnMut(&mut Entries<'_, B::Conn<'_>>) -> Result<T, Fail>,
) -> StoreResult<T> {
    s.db.with(|c| f(&mut Entries::new(c, &s.tenant)))
        .map_err(|e| e.into_store(path, false))
}

/// Runs `f` on this tenant's entries in one locked transaction, committed
/// if `f` returns `Ok`.
fn mutating<B: Backend, T>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    mut f: impl FnMut(&mut Entries<'_, B::Tx<'_>>) -> Result<T, Fail>,
) -> StoreResult<T> {
    s.db.mutate(&s.tenant, |mut tx| {
        let out = f(&mut Entries::new(&mut tx, &s.tenant))?;
        tx.commit()?;
        Ok(out)
    })
    .map_err(|e| e.into_store(path, true))
}

/// [`MemoryStore::exclusive`](crate::store::MemoryStore::exclusive) of
/// a SQL store: `f` inside one mutation's transaction, committed only if
/// `f` succeeds.
pub(crate) fn exclusive<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    f: &mut dyn FnMut(Lock) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut out = Ok(());
    s.db.mutate(&s.tenant, |mut tx| {
        tx.begin_now()?;
        out = f(Lock::Held);
        if out.is_ok() {
            tx.commit()?;
        }
        Ok(())
    })
    .map_err(|e| e.into_store(path, true))?;
    out
}

pub(crate) fn stat<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
) -> StoreResult<Option<Metadata>> {
    if path.is_root() {
        return Ok(Some(Metadata {
            kind: EntryKind::Directory,
            len: 0,
            modified: None,
        }));
    }
    reading(s, path, |e| e.stat(path))
}

pub(crate) fn read<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    limit: u64,
) -> StoreResult<FileContent> {
    if path.is_root() {
        return Err(StoreError::IsADirectory { path: path.clone() });
    }
    reading(s, path, |e| e.read(path, limit))
}

pub(crate) fn write<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    data: &[u8],
    options: WriteOptions<'_>,
) -> StoreResult<Version> {
    if path.is_root() {
        return Err(StoreError::write_to_root(path, options.mode));
    }
    mutating(s, path, |e| e.write(path, data, options))
}

pub(crate) fn list<B: Backend>(s: &SqlStore<B>, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
    reading(s, dir, |e| e.list(dir))
}

pub(crate) fn list_tree<B: Backend>(
    s: &SqlStore<B>,
    dir: &MemoryPath,
) -> StoreResult<Option<Tree>> {
    reading(s, dir, |e| e.list_tree(dir))
}

pub(crate) fn delete<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    mut condition: DeleteIf<'_>,
) -> StoreResult<bool> {
    if path.is_root() {
        return match condition {
            DeleteIf::Exists => Err(StoreError::delete_root(path)),
            _ => Ok(false),
        };
    }
    mutating(s, path, |e| {
        let condition = match &mut condition {
            DeleteIf::Exists => DeleteIf::Exists,
            DeleteIf::EmptyDir => DeleteIf::EmptyDir,
            DeleteIf::FileWhere(still) => DeleteIf::FileWhere(&mut **still),
        };
        e.delete_if(path, condition)
    })
}

pub(crate) fn rename<B: Backend>(
    s: &SqlStore<B>,
    from: &MemoryPath,
    to: &MemoryPath,
) -> StoreResult<()> {
    StoreError::check_rename(from, to)?;
    mutating(s, from, |e| e.rename(from, to))
}

pub(crate) fn update<B: Backend>(
    s: &SqlStore<B>,
    path: &MemoryPath,
    options: UpdateOptions<'_>,
    change: &mut Change<'_>,
) -> StoreResult<Updated> {
    if path.is_root() {
        return Err(StoreError::IsADirectory { path: path.clone() });
    }
    mutating(s, path, |e| e.update(path, options, change))
}

/// Implements [`MemoryStore`](crate::store::MemoryStore) for a public SQL
/// store (a newtype over [`SqlStore`]) with the shared primitives above.
macro_rules! sql_store {
    ($store:ty) => {
        impl $crate::store::MemoryStore for $store {
            fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
                stat(&self.0, path)
            }
            fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
                read(&self.0, path, limit)
            }
            /// A cap is checked in the write's locked transaction.
            fn write_opts(
                &self,
                path: &MemoryPath,
                data: &[u8],
                options: WriteOptions<'_>,
            ) -> StoreResult<Version> {
                write(&self.0, path, data, options)
            }
            fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
                list(&self.0, dir)
            }
            /// One query (up to 10,000 entries).
            fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<Tree>> {
                list_tree(&self.0, dir)
            }
            /// One locked transaction; an empty directory goes in one
            /// statement.
            fn delete_opts(
                &self,
                path: &MemoryPath,
                options: DeleteOptions<'_>,
            ) -> StoreResult<bool> {
                delete(&self.0, path, options.condition)
            }
            fn rename_opts(
                &self,
                from: &MemoryPath,
                to: &MemoryPath,
                _: RenameOptions<'_>,
            ) -> StoreResult<()> {
                rename(&self.0, from, to)
            }
            /// One locked transaction: read, `change` once, the cap, write.
            fn update_opts(
                &self,
                path: &MemoryPath,
                options: UpdateOptions<'_>,
                change: &mut Change<'_>,
            ) -> StoreResult<Updated> {
                update(&self.0, path, options, change)
            }
            /// One transaction holding the tenant's write lock for the
            /// whole of `f`: `f`'s own changes on this thread join it (a
            /// savepoint each), every other writer waits, and the change
            /// commits whole or not at all.
            fn exclusive(
                &self,
                path: &MemoryPath,
                f: &mut dyn FnMut(Lock) -> StoreResult<()>,
            ) -> StoreResult<()> {
                exclusive(&self.0, path, f)
            }
        }
    };
}

#[cfg(feature = "sqlite")]
sql_store!(super::SqliteStore);
#[cfg(feature = "postgres")]
sql_store!(super::PostgresStore);
