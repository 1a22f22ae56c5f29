//! SQLite-specific: several connections (as several processes would have)
//! editing one file, and the schema version check.
#![cfg(feature = "sqlite")]

use std::collections::BTreeSet;

use claude_memory::{MemoryTool, SqliteStore};
use serde_json::json;

#[test]
fn edits_through_separate_connections_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("memory.db");
    let tool = MemoryTool::new(SqliteStore::open(&db).expect("open"));
    assert!(
        !tool
            .dispatch(&json!({"command": "create", "path": "/memories/log.md", "file_text": ""}))
            .is_error
    );
    let (writers, per_writer) = (4, 25);
    let results: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let tool = MemoryTool::new(SqliteStore::open(db).expect("open"));
                    (0..per_writer)
                        .map(|k| {
                            let token = format!("w{w}_{k}");
                            let r = tool.dispatch(&json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": token}));
                            (token, !r.is_error)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("writer"))
            .collect()
    });
    let succeeded: BTreeSet<String> = results
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(t, _)| t.clone())
        .collect();
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories/log.md"}));
    let text = view.text().unwrap_or_default().to_owned();
    let lines: BTreeSet<String> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .map(|(_, t)| t.to_owned())
        .collect();
    println!(
        "sqlite: {} edits by {writers} connections, {} reported success, {} in the file",
        writers * per_writer,
        succeeded.len(),
        lines.len()
    );
    assert_eq!(
        lines, succeeded,
        "every reported success is in the file, and nothing else"
    );
    assert!(!succeeded.is_empty());
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
