//! `SqliteStore`: memories in one SQLite database (feature `sqlite`).
//!
//! The SQLite dialect of the shared layout and operations
//! ([`super::ops`]). Each mutation is one `BEGIN IMMEDIATE` transaction,
//! which SQLite serializes across threads and processes: create-if-absent,
//! compare-and-swap on a store-wide version counter, and rename of a whole
//! directory are atomic.

use std::borrow::Cow;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::types::ToSqlOutput;
use rusqlite::{Connection, ToSql, TransactionBehavior, params_from_iter};

use super::{
    Backend, Columns, Commit, Dialect, DriverError, Fail, Param, SqlStore, columns, schema,
};
use crate::tenant::TenantId;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claude_memory_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claude_memory_entries (
    tenant TEXT NOT NULL,
    path TEXT NOT NULL,
    parent TEXT NOT NULL,
    name TEXT NOT NULL,
    is_dir INTEGER NOT NULL,
    data BLOB,
    len INTEGER NOT NULL,
    version INTEGER NOT NULL,
    modified_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant, path)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claude_memory_children ON claude_memory_entries (tenant, parent);
CREATE TABLE IF NOT EXISTS claude_memory_counter (id INTEGER PRIMARY KEY CHECK (id = 0), value INTEGER NOT NULL);
INSERT OR IGNORE INTO claude_memory_counter VALUES (0, 0);
";

/// A store in a SQLite database. Cloning shares the connection.
#[derive(Clone)]
pub struct SqliteStore(pub(super) SqlStore<Mutex<Connection>>);

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let SqlStore { db: conn, tenant } = &self.0;
        f.debug_struct("SqliteStore")
            .field("conn", conn)
            .field("tenant", tenant)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, in WAL mode with
    /// full fsync, and creates or checks the schema.
    pub fn open(path: impl AsRef<Path>) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        Self::init(conn)
    }

    /// A private database in memory.
    pub fn open_in_memory() -> rusqlite::Result<Self> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> rusqlite::Result<Self> {
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.execute_batch(SCHEMA)?;
        if let Some(v) = schema::check_version(&mut Lite(&conn))? {
            return Err(rusqlite::Error::InvalidParameterName(schema::newer(v)));
        }
        Ok(SqliteStore(SqlStore::new(Mutex::new(conn))))
    }

    /// The same database, seen as `tenant`'s store: every row carries the
    /// tenant, and no query crosses tenants.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        SqliteStore(self.0.for_tenant(tenant))
    }
}

/// The connection a store's clones share, behind a mutex.
impl Backend for Mutex<Connection> {
    type Conn<'c> = Lite<&'c Connection>;
    type Tx<'c> = Lite<rusqlite::Transaction<'c>>;

    fn with<T>(&self, f: impl FnOnce(&mut Self::Conn<'_>) -> Result<T, Fail>) -> Result<T, Fail> {
        let conn = self.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut Lite(&conn))
    }

    /// A `BEGIN IMMEDIATE` transaction: it takes SQLite's write lock, for
    /// every tenant at once.
    fn mutate<T>(
        &self,
        _tenant: &str,
        f: impl FnOnce(Self::Tx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let mut conn = self.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        f(Lite(tx))
    }
}

/// A SQLite connection, or a transaction open on one, as a [`Dialect`].
pub(crate) struct Lite<C>(C);

impl DriverError for rusqlite::Error {}

columns!(rusqlite::Row<'_>, rusqlite::Error, get);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Param::Text(s) => s.to_sql(),
            Param::Int(n) => n.to_sql(),
            Param::Bytes(b) => b.to_sql(),
        }
    }
}

impl<C: Deref<Target = Connection>> Lite<C> {
    /// The cached statement for `sql`, with `$N` parameters spelled `?N`.
    fn prepare(&self, sql: &str) -> rusqlite::Result<rusqlite::CachedStatement<'_>> {
        let sql = if sql.contains('$') {
            Cow::Owned(sql.replace('$', "?"))
        } else {
            Cow::Borrowed(sql)
        };
        self.0.prepare_cached(&sql)
    }
}

impl<C: Deref<Target = Connection>> Dialect for Lite<C> {
    type Error = rusqlite::Error;

    const INSERT_DIR: &'static str = "INSERT OR IGNORE INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES (?1, ?2, ?3, ?4, 1, NULL, 0, 0, ?5)";

    const UPSERT_FILE: &'static str = "INSERT OR REPLACE INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8)";

    const NEXT_VERSION: &'static str =
        "UPDATE claude_memory_counter SET value = value + 1 WHERE id = 0 RETURNING value";

    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = rusqlite::Error>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Option<T>> {
        let mut stmt = self.prepare(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        rows.next()?.map(|r| f(r)).transpose()
    }

    fn fetch_all<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        mut f: impl FnMut(&dyn Columns<Error = rusqlite::Error>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Vec<T>> {
        let mut stmt = self.prepare(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(f(r)?);
        }
        Ok(out)
    }

    fn run(&mut self, sql: &str, params: &[Param<'_>]) -> rusqlite::Result<()> {
        self.prepare(sql)?.execute(params_from_iter(params))?;
        Ok(())
    }
}

impl Commit for Lite<rusqlite::Transaction<'_>> {
    fn commit(self) -> rusqlite::Result<()> {
        self.0.commit()
    }
}
