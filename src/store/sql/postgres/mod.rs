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
//! The driver is `tokio-postgres`, pooled by `deadpool-postgres`. The
//! connections' I/O tasks run on the one small runtime the remote stores
//! share (a thread started by the first of them); the blocking
//! [`MemoryStore`](crate::MemoryStore) calls wait for their answers by
//! parking the calling thread, never by entering a runtime. So a store can
//! be created, used and dropped on any thread: a plain one, a Tokio worker
//! of either flavour, or `spawn_blocking`.

mod conn;
mod pool;
mod tx;

use std::time::Duration;

use super::tls::{Rustls, SslMode, client_config};
use super::{Commit, DriverError, Fail, SqlStore, schema};
use crate::tenant::TenantId;

pub(crate) use self::conn::Pg;
pub(super) use self::pool::Db;
pub(crate) use self::tx::{Durability, PgTx};

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
        f: impl FnMut(&mut PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.transaction_with(lock, Durability::Synced, f)
    }

    /// [`transaction`](Self::transaction), its commit's durability chosen
    /// (the history log's appends commit [`Durability::Unsynced`]).
    pub(crate) fn transaction_with<T>(
        &self,
        lock: &str,
        durability: Durability,
        mut f: impl FnMut(&mut PgTx<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.0.db.mutate_with(lock, durability, |mut tx| {
            let out = f(&mut tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Runs `f` on a connection of this store's pool, outside any
    /// transaction (reads of the crate's own tables): one this thread has
    /// open on the same pool is not used (see `Db::with_own`).
    pub(crate) fn connection<T>(
        &self,
        f: impl FnMut(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        self.0.db.with_own(f)
    }

    /// Runs `f` in the transaction this thread has open on this store's
    /// pool, if there is one (the history log's reads inside its own
    /// change), else as [`connection`](Self::connection).
    pub(crate) fn reading<T>(
        &self,
        f: impl FnMut(&mut Pg<'_>) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        use super::Backend;
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

    /// The tenant this store sees (`""`: the default one).
    pub(crate) fn tenant(&self) -> &str {
        self.0.tenant()
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
