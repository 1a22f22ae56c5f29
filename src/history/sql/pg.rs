//! The history log in PostgreSQL: [`PostgresLog`].

use super::*;
use crate::PostgresStore;
use crate::store::sql::{Dialect, Durability, Fail, Param};

/// How long a compaction waits for the history table's exclusive lock
/// before it vacuums in place instead (see `compact`).
const FULL_VACUUM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The table, then its id counter (one statement each: the store's
/// connections run prepared statements).
const SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS claude_memory_history (
scope TEXT NOT NULL,
id BIGINT NOT NULL,
file BIGINT NOT NULL,
op TEXT NOT NULL,
path TEXT NOT NULL,
from_path TEXT,
time_ns BIGINT NOT NULL,
actor TEXT,
call TEXT,
sha256 TEXT NOT NULL,
size BIGINT NOT NULL,
content BYTEA,
redacted BOOLEAN NOT NULL DEFAULT FALSE,
note TEXT,
PRIMARY KEY (scope, id)
)",
    "CREATE TABLE IF NOT EXISTS claude_memory_history_ids (
scope TEXT PRIMARY KEY,
last_id BIGINT NOT NULL
)",
];

fn db_fail(e: Fail) -> HistoryError {
    HistoryError::Log(e.describe())
}

/// The history of a [`PostgresStore`](crate::PostgresStore), in the
/// table `claude_memory_history` of the same database. Ids stay
/// monotonic across processes (a per-scope counter row). Each change
/// holds the scope's advisory lock in a transaction for its whole
/// length ([`exclusive`](HistoryLog::exclusive)); on the store's own pool
/// ([`for_store`](Self::for_store)) the store's changes join that
/// transaction, so a change and its versions commit together.
pub struct PostgresLog {
    db: PostgresStore,
    scope: String,
}

/// One version, with the next id of its scope's counter: one statement,
/// so one round trip a version.
const INSERT: &str = "WITH next AS (
         INSERT INTO claude_memory_history_ids (scope, last_id) VALUES ($1, 1)
         ON CONFLICT (scope) DO UPDATE SET last_id = claude_memory_history_ids.last_id + 1
         RETURNING last_id)
     INSERT INTO claude_memory_history (scope, id, file, op, path, from_path,
         time_ns, actor, call, sha256, size, content, redacted, note)
     SELECT $1, next.last_id, CASE WHEN $2::BIGINT = 0 THEN next.last_id ELSE $2::BIGINT END, $3, $4, NULLIF($5, ''), $6, NULLIF($7, ''),
         NULLIF($8, ''), $9, $10, $11, $12::BIGINT <> 0, NULLIF($13, '')
     FROM next RETURNING id";

impl std::fmt::Debug for PostgresLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLog")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl PostgresLog {
    /// The log of the PostgreSQL store at `url`, for `scope` (the
    /// tenant id of a [`for_tenant`](crate::PostgresStore::for_tenant)
    /// store, else `""`).
    pub fn connect(url: &str, scope: &str) -> Result<Self, HistoryError> {
        let db = PostgresStore::connect(url, 2).map_err(db_error)?;
        Self::connect_on(db, scope)
    }

    /// The log of `store`'s database, for `scope` (the store's tenant id,
    /// `""` for a store with no tenant; any other scope is refused), on
    /// `store`'s own pool: give it the store the
    /// [`HistoryStore`](super::super::HistoryStore) wraps (or a clone).
    /// Each change is then one transaction: the writer lock, the
    /// change's versions and the store's statements (each a savepoint of
    /// it) commit together, so no crash leaves a change without its
    /// version. [`connect`](Self::connect)'s log, on a pool of its own,
    /// commits the versions before the change instead; a crash between
    /// the two leaves versions the next writer or opener checks against
    /// the store.
    pub fn for_store(store: &PostgresStore, scope: &str) -> Result<Self, HistoryError> {
        super::same_scope(store.tenant(), scope)?;
        Self::connect_on(store.clone(), scope)
    }

    fn connect_on(db: PostgresStore, scope: &str) -> Result<Self, HistoryError> {
        db.transaction("\u{1}history-schema", |tx| {
            // The indexes are added to a 0.4 table here, once.
            for statement in SCHEMA.iter().chain(&INDEXES).chain([&CHECKPOINT_TABLE]) {
                tx.run(statement, &[])?;
            }
            tx.run(
                "INSERT INTO claude_memory_history_ids (scope, last_id) VALUES ($1, 0)
                 ON CONFLICT (scope) DO NOTHING",
                &[Param::Text(scope)],
            )?;
            fix_files(tx, scope)?;
            Ok(())
        })
        .map_err(db_fail)?;
        Ok(PostgresLog {
            db,
            scope: scope.to_owned(),
        })
    }

    /// Whether the database at `url` keeps a history for `scope` (a
    /// [`connect`](Self::connect) made it), creating nothing: so every
    /// change to such a store is recorded, and the history commands
    /// refuse a store that has none.
    pub fn exists(url: &str, scope: &str) -> Result<bool, HistoryError> {
        let db = PostgresStore::connect(url, 1).map_err(db_error)?;
        Self::exists_in(&db, scope)
    }

    /// [`exists`](Self::exists), on `store`'s own pool.
    pub fn exists_in(store: &PostgresStore, scope: &str) -> Result<bool, HistoryError> {
        store.connection(|c| {
            let table = c
                .fetch_opt(
                    "SELECT CASE WHEN to_regclass('claude_memory_history_ids') IS NULL THEN 0::BIGINT ELSE 1::BIGINT END",
                    &[],
                    |r| r.int(0),
                )?
                .unwrap_or(0);
            if table == 0 {
                return Ok(false);
            }
            Ok(c.fetch_opt(
                "SELECT 1::BIGINT FROM claude_memory_history_ids WHERE scope = $1",
                &[Param::Text(scope)],
                |r| r.int(0),
            )?
            .is_some())
        })
        .map_err(db_fail)
    }

    /// The last id given out in this scope, read under the change lock.
    fn last_id<D: Dialect<Error = crate::PostgresError>>(
        &self,
        db: &mut D,
    ) -> Result<u64, crate::PostgresError> {
        Ok(u64_of(
            db.fetch_opt(
                "SELECT last_id FROM claude_memory_history_ids WHERE scope = $1",
                &[Param::Text(&self.scope)],
                |r| r.int(0),
            )?
            .unwrap_or(0),
        ))
    }

    /// The lock every writer of this scope holds for a change.
    fn change_lock(&self) -> String {
        format!("\u{1}history-change:{}", self.scope)
    }

    /// The advisory lock of this scope's appends.
    fn lock(&self) -> String {
        format!("\u{1}history:{}", self.scope)
    }
}

impl HistoryLog for PostgresLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        if versions.is_empty() {
            return Ok(());
        }
        // Unsynced: the store's change that follows commits synced on the
        // same server, which flushes the WAL up to its own record and so
        // this version's with it: one fsync a change instead of two.
        let ids = self
            .db
            .transaction_with(&self.lock(), Durability::Unsynced, |tx| {
                Ok(insert(tx, INSERT, None, &self.scope, versions)?)
            })
            .map_err(db_fail)?;
        for (v, id) in versions.iter_mut().zip(ids) {
            v.id = id;
            if v.file == 0 {
                v.file = id; // as the row has it (see `insert`)
            }
        }
        Ok(())
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        self.db
            .reading(|c| Ok(get(c, &self.scope, id)?))
            .map_err(db_fail)
    }

    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        self.db
            .reading(|c| Ok(find(c, &self.scope, filter, order, limit)?))
            .map_err(db_fail)
    }

    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        self.db
            .reading(|c| Ok(checkpoint(c, &self.scope)?))
            .map_err(db_fail)
    }

    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.db
            .transaction(&self.lock(), |tx| {
                Ok(save_checkpoint(tx, &self.scope, data)?)
            })
            .map_err(db_fail)
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.db
            .transaction(&self.lock(), |tx| Ok(drop_ids(tx, &self.scope, ids)?))
            .map_err(db_fail)
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.db
            .transaction(&self.lock(), |tx| {
                Ok(set_content(tx, &self.scope, id, None, true)?)
            })
            .map_err(db_fail)
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.db
            .transaction(&self.lock(), |tx| {
                Ok(set_content(tx, &self.scope, id, Some(&content), redacted)?)
            })
            .map_err(db_fail)
    }

    /// Rewrites the history table (`VACUUM (FULL)`), so erased rows'
    /// bytes leave its heap files (what stays in the WAL, backups and
    /// replicas: see the README). The rewrite needs the table's exclusive
    /// lock, which every tenant's appends and reads share: it waits at
    /// most `FULL_VACUUM_WAIT` (2 s) for it, so a busy database never stalls
    /// (or times out) other sessions behind a prune, and otherwise
    /// vacuums in place (`VACUUM`, no exclusive lock: the rows are freed,
    /// their bytes may stay in free space until it is reused; the README
    /// says to run `VACUUM FULL` in a quiet moment then). CI saw the
    /// unbounded wait fail a prune with a lock timeout under load.
    fn compact(&self) -> Result<(), HistoryError> {
        self.db
            .connection(|c| {
                c.run(
                    &format!("SET lock_timeout = '{}ms'", FULL_VACUUM_WAIT.as_millis()),
                    &[],
                )?;
                let full = c.run("VACUUM (FULL) claude_memory_history", &[]);
                // Back to the pool's setting, whatever the rewrite did.
                c.run("RESET lock_timeout", &[])?;
                match full {
                    Err(crate::PostgresError::LockTimeout(_)) => {
                        c.run("VACUUM claude_memory_history", &[])?;
                        Ok(())
                    }
                    other => Ok(other?),
                }
            })
            .map_err(db_fail)
    }

    /// A transaction holding this scope's change lock (an advisory
    /// lock every process writing this history takes) for the whole
    /// change. On the store's pool, the change's appends and the store's
    /// statements on this thread join it.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let mut ran = false;
        self.db
            .transaction(&self.change_lock(), |tx| {
                let last = self.last_id(tx)?;
                if !ran {
                    ran = true;
                    change(last);
                }
                Ok(())
            })
            .map_err(db_fail)
    }

    /// Yes: the scope's advisory lock, held by every writer's change
    /// transaction.
    fn locks_writers(&self) -> bool {
        true
    }
}
