//! Which store the command line names (`--store`, `--root`, the
//! environment), and opening it for reading only or for writing.

use std::io;
use std::path::PathBuf;

use claude_memory::{FilesystemStore, MemoryStore, TenantId, TenantStore};

use crate::output::Failure;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::output::with_causes;

/// A store named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// A directory ([`FilesystemStore`]).
    Dir(PathBuf),
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`.
    Postgres(String),
    /// `s3://BUCKET/PREFIX`, `az://CONTAINER/PREFIX`, `gs://BUCKET/PREFIX`.
    Cloud(String),
    /// `managed:MEMSTORE_ID`: a memory store of Claude Managed Agents.
    Managed(String),
}

/// `text` with the password of a `user:password@` part replaced by
/// `***`, for messages: a mistyped URL (`postgress://u:pw@…`) is echoed
/// back to say what was wrong, and must not print its secret to a
/// terminal or a log (a new user's review found it did).
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

impl StoreSpec {
    /// Parses `--store`'s value.
    ///
    /// Anything that starts like a URL (`word:`) must be a store kind this
    /// tool knows, spelled right: `postgress://…` or `postgres:/…` is a
    /// usage error, never a directory of that name that `import` would
    /// create and fill while the operator believes the data went to the
    /// database. (A directory whose name has a colon: `./name:…`.)
    pub fn parse(text: &str) -> Result<StoreSpec, Failure> {
        if let Some((scheme, rest)) = url_scheme(text) {
            return match scheme.to_ascii_lowercase().as_str() {
                "sqlite" if rest.is_empty() => Err(Failure::Usage(
                    "sqlite: needs a path, as in sqlite:memory.db".into(),
                )),
                // sqlx's spelling, `sqlite://PATH`, names the same file.
                "sqlite" => Ok(StoreSpec::Sqlite(PathBuf::from(
                    rest.strip_prefix("//")
                        .filter(|p| !p.is_empty())
                        .unwrap_or(rest),
                ))),
                "postgres" | "postgresql" if rest.starts_with("//") => {
                    Ok(StoreSpec::Postgres(text.to_owned()))
                }
                "s3" | "az" | "gs" => crate::cloud::parse(scheme, rest, text),
                "managed" => crate::managed::parse(rest, text),
                "postgres" | "postgresql" => Err(Failure::Usage(format!(
                    "`{}` is not a PostgreSQL URL: write {scheme}://USER@HOST/DATABASE",
                    without_password(text)
                ))),
                _ => Err(Failure::Usage(format!(
                    "unknown kind of store `{scheme}:` in `{shown}`: give a directory, sqlite:PATH, a postgres:// URL, s3://, az://, gs://BUCKET/PREFIX or managed:MEMSTORE_ID (for a directory whose name has a colon, write ./{shown})",
                    shown = without_password(text)
                ))),
            };
        }
        if text.is_empty() {
            return Err(Failure::Usage(
                "the store is empty: give a directory, sqlite:PATH, a postgres:// URL, s3://, az://, gs://BUCKET/PREFIX or managed:MEMSTORE_ID".into(),
            ));
        }
        Ok(StoreSpec::Dir(PathBuf::from(text)))
    }

    /// The store from the flags, else `CLAUDE_MEMORY_STORE`, else
    /// `CLAUDE_MEMORY_DIR`.
    pub fn from_args(store: Option<&str>, root: Option<PathBuf>) -> Result<StoreSpec, Failure> {
        if let Some(store) = store {
            return StoreSpec::parse(store);
        }
        if let Some(root) = root {
            return Ok(StoreSpec::Dir(root));
        }
        if let Some(store) = std::env::var_os("CLAUDE_MEMORY_STORE") {
            let store = store
                .into_string()
                .map_err(|_| Failure::Usage("CLAUDE_MEMORY_STORE is not valid UTF-8".into()))?;
            return StoreSpec::parse(&store);
        }
        if let Some(dir) = std::env::var_os("CLAUDE_MEMORY_DIR") {
            return Ok(StoreSpec::Dir(PathBuf::from(dir)));
        }
        Err(Failure::Usage(
            "no store given: use --store STORE (or --root DIR, CLAUDE_MEMORY_STORE, CLAUDE_MEMORY_DIR)".into(),
        ))
    }
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

/// What a command will do to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only read: the store must exist, and nothing is created or written
    /// (a directory store is opened read-only, without its lock file).
    Read,
    /// Change an existing store (prune): it must exist.
    Change,
    /// Write, creating the store if missing (serve, import).
    Create,
}

/// Why a writing command cannot use a store this user may only read.
fn needs_write_access(shown: &str, what: &str) -> String {
    format!(
        "cannot open the store {shown} for writing: permission denied (serve, import, prune and the history commands that change it need write access to {what}; view, stats and export only read)"
    )
}

/// `--tenant`'s value, checked as `TenantId::parse` checks it.
pub fn tenant(id: Option<&str>) -> Result<Option<TenantId>, Failure> {
    id.map(|id| TenantId::parse(id).map_err(|e| Failure::Usage(format!("--tenant {id:?}: {e}"))))
        .transpose()
}

/// Opens the store, seen as `tenant`'s when one is given: a SQL store's
/// `for_tenant`, a directory store's `TenantStore` (the shared base's
/// `/memories/<tenant>/`).
pub fn open(
    spec: &StoreSpec,
    tenant: Option<&TenantId>,
    access: Access,
) -> Result<Box<dyn MemoryStore>, Failure> {
    let store = open_base(spec, tenant, access)?;
    Ok(match (spec, tenant) {
        (StoreSpec::Dir(_) | StoreSpec::Cloud(_) | StoreSpec::Managed(_), Some(tenant)) => {
            Box::new(TenantStore::new(store, tenant.clone()))
        }
        _ => store,
    })
}

fn open_base(
    spec: &StoreSpec,
    tenant: Option<&TenantId>,
    access: Access,
) -> Result<Box<dyn MemoryStore>, Failure> {
    match spec {
        StoreSpec::Dir(dir) => {
            let store = FilesystemStore::builder(dir)
                .create(access == Access::Create)
                .read_only(access == Access::Read)
                .open()
                .map_err(|e| {
                    let shown = dir.display();
                    Failure::Failed(match e.kind() {
                        io::ErrorKind::NotFound if looks_like_sqlite(dir) => format!(
                            "no memory store at {shown}: the directory does not exist (for a SQLite file, write --store sqlite:{shown})"
                        ),
                        io::ErrorKind::NotFound => format!(
                            "no memory store at {shown}: the directory does not exist (mistyped? `serve`, `mcp` or `import` create one)"
                        ),
                        io::ErrorKind::NotADirectory if is_sqlite_file(dir) => format!(
                            "cannot open the store {shown}: it is a SQLite database, not a directory (write --store sqlite:{shown})"
                        ),
                        io::ErrorKind::NotADirectory => {
                            format!("cannot open the store {shown}: it is not a directory (a directory, sqlite:PATH, postgres://, s3://, az:// or gs://)")
                        }
                        io::ErrorKind::PermissionDenied if access != Access::Read => {
                            needs_write_access(&shown.to_string(), "the directory, to take its lock and write")
                        }
                        _ => format!("cannot open the store {shown}: {e}"),
                    })
                })?;
            Ok(Box::new(store))
        }
        StoreSpec::Sqlite(path) => open_sqlite(path, tenant, access),
        StoreSpec::Postgres(url) => open_postgres(url, tenant),
        StoreSpec::Cloud(url) => crate::cloud::open(url),
        StoreSpec::Managed(id) => crate::managed::open(id),
    }
}

/// Whether `path` is named as SQLite files are (`.db`, `.sqlite`,
/// `.sqlite3`), so a missing `--store mem.db` can be told to say `sqlite:`.
fn looks_like_sqlite(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "db" | "sqlite" | "sqlite3"))
}

/// Whether `path` is a file that starts with SQLite's header, so a
/// `--store mem.db` meant as a database can be told to say `sqlite:`.
fn is_sqlite_file(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

#[cfg(feature = "sqlite")]
fn open_sqlite(
    path: &std::path::Path,
    tenant: Option<&TenantId>,
    access: Access,
) -> Result<Box<dyn MemoryStore>, Failure> {
    let shown = path.display();
    if path.is_dir() {
        return Err(Failure::Failed(format!(
            "cannot open the SQLite store {shown}: it is a directory (for a directory store, drop the sqlite: prefix)"
        )));
    }
    if access != Access::Create && !path.is_file() {
        return Err(Failure::Failed(format!(
            "no SQLite store at {shown}: the file does not exist (mistyped? `serve` or `import` create one)"
        )));
    }
    if access != Access::Read
        && path.is_file()
        && std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
    {
        return Err(Failure::Failed(needs_write_access(
            &shown.to_string(),
            "the database file and its directory",
        )));
    }
    // Reading commands open read-only: another program's database (or a
    // store) is left exactly as it was, WAL and tables included.
    let opened = if access == Access::Read {
        claude_memory::SqliteStore::open_read_only(path)
    } else {
        claude_memory::SqliteStore::open(path)
    };
    let store = opened.map_err(|e| {
        Failure::Failed(format!(
            "cannot open the SQLite store {shown}: {}",
            with_causes(&e)
        ))
    })?;
    Ok(match tenant {
        Some(tenant) => Box::new(store.for_tenant(tenant)),
        None => Box::new(store),
    })
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(
    _: &std::path::Path,
    _: Option<&TenantId>,
    _: Access,
) -> Result<Box<dyn MemoryStore>, Failure> {
    Err(Failure::Usage(
        "this claude-memory was built without the sqlite feature (reinstall with the default features: cargo install claude-memory-cli)".into(),
    ))
}

/// The PostgreSQL stores this process opened, by URL: the history log
/// of one is made on its pool (`PostgresLog::for_store`), so each change
/// and its version commit in one transaction.
#[cfg(feature = "postgres")]
static POSTGRES: std::sync::Mutex<Vec<(String, claude_memory::PostgresStore)>> =
    std::sync::Mutex::new(Vec::new());

/// The store this process opened last at `url`, if any (see [`POSTGRES`]).
#[cfg(feature = "postgres")]
pub fn opened_postgres(url: &str) -> Option<claude_memory::PostgresStore> {
    let opened = POSTGRES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The newest: the one the command wraps in its history next.
    opened
        .iter()
        .rev()
        .find(|(u, _)| u == url)
        .map(|(_, s)| s.clone())
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str, tenant: Option<&TenantId>) -> Result<Box<dyn MemoryStore>, Failure> {
    // Three connections: a change with history holds one for its whole
    // transaction; reads of other threads (`serve`) use the others.
    let store = claude_memory::PostgresStore::connect(url, 3).map_err(|e| {
        Failure::Failed(format!(
            "cannot connect to the PostgreSQL store: {}",
            with_causes(&e)
        ))
    })?;
    POSTGRES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((url.to_owned(), store.clone()));
    Ok(match tenant {
        Some(tenant) => Box::new(store.for_tenant(tenant)),
        None => Box::new(store),
    })
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &str, _: Option<&TenantId>) -> Result<Box<dyn MemoryStore>, Failure> {
    Err(Failure::Usage(
        "this claude-memory was built without the postgres feature (reinstall with: cargo install claude-memory-cli --features postgres)".into(),
    ))
}
