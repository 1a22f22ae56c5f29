//! Issue 19, third round of attacks on history, each written as the
//! attack: operator commands (redact, redact --text, prune) on a full
//! disk while other handles write the journal, operator commands in a
//! loop beside a writer process, and the store's own commits around
//! `SqliteLog::for_store`'s unsynced versions; the lock file that replaced
//! the journal as the directory store's history lock.
#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use claude_memory::history::{FileLog, HistoryStore, Query};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

fn holds(raw: &[u8], needle: &[u8]) -> bool {
    raw.windows(needle.len()).any(|w| w == needle)
}

fn fs_history(root: &Path, label: &str) -> HistoryStore<FilesystemStore> {
    let store = FilesystemStore::open(root).expect("store");
    HistoryStore::open(store, FileLog::for_store(root).expect("log"))
        .expect("history")
        .with_label(label)
}

fn journal(root: &Path) -> PathBuf {
    root.join(".claude-memory-history/journal.jsonl")
}

/// A small tmpfs (root only; skipped otherwise, unless
/// CLAUDE_MEMORY_REQUIRE_TMPFS is set).
fn small_tmpfs(size: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir().ok()?;
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).ok()?;
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CLAUDE_MEMORY_REQUIRE_TMPFS").is_some() {
            panic!("cannot mount a tmpfs");
        }
        println!("skipped: cannot mount a tmpfs (run as root)");
        return None;
    }
    Some((dir, mnt))
}

struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

/// The ids of the journal's version lines, in file order.
fn journal_ids(root: &Path) -> Vec<u64> {
    let raw = std::fs::read(journal(root)).expect("journal");
    raw.split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
        .filter(|v| v.get("drop").is_none() && v.get("last_id").is_none())
        .filter_map(|v| v.get("id").and_then(serde_json::Value::as_u64))
        .collect()
}

/// `redact --text` on a full disk rewrites the journal in place (no room
/// for a copy): the same file, shorter. A writer that had the journal
/// open before (the `serve` process of the model's session) still
/// believes it has seen every byte up to the old length, so after
/// another writer appends a version below that length, its own next
/// append takes the same id: two versions with one id, and the first is
/// lost (the next open records its change again as a `repair`).
#[test]
fn full_disk_redact_in_place_then_a_stale_writer_reuses_an_id() {
    let _serial = serial();
    let Some((_dir, mnt)) = small_tmpfs("4m") else {
        return;
    };
    let _unmount = Unmount(mnt.clone());
    let root = mnt.join("m");
    const SECRET: &str = "SECRET-0123456789abcdef";
    // The model's session: a writer open for the whole attack.
    let serve = fs_history(&root, "serve");
    let leak = format!("{SECRET}\n").repeat(800);
    serve
        .write(&p("/memories/leak.md"), leak.as_bytes(), WriteMode::Create)
        .expect("leak");
    serve
        .write(
            &p("/memories/big.md"),
            &vec![b'k'; 1_000_000],
            WriteMode::Create,
        )
        .expect("big");
    let filler = mnt.join("filler");
    fill(&filler);
    // The operator erases the secret: no room for a new journal, so in
    // place.
    let before = std::fs::metadata(journal(&root)).expect("journal").len();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(journal(&root)).unwrap());
    {
        let operator = fs_history(&root, "operator");
        let (changed, _still) = operator
            .redact_text(SECRET.as_bytes())
            .expect("redact --text on a full disk");
        assert_eq!(changed.len(), 1, "{changed:?}");
    }
    let meta = std::fs::metadata(journal(&root)).expect("journal");
    println!(
        "journal {before} -> {} bytes, same inode: {}",
        meta.len(),
        std::os::unix::fs::MetadataExt::ino(&meta) == ino
    );
    assert!(
        !holds(&std::fs::read(journal(&root)).unwrap(), SECRET.as_bytes()),
        "the secret left the journal"
    );
    std::fs::remove_file(&filler).expect("rm filler");
    // Another writer (a second serve, a revert from the CLI) records a
    // change, then the model's session records one.
    let other = fs_history(&root, "other");
    other
        .write(&p("/memories/c.md"), b"c\n", WriteMode::Create)
        .expect("c");
    drop(other);
    serve
        .write(&p("/memories/d.md"), b"d\n", WriteMode::Create)
        .expect("d");
    drop(serve);
    let ids = journal_ids(&root);
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    let check = fs_history(&root, "check");
    let versions = check.versions(&Query::default()).expect("versions");
    let paths: Vec<(u64, String)> = versions.iter().map(|v| (v.id, v.path.clone())).collect();
    println!(
        "journal ids {ids:?}; versions {paths:?}; reopen: {}",
        check.repair_report()
    );
    assert_eq!(unique.len(), ids.len(), "an id given out twice: {ids:?}");
    assert!(
        check.repair_report().is_clean(),
        "a change lost its version: {}; versions {paths:?}",
        check.repair_report()
    );
}

/// `history prune --keep 1` on a full disk (in place) and a stale
/// writer: the same as above, with the journal shortened by a prune.
#[test]
fn full_disk_prune_in_place_then_a_stale_writer_reuses_an_id() {
    let _serial = serial();
    let Some((_dir, mnt)) = small_tmpfs("4m") else {
        return;
    };
    let _unmount = Unmount(mnt.clone());
    let root = mnt.join("m");
    let serve = fs_history(&root, "serve");
    serve
        .write(
            &p("/memories/big.md"),
            &vec![b'k'; 900_000],
            WriteMode::Create,
        )
        .expect("big");
    for i in 0..20 {
        serve
            .write(
                &p("/memories/small.md"),
                format!("{i}\n").repeat(200).as_bytes(),
                WriteMode::Overwrite,
            )
            .expect("small");
    }
    let filler = mnt.join("filler");
    fill(&filler);
    {
        let operator = fs_history(&root, "operator");
        let removed = operator
            .prune(&claude_memory::history::Retention {
                max_age: None,
                keep_per_file: Some(1),
            })
            .expect("prune on a full disk");
        assert_eq!(removed.len(), 19, "{removed:?}");
    }
    std::fs::remove_file(&filler).expect("rm filler");
    let other = fs_history(&root, "other");
    other
        .write(&p("/memories/c.md"), b"c\n", WriteMode::Create)
        .expect("c");
    drop(other);
    serve
        .write(&p("/memories/d.md"), b"d\n", WriteMode::Create)
        .expect("d");
    drop(serve);
    let ids = journal_ids(&root);
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    let check = fs_history(&root, "check");
    let versions = check.versions(&Query::default()).expect("versions");
    let paths: Vec<(u64, String)> = versions.iter().map(|v| (v.id, v.path.clone())).collect();
    println!(
        "journal ids {ids:?}; versions {paths:?}; reopen: {}",
        check.repair_report()
    );
    assert_eq!(unique.len(), ids.len(), "an id given out twice: {ids:?}");
    assert!(
        check.repair_report().is_clean(),
        "a change lost its version: {}; versions {paths:?}",
        check.repair_report()
    );
}

// Operator commands in a loop beside a writer process (the CLI).

#[cfg(feature = "cli")]
mod cli_loops {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");
    const SECRET: &str = "TOPSECRET-r3-0123456789";
    const CHANGES: usize = 240;

    /// The CLI processes running now, killed if the test finds them
    /// stuck.
    static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    fn cli(store: &str, args: &[&str], stdin: &str) -> std::process::Output {
        let child = Command::new(BIN)
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
        let mut child = child;
        let pid = child.id();
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        let mut input = child.stdin.take().expect("stdin");
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        let out = child.wait_with_output().expect("output");
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != pid);
        out
    }

    /// Creates holding the secret, edits, renames and deletes (a rename
    /// or delete refers to its file's previous version for content).
    fn calls(w: usize) -> String {
        let mut out = String::new();
        for i in 0..CHANGES {
            let f = |k: usize| format!("/memories/w{w}/{k}.md");
            let input = match i % 6 {
                0 | 1 => serde_json::json!({"command": "create", "path": f(i),
                    "file_text": format!("w{w} {i} {SECRET}\n")}),
                2 => serde_json::json!({"command": "str_replace", "path": f(i - 2),
                    "old_str": format!("w{w} {}", i - 2), "new_str": format!("w{w} {} edited", i - 2)}),
                3 => serde_json::json!({"command": "rename", "old_path": f(i - 2),
                    "new_path": f(i + 1000)}),
                4 => serde_json::json!({"command": "str_replace", "path": f(i - 4),
                    "old_str": "edited", "new_str": format!("edited again {SECRET}")}),
                _ => serde_json::json!({"command": "delete", "path": f(i + 998)}),
            };
            let block = serde_json::json!({"type": "tool_use", "id": format!("toolu_w{w}_{i}"),
                "name": "memory", "input": input});
            out.push_str(&block.to_string());
            out.push('\n');
        }
        out
    }

    /// Two writers, `redact --text` and `history prune --keep 1` in loops
    /// meanwhile. Afterwards: every command succeeded, the reopen repairs
    /// nothing (no change lost its version), no version's content is
    /// dangling (a rename or delete whose content a prune removed), and
    /// the latest version of every live file has the live file's hash.
    fn loops(store: &str, inspect: impl Fn() -> BTreeMap<u64, (String, bool, Option<bool>)>) {
        let o = cli(store, &["--history", "serve"], "");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stop = Arc::new(AtomicBool::new(false));
        let looped = |args: &'static [&'static str]| {
            let stop = Arc::clone(&stop);
            let store = store.to_owned();
            std::thread::spawn(move || {
                let mut runs = 0;
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let o = cli(&store, args, "");
                    if !o.status.success() || !o.stderr.is_empty() {
                        failures.push(String::from_utf8_lossy(&o.stderr).into_owned());
                    }
                    runs += 1;
                }
                (runs, failures)
            })
        };
        let redactor = looped(&["redact", "--text", SECRET]);
        let pruner = looped(&["history", "prune", "--keep", "1"]);
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let store = store.to_owned();
                std::thread::spawn(move || cli(&store, &["serve"], &calls(w)))
            })
            .collect();
        // Two writers' 240 calls take seconds; stuck processes are a
        // deadlock between them (the locks they hold, then killed).
        let start = std::time::Instant::now();
        while !writers.iter().all(|w| w.is_finished()) {
            if start.elapsed() > std::time::Duration::from_secs(120) {
                let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
                stop.store(true, Ordering::Relaxed);
                let stuck: Vec<u32> = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).clone();
                for pid in &stuck {
                    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                }
                panic!("writers stuck for 120 s (processes {stuck:?}); /proc/locks:\n{locks}");
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        for w in writers {
            let o = w.join().expect("writer");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        stop.store(true, Ordering::Relaxed);
        let (redacts, redact_failures) = redactor.join().expect("redactor");
        let (prunes, prune_failures) = pruner.join().expect("pruner");
        println!("{redacts} redacts, {prunes} prunes");
        assert!(redact_failures.is_empty(), "{redact_failures:?}");
        assert!(prune_failures.is_empty(), "{prune_failures:?}");
        let o = cli(store, &["history", "prune", "--older-than", "3650d"], "");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            o.stderr.is_empty(),
            "the reopen repaired: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let versions = inspect();
        let dangling: Vec<u64> = versions
            .iter()
            .filter(|(_, (_, _, content))| *content == Some(false))
            .map(|(id, _)| *id)
            .collect();
        assert!(
            dangling.is_empty(),
            "versions without content: {dangling:?}"
        );
    }

    /// What `inspect` returns: id → (path, redacted, content present),
    /// `None` for a version that needs none (no such case now).
    fn summary<S: MemoryStore>(h: &HistoryStore<S>) -> BTreeMap<u64, (String, bool, Option<bool>)> {
        h.versions(&Query::default())
            .expect("versions")
            .into_iter()
            .map(|v| {
                let full = h.version(v.id).expect("version");
                (
                    v.id,
                    (v.path.clone(), full.redacted, Some(full.content.is_some())),
                )
            })
            .collect()
    }

    #[test]
    fn redact_text_and_prune_in_loops_beside_writers_on_a_directory_store() {
        let _serial = serial();
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("m");
        let store = root.display().to_string();
        loops(&store, || {
            let h = HistoryStore::inspect(
                FilesystemStore::open(&root).expect("store"),
                FileLog::for_store_read_only(&root).expect("log"),
            )
            .expect("inspect");
            summary(&h)
        });
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn redact_text_and_prune_in_loops_beside_writers_on_postgres() {
        let _serial = serial();
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            println!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run");
            return;
        };
        let o = Command::new("psql")
            .arg(&url)
            .args(["-q", "-c", "DROP TABLE IF EXISTS claude_memory_history, claude_memory_history_ids, claude_memory_entries, claude_memory_schema CASCADE"])
            .output()
            .expect("psql");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        loops(&url, || {
            let log = claude_memory::history::PostgresLog::connect(&url, "").expect("log");
            let h = HistoryStore::inspect(
                claude_memory::PostgresStore::connect(&url, 2).expect("store"),
                log,
            )
            .expect("inspect");
            summary(&h)
        });
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn redact_text_and_prune_in_loops_beside_writers_on_a_sqlite_store() {
        let _serial = serial();
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("m.db");
        let store = format!("sqlite:{}", db.display());
        loops(&store, || {
            let log = claude_memory::history::SqliteLog::open(
                dir.path().join("m.db.claude-memory-history"),
                "",
            )
            .expect("log");
            let h = HistoryStore::inspect(claude_memory::SqliteStore::open(&db).expect("db"), log)
                .expect("inspect");
            summary(&h)
        });
    }
}

// SqliteLog::for_store's unsynced versions: every store commit after them
// must still fsync the WAL. The pragma is the connection's (not reachable
// from here), so the child below runs under `strace` and the WAL's
// fsyncs are counted against the store's commits.

#[cfg(feature = "sqlite")]
const SYNC_CHILD_DB: &str = "HISTORY_R3_SYNC_DB";

/// The child's part (nothing unless started by the test below): tenants,
/// a clone of the store written from another thread meanwhile, refused
/// changes, edits, renames and deletes; writes the number of store
/// commits it made (each must fsync the WAL) to `DB.commits`.
#[cfg(feature = "sqlite")]
#[test]
fn sqlite_sync_child() {
    use claude_memory::history::SqliteLog;
    use claude_memory::{MemoryTool, SqliteStore, TenantId};
    let Ok(db) = std::env::var(SYNC_CHILD_DB) else {
        return;
    };
    let root = SqliteStore::open(&db).expect("store");
    let alice = root.for_tenant(&TenantId::parse("alice").expect("tenant"));
    let tool_root = MemoryTool::new(
        HistoryStore::open(root.clone(), SqliteLog::for_store(&root, "").expect("log"))
            .expect("history"),
    );
    let tool_alice = MemoryTool::new(
        HistoryStore::open(
            alice.clone(),
            SqliteLog::for_store(&alice, "alice").expect("log"),
        )
        .expect("history"),
    );
    // Start marker for the parent's count.
    let _ = std::fs::File::open(format!("{db}.start"));
    let other = root.clone();
    let side = std::thread::spawn(move || {
        let mut n = 0;
        for i in 0..100 {
            other
                .write(
                    &p(&format!("/memories/side/{i}.md")),
                    b"side\n",
                    WriteMode::Create,
                )
                .expect("side");
            n += 1;
        }
        n
    });
    let mut commits = 0;
    let run = |tool: &MemoryTool<HistoryStore<SqliteStore>>, input: serde_json::Value| {
        !tool
            .dispatch(&serde_json::json!({"type": "tool_use", "id": "toolu_x", "name": "memory", "input": input}))
            .is_error
    };
    for i in 0..40 {
        let f = format!("/memories/r/{i}.md");
        let g = format!("/memories/a/{i}.md");
        let h = format!("/memories/a/{i}-moved.md");
        assert!(run(
            &tool_root,
            serde_json::json!({"command": "create", "path": f, "file_text": "x\n"})
        ));
        commits += 1;
        // Refused: the version is dropped again (a synced commit).
        assert!(!run(
            &tool_root,
            serde_json::json!({"command": "create", "path": f, "file_text": "y\n"})
        ));
        commits += 1;
        assert!(run(
            &tool_alice,
            serde_json::json!({"command": "create", "path": g, "file_text": "a\n"})
        ));
        commits += 1;
        assert!(run(
            &tool_alice,
            serde_json::json!({"command": "str_replace", "path": g, "old_str": "a", "new_str": "b"})
        ));
        commits += 1;
        assert!(run(
            &tool_alice,
            serde_json::json!({"command": "rename", "old_path": g, "new_path": h})
        ));
        commits += 1;
        assert!(run(
            &tool_root,
            serde_json::json!({"command": "delete", "path": f})
        ));
        commits += 1;
        // Refused: nothing there, no version made.
        assert!(!run(
            &tool_alice,
            serde_json::json!({"command": "delete", "path": "/memories/none.md"})
        ));
    }
    commits += side.join().expect("side");
    let _ = std::fs::File::open(format!("{db}.end"));
    std::fs::write(format!("{db}.commits"), commits.to_string()).expect("commits");
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_for_store_every_store_commit_still_fsyncs_the_wal() {
    let _serial = serial();
    let strace = std::process::Command::new("strace").arg("-V").output();
    if !strace.is_ok_and(|o| o.status.success()) {
        println!("skipped: no strace");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("m.db").display().to_string();
    let trace = dir.path().join("trace").display().to_string();
    let exe = std::env::current_exe().expect("exe");
    let status = std::process::Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-y",
            "-e",
            "trace=fsync,fdatasync,openat",
            "-o",
            &trace,
        ])
        .arg(&exe)
        .args([
            "--exact",
            "sqlite_sync_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SYNC_CHILD_DB, &db)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("strace");
    assert!(status.success());
    let commits: usize = std::fs::read_to_string(format!("{db}.commits"))
        .expect("commits")
        .parse()
        .expect("number");
    let trace = std::fs::read_to_string(&trace).expect("trace");
    let mut counting = false;
    let (mut wal, mut main) = (0, 0);
    for line in trace.lines() {
        if line.contains(".start\"") {
            counting = true;
        } else if line.contains(".end\"") {
            counting = false;
        } else if counting && (line.contains("fsync(") || line.contains("fdatasync(")) {
            if line.contains("m.db-wal>") {
                wal += 1;
            } else if line.contains("m.db>") {
                main += 1;
            }
        }
    }
    println!("{commits} store commits; WAL fsyncs {wal}, database fsyncs {main}");
    assert!(
        wal >= commits,
        "{commits} store commits, only {wal} WAL fsyncs: some commit ran unsynced"
    );
}

// SIGKILL during a large append, with a second writer open meanwhile.

const TORN_CHILD_ROOT: &str = "HISTORY_R3_TORN_ROOT";
const HUGE: usize = 96 * 1024 * 1024;

/// The child's part (nothing unless started by the test below): one
/// create of a large file, whose version line is one long write to the
/// journal; the parent kills it during that write.
#[test]
fn torn_append_child() {
    let Ok(root) = std::env::var(TORN_CHILD_ROOT) else {
        return;
    };
    let h = fs_history(Path::new(&root), "child");
    let data = vec![b'a'; HUGE];
    let _ = std::fs::File::open(format!("{root}.go"));
    let _ = h.write(&p("/memories/huge.md"), &data, WriteMode::Create);
}

/// A writer killed in the middle of appending a large version leaves a
/// torn last line; a second writer that had the journal open already
/// (another `serve`) appends its next version right after the torn
/// bytes, so its line is the torn one's continuation: unreadable, and
/// its change comes back as an anonymous `repair` on the next open.
#[test]
fn a_writer_killed_mid_append_costs_the_next_writer_its_version() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let second = fs_history(&root, "second");
    second
        .write(&p("/memories/first.md"), b"first\n", WriteMode::Create)
        .expect("first");
    let before = std::fs::metadata(journal(&root)).expect("journal").len();
    let exe = std::env::current_exe().expect("exe");
    let mut torn = false;
    for _attempt in 0..10 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "torn_append_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(TORN_CHILD_ROOT, &root)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let start = std::time::Instant::now();
        loop {
            let len = std::fs::metadata(journal(&root)).map_or(0, |m| m.len());
            if len > before + 4096 {
                let _ = child.kill();
                break;
            }
            if start.elapsed() > std::time::Duration::from_secs(60)
                || child.try_wait().ok().flatten().is_some()
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let _ = child.wait();
        let raw = std::fs::read(journal(&root)).expect("journal");
        if raw.len() as u64 > before && raw.last() != Some(&b'\n') {
            torn = true;
            println!(
                "journal torn at {} bytes (of about {})",
                raw.len(),
                before as usize + HUGE
            );
            break;
        }
        // Not torn this time: put the journal back as it was.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(journal(&root))
            .expect("journal");
        f.set_len(before).expect("cut");
        let _ = std::fs::remove_file(root.join("memories/huge.md"));
    }
    if !torn {
        println!("skipped: the kill never landed inside the append");
        return;
    }
    second
        .write(&p("/memories/after.md"), b"after\n", WriteMode::Create)
        .expect("after the kill");
    drop(second);
    let check = fs_history(&root, "check");
    let versions = check.versions(&Query::default()).expect("versions");
    let paths: Vec<(u64, String, Option<String>)> = versions
        .iter()
        .map(|v| (v.id, v.path.clone(), v.note.clone()))
        .collect();
    assert!(
        check.repair_report().is_clean(),
        "the second writer's change lost its version: {}; {paths:?}",
        check.repair_report()
    );
}

// The cross-process lock is `journal.lock` beside the journal (the fix of
// the directory store's two-writer deadlock above): it must never be
// replaced by a rewrite, and it is opened under the journal's rules.

fn lock_file(root: &Path) -> PathBuf {
    root.join(".claude-memory-history/journal.lock")
}

fn inode(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::symlink_metadata(path).expect("stat"))
}

fn refusal(root: &Path) -> String {
    match FileLog::for_store(root) {
        Ok(_) => panic!("the log opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn redact_and_prune_replace_the_journal_but_never_the_lock_file() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root, "w");
    h.write(&p("/memories/a.md"), b"one SECRET\n", WriteMode::Create)
        .expect("create");
    h.write(&p("/memories/a.md"), b"two SECRET\n", WriteMode::Overwrite)
        .expect("edit");
    let lock = inode(&lock_file(&root));
    let mode = std::fs::metadata(lock_file(&root))
        .expect("stat")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    // Each journal is held open, so its inode number cannot be handed to
    // the next new file (ext4 reuses a freed one at once, and a redact may
    // rewrite the journal more than once).
    let _held = std::fs::File::open(journal(&root)).expect("hold the journal");
    let before = inode(&journal(&root));
    let (changed, _) = h.redact_text(b"SECRET").expect("redact");
    assert_eq!(changed.len(), 2);
    let after_redact = inode(&journal(&root));
    assert_ne!(before, after_redact, "the journal was rewritten");
    let _held_too = std::fs::File::open(journal(&root)).expect("hold the journal");
    let removed = h
        .prune(&claude_memory::history::Retention {
            keep_per_file: Some(1),
            ..Default::default()
        })
        .expect("prune");
    assert_eq!(removed.len(), 1);
    assert_ne!(after_redact, inode(&journal(&root)), "rewritten again");
    assert_eq!(lock, inode(&lock_file(&root)), "the lock file stays");
}

#[test]
fn a_lock_file_planted_as_a_link_a_hard_link_or_a_fifo_is_refused() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    drop(fs_history(&root, "w"));
    let outside = dir.path().join("outside");
    std::fs::write(&outside, b"not the history's\n").expect("outside");

    std::fs::remove_file(lock_file(&root)).expect("rm");
    std::os::unix::fs::symlink(&outside, lock_file(&root)).expect("symlink");
    assert!(refusal(&root).contains("symbolic link"));
    assert!(
        FileLog::for_store_read_only(&root).is_err(),
        "refused read-only too"
    );

    std::fs::remove_file(lock_file(&root)).expect("rm");
    std::fs::hard_link(&outside, lock_file(&root)).expect("hard link");
    assert!(refusal(&root).contains("another hard link"));

    std::fs::remove_file(lock_file(&root)).expect("rm");
    let made = std::process::Command::new("mkfifo")
        .arg(lock_file(&root))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let start = std::time::Instant::now();
    assert!(refusal(&root).contains("not a regular file"));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "never blocked"
    );
    assert_eq!(
        std::fs::read(&outside).expect("outside"),
        b"not the history's\n"
    );

    // A lock file left group- and world-readable is put back to 0600.
    std::fs::remove_file(lock_file(&root)).expect("rm");
    drop(fs_history(&root, "w"));
    std::fs::set_permissions(
        lock_file(&root),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .expect("chmod");
    drop(FileLog::for_store(&root).expect("log"));
    let mode = std::fs::metadata(lock_file(&root))
        .expect("stat")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

/// A history written before the lock file existed (0.2.0 locked the
/// journal): reading it creates nothing and works; the first writer
/// creates the lock file.
#[test]
fn a_history_without_a_lock_file_is_read_without_creating_one() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root, "w");
    h.write(&p("/memories/a.md"), b"one\n", WriteMode::Create)
        .expect("create");
    drop(h);
    std::fs::remove_file(lock_file(&root)).expect("rm");
    let h = HistoryStore::inspect(
        FilesystemStore::open(&root).expect("store"),
        FileLog::for_store_read_only(&root).expect("log"),
    )
    .expect("inspect");
    assert_eq!(h.versions(&Query::default()).expect("versions").len(), 1);
    drop(h);
    assert!(!lock_file(&root).exists(), "a reader writes nothing");
    drop(fs_history(&root, "w"));
    assert!(lock_file(&root).exists());
}
