//! Opening a SQLite file as a store: private files, and telling a store
//! from another program's database before anything is written to it.

use std::io;
use std::path::Path;

use rusqlite::Connection;

/// Creates `path` as an empty file readable by its owner only (0600 on
/// Unix, whatever the umask), unless something is already there: SQLite
/// gives its `-wal` and `-shm` files the database file's mode, so the whole
/// store is as private as the filesystem store and backups. An existing
/// file keeps its mode (the operator chose it).
pub(crate) fn create_private(path: &Path) -> io::Result<()> {
    if !is_plain_file_name(path) {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether SQLite reads `path` as a file's name. Names SQLite gives a
/// meaning of its own (an in-memory or temporary database, a `file:` URI)
/// are no file to make or look for here.
pub(crate) fn is_plain_file_name(path: &Path) -> bool {
    let name = path.as_os_str();
    !(name.is_empty()
        || name == ":memory:"
        || path.to_str().is_some_and(|p| p.starts_with("file:")))
}

/// The names of the database's tables, views, indexes and triggers that
/// are not this crate's (`claude_memory_*`) nor SQLite's own (`sqlite_*`).
pub(super) fn foreign_objects(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE name NOT LIKE 'claude\\_memory\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    names.collect()
}

/// Whether the store's schema table is there.
pub(super) fn has_schema(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'claude_memory_schema'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sqlite_names_that_are_no_file_create_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cwd = std::env::current_dir().expect("cwd");
        for name in ["", ":memory:", "file:x.db?mode=memory"] {
            super::create_private(std::path::Path::new(name)).expect(name);
            assert!(!cwd.join(name).is_file() || name.is_empty(), "{name}");
        }
        let real = dir.path().join("m.db");
        super::create_private(&real).expect("real");
        assert!(real.is_file());
    }
}
