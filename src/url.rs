//! A store named by one string: the CLI's `--store`, or a setting an
//! application reads. As object_store's `parse_url` does for buckets,
//! [`StoreUrl::parse`] says which backend the text names (a mistyped
//! scheme is an error, never a directory of that name), and
//! [`StoreUrl::open`] opens it: seen as a tenant's, with its keys, and
//! with the history log it keeps. It stands above the stores and the
//! history, as `backup` and `sync` do.
//!
//! What it does not protect: a PostgreSQL store is opened by connecting,
//! which creates its tables (neither `create: false` nor `read_only` stop
//! that); a SQLite store opened read-only may gain its `-wal` and `-shm`
//! files, and its history log has no read-only mode; a SQLite store's
//! tenants share one log file, so one tenant's history makes
//! [`HistoryLogs::IfKept`] open a log for the others; a directory reached
//! through a symbolic link cannot keep a history (the journal refuses
//! links).

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::TenantId;
use crate::history::HistoryLog;
use crate::store::MemoryStore;

/// Where a store is. Each kind needs its feature to be opened; every kind
/// parses in every build, so a build without it says which feature.
///
/// ```
/// use claude_memory::url::{HistoryLogs, OpenOptions, StoreUrl};
///
/// let url: StoreUrl = "sqlite:memories.db".parse()?;
/// assert_eq!(url, StoreUrl::Sqlite("memories.db".into()));
/// // A typo is an error, not a directory named `postgress:`.
/// assert!("postgress://localhost/db".parse::<StoreUrl>().is_err());
///
/// let dir = std::env::temp_dir().join("claude-memory-doc-url");
/// let opened = StoreUrl::Dir(dir)
///     .open(&OpenOptions::new().create(true).history(HistoryLogs::Start))?;
/// assert!(opened.log.is_some());
/// # Ok::<(), claude_memory::url::OpenError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// A directory: a [`FilesystemStore`](crate::FilesystemStore).
    Dir(PathBuf),
    /// `sqlite:PATH` (or sqlx's `sqlite://PATH`): a `SqliteStore`
    /// (feature `sqlite`).
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: a `PostgresStore` (feature
    /// `postgres`).
    Postgres(String),
    /// `s3://`, `az://` or `gs://BUCKET/PREFIX`: a `CloudStore` set up
    /// from the environment, as `CloudStore::from_url` (features `s3`,
    /// `azure`, `gcs`).
    Cloud(String),
    /// `managed:MEMSTORE_ID`: a `ManagedStore` with its key from
    /// `ANTHROPIC_API_KEY`, as `ManagedStore::open` (feature `managed`).
    Managed(String),
}

/// How to open a store: options as values.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Create a directory or SQLite store that is missing (default: no,
    /// so a mistyped path is an error, not a new empty store). A history
    /// is started by [`HistoryLogs::Start`] whatever this says.
    pub create: bool,
    /// Only read: a directory store without its lock file, a SQLite file
    /// read-only, a history log that repairs nothing.
    pub read_only: bool,
    /// See the store as this tenant's: a SQL store's `for_tenant`, any
    /// other's [`TenantStore`](crate::TenantStore).
    pub tenant: Option<TenantId>,
    /// Open its history log: where the store keeps one, or anyway with
    /// [`HistoryLogs::Start`].
    pub history: HistoryLogs,
    /// The keys of an encrypted store: the store is opened sealed
    /// ([`EncryptedStore`](crate::EncryptedStore), made encrypted if it
    /// is new and not `read_only`) and its history log sealed with it.
    /// Without keys, an encrypted store is refused
    /// ([`OpenError::Encrypted`]): read raw, it would take its sealed
    /// files for the model's and its new files would be plaintext.
    /// With a tenant, give the tenant's keys (`Keyring::for_tenant`).
    #[cfg(feature = "encryption")]
    pub keys: Option<crate::Keyring>,
    /// Open an encrypted store without its keys, as its backend holds it:
    /// its sealed files as they are, for a re-key or a sealed backup
    /// (default: no).
    pub raw: bool,
}

impl OpenOptions {
    /// The defaults: open an existing store for writing, no tenant, the
    /// history log only if one is kept.
    pub fn new() -> Self {
        OpenOptions::default()
    }

    /// Sets [`create`](Self::create).
    pub fn create(mut self, yes: bool) -> Self {
        self.create = yes;
        self
    }

    /// Sets [`read_only`](Self::read_only).
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Sets [`tenant`](Self::tenant).
    pub fn tenant(mut self, tenant: Option<TenantId>) -> Self {
        self.tenant = tenant;
        self
    }

    /// Sets [`history`](Self::history).
    pub fn history(mut self, history: HistoryLogs) -> Self {
        self.history = history;
        self
    }

    /// Sets [`raw`](Self::raw).
    pub fn raw(mut self, yes: bool) -> Self {
        self.raw = yes;
        self
    }

    /// Sets [`keys`](Self::keys).
    #[cfg(feature = "encryption")]
    pub fn keys(mut self, keys: Option<crate::Keyring>) -> Self {
        self.keys = keys;
        self
    }
}

/// Whether [`StoreUrl::open`] opens the store's history log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HistoryLogs {
    /// The log where the store already keeps one: a store with history
    /// then records every change, whoever opens it.
    #[default]
    IfKept,
    /// The log, started if there is none yet.
    Start,
    /// The log, which must exist ([`OpenError::NoHistory`] otherwise).
    Required,
    /// No log.
    Never,
}

/// A store [`StoreUrl::open`] opened, and its history log: a store that
/// keeps a history records a change only through a
/// [`HistoryStore`](crate::history::HistoryStore) over both. Opening
/// blocks (a database connects); from async code, call it in
/// `spawn_blocking`.
///
/// ```
/// use claude_memory::history::HistoryStore;
/// use claude_memory::url::{HistoryLogs, OpenOptions, StoreUrl};
/// use claude_memory::{MemoryStore, MemoryTool};
///
/// let dir = std::env::temp_dir().join("claude-memory-doc-opened");
/// let opened = StoreUrl::Dir(dir)
///     .open(&OpenOptions::new().create(true).history(HistoryLogs::Start))?;
/// let store: Box<dyn MemoryStore> = match opened.log {
///     // Each change is recorded, with its actor.
///     Some(log) => Box::new(HistoryStore::open(opened.store, log)?.with_label("my-agent")),
///     None => opened.store,
/// };
/// let tool = MemoryTool::new(store);
/// # let _ = tool;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A store opened `read_only` is read through
/// [`HistoryStore::inspect`](crate::history::HistoryStore::inspect), which
/// repairs nothing.
#[must_use = "a store that keeps a history records changes only through a HistoryStore over its log"]
pub struct Opened {
    /// The store.
    pub store: Box<dyn MemoryStore>,
    /// Its history log, as [`OpenOptions::history`] asked: wrap the store
    /// in a [`HistoryStore`](crate::history::HistoryStore) with it (a
    /// PostgreSQL store's log shares the store's pool, so each change and
    /// its version commit in one transaction).
    pub log: Option<Box<dyn HistoryLog>>,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened")
            .field("log", &self.log.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a store was not parsed or opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The text names no store (it says what to write instead).
    #[error("{0}")]
    Url(String),
    /// This build lacks the feature the store needs.
    #[error("this build has no {feature} feature, which {what} needs")]
    NotBuilt {
        /// The crate feature.
        feature: &'static str,
        /// The kind of store.
        what: &'static str,
    },
    /// No store there, and [`OpenOptions::create`] was not asked.
    #[error("no memory store at {0}: it does not exist")]
    NotFound(String),
    /// [`HistoryLogs::Required`], and the store keeps no history.
    #[error(
        "no history for this store: it is kept only once the store is used with its history started"
    )]
    NoHistory,
    /// A managed memory store keeps its own versions, not a history log.
    #[error(
        "a managed memory store keeps no history log: the service keeps a version of every change itself"
    )]
    ManagedHistory,
    /// The store is encrypted and no keys were given (or this build has
    /// no `encryption` feature).
    #[error(
        "the store {0} is encrypted: open it with its keys (OpenOptions::keys, feature encryption)"
    )]
    Encrypted(String),
    /// The backend refused to open it.
    #[error("cannot open the store {shown}")]
    Open {
        /// The store, as given (a URL's password hidden).
        shown: String,
        /// The backend's error.
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

/// What the kinds of store are written as, for messages.
const KINDS: &str = "a directory, sqlite:PATH, a postgres:// URL, s3://, az://, gs://BUCKET/PREFIX or managed:MEMSTORE_ID";

impl StoreUrl {
    /// Parses a store's name. Anything that starts like a URL (`word:`)
    /// must be a kind this crate knows, spelled right: `postgress://…` is
    /// an error, never a directory of that name that a write would create
    /// and fill. (A directory whose name has a colon: `./name:…`.)
    pub fn parse(text: &str) -> Result<StoreUrl, OpenError> {
        let usage = |message: String| Err(OpenError::Url(message));
        if text.trim() != text {
            return usage(format!(
                "`{}` starts or ends with a space: give the store without one",
                without_password(text.trim())
            ));
        }
        let Some((scheme, rest)) = url_scheme(text) else {
            if text.is_empty() {
                return usage(format!("the store is empty: give {KINDS}"));
            }
            // `post_gres://…`, `postgrés://…`: a URL whose scheme is
            // misspelled past recognition, not a directory to create.
            if text.contains("://") && !text.starts_with(['.', '/']) {
                return usage(format!(
                    "`{}` looks like a URL of no kind of store this crate knows: give {KINDS} (for a directory, write ./NAME)",
                    without_password(text)
                ));
            }
            return Ok(StoreUrl::Dir(PathBuf::from(text)));
        };
        let lower = scheme.to_ascii_lowercase();
        match lower.as_str() {
            "sqlite" => {
                // sqlx's spelling, `sqlite://PATH`, names the same file.
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.trim().is_empty() {
                    return usage("sqlite: needs a path, as in sqlite:memory.db".into());
                }
                if path == ":memory:" || path.contains('?') {
                    return usage(format!(
                        "`{text}`: a SQLite store is a file, as in sqlite:memory.db (no in-memory database, no ?options)"
                    ));
                }
                Ok(StoreUrl::Sqlite(PathBuf::from(path)))
            }
            // The scheme in lower case: the driver knows no other.
            "postgres" | "postgresql" if rest.starts_with("//") => {
                Ok(StoreUrl::Postgres(format!("{lower}:{rest}")))
            }
            "postgres" | "postgresql" => usage(format!(
                "`{}` is not a PostgreSQL URL: write {lower}://USER@HOST/DATABASE",
                without_password(text)
            )),
            "s3" | "az" | "gs" => match rest.strip_prefix("//") {
                None => usage(format!(
                    "`{}` is not an object store URL: write {lower}://BUCKET/PREFIX",
                    without_password(text)
                )),
                Some(path) if path.split('/').next().is_none_or(str::is_empty) => usage(format!(
                    "`{}` names no bucket: write {lower}://BUCKET/PREFIX",
                    without_password(text)
                )),
                Some(_) => Ok(StoreUrl::Cloud(text.to_owned())),
            },
            // The id is not echoed: a key pasted in its place stays unseen.
            "managed" if !rest.starts_with("memstore_") || rest.contains(['/', '?', '#']) => usage(
                "managed: names no memory store: write managed:MEMSTORE_ID (an id starting memstore_)"
                    .into(),
            ),
            "managed" => Ok(StoreUrl::Managed(rest.to_owned())),
            _ => usage(format!(
                "unknown kind of store `{scheme}:` in `{}`: give {KINDS} (for a directory whose name has a colon, write ./NAME)",
                without_password(text)
            )),
        }
    }

    /// The store as text for messages: a URL's password hidden.
    pub fn shown(&self) -> String {
        match self {
            StoreUrl::Dir(p) | StoreUrl::Sqlite(p) => p.display().to_string(),
            StoreUrl::Postgres(u) => without_password(u),
            StoreUrl::Cloud(u) => u.clone(),
            StoreUrl::Managed(id) => format!("managed:{id}"),
        }
    }

    /// Whether the store keeps a history log (a directory's journal, the
    /// SQLite log file beside the database, PostgreSQL's history table
    /// for the tenant's scope). A cloud store's log is found only once
    /// opened: `false` there. An error (a database that cannot be asked)
    /// is an error, never a "no".
    pub fn keeps_history(&self, tenant: Option<&TenantId>) -> Result<bool, OpenError> {
        match self {
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(url) => {
                crate::history::PostgresLog::exists(url, tenant.map_or("", TenantId::as_str))
                    .map_err(|e| OpenError::Open {
                        shown: self.shown(),
                        source: Box::new(e),
                    })
            }
            _ => Ok(self.history_file(tenant).is_some_and(|file| file.is_file())),
        }
    }

    /// Where a directory's or a SQLite store's history is kept (with a
    /// tenant: in the tenant's directory; a SQL store's tenant shares the
    /// log, under its scope).
    fn history_file(&self, tenant: Option<&TenantId>) -> Option<PathBuf> {
        match self {
            StoreUrl::Dir(dir) => Some(
                tenant
                    .map_or_else(|| dir.clone(), |t| t.dir_in(dir))
                    .join(crate::history::HISTORY_DIR)
                    .join("journal.jsonl"),
            ),
            StoreUrl::Sqlite(path) => {
                let mut file = path.clone().into_os_string();
                file.push(".claude-memory-history");
                Some(PathBuf::from(file))
            }
            StoreUrl::Postgres(_) | StoreUrl::Cloud(_) | StoreUrl::Managed(_) => None,
        }
    }

    /// Opens the store, and its history log as `options` ask.
    pub fn open(&self, options: &OpenOptions) -> Result<Opened, OpenError> {
        let tenant = options.tenant.as_ref();
        let history = options.history;
        if let (StoreUrl::Managed(_), HistoryLogs::Start | HistoryLogs::Required) = (self, history)
        {
            return Err(OpenError::ManagedHistory);
        }
        // A missing store is said before a missing history.
        if let StoreUrl::Dir(path) | StoreUrl::Sqlite(path) = self
            && !options.create
            && !path.exists()
        {
            return Err(OpenError::NotFound(path.display().to_string()));
        }
        let shown = self.shown();
        let failed = |source: Box<dyn Error + Send + Sync>| OpenError::Open {
            shown: shown.clone(),
            source,
        };
        // Whether to open the log, for the stores whose log is a file
        // (a database is asked on its own pool once connected).
        let want_log = || -> Result<bool, OpenError> {
            match history {
                HistoryLogs::Never => Ok(false),
                HistoryLogs::Start => Ok(true),
                HistoryLogs::IfKept => self.keeps_history(tenant),
                // A cloud store's log is checked by its first read.
                HistoryLogs::Required if matches!(self, StoreUrl::Cloud(_)) => Ok(true),
                HistoryLogs::Required if self.keeps_history(tenant)? => Ok(true),
                HistoryLogs::Required => Err(OpenError::NoHistory),
            }
        };
        let scope = tenant.map_or("", TenantId::as_str);
        let opened = match self {
            StoreUrl::Dir(dir) => open_dir(dir, options, want_log()?, &failed)?,
            StoreUrl::Sqlite(path) => {
                let want = want_log()?;
                let store = open_sqlite(path, options, &failed)?;
                refuse_encrypted(&*store, options, &shown)?;
                let log = match (want, self.history_file(tenant)) {
                    (true, Some(file)) => Some(sqlite_log(&file, scope).map_err(&failed)?),
                    _ => None,
                };
                Opened { store, log }
            }
            StoreUrl::Postgres(url) => open_postgres(url, options, &failed)?,
            StoreUrl::Cloud(url) => open_cloud(url, options, want_log()?, &failed)?,
            StoreUrl::Managed(id) => {
                let store = with_tenant(open_managed(id, &failed)?, tenant);
                refuse_encrypted(&*store, options, &shown)?;
                Opened { store, log: None }
            }
        };
        sealed(opened, options, &failed)
    }
}

/// The opened store with its keys: sealed, its log too.
#[cfg(feature = "encryption")]
fn sealed(opened: Opened, options: &OpenOptions, failed: &Failed<'_>) -> Result<Opened, OpenError> {
    use crate::store::crypt::EncryptedStore;
    let Some(keys) = &options.keys else {
        return Ok(opened);
    };
    // Read only: no key record is made, so a mistyped store or tenant is
    // said to be unencrypted instead of read as empty.
    let encrypted = match options.read_only {
        true => EncryptedStore::open_existing(opened.store, keys.clone()),
        false => EncryptedStore::open(opened.store, keys.clone()),
    }
    .map_err(|e| failed(Box::new(e)))?;
    let sealer = crate::history::LogSealer::new(&encrypted);
    Ok(Opened {
        store: Box::new(encrypted),
        log: opened
            .log
            .map(|log| Box::new(sealer.wrap(log)) as Box<dyn HistoryLog>),
    })
}

#[cfg(not(feature = "encryption"))]
fn sealed(opened: Opened, _: &OpenOptions, _: &Failed<'_>) -> Result<Opened, OpenError> {
    Ok(opened)
}

/// Refuses an encrypted store opened without its keys (unless asked
/// for [`raw`](OpenOptions::raw)), before its history log is opened.
fn refuse_encrypted(
    store: &dyn MemoryStore,
    options: &OpenOptions,
    shown: &str,
) -> Result<(), OpenError> {
    #[cfg(feature = "encryption")]
    let keys = options.keys.is_some();
    #[cfg(not(feature = "encryption"))]
    let keys = false;
    let Some(record) = crate::MemoryPath::root().join(crate::store::KEY_RECORD) else {
        return Ok(());
    };
    if options.raw || keys {
        return Ok(());
    }
    match store.stat(&record) {
        Ok(Some(_)) => Err(OpenError::Encrypted(shown.to_owned())),
        Ok(None) => Ok(()),
        Err(e) => Err(OpenError::Open {
            shown: shown.to_owned(),
            source: Box::new(e),
        }),
    }
}

/// The kind and [`StoreUrl::shown`]: never a URL's password.
impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            StoreUrl::Dir(_) => "Dir",
            StoreUrl::Sqlite(_) => "Sqlite",
            StoreUrl::Postgres(_) => "Postgres",
            StoreUrl::Cloud(_) => "Cloud",
            StoreUrl::Managed(_) => "Managed",
        };
        f.debug_tuple(kind).field(&self.shown()).finish()
    }
}

impl std::str::FromStr for StoreUrl {
    type Err = OpenError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        StoreUrl::parse(text)
    }
}

type Failed<'a> = dyn Fn(Box<dyn Error + Send + Sync>) -> OpenError + 'a;

/// `store` seen as `tenant`'s, for a store without tenants of its own.
fn with_tenant(store: Box<dyn MemoryStore>, tenant: Option<&TenantId>) -> Box<dyn MemoryStore> {
    match tenant {
        Some(tenant) => Box::new(super::TenantStore::new(store, tenant.clone())),
        None => store,
    }
}

#[cfg(any(unix, windows))]
fn open_dir(
    dir: &Path,
    options: &OpenOptions,
    want_log: bool,
    failed: &Failed<'_>,
) -> Result<Opened, OpenError> {
    let store = crate::FilesystemStore::builder(dir)
        .create(options.create)
        .read_only(options.read_only)
        .open()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OpenError::NotFound(dir.display().to_string()),
            _ => failed(Box::new(e)),
        })?;
    let tenant = options.tenant.as_ref();
    let store = with_tenant(Box::new(store), tenant);
    refuse_encrypted(&*store, options, &shown_dir(dir))?;
    let log: Option<Box<dyn HistoryLog>> = match want_log {
        true => {
            let root = tenant.map_or_else(|| dir.to_path_buf(), |t| t.dir_in(dir));
            let log = match options.read_only {
                true => crate::history::FileLog::for_store_read_only(root),
                false => crate::history::FileLog::for_store(root),
            };
            Some(Box::new(log.map_err(|e| failed(Box::new(e)))?))
        }
        false => None,
    };
    Ok(Opened { store, log })
}

/// A directory as [`StoreUrl::shown`] shows it.
fn shown_dir(dir: &Path) -> String {
    dir.display().to_string()
}

#[cfg(not(any(unix, windows)))]
fn open_dir(_: &Path, _: &OpenOptions, _: bool, _: &Failed<'_>) -> Result<Opened, OpenError> {
    Err(OpenError::NotBuilt {
        feature: "unix or windows target",
        what: "a directory store",
    })
}

#[cfg(feature = "sqlite")]
fn open_sqlite(
    path: &Path,
    options: &OpenOptions,
    failed: &Failed<'_>,
) -> Result<Box<dyn MemoryStore>, OpenError> {
    if path.is_dir() {
        return Err(failed(
            "it is a directory (for a directory store, drop the sqlite: prefix)".into(),
        ));
    }
    if !options.create && !path.is_file() {
        return Err(OpenError::NotFound(path.display().to_string()));
    }
    // Read-only: another program's database is left exactly as it was,
    // WAL and tables included.
    let store = match options.read_only {
        true => crate::SqliteStore::open_read_only(path),
        false => crate::SqliteStore::open(path),
    }
    .map_err(|e| failed(Box::new(e)))?;
    Ok(match &options.tenant {
        Some(tenant) => Box::new(store.for_tenant(tenant)),
        None => Box::new(store),
    })
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(
    _: &Path,
    _: &OpenOptions,
    _: &Failed<'_>,
) -> Result<Box<dyn MemoryStore>, OpenError> {
    Err(OpenError::NotBuilt {
        feature: "sqlite",
        what: "a SQLite store",
    })
}

/// A SQLite store's log: a database file of its own beside the store's,
/// cheaper per write than the store's own database (see `SqliteLog`).
#[cfg(feature = "sqlite")]
fn sqlite_log(
    file: &Path,
    scope: &str,
) -> Result<Box<dyn HistoryLog>, Box<dyn Error + Send + Sync>> {
    Ok(Box::new(crate::history::SqliteLog::open(file, scope)?))
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_log(_: &Path, _: &str) -> Result<Box<dyn HistoryLog>, Box<dyn Error + Send + Sync>> {
    Err("this build has no sqlite feature".into())
}

#[cfg(feature = "postgres")]
fn open_postgres(
    url: &str,
    options: &OpenOptions,
    failed: &Failed<'_>,
) -> Result<Opened, OpenError> {
    use crate::history::PostgresLog;
    // Three connections: a change with history holds one for its whole
    // transaction; reads of other threads use the others.
    let store = crate::PostgresStore::connect(url, 3).map_err(|e| failed(Box::new(e)))?;
    let scope = options.tenant.as_ref().map_or("", TenantId::as_str);
    // The tenant's store: its history's scope is its tenant.
    let store = match &options.tenant {
        Some(tenant) => store.for_tenant(tenant),
        None => store,
    };
    let tenant_store: Box<dyn MemoryStore> = Box::new(store.clone());
    refuse_encrypted(&*tenant_store, options, &without_password(url))?;
    // Asked on the store's own pool: a failed question fails the open,
    // never opens a store that keeps a history without it.
    let kept = || PostgresLog::exists_in(&store, scope).map_err(|e| failed(Box::new(e)));
    let want_log = match options.history {
        HistoryLogs::Never => false,
        HistoryLogs::Start => true,
        HistoryLogs::IfKept => kept()?,
        HistoryLogs::Required if kept()? => true,
        HistoryLogs::Required => return Err(OpenError::NoHistory),
    };
    let log: Option<Box<dyn HistoryLog>> = match want_log {
        true => Some(Box::new(
            PostgresLog::for_store(&store, scope).map_err(|e| failed(Box::new(e)))?,
        )),
        false => None,
    };
    Ok(Opened {
        store: tenant_store,
        log,
    })
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &str, _: &OpenOptions, _: &Failed<'_>) -> Result<Opened, OpenError> {
    Err(OpenError::NotBuilt {
        feature: "postgres",
        what: "a PostgreSQL store",
    })
}

#[cfg(any(feature = "s3", feature = "azure", feature = "gcs"))]
fn open_cloud(
    url: &str,
    options: &OpenOptions,
    want_log: bool,
    failed: &Failed<'_>,
) -> Result<Opened, OpenError> {
    let store = crate::CloudStore::from_url(url).map_err(|e| failed(Box::new(e)))?;
    let tenant = options.tenant.as_ref();
    let seen = with_tenant(Box::new(store.clone()), tenant);
    refuse_encrypted(&*seen, options, url)?;
    // A tenant's log lives below the tenant's prefix.
    let log: Option<Box<dyn HistoryLog>> = match (want_log, tenant) {
        (false, _) => None,
        (true, Some(t)) => Some(Box::new(crate::history::CloudLog::for_tenant(&store, t))),
        (true, None) => Some(Box::new(crate::history::CloudLog::for_store(&store))),
    };
    Ok(Opened { store: seen, log })
}

#[cfg(not(any(feature = "s3", feature = "azure", feature = "gcs")))]
fn open_cloud(_: &str, _: &OpenOptions, _: bool, _: &Failed<'_>) -> Result<Opened, OpenError> {
    Err(OpenError::NotBuilt {
        feature: "s3, azure or gcs",
        what: "a cloud store",
    })
}

#[cfg(feature = "managed")]
fn open_managed(id: &str, failed: &Failed<'_>) -> Result<Box<dyn MemoryStore>, OpenError> {
    Ok(Box::new(
        crate::ManagedStore::open(id).map_err(|e| failed(Box::new(e)))?,
    ))
}

#[cfg(not(feature = "managed"))]
fn open_managed(_: &str, _: &Failed<'_>) -> Result<Box<dyn MemoryStore>, OpenError> {
    Err(OpenError::NotBuilt {
        feature: "managed",
        what: "a managed memory store",
    })
}

/// `(scheme, rest)` if `text` starts like a URL: two or more characters
/// (so a Windows drive `C:` is a path), a letter first, then letters,
/// digits, `+`, `-` or `.`, then `:`.
fn url_scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let ok = scheme.len() >= 2
        && first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    ok.then_some((scheme, rest))
}

/// `text` with the password of a `user:password@` part, and of a
/// `password=` option, replaced by `***`: a mistyped URL is echoed back
/// to say what was wrong, and must not print its secret to a terminal or
/// a log.
fn without_password(text: &str) -> String {
    let mut out = match text.rfind('@') {
        None => text.to_owned(),
        Some(at) => {
            // The user information starts after the scheme's `:` and its slashes.
            let start = text.find(':').map_or(0, |i| i + 1).min(at);
            let start =
                start + text[start..at].len() - text[start..at].trim_start_matches('/').len();
            match text[start..at].find(':') {
                Some(colon) => format!("{}:***{}", &text[..start + colon], &text[at..]),
                None => text.to_owned(),
            }
        }
    };
    let mut from = 0;
    while let Some(found) = out[from..].to_ascii_lowercase().find("password=") {
        let value = from + found + "password=".len();
        let end = out[value..]
            .find(['&', ' '])
            .map_or(out.len(), |i| value + i);
        out.replace_range(value..end, "***");
        from = value + 3;
    }
    out
}
