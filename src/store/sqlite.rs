//! `SqliteStore`: memories in one SQLite database (feature `sqlite`).
//!
//! Every entry (file or directory) is a row keyed by `(tenant, path)`;
//! directories are rows too, so empty directories behave as on disk. Each
//! mutation is one `BEGIN IMMEDIATE` transaction, which SQLite serializes
//! across threads and processes: create-if-absent, compare-and-swap on a
//! store-wide version counter, and rename of a whole directory are atomic.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::sql::{below, key, now_ms, to_time};
use super::{
    DirEntry, EntryKind, FileContent, MemoryStore, Metadata, StoreError, StoreResult, Version,
    WriteMode,
};
use crate::path::MemoryPath;
use crate::tenant::TenantId;

/// The schema version this crate writes and reads.
const SCHEMA_VERSION: i64 = 1;

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
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    tenant: String,
}

/// An entry's row.
struct Row {
    is_dir: bool,
    len: u64,
    version: i64,
    modified_ms: i64,
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
        let version: Option<i64> = conn
            .query_row("SELECT version FROM claude_memory_schema", [], |r| r.get(0))
            .optional()?;
        match version {
            None => {
                conn.execute(
                    "INSERT INTO claude_memory_schema (version) VALUES (?1)",
                    [SCHEMA_VERSION],
                )?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(rusqlite::Error::InvalidParameterName(format!(
                    "the database has claude-memory schema version {v}; this crate knows {SCHEMA_VERSION}"
                )));
            }
            Some(_) => {}
        }
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            tenant: String::new(),
        })
    }

    /// The same database, seen as `tenant`'s store: every row carries the
    /// tenant, and no query crosses tenants.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        SqliteStore {
            conn: Arc::clone(&self.conn),
            tenant: tenant.as_str().to_owned(),
        }
    }

    fn with<T>(
        &self,
        path: &MemoryPath,
        f: impl FnOnce(&mut Connection) -> Result<T, Fail>,
    ) -> StoreResult<T> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut conn).map_err(|e| e.into_store(path))
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, committed if it
    /// returns `Ok`.
    fn mutate<T>(
        &self,
        path: &MemoryPath,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, Fail>,
    ) -> StoreResult<T> {
        self.with(path, |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }
}

/// A failure inside a transaction: a store error, or SQLite's.
enum Fail {
    Store(StoreError),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

impl Fail {
    fn into_store(self, path: &MemoryPath) -> StoreError {
        match self {
            Fail::Store(e) => e,
            Fail::Sql(e) => StoreError::Backend {
                path: path.clone(),
                source: Box::new(e),
            },
        }
    }
}

fn row(conn: &Connection, tenant: &str, path: &str) -> rusqlite::Result<Option<Row>> {
    conn.query_row(
        "SELECT is_dir, len, version, modified_ms FROM claude_memory_entries WHERE tenant = ?1 AND path = ?2",
        params![tenant, path],
        |r| {
            Ok(Row {
                is_dir: r.get(0)?,
                len: r.get::<_, i64>(1)? as u64,
                version: r.get(2)?,
                modified_ms: r.get(3)?,
            })
        },
    )
    .optional()
}

/// How many components the first ancestor that is a file has, if any.
fn file_ancestor(
    conn: &Connection,
    tenant: &str,
    components: &[String],
) -> rusqlite::Result<Option<usize>> {
    for depth in 1..components.len() {
        if let Some(r) = row(conn, tenant, &key(&components[..depth]))? {
            if !r.is_dir {
                return Ok(Some(depth));
            }
        } else {
            return Ok(None); // a missing ancestor: nothing below it exists
        }
    }
    Ok(None)
}

/// Inserts the missing directories above `components`' last one.
fn make_parents(tx: &Connection, tenant: &str, components: &[String]) -> rusqlite::Result<()> {
    let now = now_ms();
    for depth in 1..components.len() {
        tx.execute(
            "INSERT OR IGNORE INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
             VALUES (?1, ?2, ?3, ?4, 1, NULL, 0, 0, ?5)",
            params![tenant, key(&components[..depth]), key(&components[..depth - 1]), components[depth - 1], now],
        )?;
    }
    Ok(())
}

fn next_version(tx: &Connection) -> rusqlite::Result<i64> {
    tx.query_row(
        "UPDATE claude_memory_counter SET value = value + 1 WHERE id = 0 RETURNING value",
        [],
        |r| r.get(0),
    )
}

impl MemoryStore for SqliteStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        if path.is_root() {
            return Ok(Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            }));
        }
        self.with(path, |conn| {
            Ok(
                row(conn, &self.tenant, &key(path.components()))?.map(|r| Metadata {
                    kind: if r.is_dir {
                        EntryKind::Directory
                    } else {
                        EntryKind::File
                    },
                    len: r.len,
                    modified: if r.is_dir {
                        None
                    } else {
                        to_time(r.modified_ms)
                    },
                }),
            )
        })
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        self.with(path, |conn| {
            let found = conn
                .query_row(
                    "SELECT is_dir, len, version, CASE WHEN len <= ?3 THEN data END FROM claude_memory_entries
                     WHERE tenant = ?1 AND path = ?2",
                    params![self.tenant, key(path.components()), i64::try_from(limit).unwrap_or(i64::MAX)],
                    |r| Ok((r.get::<_, bool>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, Option<Vec<u8>>>(3)?)),
                )
                .optional()?;
            match found {
                None => Err(StoreError::NotFound { path: path.clone() }.into()),
                Some((true, ..)) => Err(StoreError::IsADirectory { path: path.clone() }.into()),
                Some((false, len, _, None)) => Err(StoreError::TooLarge { path: path.clone(), len: len as u64 }.into()),
                Some((false, _, version, Some(data))) => Ok(FileContent {
                    data,
                    version: Version::new(version as u128),
                }),
            }
        })
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        if path.is_root() {
            return Err(StoreError::write_to_root(path, mode));
        }
        let comps = path.components();
        self.mutate(path, |tx| {
            if let Some(depth) = file_ancestor(tx, &self.tenant, comps)? {
                return Err(StoreError::parent_not_directory(path, depth).into());
            }
            let existing = row(tx, &self.tenant, &key(comps))?
                .map(|r| (!r.is_dir).then_some(Version::new(r.version as u128)));
            StoreError::check_write(path, existing, mode)?;
            make_parents(tx, &self.tenant, comps)?;
            let version = next_version(tx)?;
            tx.execute(
                "INSERT OR REPLACE INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8)",
                params![
                    self.tenant,
                    key(comps),
                    key(&comps[..comps.len() - 1]),
                    comps[comps.len() - 1],
                    data,
                    data.len() as i64,
                    version,
                    now_ms()
                ],
            )?;
            Ok(Version::new(version as u128))
        })
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let k = key(dir.components());
        self.with(dir, |conn| {
            if !dir.is_root() {
                match row(conn, &self.tenant, &k)? {
                    None => return Err(StoreError::NotFound { path: dir.clone() }.into()),
                    Some(r) if !r.is_dir => return Err(StoreError::NotADirectory { path: dir.clone() }.into()),
                    Some(_) => {}
                }
            }
            let mut stmt = conn.prepare_cached(
                "SELECT name, is_dir, len, modified_ms FROM claude_memory_entries WHERE tenant = ?1 AND parent = ?2",
            )?;
            let rows = stmt.query_map(params![self.tenant, k], |r| {
                let is_dir: bool = r.get(1)?;
                Ok(DirEntry {
                    name: r.get(0)?,
                    kind: if is_dir { EntryKind::Directory } else { EntryKind::File },
                    len: r.get::<_, i64>(2)? as u64,
                    modified: if is_dir { None } else { to_time(r.get(3)?) },
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        if path.is_root() {
            return Err(StoreError::delete_root(path));
        }
        let k = key(path.components());
        self.mutate(path, |tx| {
            if row(tx, &self.tenant, &k)?.is_none() {
                return Err(StoreError::NotFound { path: path.clone() }.into());
            }
            let (lo, hi) = below(&k);
            tx.execute(
                "DELETE FROM claude_memory_entries WHERE tenant = ?1 AND (path = ?2 OR (path >= ?3 AND path < ?4))",
                params![self.tenant, k, lo, hi],
            )?;
            Ok(())
        })
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let (fk, tk) = (key(from.components()), key(to.components()));
        self.mutate(from, |tx| {
            if row(tx, &self.tenant, &fk)?.is_none() {
                return Err(StoreError::NotFound { path: from.clone() }.into());
            }
            if to.is_root() || row(tx, &self.tenant, &tk)?.is_some() {
                return Err(StoreError::AlreadyExists { path: to.clone() }.into());
            }
            let tc = to.components();
            if let Some(depth) = file_ancestor(tx, &self.tenant, tc)? {
                return Err(StoreError::parent_not_directory(to, depth).into());
            }
            make_parents(tx, &self.tenant, tc)?;
            let (lo, hi) = below(&fk);
            tx.execute(
                "UPDATE claude_memory_entries SET
                    path = ?5 || substr(path, length(?2) + 1),
                    parent = CASE WHEN path = ?2 THEN ?6 ELSE ?5 || substr(parent, length(?2) + 1) END,
                    name = CASE WHEN path = ?2 THEN ?7 ELSE name END
                 WHERE tenant = ?1 AND (path = ?2 OR (path >= ?3 AND path < ?4))",
                params![self.tenant, fk, lo, hi, tk, key(&tc[..tc.len() - 1]), tc[tc.len() - 1]],
            )?;
            Ok(())
        })
    }

    fn total_size(&self) -> StoreResult<u64> {
        self.with(&MemoryPath::root(), |conn| {
            let n: i64 = conn.query_row(
                "SELECT COALESCE(SUM(len), 0) FROM claude_memory_entries WHERE tenant = ?1 AND is_dir = 0",
                params![self.tenant],
                |r| r.get(0),
            )?;
            Ok(n as u64)
        })
    }
}
