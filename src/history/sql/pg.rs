//! The history log in PostgreSQL: [`PostgresLog`].

use super::*;
use crate::PostgresStore;
use crate::store::sql::{Dialect, Durability, Fail, Owned, Param, Queue};

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

/// A nullable text column's parameter: `NULLIF($n, '')` in the SQL
/// turns `""` back into NULL (no stored value is an empty string).
fn or_empty(text: &Option<String>) -> Param<'_> {
    Param::Text(text.as_deref().unwrap_or(""))
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// The history of a [`PostgresStore`](crate::PostgresStore), in the
/// table `claude_memory_history` of the same database, through a pool
/// (and runtime) of its own, so it is as safe in async code as the
/// store and never waits for a connection the store's change holds.
/// Ids stay monotonic across processes (a per-scope counter row).
pub struct PostgresLog {
    db: PostgresStore,
    scope: String,
    /// Made by [`for_store`](Self::for_store): the log shares the store's
    /// pool, and each change's version commits in the change's own
    /// transaction (see `exclusive`).
    hosts: bool,
    /// The last id as this log last saw it, under the writer lock: the
    /// guess of [`exclusive_guessing`](HistoryLog::exclusive_guessing).
    last_seen: std::sync::atomic::AtomicU64,
    /// A hosted change was joined by the store's mutations: the store
    /// this log records is on its pool, so a guessed change's every
    /// effect is in the hosted transaction and is rolled back with it.
    joined: std::sync::atomic::AtomicBool,
}

thread_local! {
    /// The last id given out, by log, while this thread's `exclusive` of
    /// that log hosts the change's transaction: under the writer lock no
    /// other writer appends, so the next ids are known without asking.
    static LAST: std::cell::RefCell<Vec<(usize, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Takes this thread's `LAST` entry of a log off again, also on a panic.
struct Hosted(usize);

impl Drop for Hosted {
    fn drop(&mut self) {
        let key = self.0;
        LAST.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(i) = l.iter().rposition(|(k, _)| *k == key) {
                l.remove(i);
            }
        });
    }
}

const INSERT: &str = "INSERT INTO claude_memory_history (scope, id, file, op, path, from_path,
     time_ns, actor, call, sha256, size, content, redacted, note)
     VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, NULLIF($8, ''),
             NULLIF($9, ''), $10, $11, $12, $13::BIGINT <> 0, NULLIF($14, ''))";

/// A version queued in a hosted change (see `host`): `$15` is `1` when
/// it goes out behind the change's last statement, so it is inserted
/// only if that transaction wrote (the store did change).
const INSERT_IF_WRITTEN: &str = "INSERT INTO claude_memory_history (scope, id, file, op, path,
     from_path, time_ns, actor, call, sha256, size, content, redacted, note)
     SELECT $1::text, $2::bigint, $3::bigint, $4::text, $5::text, NULLIF($6::text, ''), $7::bigint,
            NULLIF($8::text, ''), NULLIF($9::text, ''), $10::text, $11::bigint, $12::bytea,
            $13::BIGINT <> 0, NULLIF($14::text, '')
     WHERE $15::bigint = 0 OR txid_current_if_assigned() IS NOT NULL";

/// The counter past a hosted change's versions, behind them, always
/// (`$3`, the rule's flag, is not needed: ids of versions not inserted
/// are not given out again, and the log's guess of the last id stays
/// right after a refused write).
const COUNTER_AFTER: &str = "UPDATE claude_memory_history_ids SET last_id = GREATEST(last_id, $2)
     WHERE scope = $1 AND $3::bigint IS NOT NULL";

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
    /// [`HistoryStore`](super::super::HistoryStore) wraps (or a clone). Each change then runs in one
    /// transaction the log hosts on that pool: the writer lock, the
    /// store's statements and the change's versions commit together, in
    /// the change's own round trips (a create: 1, as without history;
    /// `connect`'s log takes 6). The log's last id is guessed and checked
    /// by the database in the change's first round trip; when another
    /// writer appended meanwhile, the transaction is rolled back and the
    /// change runs again, so a store wrapper of your own between the
    /// two must act only through the store (see the README's safety
    /// model). Given another store, the log notices that no store
    /// statement joins it and never guesses; its versions then commit
    /// after the change instead of before it (a crash between the two
    /// leaves a change the next open records as a repair).
    pub fn for_store(store: &PostgresStore, scope: &str) -> Result<Self, HistoryError> {
        super::same_scope(store.tenant(), scope)?;
        let mut log = Self::connect_on(store.clone(), scope)?;
        log.hosts = true;
        Ok(log)
    }

    fn connect_on(db: PostgresStore, scope: &str) -> Result<Self, HistoryError> {
        db.transaction("\u{1}history-schema", |tx| {
            for statement in SCHEMA {
                tx.run(statement, &[])?;
            }
            tx.run(
                "INSERT INTO claude_memory_history_ids (scope, last_id) VALUES ($1, 0)
                 ON CONFLICT (scope) DO NOTHING",
                &[Param::Text(scope)],
            )?;
            Ok(())
        })
        .map_err(db_fail)?;
        Ok(PostgresLog {
            db,
            scope: scope.to_owned(),
            hosts: false,
            last_seen: std::sync::atomic::AtomicU64::new(0),
            joined: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This log's key in `LAST`.
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// The last id given out, while this thread hosts this log's change.
    fn hosted_last(&self) -> Option<u64> {
        if !self.hosts || !self.db.hosts() {
            return None;
        }
        let key = self.key();
        LAST.with(|l| {
            l.borrow()
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|e| e.1)
        })
    }

    fn set_hosted_last(&self, last: u64) {
        let key = self.key();
        LAST.with(|l| {
            if let Some(e) = l.borrow_mut().iter_mut().rev().find(|(k, _)| *k == key) {
                e.1 = last;
            }
        });
    }

    /// `versions` queued in the hosted transaction, with the ids after
    /// `last` (the counter row set past them, in the same transaction).
    fn append_hosted(&self, versions: &mut [Revision], last: u64) -> Result<bool, HistoryError> {
        let text = |t: &Option<String>| Owned::Text(Some(t.clone().unwrap_or_default()));
        let mut statements = Vec::with_capacity(versions.len() + 1);
        let mut id = last;
        for v in versions.iter() {
            id += 1;
            statements.push(Queue {
                sql: INSERT_IF_WRITTEN,
                params: vec![
                    Owned::Text(Some(self.scope.clone())),
                    Owned::Int(i64_of(id)),
                    Owned::Int(i64_of(v.file)),
                    Owned::Text(Some(v.op.as_str().to_owned())),
                    Owned::Text(Some(v.path.clone())),
                    text(&v.from),
                    Owned::Int(i64_of(to_nanos(v.time))),
                    text(&v.actor),
                    text(&v.call),
                    Owned::Text(Some(v.sha256.clone())),
                    Owned::Int(i64_of(v.size)),
                    Owned::Bytes(v.content.clone()),
                    Owned::Int(i64::from(v.redacted)),
                    text(&v.note),
                ],
                version: Some(id),
                versioned: true,
            });
        }
        statements.push(Queue {
            sql: COUNTER_AFTER,
            params: vec![
                Owned::Text(Some(self.scope.clone())),
                Owned::Int(i64_of(id)),
            ],
            version: None,
            versioned: true,
        });
        if !self.db.queue(statements).map_err(db_fail)? {
            return Ok(false);
        }
        let mut next = last;
        for v in versions.iter_mut() {
            next += 1;
            v.id = next;
        }
        self.set_hosted_last(id);
        Ok(true)
    }

    /// Whether the database at `url` keeps a history for `scope` (a
    /// [`connect`](Self::connect) made it), creating nothing: so every
    /// change to such a store is recorded, and the history commands
    /// refuse a store that has none.
    pub fn exists(url: &str, scope: &str) -> Result<bool, HistoryError> {
        let db = PostgresStore::connect(url, 1).map_err(db_error)?;
        db.connection(|c| {
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

    /// [`exclusive`](HistoryLog::exclusive) of a log on the store's pool:
    /// the change lock's transaction is hosted (see
    /// `store::sql::postgres::host`): the store's mutations on this
    /// thread run in it, and appends and drops are queued in it, sent
    /// with the change's statements, so both commit together. Round
    /// trips: the lock and the last id (one), then the change's own.
    fn exclusive_hosted(&self, change: &mut dyn FnMut(u64), one: bool) -> Result<(), HistoryError> {
        if let Some(last) = self.hosted_last() {
            change(last); // inside this thread's change of this log
            return Ok(());
        }
        let ((), hosted) = self
            .db
            .hosting(&self.change_lock(), None, one, |pg| {
                let last = self.last_id(pg)?;
                self.run_hosted(last, change);
                Ok(())
            })
            .map_err(db_fail)?;
        self.saw(hosted);
        Ok(())
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

    /// Runs `change` with `last` as the last id given out (appends queue
    /// the ids after it), and notes the last id it left.
    fn run_hosted(&self, last: u64, change: &mut dyn FnMut(u64)) {
        let key = self.key();
        LAST.with(|l| l.borrow_mut().push((key, last)));
        let _hosted = Hosted(key);
        change(last);
        let left = LAST.with(|l| {
            l.borrow()
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|e| e.1)
        });
        self.last_seen
            .store(left.unwrap_or(last), std::sync::atomic::Ordering::Relaxed);
    }

    fn saw(&self, hosted: crate::store::sql::Hosted) {
        if hosted.joined {
            self.joined
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The advisory lock of this scope's appends.
    fn lock(&self) -> String {
        format!("\u{1}history:{}", self.scope)
    }

    fn load_where(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        self.select(after, true)
    }

    /// The versions above `after`, with their content or without it (a
    /// NULL in its place: the bytes never leave the server).
    fn select(&self, after: u64, content: bool) -> Result<Vec<Revision>, HistoryError> {
        self.db
            .hosted_or_own(|c| {
                Ok(c.fetch_all(
                    if content {
                        "SELECT id, file, op, path, COALESCE(from_path, ''), time_ns,
                            COALESCE(actor, ''), COALESCE(call, ''), sha256, size, content,
                            redacted, COALESCE(note, '')
                     FROM claude_memory_history WHERE scope = $1 AND id > $2 ORDER BY id"
                    } else {
                        "SELECT id, file, op, path, COALESCE(from_path, ''), time_ns,
                            COALESCE(actor, ''), COALESCE(call, ''), sha256, size, NULL::BYTEA,
                            redacted, COALESCE(note, '')
                     FROM claude_memory_history WHERE scope = $1 AND id > $2 ORDER BY id"
                    },
                    &[Param::Text(&self.scope), Param::Int(i64_of(after))],
                    |r| {
                        Ok(Revision {
                            id: u64_of(r.int(0)?),
                            file: u64_of(r.int(1)?),
                            op: op_of(&r.text(2)?),
                            path: r.text(3)?,
                            from: non_empty(r.text(4)?),
                            time: from_nanos(u64_of(r.int(5)?)),
                            actor: non_empty(r.text(6)?),
                            call: non_empty(r.text(7)?),
                            sha256: r.text(8)?,
                            size: u64_of(r.int(9)?),
                            content: r.bytes(10)?,
                            redacted: r.flag(11)?,
                            note: non_empty(r.text(12)?),
                        })
                    },
                )?)
            })
            .map_err(db_fail)
    }
}

impl HistoryLog for PostgresLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        if versions.is_empty() {
            return Ok(());
        }
        if let Some(last) = self.hosted_last()
            && self.append_hosted(versions, last)?
        {
            return Ok(());
        }
        let count = i64_of(versions.len() as u64);
        // Unsynced: the store's change that follows commits synced on the
        // same server (the CLI's log is in the store's database), which
        // flushes the WAL up to its own record and so this version's with
        // it; one fsync a change instead of two (issue 19's cost goal).
        let ids = self
            .db
            .transaction_with(&self.lock(), Durability::Unsynced, |tx| {
                // The counter row's lock orders concurrent appends; a
                // dropped version's id is never given out again.
                let last = tx
                    .fetch_opt(
                        "INSERT INTO claude_memory_history_ids (scope, last_id) VALUES ($1, $2)
                         ON CONFLICT (scope) DO UPDATE
                         SET last_id = claude_memory_history_ids.last_id + $2 RETURNING last_id",
                        &[Param::Text(&self.scope), Param::Int(count)],
                        |r| r.int(0),
                    )?
                    .unwrap_or(count);
                let mut id = u64_of(last).saturating_sub(versions.len() as u64);
                let mut ids = Vec::with_capacity(versions.len());
                for v in versions.iter() {
                    id += 1;
                    tx.run(
                        INSERT,
                        &[
                            Param::Text(&self.scope),
                            Param::Int(i64_of(id)),
                            Param::Int(i64_of(v.file)),
                            Param::Text(v.op.as_str()),
                            Param::Text(&v.path),
                            or_empty(&v.from),
                            Param::Int(i64_of(to_nanos(v.time))),
                            or_empty(&v.actor),
                            or_empty(&v.call),
                            Param::Text(&v.sha256),
                            Param::Int(i64_of(v.size)),
                            match &v.content {
                                Some(c) => Param::Bytes(c),
                                None => Param::NullBytes,
                            },
                            Param::Int(i64::from(v.redacted)),
                            or_empty(&v.note),
                        ],
                    )?;
                    ids.push(id);
                }
                Ok(ids)
            })
            .map_err(db_fail)?;
        for (v, id) in versions.iter_mut().zip(ids) {
            v.id = id;
        }
        Ok(())
    }

    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        self.load_where(0)
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut ids = ids.to_vec();
        if self.hosted_last().is_some() {
            // Not sent yet: taken out. Sent: deleted in the same transaction.
            ids = self.db.unqueue(&ids);
            if ids.is_empty() {
                return Ok(());
            }
            let statements = ids
                .iter()
                .map(|&id| Queue {
                    sql: "DELETE FROM claude_memory_history WHERE scope = $1 AND id = $2",
                    params: vec![
                        Owned::Text(Some(self.scope.clone())),
                        Owned::Int(i64_of(id)),
                    ],
                    version: None,
                    versioned: false,
                })
                .collect();
            if self.db.queue(statements).map_err(db_fail)? {
                return Ok(());
            }
        }
        self.db
            .transaction(&self.lock(), |tx| {
                for &id in &ids {
                    tx.run(
                        "DELETE FROM claude_memory_history WHERE scope = $1 AND id = $2",
                        &[Param::Text(&self.scope), Param::Int(i64_of(id))],
                    )?;
                }
                Ok(())
            })
            .map_err(db_fail)
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.db
            .transaction(&self.lock(), |tx| {
                Ok(tx
                    .fetch_opt(
                        "UPDATE claude_memory_history SET content = NULL, redacted = TRUE
                         WHERE scope = $1 AND id = $2 RETURNING id",
                        &[Param::Text(&self.scope), Param::Int(i64_of(id))],
                        |r| r.int(0),
                    )?
                    .is_some())
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
                Ok(tx
                    .fetch_opt(
                        "UPDATE claude_memory_history SET content = $3, redacted = $4::BIGINT <> 0
                         WHERE scope = $1 AND id = $2 RETURNING id",
                        &[
                            Param::Text(&self.scope),
                            Param::Int(i64_of(id)),
                            Param::Bytes(&content),
                            Param::Int(i64::from(redacted)),
                        ],
                        |r| r.int(0),
                    )?
                    .is_some())
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
    /// change; the appends run on the log's other connection.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        if self.hosts {
            return self.exclusive_hosted(change, false);
        }
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

    fn load_after(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        self.load_where(after)
    }

    /// On the store's pool, once a change has shown the store joins the
    /// hosted transaction: `change` runs on this log's last known id
    /// without asking for it. The guess is checked by a statement that
    /// goes out with the change's first one and fails unless the counter
    /// still holds it; if it fails, the transaction (the change's every
    /// statement, its versions) is rolled back, and `change` runs again
    /// as [`exclusive`](HistoryLog::exclusive) runs it. A lone writer's
    /// guess holds: a change costs its own round trips and no more.
    fn exclusive_guessing(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        use std::sync::atomic::Ordering;
        if !self.hosts {
            return self.exclusive(change);
        }
        if self.hosted_last().is_some() || !self.joined.load(Ordering::Relaxed) {
            return self.exclusive_hosted(change, true);
        }
        let guess = self.last_seen.load(Ordering::Relaxed);
        let check = (
            "SELECT 1 / (CASE WHEN last_id = $2 THEN 1 ELSE 0 END) FROM claude_memory_history_ids WHERE scope = $1",
            vec![
                Owned::Text(Some(self.scope.clone())),
                Owned::Int(i64_of(guess)),
            ],
        );
        let ((), hosted) = self
            .db
            .hosting(&self.change_lock(), Some(check), true, |_| {
                self.run_hosted(guess, change);
                Ok(())
            })
            .map_err(db_fail)?;
        if !hosted.stale {
            return Ok(());
        }
        self.exclusive_hosted(change, true)
    }

    /// Yes: the scope's advisory lock, held by every writer's change
    /// transaction.
    fn locks_writers(&self) -> bool {
        true
    }

    fn records(&self) -> Result<Vec<Revision>, HistoryError> {
        self.select(0, false)
    }
}
