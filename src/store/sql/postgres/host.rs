//! A transaction hosted for the history log ([`Db::hosting`]): the log's
//! writer lock, taken on a connection of the store's own pool, that the
//! store's mutations on the same thread join, and that the log's appends
//! are queued in ([`Db::queue`]), to be sent with the next statement.
//!
//! Why: with the log and the store in one database, a change and its
//! version then commit together, in the change's own round trips plus one
//! for the lock (issue 19's cost goal, measured in `bench/benches/
//! history.rs` and counted on the wire by `bench/examples/
//! pg_round_trips.rs`). Before, each change took a transaction for the
//! lock, another for the version and a third for the change: 6 round
//! trips for a create against 1 without history, and 2.03x the time.
//!
//! Every transaction on the hosting connection starts with the hosted
//! lock: the first, and any a joined mutation starts after an earlier one
//! committed (a mutation's `COMMIT` goes out behind its last statement),
//! so the lock is held whenever the queue is sent.

use std::cell::RefCell;
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::super::Fail;
use super::conn::{Pg, literal};
use super::pool::{Db, Lent, wait};

/// A parameter owned by a queued statement.
#[derive(Debug, Clone)]
pub(crate) enum Owned {
    /// `TEXT`, or NULL.
    Text(Option<String>),
    /// `BIGINT`.
    Int(i64),
    /// `BYTEA`, or NULL.
    Bytes(Option<Vec<u8>>),
}

impl Owned {
    fn len(&self) -> usize {
        match self {
            Owned::Text(t) => t.as_ref().map_or(0, String::len),
            Owned::Bytes(b) => b.as_ref().map_or(0, Vec::len),
            Owned::Int(_) => 8,
        }
    }

    fn boxed(self) -> Box<dyn ToSql + Sync + Send> {
        match self {
            Owned::Text(t) => Box::new(t),
            Owned::Int(n) => Box::new(n),
            Owned::Bytes(b) => Box::new(b),
        }
    }
}

/// A prepared statement with its parameters, not sent yet.
pub(super) struct Queued {
    pub(super) statement: Statement,
    pub(super) params: Vec<Box<dyn ToSql + Sync + Send>>,
}

/// One hosted transaction's state, while [`Db::hosting`] runs.
struct Host {
    key: usize,
    conn: Arc<Object>,
    /// What starts a transaction on `conn`: `BEGIN`, the plan setting
    /// and the hosted lock.
    begin: String,
    /// A transaction is open on `conn` (or its `BEGIN` is on its way).
    open: bool,
    queue: Vec<Queued>,
    queued_bytes: usize,
    /// The connection died or stopped answering.
    lost: bool,
}

thread_local! {
    static HOSTS: RefCell<Vec<Host>> = const { RefCell::new(Vec::new()) };
}

/// The most a queue holds before it is sent on its own: a repair's
/// baselines or a directory's versions stay bounded in memory.
const QUEUE_STATEMENTS: usize = 64;
const QUEUE_BYTES: usize = 1024 * 1024;

fn with_key<T>(key: usize, f: impl FnOnce(&mut Host) -> T) -> Option<T> {
    HOSTS.with(|h| {
        h.borrow_mut()
            .iter_mut()
            .rev()
            .find(|h| h.key == key)
            .map(f)
    })
}

fn with_conn<T>(conn: &Object, f: impl FnOnce(&mut Host) -> T) -> Option<T> {
    HOSTS.with(|h| {
        h.borrow_mut()
            .iter_mut()
            .rev()
            .find(|h| std::ptr::eq(&*h.conn, conn))
            .map(f)
    })
}

/// What must go out before the next statement on `conn`: a `BEGIN` (with
/// the hosted lock) if no transaction is open and statements are queued,
/// and the queued statements. Nothing for a connection that hosts none.
pub(super) fn take_queue(conn: &Object) -> (Option<String>, Vec<Queued>) {
    with_conn(conn, |h| {
        let queue = std::mem::take(&mut h.queue);
        h.queued_bytes = 0;
        let begin = (!h.open && !queue.is_empty()).then(|| h.begin.clone());
        if begin.is_some() {
            h.open = true;
        }
        (begin, queue)
    })
    .unwrap_or_default()
}

/// The transaction on `conn` ended (`COMMIT` or `ROLLBACK`, sent on its
/// own or behind a statement).
pub(super) fn ended(conn: &Object) {
    with_conn(conn, |h| h.open = false);
}

/// `conn` died or stopped answering.
pub(super) fn lost(conn: &Object) {
    with_conn(conn, |h| h.lost = true);
}

/// For a mutation of pool `key` on this thread, while it hosts: the
/// hosting connection and what the mutation's transaction starts with
/// there: its own lock `lock` inside the open transaction, or a new
/// transaction with the hosted lock first. `None`: no hosting (or it
/// lost its connection).
pub(super) fn join(key: usize, lock: &str) -> Option<(Arc<Object>, String)> {
    with_key(key, |h| {
        if h.lost {
            return None;
        }
        let begin = if h.open {
            lock.to_owned()
        } else {
            h.open = true;
            format!("{}; {lock}", h.begin)
        };
        Some((Arc::clone(&h.conn), begin))
    })
    .flatten()
}

/// `SELECT pg_advisory_xact_lock(…)` of the lock named `name`.
pub(super) fn lock_sql(name: &str) -> String {
    format!(
        "SELECT pg_advisory_xact_lock(hashtextextended({}, 0))",
        literal(&format!("claude-memory:{name}"))
    )
}

/// Pops this thread's newest hosting, also when its closure panicked.
struct Popped(usize);

impl Drop for Popped {
    fn drop(&mut self) {
        let key = self.0;
        HOSTS.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|h| h.key == key) {
                h.remove(i);
            }
        });
    }
}

impl Db {
    /// Runs `f` in a transaction holding the advisory lock `lock` (the
    /// history log's writer lock), on a connection of this pool that
    /// every mutation of this pool on this thread joins meanwhile, and
    /// commits it with whatever [`queue`](Self::queue) left, unless `f`
    /// failed. Inside a hosting of this pool already (the same thread),
    /// `f` runs in that one.
    pub(crate) fn hosting<T>(
        &self,
        lock: &str,
        f: impl FnOnce(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let key = self.key();
        if let Some(conn) = with_key(key, |h| Arc::clone(&h.conn)) {
            return f(&mut Pg::new(self, &conn));
        }
        let begin = format!(
            "BEGIN; SET LOCAL plan_cache_mode TO force_generic_plan; {}",
            lock_sql(lock)
        );
        let mut lent = Lent::new(key, self.checkout()?);
        let conn = Arc::clone(lent.conn.as_ref().ok_or(Fail::Invalid("no connection"))?);
        HOSTS.with(|h| {
            h.borrow_mut().push(Host {
                key,
                conn: Arc::clone(&conn),
                begin: begin.clone(),
                open: true,
                queue: Vec::new(),
                queued_bytes: 0,
                lost: false,
            })
        });
        let popped = Popped(key);
        let out = {
            let mut pg = Pg::new(self, &conn);
            pg.begin = Some(Box::pin(conn.batch_execute(&begin)));
            let out = f(&mut pg);
            if pg.begin.is_some() {
                ended(&conn); // nothing was sent: no transaction
            }
            if pg.lost {
                lost(&conn);
            }
            out
        };
        let (open, queued, gone) = with_key(key, |h| (h.open, !h.queue.is_empty(), h.lost))
            .unwrap_or((false, false, true));
        let end = if gone {
            Err(Fail::Invalid("the connection was lost"))
        } else if out.is_ok() && (open || queued) {
            let mut pg = Pg::new(self, &conn);
            let done = pg.simple("COMMIT");
            ended(&conn);
            done.map_err(Fail::from)
        } else if open {
            let mut pg = Pg::new(self, &conn);
            let done = pg.simple("ROLLBACK");
            done.map_err(Fail::from)
        } else {
            Ok(())
        };
        drop(popped);
        lent.keep = end.is_ok();
        drop(conn);
        drop(lent);
        let value = out?;
        end?;
        Ok(value)
    }

    /// Queues `statements` (SQL and parameters) in this thread's hosting
    /// of this pool, to go out before its next statement or with its
    /// `COMMIT`; `Ok(false)` (nothing queued) if this thread hosts none.
    /// All are prepared first, so a failure queues none of them.
    pub(crate) fn queue(&self, statements: Vec<(&str, Vec<Owned>)>) -> Result<bool, Fail> {
        let key = self.key();
        let Some(conn) = with_key(key, |h| (!h.lost).then(|| Arc::clone(&h.conn))).flatten() else {
            return Ok(false);
        };
        let limit = self.settings.answer_deadline();
        let mut prepared = Vec::with_capacity(statements.len());
        for (sql, params) in statements {
            let statement = match wait(conn.prepare_cached(sql), limit) {
                Some(Ok(st)) => st,
                Some(Err(e)) => {
                    let e = self.error(e);
                    if conn.is_closed() {
                        lost(&conn);
                    }
                    return Err(e.into());
                }
                None => {
                    lost(&conn);
                    return Err(super::PostgresError::NoAnswer(limit).into());
                }
            };
            let bytes: usize = params.iter().map(Owned::len).sum();
            let params = params.into_iter().map(Owned::boxed).collect();
            prepared.push((Queued { statement, params }, bytes));
        }
        let full = with_key(key, |h| {
            for (q, bytes) in prepared {
                h.queue.push(q);
                h.queued_bytes += bytes;
            }
            h.queue.len() >= QUEUE_STATEMENTS || h.queued_bytes >= QUEUE_BYTES
        })
        .unwrap_or(false);
        if full {
            // Sent now, in the hosted transaction, waiting for nothing else.
            Pg::new(self, &conn).flush()?;
        }
        Ok(true)
    }

    /// Whether this thread hosts a transaction of this pool.
    pub(crate) fn hosts(&self) -> bool {
        with_key(self.key(), |h| !h.lost).unwrap_or(false)
    }
}
