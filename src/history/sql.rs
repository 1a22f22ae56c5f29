//! History logs in a database: the reserved table `claude_memory_history`
//! beside the store's own tables, one history per scope (a tenant id, or
//! `""` for the whole database).

use std::sync::{Mutex, PoisonError};

use super::{ChangeOp, HistoryError, HistoryLog, Revision, from_nanos, to_nanos};

fn db_error(e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Log(e.to_string())
}

fn op_of(text: &str) -> ChangeOp {
    match text {
        "created" => ChangeOp::Created,
        "deleted" => ChangeOp::Deleted,
        "renamed" => ChangeOp::Renamed,
        _ => ChangeOp::Modified,
    }
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteLog;

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use rusqlite::{Connection, params};

    const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claude_memory_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    file INTEGER NOT NULL,
    op TEXT NOT NULL,
    path TEXT NOT NULL,
    from_path TEXT,
    time_ns INTEGER NOT NULL,
    actor TEXT,
    call TEXT,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB,
    redacted INTEGER NOT NULL DEFAULT 0,
    note TEXT
);";

    /// The history of a [`SqliteStore`](crate::SqliteStore), in the table
    /// `claude_memory_history` of the same database file, through a
    /// connection of its own.
    ///
    /// Its commits are not synced (`synchronous = NORMAL` in WAL mode): the
    /// store's own commit, synced, follows each version in the same
    /// write-ahead log, and makes it durable too. So a version costs one
    /// small unsynced transaction, plus the page cache each connection
    /// drops when it sees the other's commit.
    ///
    /// `path` may also be a database file of its own (say
    /// `memory.db.claude-memory-history`): no cache is dropped, so it is
    /// cheaper (about 1.2x a write without history instead of about 1.35x
    /// in `bench/benches/history.rs`), but the store's commits no longer
    /// carry the versions to disk: as with an unsynced [`FileLog`](crate::history::FileLog),
    /// a kill loses nothing, and after a power cut the next open records
    /// a lost version's change as a `repair` version, without its actor.
    pub struct SqliteLog {
        conn: Mutex<Connection>,
        scope: String,
    }

    impl std::fmt::Debug for SqliteLog {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("SqliteLog")
                .field("scope", &self.scope)
                .finish_non_exhaustive()
        }
    }

    impl SqliteLog {
        /// The log of the SQLite store in `path`, for `scope` (the tenant id
        /// of a [`for_tenant`](crate::SqliteStore::for_tenant) store, else
        /// `""`).
        pub fn open(path: impl AsRef<std::path::Path>, scope: &str) -> Result<Self, HistoryError> {
            let conn = Connection::open(path).map_err(db_error)?;
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(db_error)?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db_error)?;
            Self::init(conn, scope)
        }

        /// A log in a private in-memory database (for tests).
        pub fn open_in_memory(scope: &str) -> Result<Self, HistoryError> {
            Self::init(Connection::open_in_memory().map_err(db_error)?, scope)
        }

        fn init(conn: Connection, scope: &str) -> Result<Self, HistoryError> {
            conn.busy_timeout(std::time::Duration::from_secs(30))
                .map_err(db_error)?;
            conn.execute_batch(SCHEMA).map_err(db_error)?;
            Ok(SqliteLog {
                conn: Mutex::new(conn),
                scope: scope.to_owned(),
            })
        }
    }

    impl HistoryLog for SqliteLog {
        fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
            let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            // One version (every change but a directory's) is one INSERT in
            // autocommit; a batch is one transaction.
            let tx = if versions.len() > 1 {
                Some(conn.unchecked_transaction().map_err(db_error)?)
            } else {
                None
            };
            let db: &Connection = match &tx {
                Some(tx) => tx,
                None => &conn,
            };
            {
                // AUTOINCREMENT: ids increase, across scopes and processes,
                // and a dropped version's id is never given out again.
                let mut insert = db
                    .prepare_cached(
                        "INSERT INTO claude_memory_history (scope, file, op, path, from_path, \
                         time_ns, actor, call, sha256, size, content, redacted, note) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    )
                    .map_err(db_error)?;
                for v in versions.iter_mut() {
                    insert
                        .execute(params![
                            self.scope,
                            i64_of(v.file),
                            v.op.as_str(),
                            v.path,
                            v.from,
                            i64_of(to_nanos(v.time)),
                            v.actor,
                            v.call,
                            v.sha256,
                            i64_of(v.size),
                            v.content,
                            v.redacted,
                            v.note,
                        ])
                        .map_err(db_error)?;
                    v.id = u64_of(db.last_insert_rowid());
                }
            }
            match tx {
                Some(tx) => tx.commit().map_err(db_error),
                None => Ok(()),
            }
        }

        fn load(&self) -> Result<Vec<Revision>, HistoryError> {
            let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let mut query = conn
                .prepare_cached(
                    "SELECT id, file, op, path, from_path, time_ns, actor, call, sha256, size, \
                     content, redacted, note FROM claude_memory_history WHERE scope = ?1 ORDER BY id",
                )
                .map_err(db_error)?;
            let rows = query
                .query_map([&self.scope], |r| {
                    Ok(Revision {
                        id: u64_of(r.get(0)?),
                        file: u64_of(r.get(1)?),
                        op: op_of(&r.get::<_, String>(2)?),
                        path: r.get(3)?,
                        from: r.get(4)?,
                        time: from_nanos(u64_of(r.get(5)?)),
                        actor: r.get(6)?,
                        call: r.get(7)?,
                        sha256: r.get(8)?,
                        size: u64_of(r.get(9)?),
                        content: r.get(10)?,
                        redacted: r.get(11)?,
                        note: r.get(12)?,
                    })
                })
                .map_err(db_error)?;
            rows.collect::<Result<_, _>>().map_err(db_error)
        }

        fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
            let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let tx = conn.transaction().map_err(db_error)?;
            for id in ids {
                tx.execute(
                    "DELETE FROM claude_memory_history WHERE scope = ?1 AND id = ?2",
                    params![self.scope, i64_of(*id)],
                )
                .map_err(db_error)?;
            }
            tx.commit().map_err(db_error)
        }

        fn redact(&self, id: u64) -> Result<bool, HistoryError> {
            let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let n = conn
                .execute(
                    "UPDATE claude_memory_history SET content = NULL, redacted = 1 \
                     WHERE scope = ?1 AND id = ?2",
                    params![self.scope, i64_of(id)],
                )
                .map_err(db_error)?;
            Ok(n > 0)
        }
    }
}

#[cfg(feature = "postgres")]
pub use self::pg::PostgresLog;

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use postgres::{Client, NoTls};

    const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS claude_memory_history (
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
);
CREATE TABLE IF NOT EXISTS claude_memory_history_ids (
    scope TEXT PRIMARY KEY,
    last_id BIGINT NOT NULL
);";

    /// The history of a [`PostgresStore`](crate::PostgresStore), in the
    /// table `claude_memory_history` of the same database, through a
    /// connection of its own.
    ///
    /// Its commits use `synchronous_commit = off`: the store's own commit,
    /// which follows each version, flushes the write-ahead log past it.
    /// Ids stay monotonic across processes (a per-scope counter row).
    pub struct PostgresLog {
        client: Mutex<Client>,
        scope: String,
    }

    impl std::fmt::Debug for PostgresLog {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("PostgresLog")
                .field("scope", &self.scope)
                .finish_non_exhaustive()
        }
    }

    /// The advisory lock key of a scope's id sequence.
    fn lock_key(scope: &str) -> i64 {
        let mut h: i64 = 0x636d_6869_7374; // "cmhist"
        for b in scope.bytes() {
            h = h.wrapping_mul(31).wrapping_add(i64::from(b));
        }
        h
    }

    impl PostgresLog {
        /// The log of the PostgreSQL store at `url`, for `scope` (the
        /// tenant id of a [`for_tenant`](crate::PostgresStore::for_tenant)
        /// store, else `""`).
        pub fn connect(url: &str, scope: &str) -> Result<Self, HistoryError> {
            let mut client = Client::connect(url, NoTls).map_err(db_error)?;
            client
                .batch_execute("SET synchronous_commit = off")
                .map_err(db_error)?;
            let mut tx = client.transaction().map_err(db_error)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key("schema")])
                .map_err(db_error)?;
            tx.batch_execute(SCHEMA).map_err(db_error)?;
            tx.commit().map_err(db_error)?;
            Ok(PostgresLog {
                client: Mutex::new(client),
                scope: scope.to_owned(),
            })
        }
    }

    impl HistoryLog for PostgresLog {
        fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
            let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            let mut tx = client.transaction().map_err(db_error)?;
            // The counter row's lock orders concurrent appends; a dropped
            // version's id is never given out again.
            let last: i64 = tx
                .query_one(
                    "INSERT INTO claude_memory_history_ids (scope, last_id) VALUES ($1, $2) \
                     ON CONFLICT (scope) DO UPDATE \
                     SET last_id = claude_memory_history_ids.last_id + $2 RETURNING last_id",
                    &[&self.scope, &i64_of(versions.len() as u64)],
                )
                .map_err(db_error)?
                .get(0);
            let insert = tx
                .prepare(
                    "INSERT INTO claude_memory_history (scope, id, file, op, path, from_path, \
                     time_ns, actor, call, sha256, size, content, redacted, note) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                )
                .map_err(db_error)?;
            let mut id = u64_of(last).saturating_sub(versions.len() as u64);
            for v in versions.iter_mut() {
                id += 1;
                v.id = id;
                tx.execute(
                    &insert,
                    &[
                        &self.scope,
                        &i64_of(v.id),
                        &i64_of(v.file),
                        &v.op.as_str(),
                        &v.path,
                        &v.from,
                        &i64_of(to_nanos(v.time)),
                        &v.actor,
                        &v.call,
                        &v.sha256,
                        &i64_of(v.size),
                        &v.content,
                        &v.redacted,
                        &v.note,
                    ],
                )
                .map_err(db_error)?;
            }
            tx.commit().map_err(db_error)
        }

        fn load(&self) -> Result<Vec<Revision>, HistoryError> {
            let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            let rows = client
                .query(
                    "SELECT id, file, op, path, from_path, time_ns, actor, call, sha256, size, \
                     content, redacted, note FROM claude_memory_history WHERE scope = $1 ORDER BY id",
                    &[&self.scope],
                )
                .map_err(db_error)?;
            Ok(rows
                .iter()
                .map(|r| Revision {
                    id: u64_of(r.get(0)),
                    file: u64_of(r.get(1)),
                    op: op_of(r.get(2)),
                    path: r.get(3),
                    from: r.get(4),
                    time: from_nanos(u64_of(r.get(5))),
                    actor: r.get(6),
                    call: r.get(7),
                    sha256: r.get(8),
                    size: u64_of(r.get(9)),
                    content: r.get(10),
                    redacted: r.get(11),
                    note: r.get(12),
                })
                .collect())
        }

        fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
            let ids: Vec<i64> = ids.iter().map(|&i| i64_of(i)).collect();
            let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            client
                .execute(
                    "DELETE FROM claude_memory_history WHERE scope = $1 AND id = ANY($2)",
                    &[&self.scope, &ids],
                )
                .map_err(db_error)?;
            Ok(())
        }

        fn redact(&self, id: u64) -> Result<bool, HistoryError> {
            let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            let n = client
                .execute(
                    "UPDATE claude_memory_history SET content = NULL, redacted = TRUE \
                     WHERE scope = $1 AND id = $2",
                    &[&self.scope, &i64_of(id)],
                )
                .map_err(db_error)?;
            Ok(n > 0)
        }
    }
}
