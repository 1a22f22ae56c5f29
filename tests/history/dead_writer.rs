//! Issue 19, "many writers": a history writer killed (SIGKILL) after it
//! appended a change's versions but before the store changed anything,
//! while another writer, already open, keeps changing the same store.
//! The survivor must not take the dead writer's versions as done: after
//! a fresh open there is no anonymous `repair` version, the history's view
//! of the live files is the store's, no version of the dead writer's
//! change is left, and every change of the survivor is there once, with
//! its actor and `tool_use` id. On the filesystem log, both SQLite logs
//! (in the store's database, and in a file of its own) and (with
//! CLAUDE_MEMORY_TEST_POSTGRES_URL) PostgreSQL.
//!
//! The dead writer is this test binary itself, run again with
//! `CLAUDE_MEMORY_DEAD_WRITER_CHILD` set (the `child_writer` test): its
//! store is wrapped in [`Stall`], which, inside the store's change (after
//! the history appended its versions, before anything is changed), says
//! `stalled` and waits to be killed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use claude_memory::history::{ChangeOp, FileLog, HistoryLog, HistoryStore, Query};
use claude_memory::store::walk::{Flow, Order, Step, walk};
use claude_memory::store::{
    Change, DirEntry, FileContent, FileReader, Metadata, StoreResult, Updated, Version,
};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../common/mod.rs"]
mod common;
use common::sha256_hex;

const CHILD: &str = "CLAUDE_MEMORY_DEAD_WRITER_CHILD";

type History = HistoryStore<Box<dyn MemoryStore>>;

/// Opens the store and log named by `spec` (`fs:DIR`, `sqlite:FILE`,
/// `sqlite-own-log:FILE`, `postgres:URL`), the store wrapped by `wrap`.
fn open(spec: &str, wrap: impl FnOnce(Box<dyn MemoryStore>) -> Box<dyn MemoryStore>) -> History {
    if let Some(dir) = spec.strip_prefix("fs:") {
        let store: Box<dyn MemoryStore> = Box::new(FilesystemStore::open(dir).expect("open"));
        let log: Arc<dyn HistoryLog> = Arc::new(FileLog::for_store(dir).expect("log"));
        return HistoryStore::open(wrap(store), log).expect("history");
    }
    #[cfg(feature = "sqlite")]
    if let Some(db) = spec.strip_prefix("sqlite:") {
        let store = claude_memory::SqliteStore::open(db).expect("open");
        let log = claude_memory::history::SqliteLog::for_store(&store, "").expect("log");
        return HistoryStore::open(wrap(Box::new(store)), log).expect("history");
    }
    #[cfg(feature = "sqlite")]
    if let Some(db) = spec.strip_prefix("sqlite-own-log:") {
        let store: Box<dyn MemoryStore> =
            Box::new(claude_memory::SqliteStore::open(db).expect("open"));
        let log =
            claude_memory::history::SqliteLog::open(format!("{db}.claude-memory-history"), "")
                .expect("log");
        return HistoryStore::open(wrap(store), log).expect("history");
    }
    #[cfg(feature = "postgres")]
    if let Some(url) = spec.strip_prefix("postgres:") {
        let store: Box<dyn MemoryStore> =
            Box::new(claude_memory::PostgresStore::connect(url, 2).expect("connect"));
        let log = claude_memory::history::PostgresLog::connect(url, "").expect("log");
        return HistoryStore::open(wrap(store), log).expect("history");
    }
    panic!("unknown spec {spec}")
}

/// A store that, inside each change (where the history store calls it,
/// after appending the change's versions), prints `stalled` and sleeps
/// until the process is killed: the store is never changed. An edit
/// (`update`) first lets the history append its version from inside
/// the change, as it does, then stalls.
struct Stall(Box<dyn MemoryStore>);

fn stall() -> ! {
    println!("stalled");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

#[deny(clippy::missing_trait_methods)]
impl MemoryStore for Stall {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.0.stat(path)
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.0.read(path, limit)
    }
    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.0.open(path)
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.0.list(dir)
    }
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<claude_memory::store::Tree>> {
        self.0.list_tree(dir)
    }
    fn max_files(&self) -> Option<u64> {
        self.0.max_files()
    }
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        let _ = (path, data, options);
        stall()
    }
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let now = self.0.read(path, options.limit)?;
        let _ = change(&now.data);
        stall()
    }
    fn delete_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::DeleteOptions<'_>,
    ) -> StoreResult<bool> {
        let _ = (path, options);
        stall()
    }
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: claude_memory::store::RenameOptions<'_>,
    ) -> StoreResult<()> {
        let _ = (from, to, options);
        stall()
    }
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(claude_memory::store::Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.0.exclusive(path, f)
    }
}

/// The tool call the dead writer makes in round `op`.
fn dead_call(op: &str) -> serde_json::Value {
    let input = match op {
        "rename" => {
            json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"})
        }
        "delete" => json!({"command": "delete", "path": "/memories/d/n2.md"}),
        "create" => {
            json!({"command": "create", "path": "/memories/d/ghost.md", "file_text": "never\n"})
        }
        "edit" => json!({"command": "str_replace", "path": "/memories/d/n3.md",
            "old_str": "alpha", "new_str": "GHOST"}),
        other => panic!("unknown op {other}"),
    };
    json!({"type": "tool_use", "id": format!("toolu_dead_{op}"), "name": "memory", "input": input})
}

/// The dead writer: opens the history (label `killed`) with its store
/// stalling inside every change, makes one change, and is killed there.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (op, spec) = spec.split_once('|').expect("op|spec");
    let history = open(spec, |s| Box::new(Stall(s))).with_label("killed");
    let tool = MemoryTool::new(history);
    let r = tool.dispatch(&dead_call(op));
    panic!("the change returned instead of stalling: {:?}", r.text());
}

/// Runs the dead writer for `op` on `spec` and SIGKILLs it once its
/// versions are appended and it is inside the store's change.
fn kill_after_append(spec: &str, op: &str) {
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{op}|{spec}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the writer");
    let out = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    let stalled = lines.any(|l| l.is_ok_and(|l| l.ends_with("stalled")));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert!(stalled, "the {op} writer never reached its store change");
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
fn claimed(history: &History) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for v in history.versions(&Query::default()).expect("records") {
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

const FILES: usize = 6;

fn dead_writer_then_survivor(spec: &str) {
    {
        let seed = MemoryTool::new(open(spec, |s| s).with_label("seed"));
        for i in 0..FILES {
            let r = seed.dispatch(&json!({"type": "tool_use", "id": format!("toolu_seed_{i}"),
                "name": "memory", "input": {"command": "create",
                "path": format!("/memories/d/n{i}.md"), "file_text": format!("note {i} alpha\n")}}));
            assert!(!r.is_error, "{:?}", r.text());
        }
    }
    // The survivor is open (its file index current) before any kill.
    let survivor = MemoryTool::new(open(spec, |s| s).with_label("survivor"));
    let mut calls = Vec::new();
    for (round, op) in ["rename", "delete", "create", "edit"].iter().enumerate() {
        kill_after_append(spec, op);
        // The survivor edits and creates at the old paths, and renames
        // one file (its versions must refer to the right file ids).
        let blocks = [
            json!({"command": "str_replace", "path": format!("/memories/d/n{}.md", round % 2),
                "old_str": "note", "new_str": format!("note r{round}")}),
            json!({"command": "create", "path": format!("/memories/d/s{round}.md"),
                "file_text": format!("survivor {round}\n")}),
            json!({"command": "rename", "old_path": format!("/memories/d/s{round}.md"),
                "new_path": format!("/memories/d/t{round}.md")}),
        ];
        for (k, input) in blocks.into_iter().enumerate() {
            let id = format!("toolu_survivor_{round}_{k}");
            let r = survivor
                .dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
            assert!(!r.is_error, "round {op}: {:?}", r.text());
            calls.push(id);
        }
    }
    drop(survivor);

    let fresh = open(spec, |s| s);
    let report = fresh.repair_report().clone();
    assert!(
        report.recorded.is_empty(),
        "anonymous repair versions on open: {report}"
    );
    let versions = fresh.versions(&Query::default()).expect("records");
    let anonymous: Vec<_> = versions
        .iter()
        .filter(|v| v.actor.is_none() || v.note.as_deref().is_some_and(|n| n.contains("repair")))
        .map(|v| format!("v{} {:?} {}", v.id, v.op, v.path))
        .collect();
    assert!(
        anonymous.is_empty(),
        "versions without an actor: {anonymous:?}"
    );
    let dead: Vec<_> = versions
        .iter()
        .filter(|v| v.actor.as_deref() == Some("killed"))
        .map(|v| format!("v{} {:?} {}", v.id, v.op, v.path))
        .collect();
    assert!(
        dead.is_empty(),
        "versions of changes that never happened: {dead:?}"
    );
    assert_eq!(
        claimed(&fresh),
        live(fresh.inner().as_ref()),
        "the history's view of the live files is not the store"
    );
    // Every survivor call once, with its actor.
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &versions {
        if v.actor.as_deref() == Some("survivor") {
            *seen
                .entry(v.call.as_deref().expect("a call id"))
                .or_default() += 1;
        }
    }
    for call in &calls {
        assert_eq!(seen.get(call.as_str()), Some(&1), "{call}: {seen:?}");
    }
    assert_eq!(seen.len(), calls.len(), "{seen:?}");
    // A rename keeps the file id: each t{round} is the file s{round} created.
    for round in 0..4 {
        let of = |path: &str| {
            versions
                .iter()
                .filter(|v| v.path == path)
                .map(|v| v.file)
                .collect::<Vec<_>>()
        };
        let created = of(&format!("/memories/d/s{round}.md"));
        let renamed = of(&format!("/memories/d/t{round}.md"));
        assert_eq!(created.len(), 1, "{created:?}");
        assert_eq!(
            renamed, created,
            "round {round}: the rename lost its file id"
        );
    }
    // The edited notes are at their old paths, edited by the survivor.
    let n0 = fresh
        .read(&MemoryPath::parse("/memories/d/n0.md").expect("path"), 1024)
        .expect("n0 is still at /memories/d");
    assert!(String::from_utf8_lossy(&n0.data).contains("note r2 r0"));
}

#[test]
fn a_writer_killed_after_its_append_on_the_filesystem_log() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    std::fs::create_dir(&root).expect("mkdir");
    dead_writer_then_survivor(&format!("fs:{}", root.display()));
}

#[cfg(feature = "sqlite")]
#[test]
fn a_writer_killed_after_its_append_on_the_sqlite_log() {
    let dir = tempfile::tempdir().expect("dir");
    dead_writer_then_survivor(&format!("sqlite:{}", dir.path().join("m.db").display()));
}

#[cfg(feature = "sqlite")]
#[test]
fn a_writer_killed_after_its_append_on_a_sqlite_log_of_its_own() {
    let dir = tempfile::tempdir().expect("dir");
    dead_writer_then_survivor(&format!(
        "sqlite-own-log:{}",
        dir.path().join("m.db").display()
    ));
}

#[cfg(feature = "postgres")]
#[test]
fn a_writer_killed_after_its_append_on_the_postgres_log() {
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        if std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_some() {
            panic!(
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
        }
        println!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL (.ci/postgres.sh) to run");
        return;
    };
    let o = Command::new("psql")
        .arg(&url)
        .args(["-q", "-c", "DROP TABLE IF EXISTS claude_memory_history, claude_memory_history_ids, claude_memory_entries, claude_memory_schema CASCADE"])
        .output();
    if let Ok(o) = o {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    dead_writer_then_survivor(&format!("postgres:{url}"));
}
