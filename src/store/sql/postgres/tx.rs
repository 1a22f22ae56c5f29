//! Transactions on the pool: a mutation's (its `BEGIN` and lock sent
//! with its first statement), one joining a transaction this thread has
//! open (a savepoint of it), and the pool as a [`Backend`].

use std::cell::Cell;
use std::sync::Arc;

use deadpool_postgres::Object;

use super::super::{Backend, Columns, Commit, Dialect, Fail, Param};
use super::PostgresError;
use super::conn::Pg;
use super::pool::{ACTIVE, Db, Lent};

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
pub(super) const RELEASE: &str = "RELEASE SAVEPOINT claude_memory_change";
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
