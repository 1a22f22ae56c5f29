//! Which store the command line names (`--store`, `--root`, the
//! environment), and the one place its stack is built: the store the
//! library opens from its URL (seen as the tenant's, with its history
//! log), sealed with the keys, in its history.

use std::io;
use std::path::{Path, PathBuf};

use claude_memory::history::HistoryStore;
use claude_memory::store::crypt::{CryptError, Keyring};
use claude_memory::url::{HistoryLogs, OpenError, OpenOptions, Opened, StoreUrl};
use claude_memory::{MemoryStore, TenantId};

use crate::output::{Failure, failed, with_causes};

/// The store in its history: `Read` inspects (no repair, nothing
/// written); otherwise the open repairs and says so on stderr.
pub type History = HistoryStore<Box<dyn MemoryStore>>;

/// Parses `--store`'s value (`StoreUrl::parse`): a mistyped kind is a
/// usage error.
pub fn parse(text: &str) -> Result<StoreUrl, Failure> {
    StoreUrl::parse(text).map_err(|e| Failure::Usage(e.to_string()))
}

/// The store from the flags, else `CLAUDE_MEMORY_STORE`, else
/// `CLAUDE_MEMORY_DIR`.
pub fn from_args(store: Option<&str>, root: Option<PathBuf>) -> Result<StoreUrl, Failure> {
    if let Some(store) = store {
        return parse(store);
    }
    if let Some(root) = root {
        return Ok(StoreUrl::Dir(root));
    }
    if let Some(store) = std::env::var_os("CLAUDE_MEMORY_STORE") {
        let store = store
            .into_string()
            .map_err(|_| Failure::Usage("CLAUDE_MEMORY_STORE is not valid UTF-8".into()))?;
        return parse(&store);
    }
    if let Some(dir) = std::env::var_os("CLAUDE_MEMORY_DIR") {
        return Ok(StoreUrl::Dir(PathBuf::from(dir)));
    }
    Err(Failure::Usage(
        "no store given: use --store STORE (or --root DIR, CLAUDE_MEMORY_STORE, CLAUDE_MEMORY_DIR)"
            .into(),
    ))
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

/// The store a command runs on. Every command builds it here.
pub struct Stack<'a> {
    /// Where it is.
    pub url: &'a StoreUrl,
    /// `--tenant`.
    pub tenant: Option<&'a TenantId>,
    /// `--key-file`, `--passphrase-file`.
    pub ring: Option<&'a Keyring>,
    /// Who the history records as the actor of a change.
    pub label: &'a str,
}

impl Stack<'_> {
    /// The store as its backend holds it: no keys, no history (rekey, a
    /// sealed export).
    pub fn base(&self, access: Access) -> Result<Box<dyn MemoryStore>, Failure> {
        Ok(self.opened(access, HistoryLogs::Never, true)?.store)
    }

    /// The store, sealed with the keys, in its history as `history` asks
    /// (a reading command reads the store as it is: never a history).
    pub fn open(
        &self,
        access: Access,
        history: HistoryLogs,
    ) -> Result<Box<dyn MemoryStore>, Failure> {
        let history = match access {
            Access::Read => HistoryLogs::Never,
            _ => history,
        };
        let opened = self.opened(access, history, false)?;
        match opened.log {
            None => Ok(opened.store),
            Some(log) => Ok(Box::new(self.in_history(opened.store, log, access)?)),
        }
    }

    /// The store in its history, which must exist (the history commands
    /// never start one: on a store without one, a restore would take
    /// every file for new).
    pub fn history(&self, access: Access) -> Result<History, Failure> {
        let opened = self.opened(access, HistoryLogs::Required, false)?;
        let log = opened
            .log
            .ok_or_else(|| self.failure(access, OpenError::NoHistory))?;
        self.in_history(opened.store, log, access)
    }

    /// The versions the history commands read: a managed store's own
    /// (the service keeps a version of every change), else the history's.
    pub fn versions(
        &self,
        access: Access,
    ) -> Result<Box<dyn claude_memory::history::Versions>, Failure> {
        match self.url {
            #[cfg(feature = "managed")]
            StoreUrl::Managed(_) => Ok(Box::new(self.managed(access)?)),
            #[cfg(not(feature = "managed"))]
            StoreUrl::Managed(_) => Err(self.not_built(access)),
            _ => Ok(Box::new(self.history(access)?)),
        }
    }

    /// The managed memory store `--store managed:ID` names.
    #[cfg(feature = "managed")]
    pub fn managed(&self, access: Access) -> Result<claude_memory::ManagedStore, Failure> {
        let StoreUrl::Managed(id) = self.url else {
            return Err(Failure::Usage(format!(
                "{} is not a managed memory store: this needs --store managed:memstore_…",
                self.url.shown()
            )));
        };
        claude_memory::ManagedStore::open(id).map_err(|e| {
            self.failure(
                access,
                OpenError::Open {
                    shown: self.url.shown(),
                    source: Box::new(e),
                },
            )
        })
    }

    /// A managed memory store in a build without the `managed` feature.
    #[cfg(not(feature = "managed"))]
    pub fn not_built(&self, access: Access) -> Failure {
        self.failure(
            access,
            OpenError::NotBuilt {
                feature: "managed",
                what: "a managed memory store",
            },
        )
    }

    /// What the review page shows: the store with its versions where it
    /// keeps them (a managed store's own, or a history the open finds or
    /// `history` starts), else the store alone.
    #[cfg(feature = "ui")]
    pub fn review(
        &self,
        access: Access,
        history: HistoryLogs,
    ) -> Result<claude_memory::ui::Backend, Failure> {
        use claude_memory::ui::Backend;
        #[cfg(feature = "managed")]
        if let StoreUrl::Managed(_) = self.url {
            return Ok(Backend::History(Box::new(self.managed(access)?)));
        }
        let opened = self.opened(access, history, false)?;
        Ok(match opened.log {
            Some(log) => Backend::History(Box::new(self.in_history(opened.store, log, access)?)),
            None => Backend::Plain(opened.store),
        })
    }

    fn in_history(
        &self,
        store: Box<dyn MemoryStore>,
        log: Box<dyn claude_memory::history::HistoryLog>,
        access: Access,
    ) -> Result<History, Failure> {
        if access == Access::Read {
            return HistoryStore::inspect(store, log).map_err(failed);
        }
        let history = HistoryStore::open(store, log)
            .map_err(failed)?
            .with_label(self.label);
        if !history.repair_report().is_clean() {
            crate::output::err(history.repair_report());
        }
        Ok(history)
    }

    fn opened(&self, access: Access, history: HistoryLogs, raw: bool) -> Result<Opened, Failure> {
        if let StoreUrl::Sqlite(path) = self.url
            && access != Access::Read
            && path.is_file()
            && std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
        {
            return Err(Failure::Failed(needs_write_access(
                &path.display().to_string(),
                "the database file and its directory",
            )));
        }
        let options = OpenOptions::new()
            .create(access == Access::Create)
            .read_only(access == Access::Read)
            .tenant(self.tenant.cloned())
            .history(history)
            .keys(if raw { None } else { self.ring.cloned() })
            .raw(raw);
        self.url.open(&options).map_err(|e| self.failure(access, e))
    }

    fn failure(&self, access: Access, e: OpenError) -> Failure {
        opening_failure(self.url, self.tenant, access, e)
    }
}

/// What the CLI says when a store does not open: the library's reason,
/// with the hint a command line can give (`sqlite:` for a database named
/// as a directory, the feature to reinstall with).
fn opening_failure(
    url: &StoreUrl,
    tenant: Option<&TenantId>,
    access: Access,
    e: OpenError,
) -> Failure {
    let shown = url.shown();
    match (url, e) {
        (_, OpenError::Url(message)) => Failure::Usage(message),
        (_, OpenError::ManagedHistory) => Failure::Usage(
            "--history does not apply to a managed memory store: the service keeps a version of every change itself (see `history`)".into(),
        ),
        (_, OpenError::Encrypted(_)) => Failure::Failed(
            "this store is encrypted: give its key with --key-file FILE or --passphrase-file FILE".into(),
        ),
        (_, OpenError::Open { source, .. })
            if matches!(
                source.downcast_ref::<CryptError>(),
                Some(CryptError::Uninitialised)
            ) && tenant.is_some() =>
        {
            Failure::Failed(format!(
                "tenant {} has no encrypted memories here yet (no key record): nothing to read (is --tenant right?)",
                tenant.map_or("", TenantId::as_str)
            ))
        }
        (_, OpenError::NoHistory) => Failure::Failed(
            "no history for this store: it is kept only once the store is used with --history (serve, import or prune)".into(),
        ),
        (_, OpenError::NotBuilt { feature, .. }) => Failure::Usage(match feature {
            "sqlite" => "this claude-memory was built without the sqlite feature (reinstall with the default features: cargo install claude-memory-cli)".into(),
            "managed" => "this claude-memory was built without managed memory stores (reinstall with: cargo install claude-memory-cli --features managed)".into(),
            "postgres" => "this claude-memory was built without the postgres feature (reinstall with: cargo install claude-memory-cli --features postgres)".into(),
            _ => "this claude-memory was built without cloud storage (reinstall with: cargo install claude-memory-cli --features s3; or azure, or gcs)".into(),
        }),
        (StoreUrl::Dir(dir), OpenError::NotFound(_)) if looks_like_sqlite(dir) => Failure::Failed(format!(
            "no memory store at {shown}: the directory does not exist (for a SQLite file, write --store sqlite:{shown})"
        )),
        (StoreUrl::Dir(_), OpenError::NotFound(_)) => Failure::Failed(format!(
            "no memory store at {shown}: the directory does not exist (mistyped? `serve`, `mcp` or `import` create one)"
        )),
        (StoreUrl::Sqlite(_), OpenError::NotFound(_)) => Failure::Failed(format!(
            "no SQLite store at {shown}: the file does not exist (mistyped? `serve` or `import` create one)"
        )),
        (StoreUrl::Dir(dir), OpenError::Open { source, .. }) => {
            let kind = source.downcast_ref::<io::Error>().map(io::Error::kind);
            Failure::Failed(match kind {
                Some(io::ErrorKind::NotADirectory) if is_sqlite_file(dir) => format!(
                    "cannot open the store {shown}: it is a SQLite database, not a directory (write --store sqlite:{shown})"
                ),
                Some(io::ErrorKind::NotADirectory) => format!(
                    "cannot open the store {shown}: it is not a directory (a directory, sqlite:PATH, postgres://, s3://, az:// or gs://)"
                ),
                Some(io::ErrorKind::PermissionDenied) if access != Access::Read => {
                    needs_write_access(&shown, "the directory, to take its lock and write")
                }
                _ => format!("cannot open the store {shown}: {}", with_causes(&*source)),
            })
        }
        (StoreUrl::Sqlite(_), OpenError::Open { source, .. }) => Failure::Failed(format!(
            "cannot open the SQLite store {shown}: {}",
            with_causes(&*source)
        )),
        (StoreUrl::Postgres(_), OpenError::Open { source, .. }) => Failure::Failed(format!(
            "cannot connect to the PostgreSQL store: {}",
            with_causes(&*source)
        )),
        (StoreUrl::Managed(id), OpenError::Open { source, .. }) => Failure::Failed(format!(
            "cannot open the managed memory store {id}: {}",
            with_causes(&*source)
        )),
        (_, e) => Failure::Failed(format!("cannot open the store {shown}: {}", with_causes(&e))),
    }
}

/// Whether `path` is named as SQLite files are (`.db`, `.sqlite`,
/// `.sqlite3`), so a missing `--store mem.db` can be told to say `sqlite:`.
fn looks_like_sqlite(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "db" | "sqlite" | "sqlite3"))
}

/// Whether `path` is a file that starts with SQLite's header, so a
/// `--store mem.db` meant as a database can be told to say `sqlite:`.
fn is_sqlite_file(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}
