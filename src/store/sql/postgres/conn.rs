//! One pooled PostgreSQL connection as a [`Dialect`], a transaction on
//! it, and the pool as a [`Backend`].

use std::cell::Cell;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use deadpool_postgres::Object;
use tokio_postgres::types::ToSql;

use super::super::{Backend, Columns, Commit, Dialect, Fail, Param};
use super::PostgresError;
use super::pool::{ACTIVE, Db, Lent, wait};

/// One pooled connection, as a [`Dialect`]: each statement is prepared
/// once per connection and cached, so it costs one round trip.
pub(crate) struct Pg<'c> {
    db: &'c Db,
    conn: &'c Object,
    /// A transaction's `BEGIN` and lock, not sent yet: they go out with
    /// the first statement, in the same round trip.
    pub(super) begin: Option<Begin<'c>>,
    /// The connection died or stopped answering: close it.
    pub(super) lost: bool,
    /// It was found dead at `BEGIN`: nothing of the transaction ran.
    lost_at_begin: bool,
    /// The next statement is the transaction's last: `COMMIT` goes out
    /// right behind it, in the same round trip.
    commit_next: bool,
    /// Where that `COMMIT` left the transaction: `Some(true)` committed,
    /// `Some(false)` ended without effect (the statement failed, so the
    /// server rolled it back).
    ended: Option<bool>,
    /// A savepoint of a transaction this thread has open on the same
    /// connection (see [`Db::mutate_with`]), not a transaction of its own.
    savepoint: bool,
}

type Begin<'c> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + 'c>>;

impl<'c> Pg<'c> {
    pub(super) fn new(db: &'c Db, conn: &'c Object) -> Self {
        Pg {
            db,
            conn,
            begin: None,
            lost: false,
            lost_at_begin: false,
            commit_next: false,
            ended: None,
            savepoint: false,
        }
    }

    /// A statement's error, noting whether it lost the connection.
    fn fail(&mut self, e: tokio_postgres::Error) -> PostgresError {
        let e = self.db.error(e);
        if matches!(e, PostgresError::ConnectionLost(_)) || self.conn.is_closed() {
            self.lost = true;
        }
        e
    }

    /// Waits for `fut`, a statement on this connection, sent after the
    /// pending `BEGIN` if there is one: both in one round trip, since
    /// requests are sent in the order first polled and answered in order.
    fn answer<T>(
        &mut self,
        fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, PostgresError> {
        let limit = self.db.settings.answer_deadline();
        let mut begin = self.begin.take();
        let at_begin = begin.is_some();
        let mut fut = pin!(fut);
        let (mut begun, mut answered) = (None, None);
        let both = std::future::poll_fn(|cx| {
            if let Some(b) = begin.as_mut()
                && let Poll::Ready(r) = b.as_mut().poll(cx)
            {
                begin = None;
                begun = Some(r);
            }
            if answered.is_none()
                && let Poll::Ready(r) = fut.as_mut().poll(cx)
            {
                answered = Some(r);
            }
            match (&begun, &answered) {
                (Some(Err(_)), _) => Poll::Ready(()),
                _ if begin.is_none() && answered.is_some() => Poll::Ready(()),
                _ => Poll::Pending,
            }
        });
        if wait(both, limit).is_none() {
            self.lost = true;
            return Err(PostgresError::NoAnswer(limit));
        }
        match (begun, answered) {
            (Some(Err(e)), _) => {
                let e = self.fail(e);
                self.lost_at_begin = at_begin && self.lost;
                Err(e)
            }
            (_, Some(Ok(v))) => Ok(v),
            (_, Some(Err(e))) => Err(self.fail(e)),
            (_, None) => {
                self.lost = true;
                Err(PostgresError::NoAnswer(limit))
            }
        }
    }

    /// Sends the pending `BEGIN` (and lock) and waits for it.
    pub(super) fn flush(&mut self) -> Result<(), PostgresError> {
        self.answer(std::future::ready(Ok(())))
    }

    /// Ends the transaction with `sql` (`COMMIT` or `ROLLBACK`), sent on
    /// its own.
    fn end(&mut self, sql: &str) -> Result<(), PostgresError> {
        self.simple(sql)
    }

    /// Runs the prepared (cached) statement `sql` through `run`; when it is
    /// the transaction's last ([`commit_next`](Self::commit_next)), sends
    /// `COMMIT` right behind it, so statement and commit share a round trip
    /// (with a pending `BEGIN`, all three do). Requests go out in the order
    /// first polled, and a cached statement is sent on its first poll, so
    /// `COMMIT` always follows the statement. A statement that fails ends
    /// the transaction there (the server answers the `COMMIT` of a failed
    /// transaction with a rollback).
    fn statement<T, F, Fut>(&mut self, sql: &str, run: F) -> Result<T, PostgresError>
    where
        F: FnOnce(tokio_postgres::Statement) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let conn = self.conn;
        if !std::mem::take(&mut self.commit_next) {
            return self.answer(async {
                let st = conn.prepare_cached(sql).await?;
                run(st).await
            });
        }
        // What goes out behind the last statement: `COMMIT`, or a
        // savepoint's release.
        let tail = if self.savepoint { RELEASE } else { "COMMIT" };
        let both = self.answer(async {
            let st = conn.prepare_cached(sql).await?;
            // Polled in this order, so sent in this order.
            let mut stmt = pin!(run(st));
            let mut commit = pin!(conn.batch_execute(tail));
            let (mut done, mut committed) = (None, None);
            std::future::poll_fn(|cx| {
                if done.is_none()
                    && let Poll::Ready(r) = stmt.as_mut().poll(cx)
                {
                    done = Some(r);
                }
                if committed.is_none()
                    && let Poll::Ready(r) = commit.as_mut().poll(cx)
                {
                    committed = Some(r);
                }
                match (done.take(), committed.take()) {
                    (Some(d), Some(c)) => Poll::Ready(Ok((d, c))),
                    (d, c) => {
                        (done, committed) = (d, c);
                        Poll::Pending
                    }
                }
            })
            .await
        });
        match both {
            Ok((Ok(v), Ok(()))) => {
                self.ended = Some(true);
                Ok(v)
            }
            Ok((Err(e), _)) | Ok((Ok(_), Err(e))) => {
                self.ended = Some(false);
                Err(self.fail(e))
            }
            Err(e) => Err(e),
        }
    }

    /// Runs `sql` (one or more statements, no parameters) as a simple
    /// query: one round trip.
    pub(super) fn simple(&mut self, sql: &str) -> Result<(), PostgresError> {
        let conn = self.conn;
        self.answer(conn.batch_execute(sql))
    }
}

struct PgRow(tokio_postgres::Row);

impl Columns for PgRow {
    type Error = PostgresError;
    fn flag(&self, i: usize) -> Result<bool, PostgresError> {
        self.0
            .try_get(i)
            .map_err(|e| PostgresError::Database(Box::new(e)))
    }
    fn int(&self, i: usize) -> Result<i64, PostgresError> {
        self.0
            .try_get(i)
            .map_err(|e| PostgresError::Database(Box::new(e)))
    }
    fn text(&self, i: usize) -> Result<String, PostgresError> {
        self.0
            .try_get(i)
            .map_err(|e| PostgresError::Database(Box::new(e)))
    }
    fn bytes(&self, i: usize) -> Result<Option<Vec<u8>>, PostgresError> {
        self.0
            .try_get(i)
            .map_err(|e| PostgresError::Database(Box::new(e)))
    }
    fn text_into(&self, i: usize, out: &mut String) -> Result<(), PostgresError> {
        let text: &str = self
            .0
            .try_get(i)
            .map_err(|e| PostgresError::Database(Box::new(e)))?;
        out.clear();
        out.push_str(text);
        Ok(())
    }
}

/// The driver's view of `params`.
fn params<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| -> &(dyn ToSql + Sync) {
            match p {
                Param::Text(s) => s,
                Param::Int(n) => n,
                Param::Bytes(b) => b,
                Param::NullBytes => &None::<&[u8]>,
            }
        })
        .collect()
}

/// [`Dialect::WRITE_CHECKED`] in PostgreSQL: `parts` is the lineage of
/// `$2` (each depth's key, parent and name, from `string_to_array`),
/// `found` its rows, `verdict` the checks, in the order of
/// `Entries::refusal` (an ancestor that is a file counts only above the
/// first missing one).
const WRITE_CHECKED: &str = r#"WITH parts AS (
    SELECT i, array_to_string(s.p[1:i], '/') AS path,
           array_to_string(s.p[1:i - 1], '/') AS parent, s.p[i] AS name,
           cardinality(s.p) AS n
    FROM string_to_array($2::text, '/') AS s(p), generate_series(1, cardinality(s.p)) AS i
),
found AS (
    SELECT parts.i, e.is_dir, e.len, e.version
    FROM claude_memory_entries e JOIN parts ON parts.path = e.path
    WHERE e.tenant = $1 AND e.path = ANY (ARRAY(SELECT path FROM parts))
),
verdict AS (
    SELECT q.total,
        NOT EXISTS (
            SELECT 1 FROM found f
            WHERE NOT f.is_dir AND f.i < l.n
              AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.i < f.i AND p.i NOT IN (SELECT i FROM found))
        )
        AND CASE $6::bigint
            WHEN 0 THEN t.is_dir IS NULL
            WHEN 1 THEN t.is_dir IS DISTINCT FROM TRUE
            ELSE t.is_dir IS FALSE AND t.version = $7::bigint
        END
        AND ($10::bigint < 0
             OR GREATEST(q.total - CASE WHEN t.is_dir IS FALSE THEN t.len ELSE 0 END, 0) + $4::bigint <= $10::bigint)
        AS ok
    FROM (SELECT max(n) AS n FROM parts) l
    LEFT JOIN found t ON t.i = l.n
    CROSS JOIN (
        SELECT CASE
            WHEN $10::bigint < 0 THEN 0
            WHEN $8::text = '' THEN (
                SELECT CAST(COALESCE(SUM(len), 0) AS BIGINT) FROM claude_memory_entries
                WHERE tenant = $1 AND NOT is_dir
            )
            ELSE (
                SELECT CAST(COALESCE(SUM(len), 0) AS BIGINT) FROM claude_memory_entries
                WHERE tenant = $1 AND NOT is_dir AND path >= $8::text AND path < $9::text
            )
        END AS total
    ) q
),
dirs AS (
    INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
    SELECT $1, parts.path, parts.parent, parts.name, TRUE, NULL, 0, 0, $5::bigint
    FROM parts, verdict
    WHERE verdict.ok AND parts.i < parts.n AND parts.i NOT IN (SELECT i FROM found)
    ON CONFLICT (tenant, path) DO NOTHING
),
file AS (
    INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
    SELECT $1, parts.path, parts.parent, parts.name, FALSE, $3::bytea, $4::bigint,
           nextval('claude_memory_version'), $5::bigint
    FROM parts, verdict
    WHERE verdict.ok AND parts.i = parts.n
    ON CONFLICT (tenant, path) DO UPDATE SET data = EXCLUDED.data, len = EXCLUDED.len,
        version = EXCLUDED.version, modified_ms = EXCLUDED.modified_ms
    RETURNING version
)
SELECT CAST(i AS BIGINT), is_dir, len, version FROM found
UNION ALL
SELECT 0, EXISTS (SELECT 1 FROM file), total, COALESCE((SELECT version FROM file), 0) FROM verdict"#;

impl Dialect for Pg<'_> {
    type Error = PostgresError;

    const REMOTE: bool = true;

    const INSERT_DIR: &'static str = "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES ($1, $2, $3, $4, TRUE, NULL, 0, 0, $5) ON CONFLICT (tenant, path) DO NOTHING";

    const UPSERT_FILE: &'static str = "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES ($1, $2, $3, $4, FALSE, $5, $6, $7, $8)
        ON CONFLICT (tenant, path) DO UPDATE SET data = EXCLUDED.data, len = EXCLUDED.len,
            version = EXCLUDED.version, modified_ms = EXCLUDED.modified_ms";

    const LONGEST_KEY: &'static str = "SELECT CAST(COALESCE(MAX(octet_length(path)), 0) AS BIGINT) FROM claude_memory_entries WHERE tenant = $1 AND path >= $2 AND path < $3";
    const UPSERT_FILE_NEXT: Option<&'static str> = Some(
        "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
        VALUES ($1, $2, $3, $4, FALSE, $5, $6, nextval('claude_memory_version'), $7)
        ON CONFLICT (tenant, path) DO UPDATE SET data = EXCLUDED.data, len = EXCLUDED.len,
            version = EXCLUDED.version, modified_ms = EXCLUDED.modified_ms
        RETURNING version",
    );

    const NEXT_VERSION: &'static str = "SELECT nextval('claude_memory_version')";

    // One statement, so a write is one round trip with `BEGIN`, the lock
    // and `COMMIT`. Its data-modifying arms run once whether referenced
    // or not, and see the rows as the statement's snapshot, taken after
    // the lock: `dirs` inserts only the missing ancestors, `file` upserts,
    // both only if `verdict` passed. The cap's sum is an init plan, run
    // only when `$10` asks for it.
    const WRITE_CHECKED: Option<&'static str> = Some(WRITE_CHECKED);

    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = PostgresError>) -> Result<T, PostgresError>,
    ) -> Result<Option<T>, PostgresError> {
        let conn = self.conn;
        let ps = params(ps);
        let row = self.statement(sql, |st| async move { conn.query_opt(&st, &ps).await })?;
        row.map(|r| f(&PgRow(r))).transpose()
    }

    fn fetch_all<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        mut f: impl FnMut(&dyn Columns<Error = PostgresError>) -> Result<T, PostgresError>,
    ) -> Result<Vec<T>, PostgresError> {
        let conn = self.conn;
        let ps = params(ps);
        let rows = self.statement(sql, |st| async move { conn.query(&st, &ps).await })?;
        rows.into_iter().map(|r| f(&PgRow(r))).collect()
    }

    fn run(&mut self, sql: &str, ps: &[Param<'_>]) -> Result<(), PostgresError> {
        let conn = self.conn;
        let ps = params(ps);
        self.statement(sql, |st| async move { conn.execute(&st, &ps).await })?;
        Ok(())
    }
}

/// A transaction on a lent connection, holding the tenant's lock.
pub(crate) struct PgTx<'c> {
    pg: Pg<'c>,
    state: &'c Cell<TxState>,
}

/// Where a mutation's transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    Open,
    Committed,
    Lost,
    /// Lost at `BEGIN`: nothing ran, the mutation may start over.
    LostAtBegin,
    /// Ended by the `COMMIT` sent behind the last statement, but not
    /// committed by the caller: that statement failed (the server rolled
    /// the transaction back), or it changed nothing and the caller
    /// returned an error (a refused write, a delete of nothing). Nothing
    /// to roll back either way.
    Ended,
    /// As `Ended`, but the statement failed: the server rolled the
    /// transaction back (a savepoint: it must be rolled back to).
    EndedFailed,
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if self.pg.lost_at_begin {
            self.state.set(TxState::LostAtBegin);
        } else if self.pg.lost {
            self.state.set(TxState::Lost);
        } else if self.pg.ended.is_some() && self.state.get() == TxState::Open {
            self.state.set(if self.pg.ended == Some(true) {
                TxState::Ended
            } else {
                TxState::EndedFailed
            });
        }
    }
}

impl Dialect for PgTx<'_> {
    type Error = PostgresError;
    const REMOTE: bool = true;
    const INSERT_DIR: &'static str = Pg::INSERT_DIR;
    const UPSERT_FILE: &'static str = Pg::UPSERT_FILE;
    const UPSERT_FILE_NEXT: Option<&'static str> = Pg::UPSERT_FILE_NEXT;
    const NEXT_VERSION: &'static str = Pg::NEXT_VERSION;
    const LONGEST_KEY: &'static str = Pg::LONGEST_KEY;
    const WRITE_CHECKED: Option<&'static str> = Pg::WRITE_CHECKED;

    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = PostgresError>) -> Result<T, PostgresError>,
    ) -> Result<Option<T>, PostgresError> {
        self.pg.fetch_opt(sql, ps, f)
    }

    fn fetch_all<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        f: impl FnMut(&dyn Columns<Error = PostgresError>) -> Result<T, PostgresError>,
    ) -> Result<Vec<T>, PostgresError> {
        self.pg.fetch_all(sql, ps, f)
    }

    fn run(&mut self, sql: &str, ps: &[Param<'_>]) -> Result<(), PostgresError> {
        self.pg.run(sql, ps)
    }

    fn last_statement(&mut self) {
        self.pg.commit_next = true;
    }
}

impl Commit for PgTx<'_> {
    fn begin_now(&mut self) -> Result<(), PostgresError> {
        self.pg.flush()
    }

    fn commit(mut self) -> Result<(), PostgresError> {
        match self.pg.ended {
            // Committed behind the last statement.
            Some(true) => {}
            Some(false) => {
                return Err(PostgresError::Database(
                    "the transaction was rolled back".into(),
                ));
            }
            None if self.pg.savepoint => self.pg.simple(RELEASE)?,
            None => self.pg.end("COMMIT")?,
        }
        self.state.set(TxState::Committed);
        Ok(())
    }
}

/// A mutation joining a transaction already open on this thread runs in
/// this savepoint (see [`Db::mutate_with`]).
const SAVEPOINT: &str = "SAVEPOINT claude_memory_change";
/// Keeps a joined mutation's changes in the enclosing transaction.
const RELEASE: &str = "RELEASE SAVEPOINT claude_memory_change";
/// Undoes a joined mutation's changes, and ends its savepoint, so an
/// enclosing savepoint of the same name is the one named next.
const UNDO: &str =
    "ROLLBACK TO SAVEPOINT claude_memory_change; RELEASE SAVEPOINT claude_memory_change";

/// `SELECT pg_advisory_xact_lock(…)` of the lock named `name`.
pub(super) fn lock_sql(name: &str) -> String {
    format!(
        "SELECT pg_advisory_xact_lock(hashtextextended({}, 0))",
        literal(&format!("claude-memory:{name}"))
    )
}

/// `sql` text as a string literal.
pub(super) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl Db {
    /// Runs `f` on a connection of its own from the pool, never on a
    /// mutation's transaction running on this thread: for reads and
    /// maintenance outside any change (the history log's compaction must
    /// not run inside a transaction). A connection found dead is closed
    /// and `f` runs again on another: reads are safe to repeat.
    pub(crate) fn with_own<T>(
        &self,
        mut f: impl FnMut(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let mut attempt = 1;
        loop {
            let conn = self.checkout()?;
            let mut pg = Pg::new(self, &conn);
            let out = f(&mut pg);
            let lost = pg.lost;
            drop(pg);
            if !lost {
                return out;
            }
            drop(Object::take(conn));
            if out.is_ok() || attempt >= self.attempts() {
                return out;
            }
            attempt += 1;
        }
    }
}

impl Backend for Db {
    type Conn<'c> = Pg<'c>;
    type Tx<'c> = PgTx<'c>;

    /// Runs `f` on a pooled connection (or, inside a mutation on this
    /// thread, on its transaction). A connection found dead is closed and
    /// `f` runs again on another: reads are safe to repeat.
    fn with<T>(&self, mut f: impl FnMut(&mut Pg<'_>) -> Result<T, Fail>) -> Result<T, Fail> {
        let key = self.key();
        let active = ACTIVE.with(|a| {
            a.borrow()
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, c)| Arc::clone(c))
        });
        if let Some(conn) = active {
            return f(&mut Pg::new(self, &conn));
        }
        self.with_own(f)
    }

    /// A transaction holding `tenant`'s advisory lock; `BEGIN` and the
    /// lock go out with the first statement, in its round trip. A
    /// connection found dead there is closed and `f` starts over on
    /// another (nothing of it took effect); once past it, an error is
    /// returned as is.
    fn mutate<T>(
        &self,
        tenant: &str,
        f: impl FnMut(PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.mutate_with(tenant, Durability::Synced, f)
    }
}

/// How a transaction's `COMMIT` waits for the WAL.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The server's setting (`synchronous_commit`, on by default): the
    /// commit returns once its WAL record is flushed.
    Synced,
    /// `SET LOCAL synchronous_commit TO OFF`: the commit returns before
    /// its WAL record is flushed. The next synced commit on the same
    /// server flushes the WAL up to its own record, and so this one's with
    /// it: a history version written this way just before the store's
    /// (synced) change is durable whenever that change is.
    Unsynced,
}

impl Db {
    /// [`Backend::mutate`], with the commit's durability chosen.
    pub(crate) fn mutate_with<T>(
        &self,
        tenant: &str,
        durability: Durability,
        mut f: impl FnMut(PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let lock = lock_sql(tenant);
        let key = self.key();
        let open = ACTIVE.with(|a| {
            a.borrow()
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, c)| Arc::clone(c))
        });
        if let Some(conn) = open {
            return self.joined(&conn, &format!("{SAVEPOINT}; {lock}"), f);
        }
        // Generic plans for the transaction's prepared statements: the
        // server would otherwise plan WRITE_CHECKED again at every
        // execution (its generic plan is costed on guessed row counts and
        // never looks cheaper), which takes longer than running it.
        let begin = format!(
            "BEGIN; SET LOCAL plan_cache_mode TO force_generic_plan; {lock}{}",
            match durability {
                Durability::Synced => "",
                Durability::Unsynced => "; SET LOCAL synchronous_commit TO OFF",
            }
        );
        let mut attempt = 1;
        loop {
            let mut lent = Lent::new(self.key(), self.checkout()?);
            let state = Cell::new(TxState::Open);
            let out = {
                let conn = lent.conn.as_deref().ok_or(Fail::Invalid("no connection"))?;
                let mut pg = Pg::new(self, conn);
                pg.begin = Some(Box::pin(conn.batch_execute(&begin)));
                let out = f(PgTx { pg, state: &state });
                match state.get() {
                    TxState::Committed | TxState::Ended | TxState::EndedFailed => {
                        lent.keep = true;
                    }
                    TxState::Lost | TxState::LostAtBegin => {}
                    TxState::Open => lent.keep = Pg::new(self, conn).end("ROLLBACK").is_ok(),
                }
                out
            };
            drop(lent);
            if state.get() != TxState::LostAtBegin || attempt >= self.attempts() {
                return out;
            }
            attempt += 1;
        }
    }

    /// A mutation inside a transaction this thread has open on `conn`
    /// (an [`exclusive`](Backend::exclusive), or a mutation whose change
    /// mutates again): a savepoint of it, whose `begin` takes the lock
    /// again (advisory locks are re-entrant in a session). It never starts
    /// over on another connection, which would not hold the enclosing
    /// transaction's locks.
    fn joined<T>(
        &self,
        conn: &Arc<Object>,
        begin: &str,
        mut f: impl FnMut(PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let state = Cell::new(TxState::Open);
        let mut pg = Pg::new(self, conn);
        pg.savepoint = true;
        pg.begin = Some(Box::pin(conn.batch_execute(begin)));
        let out = f(PgTx { pg, state: &state });
        if matches!(state.get(), TxState::EndedFailed | TxState::Open) {
            // A lost connection fails the enclosing transaction's next
            // statement too; nothing more to do for it here.
            let _ = Pg::new(self, conn).simple(UNDO);
        }
        out
    }
}
