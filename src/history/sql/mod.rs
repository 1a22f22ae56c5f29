//! History logs in a database: the reserved table `claude_memory_history`
//! beside the store's own tables, one history per scope (a tenant id, or
//! `""` for the whole database).

use super::{ChangeOp, HistoryError, HistoryLog, Revision, from_nanos, to_nanos};

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
/// anonymous repairs, at every open (a new user's review did this by
/// giving `""` to two tenants' logs).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
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

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteLog;

#[cfg(feature = "postgres")]
mod pg;
#[cfg(feature = "postgres")]
pub use self::pg::PostgresLog;
