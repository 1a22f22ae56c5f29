//! `PostgresStore`: memories in a PostgreSQL database, shared by many
//! agent processes on many machines (feature `postgres`).
//!
//! The PostgreSQL dialect of the shared layout and operations
//! ([`super::ops`]), with byte-order (`COLLATE "C"`) text so listings and
//! subtree ranges match the other backends exactly. Each mutation is one
//! transaction holding a per-tenant advisory lock, so edits,
//! create-if-absent and whole-directory renames are atomic across every
//! connection of every node; reads take no lock.
//!
//! # Runtime
//!
//! The driver is `tokio-postgres`, pooled by `deadpool-postgres`. Each
//! store (with its clones and tenants) owns a small current-thread Tokio
//! runtime on a thread of its own, where the connections' I/O tasks run;
//! the blocking [`MemoryStore`](crate::MemoryStore) calls wait for their
//! answers by parking the calling thread, never by entering a runtime. So
//! a store can be created, used and dropped on any thread: a plain one,
//! a Tokio worker of either flavour, or `spawn_blocking`. Dropping the
//! last clone stops that thread, which drops its runtime there.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::tls::{Rustls, SslMode, client_config};
use super::{Backend, Columns, Commit, Dialect, DriverError, Fail, Param, SqlStore, schema};
use crate::tenant::TenantId;

/// Serializes schema creation between processes starting together.
const SCHEMA_LOCK: i64 = 0x636c_6175_6465_6d31; // "claudem1"

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS claude_memory_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claude_memory_entries (
    tenant TEXT COLLATE "C" NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    is_dir BOOLEAN NOT NULL,
    data BYTEA,
    len BIGINT NOT NULL,
    version BIGINT NOT NULL,
    modified_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, path)
);
CREATE INDEX IF NOT EXISTS claude_memory_children ON claude_memory_entries (tenant, parent);
CREATE SEQUENCE IF NOT EXISTS claude_memory_version;
"#;

/// Why connecting to PostgreSQL, or a statement on it, failed. The
/// driver's error, where there is one, is the [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresError {
    /// The connection URL or a setting is not usable.
    #[error("invalid PostgreSQL settings: {0}")]
    Config(String),
    /// The TLS settings (`sslmode`, CA certificate) are not usable.
    #[error("invalid TLS settings for PostgreSQL: {0}")]
    Tls(String),
    /// The store's I/O thread could not be started.
    #[error("could not start the PostgreSQL store's I/O thread")]
    Runtime(#[source] std::io::Error),
    /// No connection could be made (server down, refused, authentication,
    /// TLS handshake).
    #[error("could not connect to PostgreSQL: {}", super::remote::deepest(.0.as_ref()))]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Connecting took longer than the connect timeout.
    #[error("could not connect to PostgreSQL within {0:?} (connect timeout)")]
    ConnectTimeout(Duration),
    /// Every connection of the pool stayed in use for the checkout timeout.
    #[error("no PostgreSQL connection became free within {timeout:?} (all {size} in use)")]
    CheckoutTimeout {
        /// The checkout timeout.
        timeout: Duration,
        /// The pool's size.
        size: usize,
    },
    /// Another session held this tenant's write lock longer than the lock
    /// timeout.
    #[error(
        "gave up after waiting {0:?} for another session's write lock on these memories (lock timeout)"
    )]
    LockTimeout(Duration),
    /// A statement ran longer than the statement timeout and was cancelled.
    #[error("a PostgreSQL statement ran longer than {0:?} and was cancelled (statement timeout)")]
    StatementTimeout(Duration),
    /// The server did not answer in time (a dead network, a hung server);
    /// the connection is dropped.
    #[error("PostgreSQL did not answer within {0:?}; the connection was dropped")]
    NoAnswer(Duration),
    /// The connection was lost (the server restarted or ended the
    /// session); the next call connects again.
    #[error("the connection to PostgreSQL was lost ({}); the next call connects again", super::remote::deepest(.0.as_ref()))]
    ConnectionLost(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The server refused a statement.
    #[error("PostgreSQL refused a statement: {}", super::remote::deepest(.0.as_ref()))]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database was set up by a newer version of this crate.
    #[error("{}", schema::newer(i64::from(*.0)))]
    NewerSchema(i32),
    /// The schema table holds something this crate never wrote (several
    /// rows, or a value that is no version): not a store to trust.
    #[error("the database is not a claude-memory store this crate can read: {0}")]
    InvalidSchema(String),
}

impl DriverError for PostgresError {}

/// Timeouts and pool size of a [`PostgresStore`].
#[derive(Debug, Clone)]
struct Settings {
    max_connections: usize,
    connect_timeout: Duration,
    checkout_timeout: Duration,
    lock_timeout: Duration,
    statement_timeout: Duration,
}

impl Settings {
    /// How long the client waits for an answer before giving a connection
    /// up: past the server's own statement timeout, so that one answers
    /// first whenever the server is alive.
    fn answer_deadline(&self) -> Duration {
        self.statement_timeout + Duration::from_secs(5)
    }
}

/// Connection settings for a [`PostgresStore`], from
/// [`PostgresStore::builder`].
///
/// The URL is libpq's (`postgres://user:password@host:port/db?sslmode=…`);
/// `sslmode` takes all five libpq values (`disable`, `prefer` (default),
/// `require`, `verify-ca`, `verify-full`) and `sslrootcert` names a PEM
/// file of trusted CA certificates (else the system's are used).
#[derive(Debug, Clone)]
#[must_use]
pub struct PostgresBuilder {
    url: String,
    settings: Settings,
    ca_pem: Option<Vec<u8>>,
}

impl PostgresBuilder {
    /// The most connections the pool opens (default 8, at least 1).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.settings.max_connections = n.max(1);
        self
    }

    /// How long opening one connection (TCP, TLS, authentication) may
    /// take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long a call waits for a free connection of the pool (default
    /// 30 s).
    pub fn checkout_timeout(mut self, timeout: Duration) -> Self {
        self.settings.checkout_timeout = timeout;
        self
    }

    /// How long a mutation waits for the tenant's write lock while another
    /// session holds it (PostgreSQL's `lock_timeout`; default 10 s).
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.settings.lock_timeout = timeout;
        self
    }

    /// How long one statement may run (PostgreSQL's `statement_timeout`;
    /// default 30 s).
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.settings.statement_timeout = timeout;
        self
    }

    /// Trusts these CA certificates (PEM, one or more) for `verify-ca` and
    /// `verify-full`, in place of the URL's `sslrootcert` and the system's.
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Connects, and creates or checks the schema.
    pub fn connect(self) -> Result<PostgresStore, PostgresError> {
        let (config, mode, root_file) = parse_url(&self.url)?;
        let mut config = config;
        let s = &self.settings;
        let ca = match (self.ca_pem, root_file) {
            (Some(pem), _) => Some(pem),
            (None, Some(file)) if file != "system" => {
                Some(std::fs::read(&file).map_err(|e| {
                    PostgresError::Tls(format!("cannot read sslrootcert {file}: {e}"))
                })?)
            }
            (None, _) => None,
        };
        let tls = client_config(mode, ca.as_deref()).map_err(PostgresError::Tls)?;
        config
            .ssl_mode(mode.driver())
            .connect_timeout(s.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .options(format!(
                "-c lock_timeout={} -c statement_timeout={} -c idle_in_transaction_session_timeout={}",
                millis(s.lock_timeout),
                millis(s.statement_timeout),
                millis(s.answer_deadline() * 2),
            ));
        if config.get_application_name().is_none() {
            config.application_name("claude-memory");
        }
        let db = Db::start(config, Rustls(tls), self.settings)?;
        db.create_schema()?;
        Ok(PostgresStore(SqlStore::new(db)))
    }
}

/// A duration in whole milliseconds, at least 1 (0 would mean "none").
fn millis(d: Duration) -> u128 {
    d.as_millis().max(1)
}

/// The driver's settings from `url`, with the two TLS keys it does not
/// know (all five `sslmode` values, `sslrootcert`) taken out.
fn parse_url(
    url: &str,
) -> Result<(tokio_postgres::Config, SslMode, Option<String>), PostgresError> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: String| -> Result<bool, PostgresError> {
        match key {
            "sslmode" => {
                mode = Some(SslMode::parse(&value).ok_or_else(|| {
                    PostgresError::Config(format!(
                        "sslmode {value:?} is not one of disable, prefer, require, verify-ca, verify-full"
                    ))
                })?);
                Ok(true)
            }
            "sslrootcert" => {
                root = Some(value);
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&') {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    let v = percent_encoding::percent_decode_str(v)
                        .decode_utf8_lossy()
                        .into_owned();
                    if !take(k, v)? {
                        kept.push(pair);
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        // key=value form: the two keys are taken when written unquoted.
        let mut kept = Vec::new();
        for word in url.split_whitespace() {
            match word.split_once('=') {
                Some((k, v)) if !v.starts_with('\'') && take(k, v.to_owned())? => {}
                _ => kept.push(word),
            }
        }
        kept.join(" ")
    };
    let config = rest
        .parse::<tokio_postgres::Config>()
        .map_err(|e| PostgresError::Config(e.to_string()))?;
    Ok((config, mode.unwrap_or(SslMode::Prefer), root))
}

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
fn wait<F: Future>(fut: F, timeout: Duration) -> Option<F::Output> {
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

/// The database handle a store's clones share: the pool, and the runtime
/// thread its connections run on.
pub(super) struct Db {
    pool: Pool,
    runtime: tokio::runtime::Handle,
    settings: Settings,
    // Dropped last: ends the runtime thread, which drops the runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

thread_local! {
    /// The connection of each mutation running on this thread (by pool),
    /// so reads made inside it (by an `update`'s change) use its
    /// transaction instead of waiting for a second connection.
    static ACTIVE: RefCell<Vec<(usize, Arc<Object>)>> = const { RefCell::new(Vec::new()) };
}

/// A connection lent to a mutation, registered in [`ACTIVE`] until
/// dropped; dropped early (a panic) or marked lost, it is closed instead
/// of going back to the pool.
struct Lent {
    key: usize,
    conn: Option<Arc<Object>>,
    keep: bool,
}

impl Lent {
    fn new(key: usize, conn: Object) -> Self {
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
    fn start(
        config: tokio_postgres::Config,
        tls: Rustls,
        settings: Settings,
    ) -> Result<Self, PostgresError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(PostgresError::Runtime)?;
        let runtime = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("claude-memory-postgres".into())
            .spawn(move || {
                rt.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(PostgresError::Runtime)?;
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
        Ok(Db {
            pool,
            runtime,
            settings,
            _stop: stop,
        })
    }

    /// This pool's key in [`ACTIVE`].
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// A connection from the pool: an idle one that is still open, or a
    /// new one. Bounded by the checkout and connect timeouts.
    fn checkout(&self) -> Result<Object, PostgresError> {
        // Polled here, with the store's runtime as the current one (for the
        // pool's timers and the new connections' tasks): an idle connection
        // is handed over without a trip to the runtime's thread. Entering a
        // handle is not a `block_on`, so this is allowed inside another
        // runtime too.
        let _runtime = self.runtime.enter();
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
    fn error(&self, e: tokio_postgres::Error) -> PostgresError {
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
    fn attempts(&self) -> usize {
        self.settings.max_connections + 1
    }

    /// Creates or checks the schema, under a lock shared by every process.
    fn create_schema(&self) -> Result<(), PostgresError> {
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

/// A store in a PostgreSQL database. Cloning shares the pool.
#[derive(Clone)]
pub struct PostgresStore(pub(super) SqlStore<Db>);

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let SqlStore { db, tenant } = &self.0;
        f.debug_struct("PostgresStore")
            .field("tenant", tenant)
            .field("max_connections", &db.settings.max_connections)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Runs `f` in a transaction holding the advisory lock named `lock`
    /// and commits it: for the crate's own tables beside the store's (the
    /// history log), on this store's pool and runtime.
    pub(crate) fn transaction<T>(
        &self,
        lock: &str,
        mut f: impl FnMut(&mut PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.0.db.mutate(lock, |mut tx| {
            let out = f(&mut tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Runs `f` on a connection of this store's pool, outside any
    /// transaction (reads of the crate's own tables).
    pub(crate) fn connection<T>(
        &self,
        f: impl FnMut(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.0.db.with(f)
    }

    /// Connects to `url` (`postgres://user@host:port/db`, with
    /// `?sslmode=…&sslrootcert=…` if wanted) with a pool of at most
    /// `max_connections` and the default timeouts, and creates or checks
    /// the schema. [`builder`](Self::builder) sets the timeouts and a CA
    /// certificate.
    pub fn connect(url: &str, max_connections: usize) -> Result<Self, PostgresError> {
        Self::builder(url)
            .max_connections(max_connections)
            .connect()
    }

    /// Settings for connecting to `url`, with the defaults: 8 connections,
    /// connect timeout 10 s, checkout timeout 30 s, lock timeout 10 s,
    /// statement timeout 30 s.
    pub fn builder(url: &str) -> PostgresBuilder {
        PostgresBuilder {
            url: url.to_owned(),
            settings: Settings {
                max_connections: 8,
                connect_timeout: Duration::from_secs(10),
                checkout_timeout: Duration::from_secs(30),
                lock_timeout: Duration::from_secs(10),
                statement_timeout: Duration::from_secs(30),
            },
            ca_pem: None,
        }
    }

    /// The same database, seen as `tenant`'s store.
    pub fn for_tenant(&self, tenant: &TenantId) -> Self {
        PostgresStore(self.0.for_tenant(tenant))
    }
}

/// One pooled connection, as a [`Dialect`]: each statement is prepared
/// once per connection and cached, so it costs one round trip.
pub(crate) struct Pg<'c> {
    db: &'c Db,
    conn: &'c Object,
    /// A transaction's `BEGIN` and lock, not sent yet: they go out with
    /// the first statement, in the same round trip.
    begin: Option<Begin<'c>>,
    /// The connection died or stopped answering: close it.
    lost: bool,
    /// It was found dead at `BEGIN`: nothing of the transaction ran.
    lost_at_begin: bool,
}

type Begin<'c> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + 'c>>;

impl<'c> Pg<'c> {
    fn new(db: &'c Db, conn: &'c Object) -> Self {
        Pg {
            db,
            conn,
            begin: None,
            lost: false,
            lost_at_begin: false,
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
    /// pending `BEGIN` if there is one (both in one round trip: requests
    /// are sent in the order first polled, answered in order).
    fn answer<T>(
        &mut self,
        fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, PostgresError> {
        let limit = self.db.settings.answer_deadline();
        let mut begin = self.begin.take();
        let mut fut = pin!(fut);
        let (mut began, mut answered) = (None, None);
        let both = std::future::poll_fn(|cx| {
            if let Some(b) = begin.as_mut()
                && began.is_none()
                && let Poll::Ready(r) = b.as_mut().poll(cx)
            {
                began = Some(r);
            }
            if answered.is_none()
                && let Poll::Ready(r) = fut.as_mut().poll(cx)
            {
                answered = Some(r);
            }
            let waiting_begin = begin.is_some() && began.is_none();
            if matches!(began, Some(Err(_))) || (!waiting_begin && answered.is_some()) {
                Poll::Ready((began.take(), answered.take()))
            } else {
                Poll::Pending
            }
        });
        match wait(both, limit) {
            Some((Some(Err(e)), _)) => {
                let e = self.fail(e);
                self.lost_at_begin = self.lost;
                Err(e)
            }
            Some((_, Some(Ok(v)))) => Ok(v),
            Some((_, Some(Err(e)))) => Err(self.fail(e)),
            Some((_, None)) | None => {
                self.lost = true;
                Err(PostgresError::NoAnswer(limit))
            }
        }
    }

    /// Runs `sql` (one or more statements, no parameters) as a simple
    /// query: one round trip.
    fn simple(&mut self, sql: &str) -> Result<(), PostgresError> {
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

impl Dialect for Pg<'_> {
    type Error = PostgresError;

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

    fn fetch_opt<T>(
        &mut self,
        sql: &str,
        ps: &[Param<'_>],
        f: impl FnOnce(&dyn Columns<Error = PostgresError>) -> Result<T, PostgresError>,
    ) -> Result<Option<T>, PostgresError> {
        let conn = self.conn;
        let ps = params(ps);
        let row = self.answer(async {
            let st = conn.prepare_cached(sql).await?;
            conn.query_opt(&st, &ps).await
        })?;
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
        let rows = self.answer(async {
            let st = conn.prepare_cached(sql).await?;
            conn.query(&st, &ps).await
        })?;
        rows.into_iter().map(|r| f(&PgRow(r))).collect()
    }

    fn run(&mut self, sql: &str, ps: &[Param<'_>]) -> Result<(), PostgresError> {
        let conn = self.conn;
        let ps = params(ps);
        self.answer(async {
            let st = conn.prepare_cached(sql).await?;
            conn.execute(&st, &ps).await
        })?;
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
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if self.pg.lost_at_begin {
            self.state.set(TxState::LostAtBegin);
        } else if self.pg.lost {
            self.state.set(TxState::Lost);
        }
    }
}

impl Dialect for PgTx<'_> {
    type Error = PostgresError;
    const INSERT_DIR: &'static str = Pg::INSERT_DIR;
    const UPSERT_FILE: &'static str = Pg::UPSERT_FILE;
    const UPSERT_FILE_NEXT: Option<&'static str> = Pg::UPSERT_FILE_NEXT;
    const NEXT_VERSION: &'static str = Pg::NEXT_VERSION;
    const LONGEST_KEY: &'static str = Pg::LONGEST_KEY;

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
}

impl Commit for PgTx<'_> {
    fn commit(mut self) -> Result<(), PostgresError> {
        self.pg.simple("COMMIT")?;
        self.state.set(TxState::Committed);
        Ok(())
    }
}

/// `sql` text as a string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
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

    /// A transaction holding `tenant`'s advisory lock; `BEGIN` and the
    /// lock go out with the first statement, in its round trip. A
    /// connection found dead there is closed and `f` starts over on
    /// another (nothing of it took effect); once past it, an error is
    /// returned as is.
    fn mutate<T>(
        &self,
        tenant: &str,
        mut f: impl FnMut(PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let begin = format!(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended({}, 0))",
            literal(&format!("claude-memory:{tenant}"))
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
                    TxState::Committed => lent.keep = true,
                    TxState::Lost | TxState::LostAtBegin => {}
                    TxState::Open => lent.keep = Pg::new(self, conn).simple("ROLLBACK").is_ok(),
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
}

#[cfg(test)]
mod tests {
    use super::{SslMode, parse_url};

    #[test]
    fn a_newer_schema_error_keeps_its_text() {
        assert_eq!(
            super::PostgresError::NewerSchema(7).to_string(),
            "the database has claude-memory schema version 7; this crate knows 1"
        );
    }

    #[test]
    fn the_url_gives_all_five_ssl_modes_and_the_root_certificate() {
        let (config, mode, root) = parse_url(
            "postgres://u@db.example:5433/m?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .expect("parses");
        assert_eq!(mode, SslMode::VerifyFull);
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(config.get_application_name(), Some("x"));
        assert_eq!(config.get_ports(), &[5433]);
        for (s, m) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
        ] {
            let (_, mode, _) =
                parse_url(&format!("postgresql://u@h/d?sslmode={s}")).expect("parses");
            assert_eq!(mode, m);
        }
        let (_, mode, _) = parse_url("host=h user=u sslmode=require").expect("parses");
        assert_eq!(mode, SslMode::Require);
        assert_eq!(
            parse_url("postgres://u@h/d").expect("parses").1,
            SslMode::Prefer
        );
        let err = parse_url("postgres://u@h/d?sslmode=allow")
            .map(|_| ())
            .expect_err("refused");
        assert!(err.to_string().contains("sslmode \"allow\""), "{err}");
    }
}
