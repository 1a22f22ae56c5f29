//! History logs in a database: the reserved table `claude_memory_history`
//! beside the store's own tables, one history per scope (a tenant id, or
//! `""` for the whole database).
//!
//! The statements that read and change versions are written once here,
//! over the SQL stores' [`Dialect`]; each log keeps only what differs:
//! its schema, how ids are given out, its writer lock and its durability.

use super::log::{Filter, Order};
use super::{ChangeOp, HistoryError, HistoryLog, Revision, from_nanos, to_nanos};
use crate::store::sql::{Dialect, Param};

/// The indexes the log's questions use (the table's key is the scope and
/// the id): one file's versions, a path's, a rename's source, a time.
/// Created at open, so a 0.4 table gains them then (once, in one pass).
pub(super) const INDEXES: [&str; 4] = [
    "CREATE INDEX IF NOT EXISTS claude_memory_history_file ON claude_memory_history (scope, file, id)",
    "CREATE INDEX IF NOT EXISTS claude_memory_history_path ON claude_memory_history (scope, path, id)",
    "CREATE INDEX IF NOT EXISTS claude_memory_history_from ON claude_memory_history (scope, from_path, id) WHERE from_path IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS claude_memory_history_time ON claude_memory_history (scope, time_ns)",
];

/// The checkpoint of each scope's index (see `HistoryLog::save_checkpoint`).
pub(super) const CHECKPOINT_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS claude_memory_history_checkpoint (
scope TEXT PRIMARY KEY,
data BYTEA NOT NULL
)";

fn db_error(e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Log(e.to_string())
}

fn op_of(text: &str) -> ChangeOp {
    match text {
        "created" => ChangeOp::Created,
        "deleted" => ChangeOp::Deleted,
        "renamed" => ChangeOp::Renamed,
        _ => ChangeOp::Modified,
    }
}

/// Refuses a `for_store` scope other than the store's tenant: two
/// tenants sharing one scope would each take the other's versions for
/// changes that never happened, and record their own files again as
/// anonymous repairs, at every open.
fn same_scope(tenant: &str, scope: &str) -> Result<(), HistoryError> {
    if tenant == scope {
        return Ok(());
    }
    Err(HistoryError::Log(format!(
        "the history scope {scope:?} is not the store's tenant {tenant:?}: give the tenant's id (\"\" for a store with no tenant), so each tenant keeps a history of its own"
    )))
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// A nullable text column's parameter: `NULLIF($n, '')` in the SQL
/// turns `""` back into NULL (no stored value is an empty string).
fn or_empty(text: &Option<String>) -> Param<'_> {
    Param::Text(text.as_deref().unwrap_or(""))
}

/// The values of a dialect's insert statement, in order: `$1` scope,
/// then file, op, path, from (`NULLIF`), time, actor, call (`NULLIF`),
/// sha256, size, content, redacted (an integer), note (`NULLIF`).
fn values<'a>(scope: &'a str, v: &'a Revision) -> [Param<'a>; 13] {
    [
        Param::Text(scope),
        Param::Int(i64_of(v.file)),
        Param::Text(v.op.as_str()),
        Param::Text(&v.path),
        or_empty(&v.from),
        Param::Int(i64_of(to_nanos(v.time))),
        or_empty(&v.actor),
        or_empty(&v.call),
        Param::Text(&v.sha256),
        Param::Int(i64_of(v.size)),
        match &v.content {
            Some(c) => Param::Bytes(c),
            None => Param::NullBytes,
        },
        Param::Int(i64::from(v.redacted)),
        or_empty(&v.note),
    ]
}

/// Inserts `versions` with `insert` (the dialect's statement, taking
/// [`values`] and returning the new id), in the caller's transaction;
/// their ids, in order.
/// A file's first version is stored with its own id as its file, where
/// the insert cannot name that id itself (`fix_file`, the dialect's
/// statement for it, else `None`).
fn insert<D: Dialect>(
    db: &mut D,
    insert: &str,
    fix_file: Option<&str>,
    scope: &str,
    versions: &[Revision],
) -> Result<Vec<u64>, D::Error> {
    let mut ids = Vec::with_capacity(versions.len());
    for (i, v) in versions.iter().enumerate() {
        let fix = fix_file.filter(|_| v.file == 0);
        if i + 1 == versions.len() && fix.is_none() {
            db.last_statement();
        }
        let id = db.fetch_opt(insert, &values(scope, v), |r| r.int(0))?;
        let id = id.unwrap_or(0);
        if let Some(fix) = fix {
            if i + 1 == versions.len() {
                db.last_statement();
            }
            db.run(fix, &[Param::Int(id)])?;
        }
        ids.push(u64_of(id));
    }
    Ok(ids)
}

/// Gives the rows of `scope` a 0.4 log wrote with file 0 (a file's first
/// version) their own id as their file, so one file's versions are one
/// index range: a no-op, through the file index, once done.
fn fix_files<D: Dialect>(db: &mut D, scope: &str) -> Result<(), D::Error> {
    db.run(
        "UPDATE claude_memory_history SET file = id WHERE scope = $1 AND file = 0",
        &[Param::Text(scope)],
    )
}

/// A version's columns, the content last so a listing leaves it out and
/// its bytes never leave the database.
const COLUMNS: &str =
    "SELECT id, file, op, path, COALESCE(from_path, ''), time_ns, COALESCE(actor, ''),
    COALESCE(call, ''), sha256, size, redacted, COALESCE(note, '')";

fn row<E>(r: &dyn crate::store::sql::Columns<Error = E>, content: bool) -> Result<Revision, E> {
    Ok(Revision {
        id: u64_of(r.int(0)?),
        file: u64_of(r.int(1)?),
        op: op_of(&r.text(2)?),
        path: r.text(3)?,
        from: non_empty(r.text(4)?),
        time: from_nanos(u64_of(r.int(5)?)),
        actor: non_empty(r.text(6)?),
        call: non_empty(r.text(7)?),
        sha256: r.text(8)?,
        size: u64_of(r.int(9)?),
        redacted: r.flag(10)?,
        note: non_empty(r.text(11)?),
        content: if content { r.bytes(12)? } else { None },
        // Its index on files finds a file's versions; no chain is kept.
        prev: None,
    })
}

/// Version `id` of `scope`, with its content.
fn get<D: Dialect>(db: &mut D, scope: &str, id: u64) -> Result<Option<Revision>, D::Error> {
    let sql = format!("{COLUMNS}, content FROM claude_memory_history WHERE scope = $1 AND id = $2");
    db.fetch_opt(&sql, &[Param::Text(scope), Param::Int(i64_of(id))], |r| {
        row(r, true)
    })
}

/// The records of `scope` matching `filter`, in `order`, at most
/// `limit`: one statement, each field a condition the indexes answer.
fn find<D: Dialect>(
    db: &mut D,
    scope: &str,
    filter: &Filter,
    order: Order,
    limit: usize,
) -> Result<Vec<Revision>, D::Error> {
    let mut texts: Vec<String> = Vec::new();
    let mut ints: Vec<i64> = Vec::new();
    // Conditions refer to `$t{n}` / `$i{n}`, numbered once all are known.
    let mut conditions: Vec<String> = Vec::new();
    let text = |t: &str, texts: &mut Vec<String>| {
        texts.push(t.to_owned());
        format!("$t{}", texts.len() - 1)
    };
    let int = |n: i64, ints: &mut Vec<i64>| {
        ints.push(n);
        format!("$i{}", ints.len() - 1)
    };
    if let Some(a) = filter.after {
        conditions.push(format!("id > {}", int(i64_of(a), &mut ints)));
    }
    if let Some(b) = filter.before {
        conditions.push(format!("id < {}", int(i64_of(b), &mut ints)));
    }
    if let Some(files) = &filter.files {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        // Every row has its file (a file's first version its own id:
        // see `insert` and `fix_files`), so one file is one index range.
        let list: Vec<String> = files
            .iter()
            .filter(|f| **f != 0)
            .map(|f| int(i64_of(*f), &mut ints))
            .collect();
        if list.is_empty() {
            return Ok(Vec::new());
        }
        conditions.push(format!("file IN ({})", list.join(", ")));
    }
    if let Some(p) = &filter.path {
        let p = text(p, &mut texts);
        conditions.push(format!("(path = {p} OR from_path = {p})"));
    }
    if let Some(p) = filter.prefix.as_deref().filter(|p| *p != crate::path::ROOT) {
        // Compared by characters (SQLite's LIKE ignores ASCII case, and
        // PostgreSQL's ordering follows the database's collation).
        let exact = text(p, &mut texts);
        let below = text(&format!("{p}/"), &mut texts);
        // A number this code computed, written into the statement: both
        // databases take it as an `INTEGER`, which a parameter is not.
        let len = p.chars().count() + 1;
        conditions.push(format!(
            "(path = {exact} OR substr(path, 1, {len}) = {below} OR from_path = {exact} OR substr(from_path, 1, {len}) = {below})"
        ));
    }
    if let Some(t) = filter.since {
        conditions.push(format!(
            "time_ns >= {}",
            int(i64_of(to_nanos(t)), &mut ints)
        ));
    }
    if let Some(t) = filter.until {
        conditions.push(format!(
            "time_ns <= {}",
            int(i64_of(to_nanos(t)), &mut ints)
        ));
    }
    if let Some(a) = &filter.actor {
        let a = text(a, &mut texts);
        conditions.push(format!("(actor = {a} OR call = {a})"));
    }
    if let Some(c) = &filter.call {
        conditions.push(format!("call = {}", text(c, &mut texts)));
    }
    let mut sql = format!("{COLUMNS} FROM claude_memory_history WHERE scope = $1");
    for c in &conditions {
        sql.push_str(" AND ");
        sql.push_str(c);
    }
    sql.push_str(match order {
        Order::Oldest => " ORDER BY id ASC",
        Order::Newest => " ORDER BY id DESC",
    });
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    sql.push_str(&format!(" LIMIT {}", int(limit, &mut ints)));
    // `$1` is the scope, then the texts, then the integers.
    let (nt, ni) = (texts.len(), ints.len());
    for i in (0..ni).rev() {
        sql = sql.replace(&format!("$i{i}"), &format!("${}", 2 + nt + i));
    }
    for i in (0..nt).rev() {
        sql = sql.replace(&format!("$t{i}"), &format!("${}", 2 + i));
    }
    let mut params = vec![Param::Text(scope)];
    params.extend(texts.iter().map(|t| Param::Text(t)));
    params.extend(ints.iter().map(|n| Param::Int(*n)));
    db.fetch_all(&sql, &params, |r| row(r, false))
}

/// The checkpoint of `scope`, if any.
fn checkpoint<D: Dialect>(db: &mut D, scope: &str) -> Result<Option<Vec<u8>>, D::Error> {
    Ok(db
        .fetch_opt(
            "SELECT data FROM claude_memory_history_checkpoint WHERE scope = $1",
            &[Param::Text(scope)],
            |r| r.bytes(0),
        )?
        .flatten())
}

/// Replaces the checkpoint of `scope`.
fn save_checkpoint<D: Dialect>(db: &mut D, scope: &str, data: &[u8]) -> Result<(), D::Error> {
    db.run(
        "INSERT INTO claude_memory_history_checkpoint (scope, data) VALUES ($1, $2)
         ON CONFLICT (scope) DO UPDATE SET data = excluded.data",
        &[Param::Text(scope), Param::Bytes(data)],
    )
}

/// Deletes the versions `ids` of `scope`.
fn drop_ids<D: Dialect>(db: &mut D, scope: &str, ids: &[u64]) -> Result<(), D::Error> {
    for &id in ids {
        db.run(
            "DELETE FROM claude_memory_history WHERE scope = $1 AND id = $2",
            &[Param::Text(scope), Param::Int(i64_of(id))],
        )?;
    }
    Ok(())
}

/// Sets version `id`'s content (NULL: erased) and redacted flag; whether
/// the version exists.
fn set_content<D: Dialect>(
    db: &mut D,
    scope: &str,
    id: u64,
    content: Option<&[u8]>,
    redacted: bool,
) -> Result<bool, D::Error> {
    Ok(db
        .fetch_opt(
            "UPDATE claude_memory_history SET content = $3, redacted = CAST($4 AS BIGINT) <> 0
             WHERE scope = $1 AND id = $2 RETURNING id",
            &[
                Param::Text(scope),
                Param::Int(i64_of(id)),
                content.map_or(Param::NullBytes, Param::Bytes),
                Param::Int(i64::from(redacted)),
            ],
            |r| r.int(0),
        )?
        .is_some())
}

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteLog;

#[cfg(feature = "postgres")]
mod pg;
#[cfg(feature = "postgres")]
pub use self::pg::PostgresLog;
