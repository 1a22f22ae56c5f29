//! `PostgresStore`: memories in a PostgreSQL database, shared by many
//! agent processes on many machines (feature `postgres`).
//!
//! Same layout as `SqliteStore`: one row per file or directory, keyed by
//! `(tenant, path)`, with byte-order (`COLLATE "C"`) text so listings and
//! subtree ranges match the other backends exactly. Each mutation is one
//! transaction holding a per-tenant advisory lock, so compare-and-swap
//! edits, create-if-absent and whole-directory renames are atomic across
//! every connection of every node; reads take no lock.

use std::sync::{Condvar, Mutex, PoisonError};

use postgres::{Client, NoTls, Transaction};

use super::sql::{below, key, now_ms, to_time};
use super::{
    DirEntry, EntryKind, FileContent, MemoryStore, Metadata, StoreError, StoreResult, Version,
    WriteMode,
};
use crate::path::MemoryPath;
use crate::tenant::TenantId;

const SCHEMA_VERSION: i32 = 1;

/// Serializes schema creation between processes starting together.
const SCHEMA_LOCK: i64 = 0x636c_6175_6465_6d31; // "claudem1"

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS claude_memory_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claude_memory_entries (
    tenant TEXT COLLATE "C" NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    is_dir BOOLEAN NOT NULL,
    data BYTEA,
    len BIGINT NOT NULL,
    version BIGINT NOT NULL,
    modified_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, path)
);
CREATE INDEX IF NOT EXISTS claude_memory_children ON claude_memory_entries (tenant, parent);
CREATE SEQUENCE IF NOT EXISTS claude_memory_version;
"#;

/// A small blocking connection pool.
struct Pool {
    url: String,
    max: usize,
    state: Mutex<(Vec<Client>, usize)>,
    freed: Condvar,
}

/// A connection on loan from the pool, returned on drop.
struct Loan<'a> {
    pool: &'a Pool,
    client: Option<Client>,
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        let mut state = self
            .pool
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match self.client.take() {
            Some(c) if !c.is_closed() => state.0.push(c),
            _ => state.1 -= 1, // a broken connection is dropped; a new one may open
        }
        self.pool.freed.notify_one();
    }
}

impl Pool {
    fn get(&self) -> Result<Loan<'_>, postgres::Error> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(client) = state.0.pop() {
                return Ok(Loan {
                    pool: self,
                    client: Some(client),
                });
            }
            if state.1 < self.max {
                state.1 += 1;
                drop(state);
                return match Client::connect(&self.url, NoTls) {
                    Ok(client) => Ok(Loan {
                        pool: self,
                        client: Some(client),
                    }),
                    Err(e) => {
                        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                        state.1 -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            state = self
                .freed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Why [`PostgresStore::connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresError {
    /// The database (connection, schema creation).
    #[error(transparent)]
    Db(#[from] postgres::Error),
    /// The database was set up by a newer version of this crate.
    #[error("the database has claude-memory schema version {0}; this crate knows 1")]
    NewerSchema(i32),
}

/// A store in a PostgreSQL database. Cloning shares the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pool: std::sync::Arc<Pool>,
    tenant: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("tenant", &self.tenant)
            .field("max_connections", &self.pool.max)
            .finish_non_exhaustive()
    }
}

/// A failure inside a transaction: a store error, or PostgreSQL's.
enum Fail {
    Store(StoreError),
    Sql(postgres::Error),
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

struct Row {
    is_dir: bool,
    len: i64,
    version: i64,
    modified_ms: i64,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) with a pool of at
    /// most `max_connections`, and creates or checks the schema.
    pub fn connect(url: &str, max_connections: usize) -> Result<Self, PostgresError> {
        let pool = Pool {
            url: url.to_owned(),
            max: max_connections.max(1),
            state: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
        };
        {
            let mut loan = pool.get()?;
            if let Some(client) = loan.client.as_mut() {
                let mut tx = client.transaction()?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
                tx.batch_execute(SCHEMA)?;
                let found = tx.query_opt("SELECT version FROM claude_memory_schema", &[])?;
                match found.map(|r| r.try_get::<_, i32>(0)).transpose()? {
                    None => {
                        tx.execute(
                            "INSERT INTO claude_memory_schema (version) VALUES ($1)",
                            &[&SCHEMA_VERSION],
                        )?;
                    }
                    // Leave a newer schema alone; refuse to use it.
                    Some(v) if v > SCHEMA_VERSION => return Err(PostgresError::NewerSchema(v)),
                    Some(_) => {}
                }
                tx.commit()?;
            }
        }
        Ok(PostgresStore {
            pool: std::sync::Arc::new(pool),
            tenant: String::new(),
        })
    }

    /// The same database, seen as `tenant`'s store.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        PostgresStore {
            pool: std::sync::Arc::clone(&self.pool),
            tenant: tenant.as_str().to_owned(),
        }
    }

    fn with<T>(
        &self,
        path: &MemoryPath,
        f: impl FnOnce(&mut Client) -> Result<T, Fail>,
    ) -> StoreResult<T> {
        let backend = |e: postgres::Error| StoreError::Backend {
            path: path.clone(),
            source: Box::new(e),
        };
        let mut loan = self.pool.get().map_err(backend)?;
        let Some(client) = loan.client.as_mut() else {
            return Err(StoreError::Invalid {
                path: path.clone(),
                reason: "no connection",
            });
        };
        f(client).map_err(|e| match e {
            Fail::Store(e) => e,
            Fail::Sql(e) => backend(e),
        })
    }

    /// One transaction holding this tenant's write lock.
    fn mutate<T>(
        &self,
        path: &MemoryPath,
        f: impl FnOnce(&mut Transaction<'_>) -> Result<T, Fail>,
    ) -> StoreResult<T> {
        self.with(path, |client| {
            let mut tx = client.transaction()?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('claude-memory:' || $1, 0))",
                &[&self.tenant],
            )?;
            let out = f(&mut tx)?;
            tx.commit()?;
            Ok(out)
        })
    }
}

fn row(
    c: &mut impl postgres::GenericClient,
    tenant: &str,
    path: &str,
) -> Result<Option<Row>, postgres::Error> {
    c.query_opt(
        "SELECT is_dir, len, version, modified_ms FROM claude_memory_entries WHERE tenant = $1 AND path = $2",
        &[&tenant, &path],
    )?
    .map(|r| {
        Ok(Row {
            is_dir: r.try_get(0)?,
            len: r.try_get(1)?,
            version: r.try_get(2)?,
            modified_ms: r.try_get(3)?,
        })
    })
    .transpose()
}

fn file_ancestor(
    c: &mut impl postgres::GenericClient,
    tenant: &str,
    components: &[String],
) -> Result<Option<usize>, postgres::Error> {
    for depth in 1..components.len() {
        match row(c, tenant, &key(&components[..depth]))? {
            Some(r) if !r.is_dir => return Ok(Some(depth)),
            Some(_) => {}
            None => return Ok(None),
        }
    }
    Ok(None)
}

fn make_parents(
    tx: &mut Transaction<'_>,
    tenant: &str,
    components: &[String],
) -> Result<(), postgres::Error> {
    let now = now_ms();
    for depth in 1..components.len() {
        tx.execute(
            "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
             VALUES ($1, $2, $3, $4, TRUE, NULL, 0, 0, $5) ON CONFLICT (tenant, path) DO NOTHING",
            &[&tenant, &key(&components[..depth]), &key(&components[..depth - 1]), &components[depth - 1], &now],
        )?;
    }
    Ok(())
}

impl MemoryStore for PostgresStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        if path.is_root() {
            return Ok(Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            }));
        }
        self.with(path, |c| {
            Ok(
                row(c, &self.tenant, &key(path.components()))?.map(|r| Metadata {
                    kind: if r.is_dir {
                        EntryKind::Directory
                    } else {
                        EntryKind::File
                    },
                    len: r.len as u64,
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(path, |c| {
            let found = c.query_opt(
                "SELECT is_dir, len, version, CASE WHEN len <= $3 THEN data END FROM claude_memory_entries
                 WHERE tenant = $1 AND path = $2",
                &[&self.tenant, &key(path.components()), &limit],
            )?;
            let Some(r) = found else {
                return Err(StoreError::NotFound { path: path.clone() }.into());
            };
            let (is_dir, len, version, data): (bool, i64, i64, Option<Vec<u8>>) =
                (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?);
            match (is_dir, data) {
                (true, _) => Err(StoreError::IsADirectory { path: path.clone() }.into()),
                (false, None) => Err(StoreError::TooLarge { path: path.clone(), len: len as u64 }.into()),
                (false, Some(data)) => Ok(FileContent { data, version: Version::new(version as u128) }),
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
            let version: i64 = tx.query_one("SELECT nextval('claude_memory_version')", &[])?.try_get(0)?;
            tx.execute(
                "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
                 VALUES ($1, $2, $3, $4, FALSE, $5, $6, $7, $8)
                 ON CONFLICT (tenant, path) DO UPDATE SET data = EXCLUDED.data, len = EXCLUDED.len,
                     version = EXCLUDED.version, modified_ms = EXCLUDED.modified_ms",
                &[
                    &self.tenant,
                    &key(comps),
                    &key(&comps[..comps.len() - 1]),
                    &comps[comps.len() - 1],
                    &data,
                    &(data.len() as i64),
                    &version,
                    &now_ms(),
                ],
            )?;
            Ok(Version::new(version as u128))
        })
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let k = key(dir.components());
        self.with(dir, |c| {
            if !dir.is_root() {
                match row(c, &self.tenant, &k)? {
                    None => return Err(StoreError::NotFound { path: dir.clone() }.into()),
                    Some(r) if !r.is_dir => return Err(StoreError::NotADirectory { path: dir.clone() }.into()),
                    Some(_) => {}
                }
            }
            let rows = c.query(
                "SELECT name, is_dir, len, modified_ms FROM claude_memory_entries WHERE tenant = $1 AND parent = $2",
                &[&self.tenant, &k],
            )?;
            let entries = rows
                .into_iter()
                .map(|r| {
                    let is_dir: bool = r.try_get(1)?;
                    Ok(DirEntry {
                        name: r.try_get(0)?,
                        kind: if is_dir { EntryKind::Directory } else { EntryKind::File },
                        len: r.try_get::<_, i64>(2)? as u64,
                        modified: if is_dir { None } else { to_time(r.try_get(3)?) },
                    })
                })
                .collect::<Result<Vec<_>, postgres::Error>>()?;
            Ok(entries)
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
                "DELETE FROM claude_memory_entries WHERE tenant = $1 AND (path = $2 OR (path >= $3 AND path < $4))",
                &[&self.tenant, &k, &lo, &hi],
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
                    path = $5 || substr(path, length($2) + 1),
                    parent = CASE WHEN path = $2 THEN $6 ELSE $5 || substr(parent, length($2) + 1) END,
                    name = CASE WHEN path = $2 THEN $7 ELSE name END
                 WHERE tenant = $1 AND (path = $2 OR (path >= $3 AND path < $4))",
                &[&self.tenant, &fk, &lo, &hi, &tk, &key(&tc[..tc.len() - 1]), &tc[tc.len() - 1]],
            )?;
            Ok(())
        })
    }

    fn total_size(&self) -> StoreResult<u64> {
        self.with(&MemoryPath::root(), |c| {
            let n: i64 = c
                .query_one(
                    "SELECT COALESCE(SUM(len), 0)::BIGINT FROM claude_memory_entries WHERE tenant = $1 AND NOT is_dir",
                    &[&self.tenant],
                )?
                .try_get(0)?;
            Ok(n as u64)
        })
    }
}
