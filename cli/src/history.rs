//! `history`, `show`, `diff`, `revert`, `restore --at`, `redact` and
//! `history prune`: the store's history (`claude_memory::history`).

use std::time::{Duration, SystemTime};

use claude_memory::history::{
    HistoryLog, HistoryStore, Query, Retention, Revision, escape, escape_text,
};
use claude_memory::path::MemoryPath;
use claude_memory::{MemoryStore, TenantId};

use crate::output::{Failure, Outcome, count, failed, out};
use crate::store::{Access, StoreSpec};

/// The store with its history: `Read` inspects (no repair, nothing
/// written); otherwise the open repairs and says so on stderr.
pub type History = HistoryStore<Box<dyn MemoryStore>>;

/// Where the history of a directory or SQLite store is kept, if the CLI
/// can tell without connecting (`None` for PostgreSQL).
/// With `--tenant`, a directory store's tenant keeps its journal in its
/// own directory; a SQL store's tenant, in the same log under its scope.
fn history_file(spec: &StoreSpec, tenant: Option<&TenantId>) -> Option<std::path::PathBuf> {
    match spec {
        StoreSpec::Dir(dir) => Some(
            tenant
                .map_or_else(|| dir.clone(), |t| t.dir_in(dir))
                .join(claude_memory::history::HISTORY_DIR)
                .join("journal.jsonl"),
        ),
        StoreSpec::Sqlite(path) => {
            let mut file = path.clone().into_os_string();
            file.push(".claude-memory-history");
            Some(std::path::PathBuf::from(file))
        }
        StoreSpec::Postgres(_) | StoreSpec::Cloud(_) | StoreSpec::Managed(_) => None,
    }
}

/// Whether the store already keeps a history: then every command that
/// changes it records its changes too, `--history` or not, so a change
/// made without the flag is never missing from `history`.
pub fn exists(spec: &StoreSpec, tenant: Option<&TenantId>) -> bool {
    match spec {
        StoreSpec::Postgres(url) => postgres_has_history(url, tenant.map_or("", TenantId::as_str)),
        _ => history_file(spec, tenant).is_some_and(|f| f.is_file()),
    }
}

#[cfg(feature = "postgres")]
fn postgres_has_history(url: &str, scope: &str) -> bool {
    claude_memory::history::PostgresLog::exists(url, scope).unwrap_or(false)
}

#[cfg(not(feature = "postgres"))]
fn postgres_has_history(_: &str, _: &str) -> bool {
    false
}

/// The history log of the store `spec` names. `start` says whether a
/// store without one may get one now (`--history`); the history
/// commands only work on a history that exists.
fn log(
    spec: &StoreSpec,
    tenant: Option<&TenantId>,
    start: bool,
    access: Access,
) -> Result<Box<dyn HistoryLog>, Failure> {
    let missing = match spec {
        StoreSpec::Postgres(_) => !exists(spec, tenant),
        _ => history_file(spec, tenant).is_some_and(|f| !f.is_file()),
    };
    if !start && missing {
        return Err(Failure::Failed(
            "no history for this store: it is kept only once the store is used with --history (serve, import or prune)".into(),
        ));
    }
    let scope = tenant.map_or("", TenantId::as_str);
    match spec {
        StoreSpec::Dir(dir) => {
            let root = tenant.map_or_else(|| dir.clone(), |t| t.dir_in(dir));
            let log = if access == Access::Read {
                claude_memory::history::FileLog::for_store_read_only(root)
            } else {
                claude_memory::history::FileLog::for_store(root)
            };
            Ok(Box::new(log.map_err(failed)?))
        }
        StoreSpec::Sqlite(path) => {
            // A database file of its own beside the store's: cheaper per
            // write than the store's own database (see SqliteLog).
            let file = history_file(spec, tenant).unwrap_or_else(|| path.clone());
            sqlite_log(&file, scope)
        }
        StoreSpec::Postgres(url) => postgres_log(url, scope),
        // A tenant's log lives below the tenant's prefix (CloudLog::for_tenant).
        StoreSpec::Cloud(url) => crate::cloud::log(url, tenant),
        // The service keeps a version of every change itself; `history`,
        // `show`, `diff`, `revert` and `redact` read it (managed_history).
        StoreSpec::Managed(_) => Err(Failure::Usage(
            "--history does not apply to a managed memory store: the service keeps a version of every change itself (see `history`)".into(),
        )),
    }
}

#[cfg(feature = "sqlite")]
fn sqlite_log(path: &std::path::Path, scope: &str) -> Result<Box<dyn HistoryLog>, Failure> {
    Ok(Box::new(
        claude_memory::history::SqliteLog::open(path, scope).map_err(failed)?,
    ))
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_log(_: &std::path::Path, _: &str) -> Result<Box<dyn HistoryLog>, Failure> {
    Err(Failure::Usage("built without the sqlite feature".into()))
}

#[cfg(feature = "postgres")]
fn postgres_log(url: &str, scope: &str) -> Result<Box<dyn HistoryLog>, Failure> {
    // On the store's own pool where this process opened it: each change
    // and its version then commit in one transaction.
    let log = match crate::store::opened_postgres(url) {
        Some(store) => claude_memory::history::PostgresLog::for_store(&store, scope),
        None => claude_memory::history::PostgresLog::connect(url, scope),
    };
    Ok(Box::new(log.map_err(failed)?))
}

#[cfg(not(feature = "postgres"))]
fn postgres_log(_: &str, _: &str) -> Result<Box<dyn HistoryLog>, Failure> {
    Err(Failure::Usage("built without the postgres feature".into()))
}

/// Wraps `store` in its history (what `--history` does for serve, import
/// and prune, and every changing history command).
pub fn open(
    spec: &StoreSpec,
    tenant: Option<&TenantId>,
    store: Box<dyn MemoryStore>,
    access: Access,
    start: bool,
    sealer: Option<&claude_memory::history::LogSealer>,
) -> Result<History, Failure> {
    let log = crate::crypt::seal_log(log(spec, tenant, start, access)?, sealer);
    if access == Access::Read {
        return HistoryStore::inspect(store, log).map_err(failed);
    }
    let history = HistoryStore::open(store, log)
        .map_err(failed)?
        .with_label("claude-memory-cli");
    if !history.repair_report().is_clean() {
        crate::output::err(history.repair_report());
    }
    Ok(history)
}

fn time(t: SystemTime) -> String {
    claude_memory::history::format_time(t)
}

fn line(v: &Revision) -> String {
    // Every field a model or a stored file controls is escaped: no
    // control character can move the cursor or forge a row.
    let path = match &v.from {
        Some(from) => format!("{} -> {}", escape(from), escape(&v.path)),
        None => escape(&v.path),
    };
    let actor = match (&v.actor, &v.call) {
        (Some(a), Some(c)) => format!("{}/{}", escape(a), escape(c)),
        (Some(a), None) => escape(a),
        (None, Some(c)) => escape(c),
        (None, None) => "-".into(),
    };
    let mut text = format!(
        "v{}\t{}\t{}\t{path}\t{actor}\t{}\t{}",
        v.id,
        time(v.time),
        v.op.as_str(),
        v.sha256.get(..12).unwrap_or(&v.sha256),
        claude_memory::human_size(v.size),
    );
    if v.redacted {
        text.push_str("\t[redacted]");
    }
    if let Some(note) = &v.note {
        text.push_str(&format!("\t({})", escape(note)));
    }
    text
}

fn path(text: &str) -> Result<MemoryPath, Failure> {
    MemoryPath::parse(text).map_err(|e| Failure::Usage(format!("{text}: {e}")))
}

/// `history [PATH] [--prefix P] [--since T] [--until T] [--actor A]`.
pub fn list(
    h: &History,
    file: Option<&str>,
    prefix: Option<&str>,
    since: Option<SystemTime>,
    until: Option<SystemTime>,
    actor: Option<String>,
) -> Outcome {
    let query = Query {
        path: file.map(path).transpose()?,
        prefix: prefix.map(path).transpose()?,
        since,
        until,
        actor,
        limit: Some(usize::MAX),
        ..Query::default()
    };
    // Records only: no version's content is read for a listing.
    let versions = h.versions(&query).map_err(failed)?;
    for v in &versions {
        out(line(v))?;
    }
    out(format_args!(
        "{}",
        count(versions.len(), "version", "versions")
    ))
}

/// `show ID`: the record, then the content.
pub fn show(h: &History, id: u64) -> Outcome {
    let v = h.version(id).map_err(failed)?;
    out(line(&v))?;
    out(format_args!("sha256 {}", v.sha256))?;
    match v.text() {
        Some(text) => out(format_args!("--- content ---\n{}", escape_text(&text))),
        None => out("--- content redacted ---"),
    }
}

/// `diff A [B]`.
pub fn diff(h: &History, a: u64, b: Option<u64>) -> Outcome {
    let text = h.diff(a, b).map_err(failed)?;
    if text.is_empty() {
        return out("no differences");
    }
    out(escape_text(text.trim_end()))
}

/// `revert ID`.
pub fn revert(h: &History, id: u64) -> Outcome {
    let v = h.version(id).map_err(failed)?;
    match h.revert(id).map_err(failed)? {
        Some(new) => out(format_args!(
            "reverted {} to v{id} (new version v{new})",
            escape(&v.path)
        )),
        None => out(format_args!(
            "{} already has the content of v{id}",
            escape(&v.path)
        )),
    }
}

/// `restore --at TIME [--prefix P]`.
pub fn restore(h: &History, at: SystemTime, prefix: Option<&str>, dry_run: bool) -> Outcome {
    let prefix = prefix.map(path).transpose()?;
    let report = if dry_run {
        h.restore_plan(at, prefix.as_ref())
    } else {
        h.restore(at, prefix.as_ref())
    }
    .map_err(failed)?;
    let (restored, deleted) = if dry_run {
        ("would restore", "would delete")
    } else {
        ("restored", "deleted")
    };
    for p in &report.written {
        out(format_args!("{restored} {}", escape(p)))?;
    }
    for p in &report.deleted {
        out(format_args!("{deleted} {}", escape(p)))?;
    }
    for (p, why) in &report.skipped {
        out(format_args!("skipped {}: {}", escape(p), why.as_str()))?;
    }
    for (p, e) in &report.failed {
        crate::output::err(format_args!(
            "claude-memory: cannot restore {}: {}",
            escape(p),
            escape(e)
        ));
    }
    out(format_args!(
        "{} to {}: {} written, {} deleted, {} skipped",
        if dry_run { "would restore" } else { "restored" },
        time(at),
        count(report.written.len(), "file", "files"),
        report.deleted.len(),
        report.skipped.len()
    ))?;
    if report.failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// `redact ID` or `redact --text TEXT`.
pub fn redact(h: &History, id: Option<u64>, text: Option<&str>) -> Outcome {
    if let Some(text) = text {
        let (ids, still) = h.redact_text(text.as_bytes()).map_err(failed)?;
        let list: Vec<String> = ids.iter().map(|v| format!("v{v}")).collect();
        out(format_args!(
            "erased the text from {}{}",
            count(ids.len(), "version", "versions"),
            if list.is_empty() {
                String::new()
            } else {
                format!(" ({})", list.join(", "))
            }
        ))?;
        for p in &still {
            out(format_args!(
                "the live file {} still holds it: edit or delete it (the history does not change the store)",
                escape(p)
            ))?;
        }
        return Ok(());
    }
    let Some(id) = id else {
        return Err(Failure::Usage(
            "redact needs a version id or --text TEXT".into(),
        ));
    };
    let ids = h.redact(id).map_err(failed)?;
    let also: Vec<String> = ids[1..].iter().map(|v| format!("v{v}")).collect();
    if also.is_empty() {
        out(format_args!(
            "redacted v{id}: its content is erased, its record kept"
        ))
    } else {
        out(format_args!(
            "redacted v{id} and {} holding the same content ({}): their content is erased, their records kept",
            count(also.len(), "other version", "other versions"),
            also.join(", ")
        ))
    }
}

/// `history prune [--older-than AGE] [--keep N]`.
pub fn prune(
    h: &History,
    older_than: Option<Duration>,
    keep: Option<usize>,
    dry_run: bool,
) -> Outcome {
    if keep == Some(0) {
        return Err(Failure::Usage(
            "--keep 0 would leave a live file without its latest version: keep at least 1".into(),
        ));
    }
    if older_than.is_none() && keep.is_none() {
        return Err(Failure::Usage(
            "history prune needs --older-than AGE, --keep N or both".into(),
        ));
    }
    let retention = Retention {
        max_age: older_than,
        keep_per_file: keep,
    };
    let removed = if dry_run {
        h.prune_plan(&retention)
    } else {
        h.prune(&retention)
    }
    .map_err(failed)?;
    out(format_args!(
        "{} {} (the latest version of every live file is kept)",
        if dry_run { "would remove" } else { "removed" },
        count(removed.len(), "version", "versions")
    ))
}

/// A time: RFC 3339 (`2026-11-30T12:00:00Z`, `2026-11-30 12:00:00`) or an
/// age before now (`10m`, `2h`, `1d`).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(t);
    }
    let age = humantime::parse_duration(text).map_err(|_| {
        format!(
            "`{text}` is not a time: give RFC 3339 (2026-11-30T12:00:00Z) or an age (10m, 2h, 1d)"
        )
    })?;
    SystemTime::now()
        .checked_sub(age)
        .ok_or_else(|| format!("`{text}` is too far back"))
}
