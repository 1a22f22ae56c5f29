//! The command line at the edges issue 18 found: another program's SQLite
//! file, `--tenant` on every store, read-only stores, unreadable
//! subdirectories.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory");

fn run(cwd: &Path, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env_remove("CLAUDE_MEMORY_DIR")
        .env_remove("CLAUDE_MEMORY_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run claude-memory");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Issue 18, edge 4: `view`, `stats` and `export` on another program's
/// SQLite file added four `claude_memory_*` tables and switched it to WAL.
#[test]
fn reading_commands_refuse_another_programs_database_and_leave_it_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("theirs.db");
    let conn = rusqlite::Connection::open(&db).expect("raw");
    conn.execute_batch(
        "CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (7);",
    )
    .expect("their table");
    drop(conn);
    let before = std::fs::read(&db).expect("bytes");
    let store = format!("sqlite:{}", db.display());
    for args in [
        vec!["--store", &store, "view", "/memories"],
        vec!["--store", &store, "stats"],
        vec!["--store", &store, "export"],
        vec!["--store", &store, "serve"],
    ] {
        let out = run(dir.path(), &args, "");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            text(&out.stderr).contains("not a claude-memory store"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(std::fs::read(&db).expect("bytes"), before, "{args:?}");
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["theirs.db"]);
}
