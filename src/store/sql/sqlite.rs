//! `SqliteStore`: memories in one SQLite database (feature `sqlite`).
//!
//! The SQLite dialect of the shared layout and operations
//! ([`super::ops`]). Each mutation is one `BEGIN IMMEDIATE` transaction,
//! which SQLite serializes across threads and processes: create-if-absent,
//! edits (read, change, write), and rename of a whole directory are atomic.
//! The connection sits behind a reentrant lock, so an edit's change may
//! read the store on the same thread through the open transaction.

use std::borrow::Cow;
use std::ops::Deref;
use std::path::Path;
use std::time::Duration;

use parking_lot::ReentrantMutex;

use rusqlite::types::ToSqlOutput;
use rusqlite::{Connection, OpenFlags, ToSql, params_from_iter};

use super::sqlite_open::{self, create_private};
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

/// Why [`SqliteStore::open`] failed. The driver's error, where there is
/// one, is the [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The database could not be opened, set up or read.
    #[error("could not open the SQLite database")]
    Open(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database was set up by a newer version of this crate.
    #[error("{}", schema::newer(*.0))]
    NewerSchema(i64),
    /// The file is a database, but not a store: it has no
    /// `claude_memory_schema` table (a reading open), or holds another
    /// program's tables (a writing open makes the schema only in an empty
    /// database). Nothing was written to it.
    #[error("the database is not a claude-memory store (it has no claude_memory_schema table)")]
    NotAStore,
    /// The schema table holds something this crate never wrote (several
    /// rows, or a value that is no version): not a store to trust.
    #[error("the database is not a claude-memory store this crate can read: {0}")]
    InvalidSchema(String),
    /// The directory that would hold the database does not exist. The open
    /// creates the database file, never directories: a mistyped path must
    /// not leave new folders behind.
    #[error("the directory {} does not exist (the database file is created, its directory is not)", .0.display())]
    NoDirectory(std::path::PathBuf),
    /// A reading open named a file that does not exist: reading commands
    /// create nothing.
    #[error("there is no SQLite store at {} (reading commands create nothing)", .0.display())]
    NotFound(std::path::PathBuf),
    /// The path is the CLI's spelling of a store (`sqlite:PATH`) and no
    /// such file exists: the library takes the file's own path.
    #[error("{0:?} is how the CLI names a store: give the file's path ({1:?}), without `sqlite:`")]
    CliSpelling(String, String),
}

/// Refuses `sqlite:PATH` (the CLI's spelling) where no file has that name,
/// rather than create a file called `sqlite:mem.db`.
fn refuse_cli_spelling(path: &Path) -> Result<(), SqliteError> {
    if let Some(text) = path.to_str()
        && let Some(file) = text.strip_prefix("sqlite:")
        && !path.exists()
    {
        let file = file.trim_start_matches("//");
        return Err(SqliteError::CliSpelling(text.to_owned(), file.to_owned()));
    }
    Ok(())
}

impl From<rusqlite::Error> for SqliteError {
    fn from(e: rusqlite::Error) -> Self {
        SqliteError::Open(Box::new(e))
    }
}

/// A store in a SQLite database. Cloning shares the connection.
#[derive(Clone)]
pub struct SqliteStore(pub(super) SqlStore<ReentrantMutex<Connection>>);

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
    /// Opens (creating if needed, 0600) the database at `path`, in WAL mode
    /// with full fsync, and creates or checks the schema. The schema is
    /// created only in an empty database: a file holding another program's
    /// tables is refused ([`SqliteError::NotAStore`]) and left as it was.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SqliteError> {
        let path = path.as_ref();
        refuse_cli_spelling(path)?;
        create_private(path).map_err(|e| match e.kind() {
            // create_new(true) fails with NotFound only when a directory
            // on the way is missing: say which, not the OS's bare text.
            std::io::ErrorKind::NotFound => SqliteError::NoDirectory(
                path.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf(),
            ),
            _ => SqliteError::Open(Box::new(e)),
        })?;
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        if !sqlite_open::has_schema(&conn)? && !sqlite_open::foreign_objects(&conn)?.is_empty() {
            return Err(SqliteError::NotAStore);
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        Self::init(conn)
    }

    /// Opens an existing store at `path` for reading only, for commands
    /// that only read (view, stats, export): nothing is created, and the
    /// file, its schema and its journal mode are left exactly as they are.
    /// A database that is not a store is refused
    /// ([`SqliteError::NotAStore`]); writes through the store fail.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, SqliteError> {
        let path = path.as_ref();
        refuse_cli_spelling(path)?;
        if sqlite_open::is_plain_file_name(path) && !path.exists() {
            return Err(SqliteError::NotFound(path.to_path_buf()));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        if !sqlite_open::has_schema(&conn)? {
            return Err(SqliteError::NotAStore);
        }
        match schema::read_version(&mut Lite(&conn))? {
            schema::Found::Current => {}
            schema::Found::Newer(v) => return Err(SqliteError::NewerSchema(v)),
            schema::Found::Missing => return Err(SqliteError::NotAStore),
            schema::Found::Invalid(why) => return Err(SqliteError::InvalidSchema(why)),
        }
        Ok(SqliteStore(SqlStore::new(ReentrantMutex::new(conn))))
    }

    /// A private database in memory.
    pub fn open_in_memory() -> Result<Self, SqliteError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self, SqliteError> {
        conn.busy_timeout(Duration::from_secs(30))?;
        // Checked before the schema is made or completed: a newer or
        // untrusted schema is left alone.
        if sqlite_open::has_schema(&conn)? {
            match schema::read_version(&mut Lite(&conn))? {
                schema::Found::Newer(v) => return Err(SqliteError::NewerSchema(v)),
                schema::Found::Invalid(why) => return Err(SqliteError::InvalidSchema(why)),
                schema::Found::Current | schema::Found::Missing => {}
            }
        }
        conn.execute_batch(SCHEMA)?;
        match schema::check_version(&mut Lite(&conn))? {
            schema::Found::Current | schema::Found::Missing => {}
            schema::Found::Newer(v) => return Err(SqliteError::NewerSchema(v)),
            schema::Found::Invalid(why) => return Err(SqliteError::InvalidSchema(why)),
        }
        Ok(SqliteStore(SqlStore::new(ReentrantMutex::new(conn))))
    }

    /// Runs `f` on this store's connection, under its (re-entrant) lock:
    /// inside the store's own transaction when called from within one on
    /// this thread. For the crate's own tables beside the store's (the
    /// history log), so a version commits with the change it records.
    pub(crate) fn with_connection<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        let conn = self.0.db.lock();
        f(&conn)
    }

    /// The same database, seen as `tenant`'s store: every row carries the
    /// tenant, and no query crosses tenants.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        SqliteStore(self.0.for_tenant(tenant))
    }

    /// The tenant this store sees (`""`: the default one).
    pub(crate) fn tenant(&self) -> &str {
        self.0.tenant()
    }
}

/// The connection a store's clones share, behind a reentrant lock: a read
/// made inside a mutation on the same thread goes through its transaction.
impl Backend for ReentrantMutex<Connection> {
    type Conn<'c> = Lite<&'c Connection>;
    type Tx<'c> = Lite<LiteTx<'c>>;

    fn with<T>(
        &self,
        mut f: impl FnMut(&mut Self::Conn<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let conn = self.lock();
        f(&mut Lite(&conn))
    }

    /// A `BEGIN IMMEDIATE` transaction: it takes SQLite's write lock, for
    /// every tenant at once (a savepoint inside one this thread has open).
    fn mutate<T>(
        &self,
        _tenant: &str,
        mut f: impl FnMut(Self::Tx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let conn = self.lock();
        f(Lite(LiteTx::begin(&conn)?))
    }
}

/// A transaction on the store's connection: `BEGIN IMMEDIATE`, or, inside
/// one this thread has open (an `exclusive`: the reentrant lock lets no
/// other thread in), a savepoint of it. Rolled back unless committed.
pub(crate) struct LiteTx<'c> {
    conn: &'c Connection,
    nested: bool,
    open: bool,
}

impl<'c> LiteTx<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        let nested = !conn.is_autocommit();
        conn.execute_batch(if nested {
            "SAVEPOINT claude_memory_change"
        } else {
            "BEGIN IMMEDIATE"
        })?;
        Ok(LiteTx {
            conn,
            nested,
            open: true,
        })
    }
}

impl Deref for LiteTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for LiteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            // A failure leaves the transaction to SQLite: a connection
            // whose rollback failed has lost it already.
            let _ = self.conn.execute_batch(if self.nested {
                "ROLLBACK TO claude_memory_change; RELEASE claude_memory_change"
            } else {
                "ROLLBACK"
            });
        }
    }
}

/// A SQLite connection, or a transaction open on one, as a [`Dialect`].
pub(crate) struct Lite<C>(pub(crate) C);

impl DriverError for rusqlite::Error {}

columns!(rusqlite::Row<'_>, rusqlite::Error, get);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Param::Text(s) => s.to_sql(),
            Param::Int(n) => n.to_sql(),
            Param::Bytes(b) => b.to_sql(),
            Param::NullBytes => rusqlite::types::Null.to_sql(),
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

    // An upsert, not `INSERT OR REPLACE`: an edit updates the row in place
    // instead of deleting and reinserting it.
    const UPSERT_FILE: &'static str = "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8)
        ON CONFLICT (tenant, path) DO UPDATE SET is_dir = 0, data = excluded.data, len = excluded.len,
            version = excluded.version, modified_ms = excluded.modified_ms";

    const LONGEST_KEY: &'static str = "SELECT CAST(COALESCE(MAX(length(CAST(path AS BLOB))), 0) AS BIGINT) FROM claude_memory_entries WHERE tenant = $1 AND path >= $2 AND path < $3";
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

impl Commit for Lite<LiteTx<'_>> {
    fn commit(mut self) -> rusqlite::Result<()> {
        self.0.conn.execute_batch(if self.0.nested {
            "RELEASE claude_memory_change"
        } else {
            "COMMIT"
        })?;
        self.0.open = false;
        Ok(())
    }
}
