//! SQLite-specific: several connections (as several processes would have)
//! editing one file, and the schema version check.
#![cfg(feature = "sqlite")]

use claude_memory::{MemoryTool, SqliteStore};

mod common;

#[test]
fn edits_through_separate_connections_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("memory.db");
    let open = || MemoryTool::new(SqliteStore::open(&db).expect("open"));
    let race = common::insert_race(open, "/memories/log.md", 4, 25);
    println!(
        "sqlite: 100 edits by 4 connections, {} reported success, {} failed, {} in the file",
        race.succeeded.len(),
        race.failed,
        race.in_file.len()
    );
    assert_eq!(
        race.in_file, race.succeeded,
        "every reported success is in the file, and nothing else"
    );
    assert!(!race.succeeded.is_empty());
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("memory.db");
    drop(SqliteStore::open(&db).expect("open"));
    assert!(
        SqliteStore::open(&db).is_ok(),
        "an up-to-date database reopens"
    );
    let conn = rusqlite::Connection::open(&db).expect("raw connection");
    conn.execute("UPDATE claude_memory_schema SET version = 99", [])
        .expect("bump");
    drop(conn);
    let err = SqliteStore::open(&db)
        .map(|_| ())
        .expect_err("newer schema");
    assert!(err.to_string().contains("schema version 99"), "{err}");
}
