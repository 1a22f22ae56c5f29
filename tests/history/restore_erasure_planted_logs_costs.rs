//! Issue 19, second round of attacks on history, each written as the
//! attack (before and after in the README's history section): restore
//! after renames, erasure while the log is open, a planted SQLite history
//! file, a hard link made to the journal after it was opened, a megabyte
//! `tool_use` id, the cost of redacting many versions, the memory of a
//! baseline and of `MemoryLog`, and two processes on
//! `SqliteLog::for_store`.
#![cfg(unix)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use claude_memory::history::{FileLog, HistoryStore, MemoryLog, Query};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, InMemoryStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

struct Counting;
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Memory tests measure one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const MIB: usize = 1024 * 1024;

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

fn call(tool: &MemoryTool<impl MemoryStore>, id: &str, input: serde_json::Value) {
    let out =
        tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
    assert!(!out.is_error, "{input}: {:?}", out.text());
}

/// Every file of the store: path → content.
fn snapshot(store: &impl MemoryStore) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![MemoryPath::root()];
    while let Some(dir) = dirs.pop() {
        for entry in store.list(&dir).expect("list") {
            let Some(path) = dir.join(&entry.name) else {
                continue;
            };
            if entry.kind == claude_memory::store::EntryKind::Directory {
                dirs.push(path);
            } else {
                let data = store.read(&path, u64::MAX).expect("read").data;
                out.insert(path.normalized(), data);
            }
        }
    }
    out
}

fn holds(raw: &[u8], needle: &[u8]) -> bool {
    raw.windows(needle.len()).any(|w| w == needle)
}

/// The model renames in loops, moves directories, deletes and re-creates
/// paths; the operator restores to every moment in turn. Before: a file
/// renamed after T was written back at its old path and kept at its new
/// one (its file's history was dated, not the path's), so the restored
/// store had both.
#[test]
fn restore_at_every_moment_of_renames_in_loops_gives_that_store() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let log = FileLog::for_store(dir.path()).expect("log");
    let tool = MemoryTool::new(HistoryStore::open(store, log).expect("h"));
    let steps: Vec<serde_json::Value> = vec![
        json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
        json!({"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/a.md"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
        json!({"command": "create", "path": "/memories/d/x.md", "file_text": "x\n"}),
        json!({"command": "create", "path": "/memories/d/y.md", "file_text": "y\n"}),
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        json!({"command": "create", "path": "/memories/a.md", "file_text": "new a\n"}),
        json!({"command": "delete", "path": "/memories/b.md"}),
        json!({"command": "rename", "old_path": "/memories/e/x.md", "new_path": "/memories/b.md"}),
        json!({"command": "insert", "path": "/memories/b.md", "insert_line": 0, "insert_text": "top\n"}),
        json!({"command": "delete", "path": "/memories/e"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/e/a.md"}),
    ];
    let mut moments = vec![(SystemTime::now(), snapshot(tool.store().inner()))];
    for (i, step) in steps.into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(3));
        call(&tool, &format!("toolu_{i}"), step);
        std::thread::sleep(Duration::from_millis(3));
        moments.push((SystemTime::now(), snapshot(tool.store().inner())));
    }
    // Backwards, then forwards again: each restore is itself recorded.
    let order: Vec<usize> = (0..moments.len()).rev().chain(0..moments.len()).collect();
    for k in order {
        let (at, expected) = &moments[k];
        let report = tool.store().restore(*at, None).expect("restore");
        assert!(report.failed.is_empty(), "{report:?}");
        let got = snapshot(tool.store().inner());
        assert_eq!(
            &got, expected,
            "restore to moment {k} gave another store ({report:?})"
        );
    }
}

// Erasure: after redact, the text is in no file the crate manages, even
// while the log is still open (a `serve` running beside the operator).

#[cfg(feature = "sqlite")]
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for file in std::fs::read_dir(dir).expect("ls") {
        let file = file.expect("entry").path();
        if let Ok(raw) = std::fs::read(&file)
            && holds(&raw, needle)
        {
            out.push(file.display().to_string());
        }
    }
    out
}

/// `redact ID` (not `--text`) on the CLI's SQLite log while it is open.
/// Before: the content stayed in the log's WAL (no compaction after a
/// redaction by id).
#[cfg(feature = "sqlite")]
#[test]
fn redact_by_id_leaves_nothing_in_an_open_sqlite_log() {
    let _serial = serial();
    use claude_memory::history::SqliteLog;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("m.db");
    let log = SqliteLog::open(dir.path().join("m.db.claude-memory-history"), "").expect("log");
    let store = claude_memory::SqliteStore::open(&db).expect("store");
    let h = HistoryStore::open(store, log).expect("h");
    let secret = b"sk-ant-REDACT-BY-ID-0123456789";
    let mut text = b"key=".to_vec();
    text.extend_from_slice(secret);
    h.write(&p("/memories/a.md"), &text, WriteMode::Overwrite)
        .expect("w");
    h.write(&p("/memories/a.md"), b"clean\n", WriteMode::Overwrite)
        .expect("w");
    let v = h.versions(&Query::default()).expect("versions")[0].id;
    h.redact(v).expect("redact");
    let mut found = files_holding(dir.path(), secret);
    // The store itself (m.db, its WAL) is not the history's to erase.
    found.retain(|f| f.contains("claude-memory-history"));
    assert!(found.is_empty(), "still holding the secret: {found:?}");
}

/// The log in the store's own database (`SqliteLog::for_store`): after
/// `redact --text`, neither the database nor its WAL holds the text, the
/// handle still open. Before: no checkpoint, the WAL kept it.
#[cfg(feature = "sqlite")]
#[test]
fn redact_text_leaves_nothing_in_the_stores_own_database() {
    let _serial = serial();
    use claude_memory::history::SqliteLog;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("m.db");
    let store = claude_memory::SqliteStore::open(&db).expect("store");
    let log = SqliteLog::for_store(&store, "").expect("log");
    let h = HistoryStore::open(store, log).expect("h");
    let secret = b"sk-ant-IN-THE-STORES-DB-987654";
    let mut text = b"key=".to_vec();
    text.extend_from_slice(secret);
    text.extend_from_slice(&[b'.'; 6000]); // past a page: overflow pages too
    h.write(&p("/memories/a.md"), &text, WriteMode::Overwrite)
        .expect("w");
    h.write(&p("/memories/a.md"), b"clean\n", WriteMode::Overwrite)
        .expect("w");
    let (ids, still) = h.redact_text(secret).expect("redact");
    assert_eq!(ids.len(), 1);
    assert!(still.is_empty());
    let found = files_holding(dir.path(), secret);
    assert!(found.is_empty(), "still holding the secret: {found:?}");
}

/// A hard link to the journal, made by a local process after the
/// journal was opened (so the open's link check passed), then `redact
/// --text`. Before: the rewrite renamed a new journal over the old one
/// and the link kept the old inode, secret included.
#[test]
fn a_hard_link_made_after_open_keeps_no_redacted_text() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).expect("root");
    let store = FilesystemStore::open(&root).expect("store");
    let h = HistoryStore::open(store, FileLog::for_store(&root).expect("log")).expect("h");
    let secret = b"sk-ant-HARD-LINKED-JOURNAL-42";
    h.write(&p("/memories/a.md"), secret, WriteMode::Overwrite)
        .expect("w");
    h.write(&p("/memories/a.md"), b"clean\n", WriteMode::Overwrite)
        .expect("w");
    let link = dir.path().join("kept");
    std::fs::hard_link(root.join(".claude-memory-history/journal.jsonl"), &link).expect("link");
    h.redact_text(secret).expect("redact");
    let kept = std::fs::read(&link).expect("read");
    assert!(!holds(&kept, secret), "the planted link kept the secret");
    let journal = std::fs::read(root.join(".claude-memory-history/journal.jsonl")).expect("j");
    assert!(!holds(&journal, secret));
    // The history still works after it, and the erased version is marked.
    let versions = h.versions(&Query::default()).expect("versions");
    assert_eq!(versions.len(), 2);
    assert!(versions[0].redacted);
}

/// A megabyte-long `tool_use` id on 20 renames. Before: each version
/// kept the whole id, a megabyte per rename.
#[test]
fn a_megabyte_tool_use_id_does_not_grow_every_version() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let log = FileLog::for_store(dir.path()).expect("log");
    let tool = MemoryTool::new(HistoryStore::open(store, log).expect("h"));
    call(
        &tool,
        "toolu_1",
        json!({"command": "create", "path": "/memories/a0.md", "file_text": "a\n"}),
    );
    let journal = dir.path().join(".claude-memory-history/journal.jsonl");
    let start = std::fs::metadata(&journal).expect("j").len();
    let id = format!("toolu_{}", "\u{1b}[2K".repeat(250_000));
    for i in 0..20 {
        call(
            &tool,
            &id,
            json!({"command": "rename", "old_path": format!("/memories/a{i}.md"),
                   "new_path": format!("/memories/a{}.md", i + 1)}),
        );
    }
    let grown = std::fs::metadata(&journal).expect("j").len() - start;
    assert!(
        grown < 20 * 2048,
        "20 renames grew the journal {grown} bytes"
    );
    let versions = tool.store().versions(&Query::default()).expect("v");
    let last = versions.last().expect("a version");
    let kept = last.call.as_deref().expect("the call is kept");
    assert!(kept.starts_with("toolu_\u{1b}[2K") && kept.len() <= 260);
}

/// A local process plants `m.db.claude-memory-history` as a symbolic
/// link to a file outside (not there yet), as a FIFO, or as a hard link
/// to an outside database. Before: SQLite followed the link and created
/// the outside file with the history in it; a FIFO hung the open.
#[cfg(feature = "sqlite")]
#[test]
fn a_planted_sqlite_history_file_is_refused() {
    let _serial = serial();
    use claude_memory::history::SqliteLog;
    let dir = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    let history = dir.path().join("m.db.claude-memory-history");
    let target = outside.path().join("victim.db");
    std::os::unix::fs::symlink(&target, &history).expect("symlink");
    let err = SqliteLog::open(&history, "").expect_err("a symlink is refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!target.exists(), "the outside file was created");

    std::fs::remove_file(&history).expect("rm");
    let made = std::process::Command::new("mkfifo")
        .arg(&history)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let path = history.clone();
    std::thread::spawn(move || {
        let _ = tx.send(SqliteLog::open(&path, "").map(|_| ()));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("opening a FIFO as the history hung");
    assert!(result.is_err(), "a FIFO is refused");

    std::fs::remove_file(&history).expect("rm");
    let other = outside.path().join("other.db");
    drop(SqliteLog::open(&other, "").expect("an outside database"));
    std::fs::hard_link(&other, &history).expect("link");
    let err = SqliteLog::open(&history, "").expect_err("a hard link is refused");
    assert!(err.to_string().contains("hard link"), "{err}");
}

// Memory per call does not grow with the number of versions or the
// size of the store.

/// 300 edits of a 1 MB file through the README's own setup
/// (`HistoryStore` with `MemoryLog` over `InMemoryStore`). Before: about
/// 1 MB more per edit (298 MiB after 300 edits).
#[test]
fn memory_log_300_edits_of_a_1_mb_file_stay_bounded() {
    let _serial = serial();
    let base = NOW.load(Ordering::Relaxed);
    let log = MemoryLog::with_capacity(16 * MIB);
    let h = HistoryStore::open(InMemoryStore::new(), log).expect("h");
    let mut text = vec![b'a'; 1_000_000];
    for i in 0..300 {
        text[i] = b'b';
        h.write(&p("/memories/big.md"), &text, WriteMode::Overwrite)
            .expect("w");
    }
    let held = NOW.load(Ordering::Relaxed).saturating_sub(base);
    assert!(held < 24 * MIB, "300 edits of 1 MB hold {} MiB", held / MIB);
    // The latest version, and the newest ones within the cap, remain.
    let versions = h.versions(&Query::default()).expect("v");
    assert!(versions.len() >= 10 && versions.len() < 300);
    let latest = h
        .version(versions.last().expect("latest").id)
        .expect("version");
    assert_eq!(latest.content.as_deref(), Some(&text[..]));
    // A restore to a moment within what is kept still works.
    let at = versions[versions.len() - 2].time;
    h.restore(at, None).expect("restore");
    let now = h.read(&p("/memories/big.md"), u64::MAX).expect("read").data;
    let before = h.version(versions[versions.len() - 2].id).expect("v");
    assert_eq!(now, before.content.expect("c"));
}

/// The first `--history` open of a store a local process filled with 40
/// files of 1 MB records their baseline. Before: every file's content
/// was held until the one append at the end (40 MB and more).
#[test]
fn a_baseline_of_40_files_of_1_mb_holds_one_batch() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    for i in 0..40 {
        std::fs::write(
            dir.path().join(format!("f{i}.md")),
            vec![b'a' + (i % 26) as u8; 1_000_000],
        )
        .expect("plant");
    }
    let (h, peak) = peak_during(|| {
        let store = FilesystemStore::open(dir.path()).expect("store");
        HistoryStore::open(store, FileLog::for_store(dir.path()).expect("log")).expect("h")
    });
    assert!(h.repair_report().baseline);
    assert_eq!(h.repair_report().recorded.len(), 40);
    assert!(peak < 28 * MIB, "the baseline peaked at {} MiB", peak / MIB);
    let versions = h.versions(&Query::default()).expect("v");
    assert_eq!(versions.len(), 40);
    assert!(versions.iter().all(|v| v.size == 1_000_000));
}

// Two processes on `SqliteLog::for_store` (the log in the store's own
// database), with a third opening the store in a loop (every open
// repairs). Before: no cross-process lock, so an opener's repair saw a
// create's version before its change, dropped it, and the change came
// back as an anonymous `repair` version.

#[cfg(feature = "sqlite")]
const CHILD_DB: &str = "HISTORY_R2_CHILD_DB";
#[cfg(feature = "sqlite")]
const CHILD_ROLE: &str = "HISTORY_R2_CHILD_ROLE";
#[cfg(feature = "sqlite")]
const R2_CHANGES: usize = 150;

#[cfg(feature = "sqlite")]
fn for_store_history(db: &str) -> HistoryStore<claude_memory::SqliteStore> {
    use claude_memory::history::SqliteLog;
    let store = claude_memory::SqliteStore::open(db).expect("store");
    let log = SqliteLog::for_store(&store, "").expect("log");
    HistoryStore::open(store, log).expect("history")
}

/// A child process's part (does nothing unless started by the test
/// below): a writer making attributed creates, or an opener in a loop.
#[cfg(feature = "sqlite")]
#[test]
fn for_store_child() {
    let _serial = serial();
    let (Ok(db), Ok(role)) = (std::env::var(CHILD_DB), std::env::var(CHILD_ROLE)) else {
        return;
    };
    if role == "opener" {
        let stop = format!("{db}.stop");
        while !Path::new(&stop).exists() {
            drop(for_store_history(&db));
        }
        return;
    }
    let tool = MemoryTool::new(for_store_history(&db).with_label(role.clone()));
    for i in 0..R2_CHANGES {
        call(
            &tool,
            &format!("toolu_{role}_{i}"),
            json!({"command": "create", "path": format!("/memories/{role}/{i}.md"),
                   "file_text": format!("{role} {i}\n")}),
        );
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_for_store_two_writer_processes_and_an_opener() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("m.db").display().to_string();
    drop(for_store_history(&db)); // history on, on an empty store
    let exe = std::env::current_exe().expect("exe");
    let spawn = |role: &str| {
        std::process::Command::new(&exe)
            .args([
                "--exact",
                "for_store_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DB, &db)
            .env(CHILD_ROLE, role)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn")
    };
    let mut opener = spawn("opener");
    let writers: Vec<_> = ["w1", "w2"].into_iter().map(spawn).collect();
    for mut w in writers {
        assert!(w.wait().expect("wait").success(), "a writer failed");
    }
    std::fs::write(format!("{db}.stop"), b"").expect("stop");
    assert!(opener.wait().expect("wait").success(), "the opener failed");
    let h = for_store_history(&db);
    assert!(h.repair_report().is_clean(), "{}", h.repair_report());
    let versions = h.versions(&Query::default()).expect("versions");
    let repairs = versions
        .iter()
        .filter(|v| v.note.as_deref().is_some_and(|n| n.starts_with("repair")))
        .count();
    let calls: std::collections::BTreeSet<&str> =
        versions.iter().filter_map(|v| v.call.as_deref()).collect();
    assert_eq!(repairs, 0, "anonymous repair versions");
    assert_eq!(calls.len(), 2 * R2_CHANGES, "every change with its call");
    assert_eq!(versions.len(), 2 * R2_CHANGES, "no duplicate, no loss");
}

/// `claude-memory history` of a journal where the model edited a 1 MB
/// file 40 times: the listing reads records only. Before: every
/// version's content was decoded and held for the listing (40 MB and
/// more).
#[test]
fn listing_40_versions_of_a_1_mb_file_reads_no_content() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let h = HistoryStore::open(store, FileLog::for_store(dir.path()).expect("log")).expect("h");
    let mut text = vec![b'a'; 1_000_000];
    for i in 0..40 {
        text[i] = b'b';
        h.write(&p("/memories/big.md"), &text, WriteMode::Overwrite)
            .expect("w");
    }
    drop(h);
    let (records, peak) = peak_during(|| {
        let store = FilesystemStore::open(dir.path()).expect("store");
        let log = FileLog::for_store_read_only(dir.path()).expect("log");
        let h = HistoryStore::inspect(store, log).expect("h");
        h.versions(&Query::default()).expect("records")
    });
    assert_eq!(records.len(), 40);
    assert!(
        records
            .iter()
            .all(|v| v.content.is_none() && v.size == 1_000_000)
    );
    assert!(peak < 8 * MIB, "the listing peaked at {} MiB", peak / MIB);
}

/// A local process plants a journal line claiming the highest id there
/// is. Before: the next append added one to it and panicked (debug
/// builds; release builds wrapped to id 0).
#[test]
fn a_planted_line_with_the_last_id_is_an_error_not_a_panic() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    drop(HistoryStore::open(
        FilesystemStore::open(dir.path()).expect("store"),
        FileLog::for_store(dir.path()).expect("log"),
    ));
    let journal = dir.path().join(".claude-memory-history/journal.jsonl");
    let line = format!(
        "{{\"id\":{},\"file\":0,\"op\":\"created\",\"path\":\"/memories/planted.md\",\"time_ns\":1,\"sha256\":\"00\",\"size\":1,\"text\":\"x\"}}\n",
        u64::MAX
    );
    let mut planted = std::fs::read(&journal).expect("journal");
    planted.extend_from_slice(line.as_bytes());
    std::fs::write(&journal, planted).expect("plant");
    let store = FilesystemStore::open(dir.path()).expect("store");
    // Repair drops the planted version (its change never reached the
    // store); the id it claimed stays the last one given out.
    let h = HistoryStore::open(store, FileLog::for_store(dir.path()).expect("log")).expect("h");
    let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
    }));
    let err = written
        .expect("no panic")
        .expect_err("no id is left to give the version");
    assert!(err.to_string().contains("history"), "{err}");
    assert!(
        h.stat(&p("/memories/a.md")).expect("stat").is_none(),
        "a change without its version"
    );
}

/// A planted journal line whose path holds terminal escapes, then every
/// operator command that names it. Before: `revert` printed the path raw
/// in its error ("cannot name …"), so an `ESC[2K` reached the terminal.
#[cfg(feature = "cli")]
#[test]
fn escapes_in_a_planted_path_reach_no_operator_output() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let tool = MemoryTool::new(
        HistoryStore::open(store, FileLog::for_store(dir.path()).expect("log")).expect("h"),
    );
    call(
        &tool,
        "toolu_\u{1b}[1A\r",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a\u{1b}[2K\r\n"}),
    );
    drop(tool);
    let journal = dir.path().join(".claude-memory-history/journal.jsonl");
    let line = "{\"id\":50,\"file\":0,\"op\":\"created\",\"path\":\"/memories/x\\u001b[2K\\r\\u009b.md\",\"time_ns\":1,\"sha256\":\"00\",\"size\":1,\"text\":\"x\\u001b[1A\"}\n";
    let mut planted = std::fs::read(&journal).expect("journal");
    planted.extend_from_slice(line.as_bytes());
    std::fs::write(&journal, planted).expect("plant");
    let root = dir.path().to_str().expect("utf-8");
    for args in [
        &["history"][..],
        &["show", "v50"],
        &["diff", "v50"],
        &["diff", "v1", "v50"],
        &["revert", "v50"],
        &["show", "v1"],
        &["history", "--actor", "toolu_\u{1b}[1A\r"],
        &["restore", "--at", "1970-01-01T00:00:01Z", "--dry-run"],
        &["redact", "--text", "a"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
            .arg("--store")
            .arg(root)
            .args(args)
            .env_remove("CLAUDE_MEMORY_STORE")
            .env_remove("CLAUDE_MEMORY_DIR")
            .output()
            .expect("run the CLI");
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(['\u{1b}', '\r', '\u{9b}']),
                "{args:?} printed a control character on {name}: {text:?}"
            );
        }
    }
}
