//! History under SIGKILL: a writer process making changes through a
//! `HistoryStore` is killed at random moments; after each kill the store
//! is reopened (which repairs) and every live file is compared with its
//! latest version. The history must never claim a change that did not
//! happen and never miss one that did: 0 mismatches, and no change
//! recorded by repair (a kill loses nothing from the page cache, so every
//! change that happened had its version first).
//!
//! The writer is this test binary itself, run again with
//! `CLAUDE_MEMORY_HISTORY_CHILD` set (the `child_writer` test).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use claude_memory::history::{ChangeOp, FileLog, HistoryLog, HistoryStore, Query};
use claude_memory::store::walk::{Flow, Order, Step, walk};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../common/mod.rs"]
mod common;
use common::sha256_hex;

const CHILD: &str = "CLAUDE_MEMORY_HISTORY_CHILD";

fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Opens the store named by a spec: `fs:DIR` or `sqlite:FILE`.
fn open(spec: &str) -> HistoryStore<Box<dyn MemoryStore>> {
    if let Some(dir) = spec.strip_prefix("fs:") {
        let store: Box<dyn MemoryStore> = Box::new(FilesystemStore::open(dir).expect("open"));
        let log: Arc<dyn HistoryLog> = Arc::new(FileLog::for_store(dir).expect("log"));
        return HistoryStore::open(store, log).expect("history");
    }
    #[cfg(feature = "sqlite")]
    if let Some(db) = spec.strip_prefix("sqlite:") {
        let store = claude_memory::SqliteStore::open(db).expect("open");
        let log = claude_memory::history::SqliteLog::for_store(&store, "").expect("log");
        let store: Box<dyn MemoryStore> = Box::new(store);
        return HistoryStore::open(store, log).expect("history");
    }
    #[cfg(feature = "sqlite")]
    if let Some(db) = spec.strip_prefix("sqlite-own-log:") {
        let store: Box<dyn MemoryStore> =
            Box::new(claude_memory::SqliteStore::open(db).expect("open"));
        let log =
            claude_memory::history::SqliteLog::open(format!("{db}.claude-memory-history"), "")
                .expect("log");
        return HistoryStore::open(store, log).expect("history");
    }
    panic!("unknown spec {spec}")
}

/// The writer: changes forever, through the handler, until killed.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let tool = MemoryTool::new(open(&spec).with_label("crash-writer"));
    let mut seed = u64::from(std::process::id()) | 1;
    println!("ready");
    for n in 0u64.. {
        let f = format!("/memories/d{}/f{}.md", n % 3, next_random(&mut seed) % 5);
        let g = format!("/memories/d{}/f{}.md", n % 2, next_random(&mut seed) % 5);
        let input = match next_random(&mut seed) % 6 {
            0 => {
                json!({"command": "create", "path": f, "file_text": format!("file {n}\n{}\n", "x".repeat((n % 50) as usize * 100))})
            }
            1 => json!({"command": "str_replace", "path": f, "old_str": "file", "new_str": "FILE"}),
            2 => {
                json!({"command": "insert", "path": f, "insert_line": 0, "insert_text": format!("line {n}")})
            }
            3 => json!({"command": "delete", "path": f}),
            4 => json!({"command": "rename", "old_path": f, "new_path": g}),
            _ => {
                json!({"command": "rename", "old_path": format!("/memories/d{}", n % 3), "new_path": "/memories/d9"})
            }
        };
        let id = format!("toolu_{n}");
        tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
        if n % 7 == 0 {
            tool.dispatch(&json!({"command": "rename", "old_path": "/memories/d9", "new_path": format!("/memories/d{}", n % 3)}));
        }
    }
}

/// Live files: path → sha256.
fn live(store: &dyn MemoryStore) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(p) = dir.join(&entry.name)
        {
            let data = store.read(&p, u64::MAX)?.data;
            out.insert(p.normalized(), sha256_hex(&data));
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    out
}

/// The files the versions say exist: path → sha256 of the latest.
fn claimed(history: &HistoryStore<Box<dyn MemoryStore>>) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    let all = Query {
        limit: Some(usize::MAX),
        ..Query::default()
    };
    for v in history.versions(&all).expect("versions") {
        match v.op {
            ChangeOp::Created | ChangeOp::Modified => {
                state.insert(v.path, v.sha256);
            }
            ChangeOp::Deleted => {
                state.remove(&v.path);
            }
            ChangeOp::Renamed => {
                if let Some(from) = &v.from {
                    state.remove(from);
                }
                state.insert(v.path, v.sha256);
            }
        }
    }
    state
}

fn mismatches(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> usize {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).count()
}

fn crash_rounds(spec: &str, rounds: usize) {
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    let (mut dropped, mut versions) = (0, 0);
    for round in 0..rounds {
        let exe = std::env::current_exe().expect("this test binary");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "child_writer",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the writer");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        while !line.contains("ready") {
            line.clear();
            if stdout.read_line(&mut line).expect("read") == 0 {
                panic!("the writer stopped before it was ready");
            }
        }
        std::thread::sleep(Duration::from_millis(10 + next_random(&mut seed) % 80));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let history = open(spec);
        let report = history.repair_report().clone();
        let now = live(&history);
        let claims = claimed(&history);
        let bad = mismatches(&now, &claims);
        let all = Query {
            limit: Some(usize::MAX),
            ..Query::default()
        };
        versions = history.versions(&all).expect("versions").len();
        dropped += report.dropped.len();
        assert_eq!(
            bad, 0,
            "round {round}: {bad} mismatches after repair ({report})"
        );
        assert!(
            report.recorded.is_empty(),
            "round {round}: a change had no version: {report}"
        );
    }
    println!(
        "history crash test ({spec}): {rounds} SIGKILLs, {versions} versions at the end, \
         {dropped} write-ahead versions of unfinished changes dropped on reopen, 0 mismatches \
         between files and their latest versions, 0 changes without a version"
    );
}

#[test]
fn history_survives_sigkill_on_the_filesystem_store() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    crash_rounds(&format!("fs:{}", dir.path().display()), 25);
    assert!(Path::new(&dir.path().join(".claude-memory-history/journal.jsonl")).exists());
}

#[cfg(feature = "sqlite")]
#[test]
fn history_survives_sigkill_on_the_sqlite_store() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    crash_rounds(&format!("sqlite:{}", dir.path().join("m.db").display()), 15);
}

#[cfg(feature = "sqlite")]
#[test]
fn history_survives_sigkill_with_a_sqlite_log_of_its_own() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    crash_rounds(
        &format!("sqlite-own-log:{}", dir.path().join("m.db").display()),
        10,
    );
}
