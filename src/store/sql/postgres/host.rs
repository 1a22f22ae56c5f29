//! A transaction hosted for the history log ([`Db::hosting`]): the log's
//! writer lock, taken on a connection of the store's own pool, that the
//! store's mutations on the same thread join, and that the log's appends
//! are queued in ([`Db::queue`]), to be sent with the next statement.
//!
//! Why: with the log and the store in one database, a change and its
//! version then commit together, in the change's own round trips (issue
//! 19's cost goal, measured in `bench/benches/history.rs` and counted on
//! the wire by `bench/examples/pg_round_trips.rs`). Before, each change
//! took a transaction for the lock, another for the version and a third
//! for the change: 6 round trips for a create against 1 without history,
//! and 2.03x the time.
//!
//! Two kinds of hosting:
//! - *one change* (a [`HistoryStore`](crate::history::HistoryStore)
//!   change): the joined mutation sends its `COMMIT` behind its last
//!   statement, as it does alone, with the change's versions between the
//!   two, each inserted only if the transaction wrote something by then
//!   (`txid_current_if_assigned()`): a write the store refused leaves no
//!   version, and nothing is left to do after the lock is let go.
//! - *many* (repair, an operator's command): each joined mutation is a
//!   savepoint of the hosted transaction, which commits once, at the end,
//!   so the lock is held throughout.
//!
//! Every transaction on the hosting connection starts with the hosted
//! lock, so the lock is held whenever a queue is sent.

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

/// A statement to queue in a hosting ([`Db::queue`]).
#[derive(Debug)]
pub(crate) struct Queue<'a> {
    /// The SQL. A `versioned` one ends with one more parameter than
    /// `params` holds: `0` when it must run, `1` when it runs only if the
    /// transaction has written something (`txid_current_if_assigned()`).
    pub(crate) sql: &'a str,
    pub(crate) params: Vec<Owned>,
    /// The history version it inserts (what [`Db::unqueue`] removes), or
    /// `None`.
    pub(crate) version: Option<u64>,
    /// It records the change being made: in a one-change hosting it goes
    /// out behind the change's last statement, conditional as above.
    pub(crate) versioned: bool,
}

/// A prepared statement with its parameters, not sent yet.
pub(super) struct Queued {
    pub(super) statement: Statement,
    pub(super) params: Vec<Box<dyn ToSql + Sync + Send>>,
    /// The hosting's check (see [`Db::hosting`]): its failure marks the
    /// hosting stale.
    pub(super) check: bool,
    version: Option<u64>,
    /// Takes the trailing "only if written" parameter.
    versioned: bool,
}

impl Queued {
    /// Ready to send: a versioned statement gets its last parameter.
    fn ready(mut self, only_if_written: bool) -> Self {
        if self.versioned {
            self.params
                .push(Owned::Int(i64::from(only_if_written)).boxed());
            self.versioned = false;
        }
        self
    }
}

/// The savepoint a joined mutation of a many-change hosting runs in.
pub(super) const SAVEPOINT: &str = "claude_memory_change";

/// How a mutation joins a hosting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Joined {
    /// Not hosted: a transaction of its own.
    No,
    /// A one-change hosting: `COMMIT` behind the last statement, with the
    /// change's versions; an explicit commit leaves it to the hosting.
    One,
    /// A many-change hosting: a savepoint, released behind the last
    /// statement or by the commit, rolled back to on failure.
    Savepoint,
}

/// The SQLSTATE a hosting's check fails with (`division_by_zero`: the
/// check divides by zero when what it checks does not hold).
pub(super) const CHECK_FAILED: &str = "22012";

/// How a [`Db::hosting`] went.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hosted {
    /// Its check failed: everything in its transaction was rolled back,
    /// and every statement after the check failed without being sent.
    pub(crate) stale: bool,
    /// A mutation of the store (not the log's own) joined it: the store
    /// being changed is on this pool.
    pub(crate) joined: bool,
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
    /// One change (see the module).
    one: bool,
    /// Sent before the next statement.
    queue: Vec<Queued>,
    /// A one-change hosting's versions: sent behind the change's last
    /// statement (or at the end, before `COMMIT`).
    after: Vec<Queued>,
    queued_bytes: usize,
    /// The connection died or stopped answering.
    lost: bool,
    /// See [`Hosted`].
    stale: bool,
    joined: bool,
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
/// and the queued statements (and, unless the hosting is of one change,
/// the versions waiting for its last statement). Nothing for a
/// connection that hosts none.
pub(super) fn take_queue(conn: &Object) -> (Option<String>, Vec<Queued>) {
    with_conn(conn, |h| {
        let mut queue: Vec<Queued> = std::mem::take(&mut h.queue)
            .into_iter()
            .map(|q| q.ready(false))
            .collect();
        if !h.one {
            queue.extend(
                std::mem::take(&mut h.after)
                    .into_iter()
                    .map(|q| q.ready(false)),
            );
        }
        h.queued_bytes = 0;
        let begin = (!h.open && !queue.is_empty()).then(|| h.begin.clone());
        if begin.is_some() {
            h.open = true;
        }
        (begin, queue)
    })
    .unwrap_or_default()
}

/// A one-change hosting's versions, to go out behind the change's last
/// statement on `conn`, each only if the transaction wrote by then.
pub(super) fn take_after(conn: &Object) -> Vec<Queued> {
    with_conn(conn, |h| {
        std::mem::take(&mut h.after)
            .into_iter()
            .map(|q| q.ready(true))
            .collect()
    })
    .unwrap_or_default()
}

/// Whether a one-change mutation on `conn` sends its `COMMIT` (and the
/// change's versions) behind its last statement: not once its versions
/// went out before it (a queue too big to wait), since a refused change
/// would then commit them; the hosting commits at its end instead.
pub(super) fn pipelines(conn: &Object) -> bool {
    with_conn(conn, |h| h.one).unwrap_or(false)
}

/// The versions waiting for a change's last statement go out with the
/// next statement instead (the hosting's `COMMIT`).
pub(super) fn release_after(conn: &Object) {
    with_conn(conn, |h| h.one = false);
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

/// The check of the hosting on `conn` failed.
pub(super) fn stale(conn: &Object) {
    with_conn(conn, |h| h.stale = true);
}

/// Whether `conn` hosts a transaction whose check failed: then nothing
/// more is sent on it until the hosting ends (the change runs again).
pub(super) fn is_stale(conn: &Object) -> bool {
    with_conn(conn, |h| h.stale).unwrap_or(false)
}

/// For a mutation of pool `key` on this thread, while it hosts: the
/// hosting connection, what the mutation's transaction starts with there
/// (its own lock `lock`, in a savepoint in a many-change hosting, and the
/// transaction's `BEGIN` with the hosted lock first if none is open), and
/// how it joined. `store`: the mutation is the store's (a tenant's lock),
/// not one of the log's own. `None`: no hosting (or it lost its
/// connection).
pub(super) fn join(key: usize, lock: &str, store: bool) -> Option<(Arc<Object>, String, Joined)> {
    with_key(key, |h| {
        if h.lost {
            return None;
        }
        h.joined |= store;
        let mut begin = String::new();
        if !h.open {
            h.open = true;
            begin = format!("{}; ", h.begin);
        }
        let how = if h.one {
            Joined::One
        } else {
            begin.push_str(&format!("SAVEPOINT {SAVEPOINT}; "));
            Joined::Savepoint
        };
        begin.push_str(lock);
        Some((Arc::clone(&h.conn), begin, how))
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
    ///
    /// Without `check`, the transaction's `BEGIN` and lock go out with
    /// `f`'s first statement on the `Pg` it gets. With `check` (a
    /// statement that divides by zero when what the caller guessed does
    /// not hold), `BEGIN`, the lock and the check go out with the first
    /// statement anyone sends on the connection, so a guess costs no
    /// round trip; if the check fails, the transaction is rolled back,
    /// every later statement of the hosting fails unsent, and
    /// [`Hosted::stale`] says so.
    pub(crate) fn hosting<T>(
        &self,
        lock: &str,
        check: Option<(&str, Vec<Owned>)>,
        one: bool,
        f: impl FnOnce(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<(T, Hosted), Fail> {
        let key = self.key();
        if let Some(conn) = with_key(key, |h| Arc::clone(&h.conn)) {
            return Ok((f(&mut Pg::new(self, &conn))?, Hosted::default()));
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
                open: check.is_none(),
                one,
                queue: Vec::new(),
                after: Vec::new(),
                queued_bytes: 0,
                lost: false,
                stale: false,
                joined: false,
            })
        });
        let popped = Popped(key);
        let out = (|| {
            let mut pg = Pg::new(self, &conn);
            match check {
                None => pg.begin = Some(Box::pin(conn.batch_execute(&begin))),
                Some((sql, params)) => {
                    let statement = self.prepare(&conn, sql)?;
                    let params = params.into_iter().map(Owned::boxed).collect();
                    with_key(key, |h| {
                        h.queue.push(Queued {
                            statement,
                            params,
                            check: true,
                            version: None,
                            versioned: false,
                        });
                    });
                }
            }
            let out = f(&mut pg);
            if pg.begin.is_some() {
                ended(&conn); // nothing was sent: no transaction
            }
            if pg.lost {
                lost(&conn);
            }
            out
        })();
        let state = with_key(key, |h| {
            (
                h.open,
                !h.queue.is_empty() || !h.after.is_empty(),
                h.lost,
                Hosted {
                    stale: h.stale,
                    joined: h.joined,
                },
            )
        });
        let (open, queued, gone, hosted) = state.unwrap_or((false, false, true, Hosted::default()));
        if hosted.stale {
            // Nothing more may go out: the queue is dropped with the host.
            with_key(key, |h| h.stale = false);
        }
        let end = if gone {
            Err(Fail::Invalid("the connection was lost"))
        } else if out.is_ok() && !hosted.stale && (open || queued) {
            let mut pg = Pg::new(self, &conn);
            let done = pg.commit_hosted();
            ended(&conn);
            done.map_err(Fail::from)
        } else if open || hosted.stale {
            // A stale hosting's transaction may be open whatever `open`
            // says (its check failed before the rest went out): rolled
            // back in any case, so the connection goes back to the pool
            // outside any transaction (else the change's second run, on
            // the same connection, began inside the aborted one).
            with_key(key, |h| {
                h.queue.clear();
                h.after.clear();
            });
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
        Ok((value, hosted))
    }

    /// `sql` prepared (cached) on `conn`, waiting no longer than a
    /// statement may take.
    fn prepare(&self, conn: &Object, sql: &str) -> Result<Statement, Fail> {
        let limit = self.settings.answer_deadline();
        match wait(conn.prepare_cached(sql), limit) {
            Some(Ok(st)) => Ok(st),
            Some(Err(e)) => {
                let e = self.error(e);
                if conn.is_closed() {
                    lost(conn);
                }
                Err(e.into())
            }
            None => {
                lost(conn);
                Err(super::PostgresError::NoAnswer(limit).into())
            }
        }
    }

    /// Queues `statements` in this thread's hosting of this pool, to go
    /// out before its next statement, or (a one-change hosting's
    /// versioned ones) behind the change's last statement, or with its
    /// `COMMIT`; `Ok(false)` (nothing queued) if this thread hosts none.
    /// All are prepared first, so a failure queues none of them.
    pub(crate) fn queue(&self, statements: Vec<Queue<'_>>) -> Result<bool, Fail> {
        let key = self.key();
        let Some((conn, stale, gone)) = with_key(key, |h| (Arc::clone(&h.conn), h.stale, h.lost))
        else {
            return Ok(false);
        };
        if gone {
            // Never elsewhere: only the hosted transaction holds the lock.
            return Err(Fail::Invalid(
                "the connection of the history's change was lost",
            ));
        }
        if stale {
            // The change runs again: what it queues now would be dropped.
            return Err(Fail::Invalid("the history's guess was wrong"));
        }
        let mut prepared = Vec::with_capacity(statements.len());
        for q in statements {
            let statement = self.prepare(&conn, q.sql)?;
            let bytes: usize = q.params.iter().map(Owned::len).sum();
            let params = q.params.into_iter().map(Owned::boxed).collect();
            prepared.push((
                Queued {
                    statement,
                    params,
                    check: false,
                    version: q.version,
                    versioned: q.versioned,
                },
                bytes,
            ));
        }
        let full = with_key(key, |h| {
            for (q, bytes) in prepared {
                if q.versioned && h.one {
                    h.after.push(q);
                } else {
                    h.queue.push(q);
                }
                h.queued_bytes += bytes;
            }
            let full =
                h.queue.len() + h.after.len() >= QUEUE_STATEMENTS || h.queued_bytes >= QUEUE_BYTES;
            if full && !h.after.is_empty() {
                // Sent before the change's statements now: the hosting
                // commits at its end instead, after the change.
                h.one = false;
            }
            full
        })
        .unwrap_or(false);
        if full {
            // Sent now, in the hosted transaction, waiting for nothing else.
            Pg::new(self, &conn).flush()?;
        }
        Ok(true)
    }

    /// Removes the versions `ids` from this thread's hosting's queues if
    /// they are still there; returns the ids that were not (sent already).
    pub(crate) fn unqueue(&self, ids: &[u64]) -> Vec<u64> {
        let found = with_key(self.key(), |h| {
            let mut found = Vec::new();
            for q in [&mut h.queue, &mut h.after] {
                q.retain(|q| match q.version {
                    Some(v) if ids.contains(&v) => {
                        found.push(v);
                        false
                    }
                    _ => true,
                });
            }
            found
        })
        .unwrap_or_default();
        ids.iter().copied().filter(|i| !found.contains(i)).collect()
    }

    /// Runs `f`, a change the store makes in several transactions (an
    /// encrypted rename: journal, copies, deletes), as one: in a hosting
    /// of one change on this thread, the hosting becomes one of many from
    /// here (each mutation a savepoint, the versions sent with the first,
    /// one `COMMIT` at its end), so the writer lock is held until the
    /// whole change is made. Before (an attacker's review): the first
    /// mutation committed with the change's versions and let the lock go,
    /// a second writer came in mid-move, took the versions for a change
    /// that never happened, and the reopen recorded repairs.
    pub(crate) fn holding(
        &self,
        f: &mut dyn FnMut() -> crate::store::StoreResult<()>,
    ) -> crate::store::StoreResult<()> {
        with_key(self.key(), |h| h.one = false);
        f()
    }

    /// Whether this thread hosts a transaction of this pool.
    pub(crate) fn hosts(&self) -> bool {
        with_key(self.key(), |_| ()).is_some()
    }

    /// Whether this thread hosts a transaction of this pool whose
    /// connection was lost: then no mutation of the pool may run on this
    /// thread until the hosting ends (anywhere else it would run without
    /// the hosted lock).
    pub(super) fn host_lost(&self) -> bool {
        with_key(self.key(), |h| h.lost).unwrap_or(false)
    }
}
