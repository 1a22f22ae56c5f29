//! The database handle a PostgreSQL store's clones share: the pool, whose
//! connections run on the process's I/O thread (`store::runtime`), and
//! the wait that lets a blocking call use them from any thread.

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use tokio_postgres::error::SqlState;

use super::super::schema;
use super::super::tls::Rustls;
use super::{Pg, PostgresError, SCHEMA, SCHEMA_LOCK, Settings};
use crate::store::runtime::Io;

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` on this thread, parking between polls, until it is done or
/// `timeout` has passed (`None`). No runtime is entered, so this works on
/// any thread, a Tokio worker included (where it blocks that worker, as
/// any blocking call does).
pub(super) fn wait<F: Future>(fut: F, timeout: Duration) -> Option<F::Output> {
    let deadline = Instant::now() + timeout;
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// The database handle a store's clones share: the pool, and the I/O
/// thread its connections run on.
pub(in crate::store::sql) struct Db {
    pool: Pool,
    io: Io,
    pub(super) settings: Settings,
}

thread_local! {
    /// The connection of each mutation running on this thread (by pool),
    /// so reads made inside it (by an `update`'s change) use its
    /// transaction instead of waiting for a second connection.
    pub(super) static ACTIVE: RefCell<Vec<(usize, Arc<Object>)>> = const { RefCell::new(Vec::new()) };
}

/// A connection lent to a mutation, registered in [`ACTIVE`] until
/// dropped; dropped early (a panic) or marked lost, it is closed instead
/// of going back to the pool.
pub(super) struct Lent {
    key: usize,
    pub(super) conn: Option<Arc<Object>>,
    pub(super) keep: bool,
}

impl Lent {
    pub(super) fn new(key: usize, conn: Object) -> Self {
        let conn = Arc::new(conn);
        ACTIVE.with(|a| a.borrow_mut().push((key, Arc::clone(&conn))));
        Lent {
            key,
            conn: Some(conn),
            keep: false,
        }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let key = self.key;
        ACTIVE.with(|a| {
            let mut a = a.borrow_mut();
            if let Some(i) = a.iter().rposition(|(k, _)| *k == key) {
                a.remove(i);
            }
        });
        if let Some(conn) = self.conn.take()
            && let Ok(conn) = Arc::try_unwrap(conn)
            && !self.keep
        {
            drop(Object::take(conn));
        }
    }
}

impl Db {
    pub(super) fn start(
        config: tokio_postgres::Config,
        tls: Rustls,
        settings: Settings,
    ) -> Result<Self, PostgresError> {
        let io = Io::shared().map_err(PostgresError::Runtime)?;
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(settings.checkout_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|e| PostgresError::Config(e.to_string()))?;
        Ok(Db { pool, io, settings })
    }

    /// This pool's key in [`ACTIVE`].
    pub(super) fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// A connection from the pool: an idle one that is still open, or a
    /// new one. Bounded by the checkout and connect timeouts.
    pub(super) fn checkout(&self) -> Result<Object, PostgresError> {
        // Polled here, with the store's runtime as the current one (for the
        // pool's timers and the new connections' tasks): an idle connection
        // is handed over without a trip to the runtime's thread. Entering a
        // handle is not a `block_on`, so this is allowed inside another
        // runtime too.
        let _runtime = self.io.handle().enter();
        let s = &self.settings;
        let limit = s.checkout_timeout + s.connect_timeout * 2 + Duration::from_secs(5);
        match wait(self.pool.get(), limit) {
            Some(Ok(conn)) => Ok(conn),
            Some(Err(e)) => Err(self.pool_error(e)),
            None => Err(PostgresError::CheckoutTimeout {
                timeout: limit,
                size: s.max_connections,
            }),
        }
    }

    fn pool_error(&self, e: PoolError) -> PostgresError {
        use deadpool_postgres::TimeoutType;
        let s = &self.settings;
        match e {
            PoolError::Timeout(TimeoutType::Wait) => PostgresError::CheckoutTimeout {
                timeout: s.checkout_timeout,
                size: s.max_connections,
            },
            PoolError::Timeout(_) => PostgresError::ConnectTimeout(s.connect_timeout),
            PoolError::Backend(e) => PostgresError::Connect(Box::new(e)),
            other => PostgresError::Connect(other.to_string().into()),
        }
    }

    /// A statement's error, in words.
    pub(super) fn error(&self, e: tokio_postgres::Error) -> PostgresError {
        let s = &self.settings;
        match e.code() {
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => {
                PostgresError::LockTimeout(s.lock_timeout)
            }
            Some(c) if *c == SqlState::QUERY_CANCELED => {
                PostgresError::StatementTimeout(s.statement_timeout)
            }
            Some(c)
                if *c == SqlState::ADMIN_SHUTDOWN
                    || *c == SqlState::CRASH_SHUTDOWN
                    || *c == SqlState::CANNOT_CONNECT_NOW
                    || *c == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT =>
            {
                PostgresError::ConnectionLost(Box::new(e))
            }
            _ if e.is_closed() => PostgresError::ConnectionLost(Box::new(e)),
            _ => PostgresError::Database(Box::new(e)),
        }
    }

    /// How many times a call takes another connection when the one it got
    /// turns out to be dead: every pooled one may be (a server restart).
    pub(super) fn attempts(&self) -> usize {
        self.settings.max_connections + 1
    }

    /// Creates or checks the schema, under a lock shared by every process.
    pub(super) fn create_schema(&self) -> Result<(), PostgresError> {
        let conn = self.checkout()?;
        let mut pg = Pg::new(self, &conn);
        let out = (|| {
            pg.simple(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA}"
            ))?;
            match schema::check_version(&mut pg)? {
                // Leave a newer schema alone; refuse to use it.
                schema::Found::Newer(v) => {
                    return Err(PostgresError::NewerSchema(
                        i32::try_from(v).unwrap_or(i32::MAX),
                    ));
                }
                schema::Found::Invalid(why) => return Err(PostgresError::InvalidSchema(why)),
                schema::Found::Current | schema::Found::Missing => {}
            }
            pg.simple("COMMIT")
        })();
        let broken = out.is_err() && pg.simple("ROLLBACK").is_err();
        drop(pg);
        if broken {
            drop(Object::take(conn));
        }
        out
    }
}
