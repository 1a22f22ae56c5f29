//! SQLite-specific: several connections (as several processes would have)
//! editing one file, and the schema version check.
#![cfg(feature = "sqlite")]

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{MemoryTool, SqliteStore};

#[path = "../common/mod.rs"]
mod common;

#[test]
fn edits_through_separate_connections_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("memory.db");
    let open = || MemoryTool::new(SqliteStore::open(&db).expect("open"));
    // Six independent stores (six connections to one file, as six
    // processes would have), 30 edits each.
    let race = common::insert_race(open, "/memories/log.md", 6, 30);
    println!(
        "sqlite: 180 edits by 6 connections, {} reported success, {} failed, {} in the file",
        race.succeeded.len(),
        race.failed,
        race.in_file.len()
    );
    assert_eq!(
        race.in_file, race.succeeded,
        "every reported success is in the file, and nothing else"
    );
    assert_eq!(
        (race.succeeded.len(), race.failed),
        (180, 0),
        "no edit is refused"
    );
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
    assert_eq!(
        err.to_string(),
        "the database has claude-memory schema version 99; this crate knows 1"
    );
    assert!(matches!(err, claude_memory::SqliteError::NewerSchema(99)));
}

#[test]
fn an_unopenable_database_is_the_crates_error_with_the_drivers_as_source() {
    use std::error::Error as _;
    let dir = tempfile::tempdir().expect("temporary directory");
    // A directory where the database file should be: SQLite cannot open
    // it. (A missing directory has an error of its own: sqlite_open.rs.)
    let err = SqliteStore::open(dir.path())
        .map(|_| ())
        .expect_err("a directory is no database");
    assert_eq!(err.to_string(), "could not open the SQLite database");
    assert!(err.source().is_some());
}

/// `sqlite:mem.db` (the CLI's spelling) given to the library creates no
/// file of that name: the error says to give the file's path.
#[test]
fn the_clis_spelling_given_to_the_library_is_refused_with_the_path_to_give() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let spelled = format!("sqlite:{}", dir.path().join("mem.db").display());
    let err = SqliteStore::open(&spelled)
        .map(|_| ())
        .expect_err("sqlite: is the CLI's spelling");
    assert!(
        matches!(err, claude_memory::SqliteError::CliSpelling(..)),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("without `sqlite:`"), "{text}");
    assert!(
        text.contains(&format!(
            "{:?}",
            dir.path().join("mem.db").display().to_string()
        )),
        "{text}"
    );
    let read = SqliteStore::open_read_only(&spelled).map(|_| ());
    assert!(
        matches!(read, Err(claude_memory::SqliteError::CliSpelling(..))),
        "{read:?}"
    );
    // Nothing was created.
    assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
}

/// A tree past the 10,000 entries `list_tree` reads at once is walked a
/// directory at a time; its view prints the same bytes as the in-memory
/// store's of the same files.
#[test]
fn a_tree_past_the_listing_limit_is_walked_and_viewed_the_same() {
    use claude_memory::store::{MemoryStore, WriteMode};
    use claude_memory::{InMemoryStore, MemoryPath};
    let store = SqliteStore::open_in_memory().expect("open");
    let mirror = InMemoryStore::new();
    for i in 0..10_001 {
        let p = MemoryPath::parse(&format!("/memories/d{}/f{i}.md", i % 7)).expect("path");
        store.write(&p, b"x", WriteMode::Create).expect("write");
        mirror.write(&p, b"x", WriteMode::Create).expect("write");
    }
    let root = MemoryPath::root();
    assert!(store.list_tree(&root).expect("list_tree").is_none());
    let small = MemoryPath::parse("/memories/d3").expect("path");
    assert!(store.list_tree(&small).expect("list_tree").is_some());
    let view = |tool: &dyn Fn(&serde_json::Value) -> String| {
        tool(&serde_json::json!({"command": "view", "path": "/memories"}))
    };
    let (sql, memory) = (MemoryTool::new(store), MemoryTool::new(mirror));
    let a = view(&|c| format!("{:?}", sql.dispatch(c)));
    let b = view(&|c| format!("{:?}", memory.dispatch(c)));
    assert_eq!(a, b);
}
