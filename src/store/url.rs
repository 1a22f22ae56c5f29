//! A store named by one string: the CLI's `--store`, or a setting an
//! application reads. As object_store's `parse_url` does for buckets,
//! [`StoreUrl::parse`] says which backend the text names (a mistyped
//! scheme is an error, never a directory of that name), and
//! [`StoreUrl::open`] opens it, seen as a tenant's where asked, with the
//! history log it keeps.

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};

use super::MemoryStore;
use crate::TenantId;
use crate::history::HistoryLog;

/// Where a store is. Each kind needs its feature to be opened; every kind
/// parses in every build, so a build without it says which feature.
///
/// ```
/// use claude_memory::store::{HistoryLogs, OpenOptions, StoreUrl};
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
/// # Ok::<(), claude_memory::store::OpenError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// so a mistyped path is an error, not a new empty store).
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

/// A store [`StoreUrl::open`] opened.
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
        let Some((scheme, rest)) = url_scheme(text) else {
            if text.is_empty() {
                return usage(format!("the store is empty: give {KINDS}"));
            }
            return Ok(StoreUrl::Dir(PathBuf::from(text)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" if rest.is_empty() => {
                usage("sqlite: needs a path, as in sqlite:memory.db".into())
            }
            // sqlx's spelling, `sqlite://PATH`, names the same file.
            "sqlite" => Ok(StoreUrl::Sqlite(PathBuf::from(
                rest.strip_prefix("//")
                    .filter(|p| !p.is_empty())
                    .unwrap_or(rest),
            ))),
            "postgres" | "postgresql" if rest.starts_with("//") => {
                Ok(StoreUrl::Postgres(text.to_owned()))
            }
            "postgres" | "postgresql" => usage(format!(
                "`{}` is not a PostgreSQL URL: write {scheme}://USER@HOST/DATABASE",
                without_password(text)
            )),
            "s3" | "az" | "gs" => match rest.strip_prefix("//") {
                None => usage(format!(
                    "`{text}` is not an object store URL: write {scheme}://BUCKET/PREFIX"
                )),
                Some(path) if path.split('/').next().is_none_or(str::is_empty) => usage(format!(
                    "`{text}` names no bucket: write {scheme}://BUCKET/PREFIX"
                )),
                Some(_) => Ok(StoreUrl::Cloud(text.to_owned())),
            },
            "managed" if !rest.starts_with("memstore_") || rest.contains(['/', '?', '#']) => {
                usage(format!(
                    "`{text}` names no memory store: write managed:MEMSTORE_ID (an id starting memstore_)"
                ))
            }
            "managed" => Ok(StoreUrl::Managed(rest.to_owned())),
            _ => usage(format!(
                "unknown kind of store `{scheme}:` in `{shown}`: give {KINDS} (for a directory whose name has a colon, write ./{shown})",
                shown = without_password(text)
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
    /// opened: `false` there.
    pub fn keeps_history(&self, tenant: Option<&TenantId>) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(url) => {
                crate::history::PostgresLog::exists(url, tenant.map_or("", TenantId::as_str))
                    .unwrap_or(false)
            }
            _ => self.history_file(tenant).is_some_and(|file| file.is_file()),
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
        let want_log = match options.history {
            HistoryLogs::Never => false,
            HistoryLogs::Start => true,
            HistoryLogs::IfKept => self.keeps_history(tenant),
            HistoryLogs::Required => match self {
                StoreUrl::Managed(_) => return Err(OpenError::ManagedHistory),
                // A cloud store's log is checked by its first read.
                StoreUrl::Cloud(_) => true,
                _ if self.keeps_history(tenant) => true,
                _ => return Err(OpenError::NoHistory),
            },
        };
        if want_log && matches!(self, StoreUrl::Managed(_)) {
            return Err(OpenError::ManagedHistory);
        }
        let shown = self.shown();
        let failed = |source: Box<dyn Error + Send + Sync>| OpenError::Open {
            shown: shown.clone(),
            source,
        };
        let scope = tenant.map_or("", TenantId::as_str);
        match self {
            StoreUrl::Dir(dir) => open_dir(dir, options, want_log, &failed),
            StoreUrl::Sqlite(path) => {
                let store = open_sqlite(path, options, &failed)?;
                let log = match (want_log, self.history_file(tenant)) {
                    (true, Some(file)) => Some(sqlite_log(&file, scope).map_err(&failed)?),
                    _ => None,
                };
                Ok(Opened { store, log })
            }
            StoreUrl::Postgres(url) => open_postgres(url, options, want_log, &failed),
            StoreUrl::Cloud(url) => open_cloud(url, options, want_log, &failed),
            StoreUrl::Managed(id) => {
                let store = open_managed(id, &failed)?;
                Ok(Opened {
                    store: with_tenant(store, tenant),
                    log: None,
                })
            }
        }
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
    Ok(Opened {
        store: with_tenant(Box::new(store), tenant),
        log,
    })
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
    want_log: bool,
    failed: &Failed<'_>,
) -> Result<Opened, OpenError> {
    // Three connections: a change with history holds one for its whole
    // transaction; reads of other threads use the others.
    let store = crate::PostgresStore::connect(url, 3).map_err(|e| failed(Box::new(e)))?;
    let scope = options.tenant.as_ref().map_or("", TenantId::as_str);
    let log: Option<Box<dyn HistoryLog>> = match want_log {
        true => Some(Box::new(
            crate::history::PostgresLog::for_store(&store, scope)
                .map_err(|e| failed(Box::new(e)))?,
        )),
        false => None,
    };
    let store: Box<dyn MemoryStore> = match &options.tenant {
        Some(tenant) => Box::new(store.for_tenant(tenant)),
        None => Box::new(store),
    };
    Ok(Opened { store, log })
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &str, _: &OpenOptions, _: bool, _: &Failed<'_>) -> Result<Opened, OpenError> {
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
    // A tenant's log lives below the tenant's prefix.
    let log: Option<Box<dyn HistoryLog>> = match (want_log, tenant) {
        (false, _) => None,
        (true, Some(t)) => Some(Box::new(crate::history::CloudLog::for_tenant(&store, t))),
        (true, None) => Some(Box::new(crate::history::CloudLog::for_store(&store))),
    };
    Ok(Opened {
        store: with_tenant(Box::new(store), tenant),
        log,
    })
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

/// `text` with the password of a `user:password@` part replaced by
/// `***`: a mistyped URL is echoed back to say what was wrong, and must
/// not print its secret to a terminal or a log.
fn without_password(text: &str) -> String {
    let Some(at) = text.rfind('@') else {
        return text.to_owned();
    };
    // The user information starts after the scheme's `:` and its slashes.
    let start = text.find(':').map_or(0, |i| i + 1);
    let start = start + text[start..at].len() - text[start..at].trim_start_matches('/').len();
    match text[start..at].find(':') {
        Some(colon) => format!("{}:***{}", &text[..start + colon], &text[at..]),
        None => text.to_owned(),
    }
}
