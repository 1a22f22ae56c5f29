//! The schema version both SQL backends write and check on opening.
//!
//! The tables themselves are dialect text (column types differ); this is
//! the version row in `claude_memory_schema` beside them.

use super::Dialect;

/// The schema version this crate writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// Records [`SCHEMA_VERSION`] in a database that has none yet. Returns the
/// version found if it is newer than this crate's: such a database is left
/// alone and must be refused.
pub(crate) fn check_version<D: Dialect>(db: &mut D) -> Result<Option<i64>, D::Error> {
    let found = db.fetch_opt(
        "SELECT CAST(version AS BIGINT) FROM claude_memory_schema",
        &[],
        |r| r.int(0),
    )?;
    match found {
        None => {
            db.run(
                &format!("INSERT INTO claude_memory_schema (version) VALUES ({SCHEMA_VERSION})"),
                &[],
            )?;
            Ok(None)
        }
        Some(v) if v > SCHEMA_VERSION => Ok(Some(v)),
        Some(_) => Ok(None),
    }
}

/// Why a database with schema `version` (newer than this crate's) is
/// refused.
pub(crate) fn newer(version: i64) -> String {
    format!(
        "the database has claude-memory schema version {version}; this crate knows {SCHEMA_VERSION}"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_newer_schema_is_named_with_both_versions() {
        assert_eq!(
            super::newer(99),
            "the database has claude-memory schema version 99; this crate knows 1"
        );
    }
}
