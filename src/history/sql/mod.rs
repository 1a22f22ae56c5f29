//! History logs in a database: the reserved table `claude_memory_history`
//! beside the store's own tables, one history per scope (a tenant id, or
//! `""` for the whole database).
//!
//! The statements that read and change versions are written once here,
//! over the SQL stores' [`Dialect`]; each log keeps only what differs:
//! its schema, how ids are given out, its writer lock and its durability.

use super::{ChangeOp, HistoryError, HistoryLog, Revision, from_nanos, to_nanos};
use crate::store::sql::{Dialect, Param};

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
fn insert<D: Dialect>(
    db: &mut D,
    insert: &str,
    scope: &str,
    versions: &[Revision],
) -> Result<Vec<u64>, D::Error> {
    let mut ids = Vec::with_capacity(versions.len());
    for (i, v) in versions.iter().enumerate() {
        if i + 1 == versions.len() {
            db.last_statement();
        }
        let id = db.fetch_opt(insert, &values(scope, v), |r| r.int(0))?;
        ids.push(u64_of(id.unwrap_or(0)));
    }
    Ok(ids)
}

/// A version's columns, the content last so a listing leaves it out and
/// its bytes never leave the database.
macro_rules! select {
    ($content:literal) => {
        concat!(
            "SELECT id, file, op, path, COALESCE(from_path, ''), time_ns, COALESCE(actor, ''),
                COALESCE(call, ''), sha256, size, redacted, COALESCE(note, '')",
            $content,
            " FROM claude_memory_history WHERE scope = $1 AND id > $2 ORDER BY id"
        )
    };
}

/// The versions of `scope` above `after`, by ascending id, with their
/// content or without it.
fn select<D: Dialect>(
    db: &mut D,
    scope: &str,
    after: u64,
    content: bool,
) -> Result<Vec<Revision>, D::Error> {
    let sql = if content {
        select!(", content")
    } else {
        select!("")
    };
    db.fetch_all(sql, &[Param::Text(scope), Param::Int(i64_of(after))], |r| {
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
        })
    })
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
