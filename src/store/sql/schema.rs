//! The schema version both SQL backends write and check on opening.
//!
//! The tables themselves are dialect text (column types differ); this is
//! the version row in `claude_memory_schema` beside them.

use super::Dialect;

/// The schema version this crate writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// What `claude_memory_schema` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// Exactly one row, [`SCHEMA_VERSION`].
    Current,
    /// No row yet.
    Missing,
    /// Exactly one row, a newer version: leave the database alone.
    Newer(i64),
    /// Anything else (several rows, a value that is no version this crate
    /// ever wrote): not a store this crate can trust.
    Invalid(String),
}

/// Reads `claude_memory_schema`: exactly one row holding exactly one known
/// version is a store; rows 1 and 99, or `'abc'`, are not.
pub(crate) fn read_version<D: Dialect>(db: &mut D) -> Result<Found, D::Error> {
    let rows = db.fetch_all(
        "SELECT CAST(version AS TEXT) FROM claude_memory_schema",
        &[],
        |r| r.text(0),
    )?;
    Ok(match rows.as_slice() {
        [] => Found::Missing,
        [one] => match one.parse::<i64>() {
            Ok(SCHEMA_VERSION) => Found::Current,
            Ok(v) if v > SCHEMA_VERSION => Found::Newer(v),
            _ => Found::Invalid(format!(
                "claude_memory_schema holds {one:?}, which is no schema version this crate wrote"
            )),
        },
        more => Found::Invalid(format!(
            "claude_memory_schema holds {} rows; a store has exactly one",
            more.len()
        )),
    })
}

/// Records [`SCHEMA_VERSION`] in a database that has none yet, and
/// returns what was found (for a writing open: [`Found::Missing`] becomes
/// [`Found::Current`]).
pub(crate) fn check_version<D: Dialect>(db: &mut D) -> Result<Found, D::Error> {
    match read_version(db)? {
        Found::Missing => {
            db.run(
                &format!("INSERT INTO claude_memory_schema (version) VALUES ({SCHEMA_VERSION})"),
                &[],
            )?;
            Ok(Found::Current)
        }
        found => Ok(found),
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
