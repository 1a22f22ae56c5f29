//! `PostgresStore`: memories in a PostgreSQL database, shared by many
//! agent processes on many machines (feature `postgres`).
//!
//! The PostgreSQL dialect of the shared layout and operations
//! ([`super::ops`]), with byte-order (`COLLATE "C"`) text so listings and
//! subtree ranges match the other backends exactly. Each mutation is one
//! transaction holding a per-tenant advisory lock, so compare-and-swap
//! edits, create-if-absent and whole-directory renames are atomic across
//! every connection of every node; reads take no lock.

use std::sync::{Condvar, Mutex, PoisonError};

use postgres::types::ToSql;
use postgres::{Client, GenericClient, NoTls, Transaction};

use super::{
    Backend, Columns, Commit, Dialect, DriverError, Fail, Param, SqlStore, columns, schema,
};
use crate::tenant::TenantId;

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
pub(super) struct Pool {
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
    #[error("{}", schema::newer(i64::from(*.0)))]
    NewerSchema(i32),
}

/// A store in a PostgreSQL database. Cloning shares the pool.
#[derive(Clone)]
pub struct PostgresStore(pub(super) SqlStore<Pool>);

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let SqlStore { db: pool, tenant } = &self.0;
        f.debug_struct("PostgresStore")
            .field("tenant", tenant)
            .field("max_connections", &pool.max)
            .finish_non_exhaustive()
    }
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
                if let Some(v) = schema::check_version(&mut tx)? {
                    // Leave a newer schema alone; refuse to use it.
                    let v = i32::try_from(v).unwrap_or(i32::MAX);
                    return Err(PostgresError::NewerSchema(v));
                }
                tx.commit()?;
            }
        }
        Ok(PostgresStore(SqlStore::new(pool)))
    }

    /// The same database, seen as `tenant`'s store.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        PostgresStore(self.0.for_tenant(tenant))
    }
}

/// The pool a store's clones share.
impl Backend for Pool {
    type Conn<'c> = Client;
    type Tx<'c> = Transaction<'c>;

    fn with<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, Fail>) -> Result<T, Fail> {
        let mut loan = self.get()?;
        let client = loan.client.as_mut().ok_or(Fail::Invalid("no connection"))?;
        f(client)
    }

    /// A transaction holding `tenant`'s advisory lock.
    fn mutate<T>(
        &self,
        tenant: &str,
        f: impl FnOnce(Transaction<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.with(|client| {
            let mut tx = client.transaction()?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('claude-memory:' || $1, 0))",
                &[&tenant],
            )?;
            f(tx)
        })
    }
}

impl DriverError for postgres::Error {}

columns!(postgres::Row, postgres::Error, try_get);

/// The driver's view of `params`.
fn params<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| -> &(dyn ToSql + Sync) {
            match p {
                Param::Text(s) => s,
                Param::Int(n) => n,
                Param::Bytes(b) => b,
            }
        })
        .collect()
}

/// A pooled connection or a transaction on one, as a [`Dialect`].
impl<G: GenericClient> Dialect for G {
    type Error = postgres::Error;

    const INSERT_DIR: &'static str = "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES ($1, $2, $3, $4, TRUE, NULL, 0, 0, $5) ON CONFLICT (tenant, path) DO NOTHING";

    const UPSERT_FILE: &'static str = "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES ($1, $2, $3, $4, FALSE, $5, $6, $7, $8)
        ON CONFLICT (tenant, path) DO UPDATE SET data = EXCLUDED.data, len = EXCLUDED.len,
            version = EXCLUDED.version, modified_ms = EXCLUDED.modified_ms";

    const NEXT_VERSION: &'static str = "SELECT nextval('claude_memory_version')";

    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = postgres::Error>) -> Result<T, postgres::Error>,
    ) -> Result<Option<T>, postgres::Error> {
        GenericClient::query_opt(self, sql, &params(ps))?
            .map(|r| f(&r))
            .transpose()
    }

    fn fetch_all<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        mut f: impl FnMut(&dyn Columns<Error = postgres::Error>) -> Result<T, postgres::Error>,
    ) -> Result<Vec<T>, postgres::Error> {
        GenericClient::query(self, sql, &params(ps))?
            .iter()
            .map(|r| f(r))
            .collect()
    }

    fn run(&mut self, sql: &str, ps: &[Param<'_>]) -> Result<(), postgres::Error> {
        GenericClient::execute(self, sql, &params(ps))?;
        Ok(())
    }
}

impl Commit for Transaction<'_> {
    fn commit(self) -> Result<(), postgres::Error> {
        Transaction::commit(self)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_newer_schema_error_keeps_its_text() {
        assert_eq!(
            super::PostgresError::NewerSchema(7).to_string(),
            "the database has claude-memory schema version 7; this crate knows 1"
        );
    }
}
