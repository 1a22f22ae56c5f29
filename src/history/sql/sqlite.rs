//! The history log in SQLite: [`SqliteLog`].

use std::sync::{Mutex, PoisonError};

use super::*;
use crate::store::sql::Lite;
use rusqlite::Connection;

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

/// One version; AUTOINCREMENT gives ids that increase across scopes and
/// processes and never come back after a drop.
const INSERT: &str = "INSERT INTO claude_memory_history (scope, file, op, path, from_path,
        time_ns, actor, call, sha256, size, content, redacted, note)
    VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, NULLIF($7, ''), NULLIF($8, ''), $9, $10, $11,
        CAST($12 AS BIGINT) <> 0, NULLIF($13, ''))
    RETURNING id";

/// A file's first version gets its own id as its file.
const FIX_FILE: &str = "UPDATE claude_memory_history SET file = id WHERE id = $1 AND file = 0";

/// The history of a [`SqliteStore`](crate::SqliteStore), in a table
/// `claude_memory_history`.
///
/// - [`for_store`](Self::for_store): in the store's own database, on
///   the store's connection. An edit's version is written inside the
///   edit's transaction and commits (synced) with it; other changes'
///   versions commit just before them.
/// - [`open`](Self::open): in a database file of its own (say
///   `memory.db.claude-memory-history`, what the CLI uses), whose
///   commits are not synced (`synchronous = NORMAL` in WAL mode): as
///   with an unsynced [`FileLog`](crate::history::FileLog), a kill loses
///   nothing, and after a power cut the next open records a lost
///   version's change as a `repair` version, without its actor.
pub struct SqliteLog {
    conn: Source,
    scope: String,
    /// The writer lock shared by every process using this database
    /// file (a `flock` on `PATH-lock` beside it; [`open`](Self::open)
    /// only), and whether [`HistoryLog::exclusive`] holds it now.
    lock: Option<(std::fs::File, Mutex<bool>)>,
}

/// Where a [`SqliteLog`]'s statements run.
enum Source {
    /// A connection of its own (a database file of its own).
    Own(Mutex<Connection>),
    /// The store's connection: inside the store's transaction when the
    /// store is changing, so a version commits with its change.
    Shared(crate::SqliteStore),
}

impl std::fmt::Debug for SqliteLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteLog")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl SqliteLog {
    /// The log of `store` in its own database, on its own connection,
    /// for `scope`: the tenant id of a
    /// [`for_tenant`](crate::SqliteStore::for_tenant) store, else `""`
    /// (any other scope is refused: two tenants sharing one would take
    /// each other's versions for changes that never happened). An edit's version is written inside the store's
    /// transaction, so it commits (durably) with the edit or not at all.
    pub fn for_store(store: &crate::SqliteStore, scope: &str) -> Result<Self, HistoryError> {
        super::same_scope(store.tenant(), scope)?;
        store.with_connection(|conn| schema(conn, scope))?;
        store
            .with_connection(|conn| conn.pragma_update(None, "secure_delete", "ON"))
            .map_err(db_error)?;
        // The writer lock of every process writing this database's
        // history: a `flock` on `PATH-history-lock` beside it (none for
        // an in-memory database, which one process alone can reach).
        let path = store
            .with_connection(|conn| conn.path().map(str::to_owned))
            .filter(|p| !p.is_empty());
        let lock = match path {
            Some(path) => Some((
                lock_file(format!("{path}-history-lock"))?,
                Mutex::new(false),
            )),
            None => None,
        };
        Ok(SqliteLog {
            conn: Source::Shared(store.clone()),
            scope: scope.to_owned(),
            lock,
        })
    }

    /// A log in the SQLite database file `path` of its own (say
    /// `memory.db.claude-memory-history`), for `scope`. Not the
    /// store's own file: the store holds its write lock while an edit
    /// runs, and the version is written then (use
    /// [`for_store`](Self::for_store) for the store's database).
    ///
    /// Every process writing through a log on this file takes the
    /// writer lock of [`HistoryLog::exclusive`], a `flock` on the file
    /// `PATH-lock` beside it (created 0600), so several processes can
    /// write the store while others open it.
    pub fn open(path: impl AsRef<std::path::Path>, scope: &str) -> Result<Self, HistoryError> {
        let path = path.as_ref();
        refuse_planted(path)?;
        // Private (0600) as the store it records: it holds every version.
        crate::store::sql::create_private(path)
            .map_err(|e| HistoryError::Log(format!("cannot create the history file: {e}")))?;
        refuse_planted(path)?;
        // No link followed, even one swapped in since the check.
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(path, flags).map_err(db_error)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(db_error)?;
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push("-lock");
        let lock = lock_file(lock_path)?;
        let mut log = Self::init(conn, scope)?;
        log.lock = Some((lock, Mutex::new(false)));
        Ok(log)
    }

    /// A log in a private in-memory database (for tests).
    pub fn open_in_memory(scope: &str) -> Result<Self, HistoryError> {
        Self::init(Connection::open_in_memory().map_err(db_error)?, scope)
    }

    fn init(conn: Connection, scope: &str) -> Result<Self, HistoryError> {
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(db_error)?;
        schema(&conn, scope)?;
        // Deleted rows (dropped, pruned, redacted content) are
        // overwritten with zeros, not left in free pages.
        conn.pragma_update(None, "secure_delete", "ON")
            .map_err(db_error)?;
        Ok(SqliteLog {
            conn: Source::Own(Mutex::new(conn)),
            scope: scope.to_owned(),
            lock: None,
        })
    }

    /// Runs `f` on the log's connection.
    fn with<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        match &self.conn {
            Source::Own(conn) => f(&conn.lock().unwrap_or_else(PoisonError::into_inner)),
            Source::Shared(store) => store.with_connection(f),
        }
    }

    /// Runs `f` in a savepoint (a transaction of its own, or nested in
    /// the store's): all of it or nothing.
    fn atomically<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        self.with(|conn| {
            conn.execute_batch("SAVEPOINT claude_memory_history")
                .map_err(db_error)?;
            match f(conn) {
                Ok(out) => {
                    conn.execute_batch("RELEASE claude_memory_history")
                        .map_err(db_error)?;
                    Ok(out)
                }
                Err(e) => {
                    let _ = conn.execute_batch(
                        "ROLLBACK TO claude_memory_history; RELEASE claude_memory_history",
                    );
                    Err(e)
                }
            }
        })
    }
}

/// The table, its indexes and the checkpoints' table (the indexes are
/// added to a 0.4 table here, once).
fn schema(conn: &Connection, scope: &str) -> Result<(), HistoryError> {
    conn.execute_batch(SCHEMA).map_err(db_error)?;
    // SQLite's key is the id alone: a scope's versions in id order need
    // an index of their own (PostgreSQL's key is the two).
    let by_scope = "CREATE INDEX IF NOT EXISTS claude_memory_history_scope ON claude_memory_history (scope, id)";
    for statement in INDEXES.iter().chain([&CHECKPOINT_TABLE, &by_scope]) {
        conn.execute_batch(statement).map_err(db_error)?;
    }
    fix_files(&mut Lite(conn), scope).map_err(db_error)
}

/// Refuses a history database a local process planted: a symbolic link
/// (SQLite would follow it and write the history wherever it points), a
/// FIFO or device (an open that blocks forever), or a file with a second
/// hard link (its content shared with a file elsewhere).
fn refuse_planted(path: &std::path::Path) -> Result<(), HistoryError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(db_error(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(HistoryError::Log(
            "the history database is a symbolic link: refused".into(),
        ));
    }
    if !meta.file_type().is_file() {
        return Err(HistoryError::Log(
            "the history database is not a regular file: refused".into(),
        ));
    }
    #[cfg(unix)]
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(HistoryError::Log(
            "the history database has another hard link: refused".into(),
        ));
    }
    Ok(())
}

/// The writer lock's file (created 0600, no link followed).
fn lock_file(path: impl AsRef<std::path::Path>) -> Result<std::fs::File, HistoryError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
    );
    options.open(path).map_err(db_error)
}

impl SqliteLog {
    /// Appends `versions` in one savepoint.
    fn append_now(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        let ids = self.atomically(|db| {
            insert(&mut Lite(db), INSERT, Some(FIX_FILE), &self.scope, versions).map_err(db_error)
        })?;
        for (v, id) in versions.iter_mut().zip(ids) {
            v.id = id;
            if v.file == 0 {
                v.file = id; // as the row has it (see `insert`)
            }
        }
        Ok(())
    }

    /// Runs `f` with this connection's commits unsynced
    /// (`synchronous = NORMAL`) when the log shares the store's
    /// connection and no transaction is open: a create's, delete's or
    /// rename's version then commits just before its change, whose own
    /// commit is synced (`FULL`) and fsyncs the write-ahead log with every
    /// frame before it, this version's included. So the version is
    /// durable whenever its change is, for one fsync a change instead of
    /// two. Inside the store's transaction (an
    /// edit), or on a log of its own, nothing changes.
    fn unsynced<T>(&self, f: impl FnOnce() -> Result<T, HistoryError>) -> Result<T, HistoryError> {
        let Source::Shared(store) = &self.conn else {
            return f();
        };
        // The connection's lock is held throughout (it is reentrant, so
        // `f` takes it again): no other clone of the store commits while
        // the level is lowered.
        store.with_connection(|conn| {
            if !conn.is_autocommit() {
                return f();
            }
            let level: i64 = conn
                .pragma_query_value(None, "synchronous", |r| r.get(0))
                .map_err(db_error)?;
            /// Puts the level back however `f` ends, a panic included,
            /// so the store's own commits never stay unsynced.
            struct Restore<'c>(&'c Connection, i64, bool);
            impl Drop for Restore<'_> {
                fn drop(&mut self) {
                    if !self.2 {
                        let _ = self.0.pragma_update(None, "synchronous", self.1);
                    }
                }
            }
            let mut restore = Restore(conn, level, false);
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db_error)?;
            let out = f();
            // Restored here, so that a failure is reported (and tried
            // once more by the guard).
            conn.pragma_update(None, "synchronous", level)
                .map_err(db_error)?;
            restore.2 = true;
            out
        })
    }
}

impl HistoryLog for SqliteLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        self.unsynced(|| self.append_now(versions))
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        self.with(|conn| get(&mut Lite(conn), &self.scope, id).map_err(db_error))
    }

    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        self.with(|conn| find(&mut Lite(conn), &self.scope, filter, order, limit).map_err(db_error))
    }

    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        self.with(|conn| checkpoint(&mut Lite(conn), &self.scope).map_err(db_error))
    }

    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.with(|conn| save_checkpoint(&mut Lite(conn), &self.scope, data).map_err(db_error))
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        self.atomically(|db| drop_ids(&mut Lite(db), &self.scope, ids).map_err(db_error))
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.with(|conn| {
            let found =
                set_content(&mut Lite(conn), &self.scope, id, None, true).map_err(db_error)?;
            // The WAL still holds the erased content's older frames:
            // moved into the database (zeroed there by secure_delete)
            // and emptied.
            if found && conn.is_autocommit() {
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                    .map_err(db_error)?;
            }
            Ok(found)
        })
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.with(|conn| {
            set_content(&mut Lite(conn), &self.scope, id, Some(&content), redacted)
                .map_err(db_error)
        })
    }

    /// `secure_delete` zeroes freed rows; a `VACUUM` (own database)
    /// and a WAL checkpoint then leave no copy of erased content in
    /// the database or its WAL file.
    fn compact(&self) -> Result<(), HistoryError> {
        match &self.conn {
            Source::Own(_) => self.with(|conn| {
                conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
                    .map_err(db_error)
            }),
            // The store's own database: its free pages are zeroed
            // (secure_delete); a checkpoint moves the zeroed pages into
            // the database and empties the WAL, which held the erased
            // content's older frames.
            Source::Shared(_) => self.with(|conn| {
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                    .map_err(db_error)
            }),
        }
    }

    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = || {
            self.with(|conn| {
                conn.query_row(
                    "SELECT COALESCE(MAX(id), 0) FROM claude_memory_history",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(u64_of)
                .map_err(db_error)
            })
        };
        let Some((file, held)) = &self.lock else {
            change(last()?);
            return Ok(());
        };
        let mut held_now = held.lock().unwrap_or_else(PoisonError::into_inner);
        if *held_now {
            drop(held_now);
            change(last()?);
            return Ok(());
        }
        file.lock().map_err(db_error)?;
        *held_now = true;
        drop(held_now);
        struct Release<'a>(&'a std::fs::File, &'a Mutex<bool>);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *self.1.lock().unwrap_or_else(PoisonError::into_inner) = false;
                let _ = self.0.unlock();
            }
        }
        let _release = Release(file, held);
        change(last()?);
        Ok(())
    }

    /// Yes, with a lock file (a database file); an in-memory database has
    /// none (one connection, one process).
    fn locks_writers(&self) -> bool {
        self.lock.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::HistoryStore;
    use crate::{MemoryTool, SqliteStore};

    fn synchronous(store: &SqliteStore) -> i64 {
        store.with_connection(|c| {
            c.pragma_query_value(None, "synchronous", |r| r.get(0))
                .unwrap_or(-1)
        })
    }

    /// A create's, delete's or rename's version commits unsynced on the
    /// store's connection; the store's own commits stay synced (`FULL`,
    /// 2) after every kind of change, and after a refused one.
    #[test]
    fn the_store_commits_stay_synced_around_unsynced_versions() {
        let dir = tempfile::tempdir().expect("dir");
        let store = SqliteStore::open(dir.path().join("m.db")).expect("store");
        assert_eq!(synchronous(&store), 2);
        let log = SqliteLog::for_store(&store, "").expect("log");
        let tool = MemoryTool::new(HistoryStore::open(store.clone(), log).expect("history"));
        let calls = [
            serde_json::json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}),
            serde_json::json!({"command": "create", "path": "/memories/a.md", "file_text": "again"}),
            serde_json::json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}),
            serde_json::json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
            serde_json::json!({"command": "delete", "path": "/memories/c.md"}),
        ];
        for (i, call) in calls.iter().enumerate() {
            let result = tool.dispatch(call);
            assert_eq!(result.is_error, i == 1, "{call}: {result:?}");
            assert_eq!(synchronous(&store), 2, "after {call}");
        }
        let versions = tool
            .store()
            .versions(&crate::history::Query::default())
            .expect("versions");
        assert_eq!(versions.len(), 4, "{versions:?}");
    }
}
