//! One pooled PostgreSQL connection as a [`Dialect`], a transaction on
//! it, and the pool as a [`Backend`].

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::Poll;

use deadpool_postgres::Object;
use tokio_postgres::types::ToSql;

use super::super::{Columns, Dialect, Param};
use super::PostgresError;
use super::pool::{Db, wait};
use super::tx::RELEASE;

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
    pub(super) lost_at_begin: bool,
    /// The next statement is the transaction's last: `COMMIT` goes out
    /// right behind it, in the same round trip.
    pub(super) commit_next: bool,
    /// Where that `COMMIT` left the transaction: `Some(true)` committed,
    /// `Some(false)` ended without effect (the statement failed, so the
    /// server rolled it back).
    pub(super) ended: Option<bool>,
    /// A savepoint of a transaction this thread has open on the same
    /// connection (see [`Db::mutate_with`]), not a transaction of its own.
    pub(super) savepoint: bool,
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
    pub(super) fn end(&mut self, sql: &str) -> Result<(), PostgresError> {
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
