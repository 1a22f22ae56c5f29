//! The SQL backends: one table layout and one set of operations, spoken in
//! two dialects.
//!
//! Every entry (file or directory) is a row keyed by `(tenant, path)`, with
//! `path` the components joined by `/` (`""` is the root, which has no row)
//! and `parent` the key of the directory holding it; directories are rows
//! too, so empty directories behave as on disk. Paths compare in byte
//! order, so listings and subtree ranges match the other backends exactly.
//!
//! [`ops`] holds the whole logic of each primitive, written once over two
//! small traits defined here: a [`Dialect`] is one connection or transaction
//! (query a row, query rows, execute, and the few statements whose SQL
//! differs), and a [`Backend`] is the database handle a store's clones
//! share (where reads run, and how a mutation takes its transaction and
//! write lock). A store is that handle seen as one tenant ([`SqlStore`]).
//! The backends themselves, [`sqlite`] and [`postgres`], are only dialect.

mod ops;
#[cfg(feature = "postgres")]
mod postgres;
mod remote;
mod run;
mod schema;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_open;
#[cfg(feature = "postgres")]
mod tls;

use std::sync::Arc;

#[cfg(feature = "postgres")]
pub(crate) use postgres::Durability;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresBuilder, PostgresError, PostgresStore};
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::Lite;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteError, SqliteStore};
#[cfg(feature = "sqlite")]
pub(crate) use sqlite_open::create_private;

use super::StoreError;
use crate::path::MemoryPath;
use crate::tenant::TenantId;

/// A SQL store: the database handle its clones share, seen as one tenant.
/// Every row carries the tenant, and no query crosses tenants.
pub(crate) struct SqlStore<H> {
    db: Arc<H>,
    tenant: String,
}

impl<H> Clone for SqlStore<H> {
    fn clone(&self) -> Self {
        SqlStore {
            db: Arc::clone(&self.db),
            tenant: self.tenant.clone(),
        }
    }
}

impl<H> SqlStore<H> {
    /// A new handle, seen as the default (empty) tenant.
    fn new(db: H) -> Self {
        SqlStore {
            db: Arc::new(db),
            tenant: String::new(),
        }
    }

    /// The tenant this handle sees (`""`: the default one).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The same database, seen as `tenant`'s store.
    fn for_tenant(&self, tenant: &TenantId) -> Self {
        SqlStore {
            db: Arc::clone(&self.db),
            tenant: tenant.as_str().to_owned(),
        }
    }
}

/// One connection or transaction of a SQL database, as the shared
/// operations see it.
///
/// Shared statements number their parameters `$1`, `$2`, …; a dialect
/// whose driver spells them otherwise rewrites them.
pub(crate) trait Dialect {
    /// The driver's error.
    type Error: DriverError;

    /// Each statement is a round trip to a server (PostgreSQL): fewer,
    /// larger statements are cheaper. `false` for an embedded database
    /// (SQLite), where simpler statements are.
    const REMOTE: bool = false;

    /// Inserts directory `$2` (parent `$3`, name `$4`, modified `$5`) of
    /// tenant `$1` unless the row exists: `is_dir` true, no data, length
    /// and version 0.
    const INSERT_DIR: &'static str;

    /// Inserts or replaces file `$2` (parent `$3`, name `$4`) of tenant
    /// `$1` with data `$5`, length `$6`, version `$7`, modified `$8`.
    const UPSERT_FILE: &'static str;

    /// Returns one row with a fresh version number, greater than every one
    /// handed out before.
    const NEXT_VERSION: &'static str;

    /// [`UPSERT_FILE`](Self::UPSERT_FILE) taking a fresh version itself
    /// and returning it, in one statement: file `$2` (parent `$3`, name
    /// `$4`) of tenant `$1` with data `$5`, length `$6`, modified `$7`.
    /// `None` where the dialect needs [`NEXT_VERSION`](Self::NEXT_VERSION)
    /// first.
    const UPSERT_FILE_NEXT: Option<&'static str> = None;

    /// A whole write in one statement, where the dialect can (PostgreSQL's
    /// data-modifying `WITH`): it reads the rows of file `$2`'s lineage
    /// (the ancestors' and its own) of tenant `$1`, makes the checks of
    /// the write (no ancestor a file; for mode `$6` 0, create, no row at
    /// `$2`; 1, overwrite, none or a file; 2, update, a file at version
    /// `$7`) and, when `$10` is not negative, of the size cap (the bytes
    /// of the files in [`$8`, `$9`) (`$8` empty: all the tenant's), less
    /// the file's it replaces, plus `$4`, at most `$10`), and only if all
    /// pass inserts the missing directories and upserts the file (data
    /// `$3`, length `$4`, modified `$5`, a fresh version).
    ///
    /// Rows: `(i, is_dir, len, version)` for each lineage row found, `i`
    /// its depth (1 for the top); then one row `(0, written, total,
    /// version)` with the cap's total (0 without a cap) and, if written,
    /// the new version. The caller names the error from the rows, with
    /// the checks it makes on every dialect.
    const WRITE_CHECKED: Option<&'static str> = None;

    /// One row, one column: the length in bytes of the longest key of
    /// tenant `$1` in the range [`$2`, `$3`), or 0 (SQLite's `length`
    /// counts characters, PostgreSQL's `octet_length` bytes).
    const LONGEST_KEY: &'static str;

    /// The first row `sql` returns, decoded by `f`, or `None` (a dialect
    /// may refuse a query that returns more than one).
    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = Self::Error>) -> Result<T, Self::Error>,
    ) -> Result<Option<T>, Self::Error>;

    /// Every row `sql` returns, each decoded by `f`.
    fn fetch_all<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnMut(&dyn Columns<Error = Self::Error>) -> Result<T, Self::Error>,
    ) -> Result<Vec<T>, Self::Error>;

    /// Runs a statement that returns no rows.
    fn run(&mut self, sql: &str, params: &[Param<'_>]) -> Result<(), Self::Error>;

    /// Says that the next statement is the transaction's last, so a
    /// dialect may send its `COMMIT` in the same round trip (PostgreSQL).
    /// The caller still calls [`Commit::commit`]; nothing may run in the
    /// transaction after that statement.
    fn last_statement(&mut self) {}
}

/// A transaction: a [`Dialect`] whose work lasts only once committed.
/// Dropped uncommitted, it rolls back.
pub(crate) trait Commit: Dialect {
    /// Takes the transaction's lock now, before anything is read through
    /// it (a backend may otherwise send it with the first statement).
    fn begin_now(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Commits the transaction.
    fn commit(self) -> Result<(), Self::Error>;
}

/// A SQL database handle (what a store's clones share): where the shared
/// operations run.
pub(crate) trait Backend {
    /// A connection that reads outside any transaction.
    type Conn<'c>: Dialect;
    /// A transaction holding a tenant's write lock.
    type Tx<'c>: Commit;

    /// Runs `f` on a connection; a backend may run it again on another
    /// connection if the first one died (reads are safe to repeat). Inside
    /// [`mutate`](Self::mutate) on the same thread, `f` reads through the
    /// mutation's transaction (an `update`'s change may read the store).
    fn with<T>(&self, f: impl FnMut(&mut Self::Conn<'_>) -> Result<T, Fail>) -> Result<T, Fail>;

    /// Begins a transaction, takes `tenant`'s write lock in it, and hands
    /// it to `f`, which commits it or drops it. Inside another mutation on
    /// the same thread (an [`exclusive`](crate::store::MemoryStore::exclusive)),
    /// it is a savepoint of that one's transaction. A backend may run `f` again
    /// on another connection if taking the lock failed because the first
    /// connection was dead (nothing of `f`'s took effect then).
    fn mutate<T>(
        &self,
        tenant: &str,
        f: impl FnMut(Self::Tx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail>;
}

/// A statement parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    /// `TEXT`.
    Text(&'a str),
    /// A 64-bit integer.
    Int(i64),
    /// `BLOB` / `BYTEA`.
    Bytes(&'a [u8]),
    /// A NULL `BLOB` / `BYTEA` (a history version's erased content).
    NullBytes,
}

/// The columns of one result row, read by position.
pub(crate) trait Columns {
    /// The driver's error.
    type Error;
    /// A boolean column.
    fn flag(&self, i: usize) -> Result<bool, Self::Error>;
    /// A 64-bit integer column.
    fn int(&self, i: usize) -> Result<i64, Self::Error>;
    /// A text column.
    fn text(&self, i: usize) -> Result<String, Self::Error>;
    /// A nullable binary column.
    fn bytes(&self, i: usize) -> Result<Option<Vec<u8>>, Self::Error>;
    /// A text column, into `out` (replacing what it held), so a loop over
    /// rows reuses one buffer instead of allocating a string per row.
    fn text_into(&self, i: usize, out: &mut String) -> Result<(), Self::Error> {
        *out = self.text(i)?;
        Ok(())
    }
}

/// Implements [`Columns`] for a driver's row type by its typed getter.
#[cfg(feature = "sqlite")]
macro_rules! columns {
    ($row:ty, $error:ty, $get:ident) => {
        impl $crate::store::sql::Columns for $row {
            type Error = $error;
            fn flag(&self, i: usize) -> Result<bool, $error> {
                self.$get(i)
            }
            fn int(&self, i: usize) -> Result<i64, $error> {
                self.$get(i)
            }
            fn text(&self, i: usize) -> Result<String, $error> {
                self.$get(i)
            }
            fn bytes(&self, i: usize) -> Result<Option<Vec<u8>>, $error> {
                self.$get(i)
            }
            fn text_into(&self, i: usize, out: &mut String) -> Result<(), $error> {
                let text = self.get_ref(i)?.as_str().map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        i,
                        rusqlite::types::Type::Text,
                        Box::new(e),
                    )
                })?;
                out.clear();
                out.push_str(text);
                Ok(())
            }
        }
    };
}
#[cfg(feature = "sqlite")]
use columns;

/// A database driver's error type.
pub(crate) trait DriverError: std::error::Error + Send + Sync + 'static {}

/// A failure inside a connection or transaction. It becomes a
/// [`StoreError`] once the caller's path is known.
pub(crate) enum Fail {
    /// A store error.
    Store(StoreError),
    /// [`StoreError::Invalid`] at the caller's path, for this reason.
    #[cfg(feature = "postgres")]
    Invalid(&'static str),
    /// The driver's error: [`StoreError::Backend`] at the caller's path.
    Sql(Box<dyn std::error::Error + Send + Sync>),
}

impl<E: DriverError> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail::Sql(Box::new(e))
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

impl Fail {
    /// What went wrong, in words (for errors that name no memory path:
    /// the PostgreSQL history log's).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn describe(self) -> String {
        match self {
            Fail::Store(e) => e.to_string(),
            #[cfg(feature = "postgres")]
            Fail::Invalid(reason) => reason.to_owned(),
            Fail::Sql(source) => source.to_string(),
        }
    }

    /// The store error for an operation on `path`; `writing` for a
    /// mutation, whose outcome a lost answer leaves unknown (SPEC §4).
    fn into_store(self, path: &MemoryPath, writing: bool) -> StoreError {
        match self {
            Fail::Store(e) => e,
            #[cfg(feature = "postgres")]
            Fail::Invalid(reason) => StoreError::Invalid {
                path: path.clone(),
                reason,
            },
            Fail::Sql(source) => remote::store_error(source, path, writing),
        }
    }
}
