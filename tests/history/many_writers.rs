//! Issue 19's many-writer attack: 4 `serve` processes each make 300
//! attributed changes to one store with history while another process
//! opens it (`history prune`, which repairs on open) in a loop. Every
//! change must be recorded exactly once with its actor: 1,200 versions,
//! no `repair` version, no duplicate, no loss. On a directory store, a
//! SQLite store and (with CLAUDE_MEMORY_TEST_POSTGRES_URL) PostgreSQL.
#![cfg(feature = "cli")]

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");
const WRITERS: usize = 4;
const CHANGES: usize = 300;

fn cli(store: &str, args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("CLAUDE_MEMORY_STORE")
        .env_remove("CLAUDE_MEMORY_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the CLI");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("stdin");
    drop(input);
    child.wait_with_output().expect("output")
}

/// Writer `w`'s calls: creates, then edits of its own files, all with a
/// `tool_use` id naming the writer and the change.
fn calls(w: usize) -> String {
    let mut out = String::new();
    for i in 0..CHANGES {
        let input = if i % 3 == 0 || i < 3 {
            serde_json::json!({"command": "create", "path": format!("/memories/w{w}/{i}.md"),
                "file_text": format!("writer {w} change {i}\n")})
        } else {
            let target = (i / 3) * 3;
            serde_json::json!({"command": "str_replace", "path": format!("/memories/w{w}/{target}.md"),
                "old_str": format!("writer {w} change {target}"),
                "new_str": format!("writer {w} change {target} edit {i}")})
        };
        let block = serde_json::json!({"type": "tool_use", "id": format!("toolu_w{w}_{i}"),
            "name": "memory", "input": input});
        out.push_str(&block.to_string());
        out.push('\n');
    }
    out
}

fn many_writers(store: &str) {
    // History on, on an empty store.
    let o = cli(store, &["--history", "serve"], "");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stop = Arc::new(AtomicBool::new(false));
    let opener = {
        let stop = Arc::clone(&stop);
        let store = store.to_owned();
        std::thread::spawn(move || {
            let mut opens = 0;
            while !stop.load(Ordering::Relaxed) {
                let o = cli(&store, &["history", "prune", "--older-than", "3650d"], "");
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                opens += 1;
            }
            opens
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.to_owned();
            std::thread::spawn(move || {
                let o = cli(&store, &["serve"], &calls(w));
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                let out = String::from_utf8_lossy(&o.stdout).into_owned();
                assert!(!out.contains("\"is_error\":true"), "writer {w}: {out}");
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    stop.store(true, Ordering::Relaxed);
    let opens = opener.join().expect("opener");
    assert!(opens > 0);
    let o = cli(store, &["history"], "");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listing = String::from_utf8(o.stdout).expect("UTF-8");
    let rows: Vec<&str> = listing.lines().filter(|l| l.starts_with('v')).collect();
    let repairs = rows.iter().filter(|r| r.contains("(repair")).count();
    let mut calls = BTreeSet::new();
    for r in &rows {
        let actor = r.split('\t').nth(4).unwrap_or("");
        if let Some(call) = actor.strip_prefix("claude-memory-cli/") {
            assert!(
                calls.insert(call.to_owned()),
                "a duplicate version of {call}"
            );
        }
    }
    eprintln!(
        "{store}: {} versions, {} attributed, {repairs} repairs, {opens} opens meanwhile",
        rows.len(),
        calls.len()
    );
    assert_eq!(repairs, 0, "{listing}");
    assert_eq!(calls.len(), WRITERS * CHANGES, "{listing}");
    assert_eq!(rows.len(), WRITERS * CHANGES);
}

#[test]
fn four_writers_and_an_opener_on_a_directory_store() {
    let dir = tempfile::tempdir().expect("dir");
    many_writers(dir.path().join("m").to_str().expect("UTF-8"));
}

#[cfg(feature = "sqlite")]
#[test]
fn four_writers_and_an_opener_on_a_sqlite_store() {
    let dir = tempfile::tempdir().expect("dir");
    many_writers(&format!("sqlite:{}", dir.path().join("m.db").display()));
}

#[cfg(feature = "postgres")]
#[test]
fn four_writers_and_an_opener_on_postgres() {
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        if std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_some() {
            panic!(
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
        }
        println!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL (.ci/postgres.sh) to run");
        return;
    };
    reset_postgres(&url);
    many_writers(&url);
}

#[cfg(feature = "postgres")]
fn reset_postgres(url: &str) {
    // A fresh database for this test: drop the crate's tables.
    let o = Command::new("psql")
        .arg(url)
        .args(["-q", "-c", "DROP TABLE IF EXISTS claude_memory_history, claude_memory_history_ids, claude_memory_entries, claude_memory_schema CASCADE"])
        .output();
    if let Ok(o) = o {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}
