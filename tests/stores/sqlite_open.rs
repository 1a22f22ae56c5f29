//! Issue 18, edges 4 and 5: opening SQLite files. Reading commands changed
//! another program's database (four `claude_memory_*` tables and WAL for
//! good); a schema table holding 1 and 99, or 'abc', passed as version 1;
//! store files were created 0644 under umask 022.
#![cfg(feature = "sqlite")]

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{MemoryPath, MemoryStore, SqliteError, SqliteStore};

/// Another program's database: one table of its own, rollback journal.
fn foreign_db(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).expect("raw connection");
    conn.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO invoices VALUES (1, 100);")
        .expect("their schema");
}

/// Every table of the database and its journal mode.
fn state(path: &std::path::Path) -> (Vec<String>, String) {
    let conn = rusqlite::Connection::open(path).expect("raw connection");
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master ORDER BY name")
        .expect("prepare");
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    let mode = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
        .expect("journal mode");
    (names, mode)
}

#[test]
fn reading_another_programs_database_refuses_it_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("theirs.db");
    foreign_db(&db);
    let before = state(&db);
    assert_eq!(before, (vec!["invoices".to_owned()], "delete".to_owned()));
    let refused = SqliteStore::open_read_only(&db).expect_err("not a store");
    assert!(matches!(refused, SqliteError::NotAStore), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "the database is not a claude-memory store (it has no claude_memory_schema table)"
    );
    // Writing opens refuse it too: the schema is made only in an empty database.
    assert!(matches!(
        SqliteStore::open(&db).expect_err("not a store"),
        SqliteError::NotAStore
    ));
    assert_eq!(state(&db), before);
}

#[test]
fn a_read_only_open_reads_a_store_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("memory.db");
    let p = MemoryPath::parse("/memories/a.md").expect("path");
    {
        let store = SqliteStore::open(&db).expect("create");
        store
            .write(&p, b"hello", claude_memory::store::WriteMode::Create)
            .expect("write");
    }
    let before = std::fs::read(&db).expect("bytes");
    let reader = SqliteStore::open_read_only(&db).expect("read-only");
    assert_eq!(reader.read(&p, u64::MAX).expect("read").data, b"hello");
    assert!(
        reader
            .write(&p, b"x", claude_memory::store::WriteMode::Overwrite)
            .is_err()
    );
    drop(reader);
    assert_eq!(std::fs::read(&db).expect("bytes"), before);
    // A missing file is not created by a read-only open.
    let missing = dir.path().join("missing.db");
    assert!(SqliteStore::open_read_only(&missing).is_err());
    assert!(!missing.exists());
}

#[test]
fn an_empty_database_gets_the_schema_on_a_writing_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("new.db");
    std::fs::File::create(&db).expect("empty file");
    assert!(matches!(
        SqliteStore::open_read_only(&db).expect_err("empty"),
        SqliteError::NotAStore
    ));
    SqliteStore::open(&db).expect("an empty database becomes a store");
    SqliteStore::open_read_only(&db).expect("now a store");
}

#[test]
fn exactly_one_known_schema_version_is_accepted() {
    for rows in ["(1), (99)", "('abc')", "(1), (1)", "(0)", "('1x')", "(1.5)"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("m.db");
        drop(SqliteStore::open(&db).expect("create"));
        let conn = rusqlite::Connection::open(&db).expect("raw");
        conn.execute_batch(&format!(
            "DELETE FROM claude_memory_schema; INSERT INTO claude_memory_schema VALUES {rows};"
        ))
        .expect("tamper");
        drop(conn);
        for open in [SqliteStore::open, SqliteStore::open_read_only] {
            match open(&db) {
                Err(SqliteError::InvalidSchema(why)) => {
                    assert!(why.contains("claude_memory_schema"), "{rows}: {why}")
                }
                other => panic!("{rows}: {other:?}"),
            }
        }
    }
}

#[cfg(unix)]
#[test]
fn store_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("memory.db");
    let store = SqliteStore::open(&db).expect("create");
    store
        .write(
            &MemoryPath::parse("/memories/a.md").expect("path"),
            b"secret",
            claude_memory::store::WriteMode::Create,
        )
        .expect("write");
    let log_file = dir.path().join("memory.db.claude-memory-history");
    let _log = claude_memory::history::SqliteLog::open(&log_file, "").expect("log");
    for file in [
        db.clone(),
        dir.path().join("memory.db-wal"),
        dir.path().join("memory.db-shm"),
        log_file.clone(),
    ] {
        let mode = std::fs::metadata(&file)
            .unwrap_or_else(|e| panic!("{file:?}: {e}"))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{file:?}");
    }
}

/// A new user's typo in the directory part of a path got the OS's bare
/// "No such file or directory (os error 2)". The open names the missing
/// directory, and creates nothing.
#[test]
fn a_missing_directory_is_named_and_nothing_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("no-such-dir").join("memories.db");
    let refused = SqliteStore::open(&db).expect_err("no directory");
    assert!(
        matches!(&refused, SqliteError::NoDirectory(d) if d == &dir.path().join("no-such-dir")),
        "{refused:?}"
    );
    let text = refused.to_string();
    assert!(
        text.contains("no-such-dir") && text.contains("does not exist"),
        "{text}"
    );
    assert!(!text.contains("os error"), "{text}");
    assert!(!dir.path().join("no-such-dir").exists());

    let refused = SqliteStore::open_read_only(&db).expect_err("no file");
    assert!(
        matches!(&refused, SqliteError::NotFound(p) if p == &db),
        "{refused:?}"
    );
    assert!(!db.exists());
}
