//! Issue 19's attacks on history, each written as the attack: a local
//! process planting links, huge or sparse files in the store; the model
//! writing control characters and secrets; a kill between a version and
//! its change; a full disk. Each test fails on the history before issue
//! 19 and passes now.
#![cfg(unix)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use claude_memory::history::{
    ChangeOp, FileLog, HistoryLog, HistoryStore, MemoryLog, Query, Retention, Revision, SkipReason,
};
use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{FilesystemStore, InMemoryStore, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../common/mod.rs"]
mod common;
use common::sha256_hex;

/// Counts the bytes allocated now and the peak, for the memory attacks.
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

fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

fn fs_history(root: &Path) -> HistoryStore<FilesystemStore> {
    let store = FilesystemStore::open(root).expect("store");
    HistoryStore::open(store, FileLog::for_store(root).expect("log"))
        .expect("history")
        .with_label("test")
}

fn journal(root: &Path) -> std::path::PathBuf {
    root.join(".claude-memory-history/journal.jsonl")
}

fn call(tool: &MemoryTool<impl MemoryStore>, id: &str, input: serde_json::Value) -> String {
    let out =
        tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
    format!("{out:?}")
}

// 1. Containment: the journal follows no planted link.

#[test]
fn attack_1_journal_replaced_by_a_symlink_to_an_outside_file() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    drop(fs_history(&root));
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "precious\nno newline at the end").expect("write");
    std::fs::remove_file(journal(&root)).expect("rm");
    std::os::unix::fs::symlink(&outside, journal(&root)).expect("symlink");
    assert!(
        FileLog::for_store(&root).is_err(),
        "a symlinked journal is refused"
    );
    assert!(FileLog::for_store_read_only(&root).is_err());
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "precious\nno newline at the end",
        "the outside file was neither cut nor appended to"
    );
}

#[test]
fn attack_1_history_directory_replaced_by_a_symlink() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    drop(fs_history(&root));
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::write(outside.join("journal.jsonl"), "x").expect("write");
    std::fs::remove_dir_all(root.join(".claude-memory-history")).expect("rm");
    std::os::unix::fs::symlink(&outside, root.join(".claude-memory-history")).expect("symlink");
    assert!(FileLog::for_store(&root).is_err());
    assert_eq!(
        std::fs::read(outside.join("journal.jsonl")).expect("read"),
        b"x"
    );
}

#[test]
fn attack_1_journal_hard_linked_or_a_device() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    drop(fs_history(&root));
    let outside = dir.path().join("outside.jsonl");
    std::fs::hard_link(journal(&root), &outside).expect("hard link");
    assert!(
        FileLog::for_store(&root).is_err(),
        "a second link is refused"
    );
    std::fs::remove_file(&outside).expect("rm");
    assert!(FileLog::for_store(&root).is_ok());
    std::fs::remove_file(journal(&root)).expect("rm");
    std::os::unix::fs::symlink("/dev/zero", journal(&root)).expect("symlink");
    let start = Instant::now();
    assert!(
        FileLog::for_store(&root).is_err(),
        "/dev/zero is never read"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn attack_1_reading_never_writes_and_modes_are_0600() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root);
    h.write(
        &p("/memories/a.md"),
        b"a\n",
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    drop(h);
    let mode = std::fs::metadata(journal(&root))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // A torn tail: the read-only log leaves it; only a writer cuts it.
    let mut data = std::fs::read(journal(&root)).expect("read");
    data.extend_from_slice(b"{\"torn");
    std::fs::write(journal(&root), &data).expect("write");
    let log = FileLog::for_store_read_only(&root).expect("read-only log");
    let all = log
        .find(
            &Default::default(),
            claude_memory::history::Order::Oldest,
            10,
        )
        .expect("find");
    assert_eq!(all.len(), 1);
    assert!(log.append(&mut []).is_err() || log.drop_versions(&[1]).is_err());
    drop(log);
    assert_eq!(std::fs::read(journal(&root)).expect("read"), data);
}

// 2. One planted file does not deny the store.

#[test]
fn attack_2_planted_hard_link_and_sparse_file_are_skipped_by_repair() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    drop(fs_history(&root));
    std::fs::write(root.join("ok.md"), "fine\n").expect("write");
    let outside = dir.path().join("outside.md");
    std::fs::write(&outside, "outside\n").expect("write");
    std::fs::hard_link(&outside, root.join("linked.md")).expect("link");
    let sparse = std::fs::File::create(root.join("sparse.md")).expect("create");
    sparse.set_len(8 << 30).expect("8 GiB sparse");
    drop(sparse);
    let (h, peak) = peak_during(|| {
        HistoryStore::open(
            FilesystemStore::open(&root).expect("store"),
            FileLog::for_store(&root).expect("log"),
        )
    });
    let h = h.expect("the open succeeds");
    let skipped: Vec<&str> = h
        .repair_report()
        .skipped
        .iter()
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(skipped, ["/memories/linked.md", "/memories/sparse.md"]);
    assert!(peak < 16 << 20, "repair peaked at {peak} bytes");
    // The rest is repaired (recorded) and the store serves.
    let recorded = h.versions(&Query::default()).expect("versions");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].path, "/memories/ok.md");
    assert!(h.repair_report().to_string().contains("skipped 2 files"));
}

// 3. Bounded disk.

#[test]
fn attack_3_refused_writes_leave_nothing_in_the_journal() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root);
    h.write(
        &p("/memories/a.md"),
        b"a\n",
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    let before = std::fs::metadata(journal(&root)).expect("meta").len();
    let big = vec![1u8; 1_000_000];
    for _ in 0..20 {
        let refused = h.write(
            &p("/memories/a.md"),
            &big,
            claude_memory::store::WriteMode::Create,
        );
        assert!(refused.is_err());
    }
    let after = std::fs::metadata(journal(&root)).expect("meta").len();
    assert_eq!(after, before, "20 refused 1 MB creates grew the journal");
}

#[test]
fn attack_3_renames_record_paths_and_encoding_does_not_multiply() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root);
    let text = "\u{1}".repeat(1_000_000);
    h.write(
        &p("/memories/f0.md"),
        text.as_bytes(),
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    let one = std::fs::metadata(journal(&root)).expect("meta").len();
    assert!(one < 1_400_000, "a 1 MB U+0001 file took {one} bytes");
    for i in 0..20 {
        h.rename(
            &p(&format!("/memories/f{i}.md")),
            &p(&format!("/memories/f{}.md", i + 1)),
        )
        .expect("rename");
    }
    let after = std::fs::metadata(journal(&root)).expect("meta").len();
    assert!(
        after - one < 20_000,
        "20 renames added {} bytes",
        after - one
    );
    // Every rename version still shows (and reverts to) the content.
    let versions: Vec<Revision> = h
        .versions(&Query::default())
        .expect("versions")
        .iter()
        .map(|v| h.version(v.id).expect("version"))
        .collect();
    assert_eq!(versions.len(), 21);
    assert!(
        versions
            .iter()
            .all(|v| v.content.as_deref() == Some(text.as_bytes()))
    );
}

// 4. Bounded memory.

#[test]
fn attack_4_deleting_a_directory_of_50_files_of_1_mb() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root);
    let data = vec![b'x'; 1_000_000];
    for i in 0..50 {
        h.write(
            &p(&format!("/memories/d/{i}.md")),
            &data,
            claude_memory::store::WriteMode::Create,
        )
        .expect("write");
    }
    drop(data);
    let before = std::fs::metadata(journal(&root)).expect("meta").len();
    let (r, peak) = peak_during(|| h.delete(&p("/memories/d")));
    r.expect("delete");
    assert!(peak < 24 << 20, "the delete peaked at {} MiB", peak >> 20);
    let after = std::fs::metadata(journal(&root)).expect("meta").len();
    assert!(
        after - before < 50_000,
        "the delete wrote {} bytes",
        after - before
    );
    let deleted: Vec<Revision> = h
        .versions(&Query::default())
        .expect("versions")
        .iter()
        .filter(|v| v.op == ChangeOp::Deleted)
        .map(|v| h.version(v.id).expect("version"))
        .collect();
    assert_eq!(deleted.len(), 50);
    assert!(
        deleted
            .iter()
            .all(|v| v.content.as_ref().is_some_and(|c| c.len() == 1_000_000))
    );
}

// 5. Repair on open is linear.

#[test]
fn attack_5_repair_of_100000_pending_versions() {
    let _serial = SERIAL.lock();
    let store = InMemoryStore::new();
    let log = MemoryLog::new();
    let n: usize = std::env::var("CLAUDE_MEMORY_REPAIR_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let setup = Instant::now();
    let mut versions = Vec::with_capacity(2 * n);
    for i in 0..n {
        let path = format!("/memories/d/{i}.md");
        let data = format!("{i}\n");
        store
            .write(
                &p(&path),
                data.as_bytes(),
                claude_memory::store::WriteMode::Create,
            )
            .expect("write");
        for op in [ChangeOp::Created, ChangeOp::Deleted] {
            versions.push(Revision {
                id: 0,
                file: 0,
                op,
                path: path.clone(),
                from: None,
                time: SystemTime::now(),
                actor: Some("model".into()),
                call: None,
                sha256: sha256_hex(data.as_bytes()),
                size: data.len() as u64,
                content: Some(data.clone().into_bytes()),
                redacted: false,
                note: None,
                prev: None,
            });
        }
    }
    log.append(&mut versions).expect("append");
    eprintln!("setup of {n}: {:?}", setup.elapsed());
    // Killed before the store's delete: 100,000 pending deleted versions.
    let start = Instant::now();
    let h = HistoryStore::open(store, log).expect("open");
    let took = start.elapsed();
    assert_eq!(h.repair_report().dropped.len(), n);
    assert!(h.repair_report().recorded.is_empty());
    eprintln!("repair of {n} pending versions: {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

// 7. Redaction of a text across every version.

#[test]
fn attack_7_redaction_sticks_across_edits_and_renames() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let tool = MemoryTool::new(fs_history(&root));
    call(
        &tool,
        "t1",
        json!({"command": "create", "path": "/memories/k.md",
        "file_text": "key=sk-SECRET-123\nother\n"}),
    );
    call(
        &tool,
        "t2",
        json!({"command": "str_replace", "path": "/memories/k.md",
        "old_str": "other", "new_str": "edited"}),
    );
    let h = tool.store();
    let (ids, still) = h.redact_text(b"sk-SECRET-123").expect("redact");
    assert_eq!(ids.len(), 2, "both versions held it");
    assert_eq!(still, ["/memories/k.md"], "the live file still holds it");
    call(
        &tool,
        "t3",
        json!({"command": "rename", "old_path": "/memories/k.md",
        "new_path": "/memories/k2.md"}),
    );
    for v in h.versions(&Query::default()).expect("versions") {
        let text = v.text().unwrap_or_default();
        assert!(!text.contains("sk-SECRET"), "v{} holds it: {text}", v.id);
    }
    let raw = std::fs::read(journal(&root)).expect("journal");
    assert!(
        !raw.windows(13).any(|w| w == b"sk-SECRET-123"),
        "the journal holds it"
    );
}

// 6. Erasure in SQLite.

#[cfg(feature = "sqlite")]
#[test]
fn attack_6_sqlite_history_keeps_no_redacted_or_pruned_bytes() {
    let _serial = SERIAL.lock();
    use claude_memory::history::SqliteLog;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("m.db");
    let log_path = dir.path().join("m.db.claude-memory-history");
    let store = claude_memory::SqliteStore::open(&db).expect("store");
    let h = HistoryStore::open(store, SqliteLog::open(&log_path, "").expect("log")).expect("h");
    let w = claude_memory::store::WriteMode::Overwrite;
    h.write(&p("/memories/a.md"), b"token=FIRST-SECRET-aaaa\n", w)
        .expect("w");
    h.write(&p("/memories/a.md"), b"token=SECOND-SECRET-bbb\n", w)
        .expect("w");
    h.write(&p("/memories/a.md"), b"clean\n", w).expect("w");
    h.redact_text(b"FIRST-SECRET-aaaa").expect("redact");
    h.prune(&Retention {
        max_age: None,
        keep_per_file: Some(1),
    })
    .expect("prune");
    drop(h);
    for file in std::fs::read_dir(dir.path()).expect("ls") {
        let file = file.expect("entry").path();
        if !file.to_string_lossy().contains("claude-memory-history") {
            continue;
        }
        let raw = std::fs::read(&file).expect("read");
        for secret in [&b"FIRST-SECRET-aaaa"[..], b"SECOND-SECRET-bbb"] {
            assert!(
                !raw.windows(secret.len()).any(|w| w == secret),
                "{} holds {}",
                file.display(),
                String::from_utf8_lossy(secret)
            );
        }
    }
}

// 8. A full disk (an injected fault: a file that refuses appends is
// simulated by a tmpfs in history_attacks_cli; here the in-process
// rollback of a failed append is checked by a journal on a full tmpfs).

fn small_tmpfs() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::tempdir().ok()?;
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).ok()?;
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CLAUDE_MEMORY_REQUIRE_TMPFS").is_some() {
            panic!("cannot mount a tmpfs");
        }
        println!(
            "skipped: cannot mount a tmpfs (run as root, or set CLAUDE_MEMORY_REQUIRE_TMPFS=1 to require it)"
        );
        return None;
    }
    Some((dir, mnt))
}

struct Unmount(std::path::PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn attack_8_full_disk() {
    let _serial = SERIAL.lock();
    let Some((_dir, mnt)) = small_tmpfs() else {
        return;
    };
    let _unmount = Unmount(mnt.clone());
    let root = mnt.join("m");
    let tool = MemoryTool::new(fs_history(&root));
    let h = tool.store();
    let w = claude_memory::store::WriteMode::Create;
    for i in 0..3 {
        h.write(
            &p(&format!("/memories/keep{i}.md")),
            &vec![b'k'; 500_000],
            w,
        )
        .expect("write");
    }
    // Fill the disk.
    let filler = mnt.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let chunk = vec![0u8; 64 * 1024];
    while std::io::Write::write_all(&mut f, &chunk).is_ok() {}
    drop(f);
    let before = std::fs::read(journal(&root)).expect("journal");
    let failed = h.write(&p("/memories/big.md"), &vec![b'b'; 300_000], w);
    assert!(failed.is_err(), "no room");
    assert_eq!(
        std::fs::read(journal(&root)).expect("journal"),
        before,
        "the failed append was cut back off"
    );
    // A delete needs no new space for content already in the history.
    h.delete(&p("/memories/keep0.md"))
        .expect("delete on a full disk");
    // Prune frees space on the full disk.
    let pruned = h
        .prune(&Retention {
            max_age: None,
            keep_per_file: Some(1),
        })
        .expect("prune on a full disk");
    assert!(!pruned.is_empty());
    std::fs::remove_file(&filler).expect("rm filler");
    call(
        &tool,
        "toolu_after",
        json!({"command": "create", "path": "/memories/after.md",
        "file_text": "after\n"}),
    );
    let mine = h
        .versions(&Query {
            actor: Some("toolu_after".into()),
            ..Query::default()
        })
        .expect("versions");
    assert_eq!(mine.len(), 1, "the next create is recorded with its actor");
    drop(tool);
    let reopened = fs_history(&root);
    assert!(
        reopened.repair_report().recorded.is_empty(),
        "{}",
        reopened.repair_report()
    );
}

// 9. Restore after prune never deletes what it cannot date.

#[test]
fn attack_9_restore_after_prune_keeps_undated_files() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    let h = fs_history(&root);
    let w = claude_memory::store::WriteMode::Overwrite;
    h.write(&p("/memories/a.md"), b"v1\n", w).expect("w");
    std::thread::sleep(Duration::from_millis(20));
    let when = SystemTime::now();
    std::thread::sleep(Duration::from_millis(20));
    h.write(&p("/memories/a.md"), b"v2\n", w).expect("w");
    h.prune(&Retention {
        max_age: None,
        keep_per_file: Some(1),
    })
    .expect("prune");
    let report = h.restore(when, None).expect("restore");
    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(
        report.skipped,
        [("/memories/a.md".to_owned(), SkipReason::Undated)]
    );
    assert_eq!(
        h.read(&p("/memories/a.md"), 100).expect("read").data,
        b"v2\n"
    );
    assert_ne!(SkipReason::Undated.as_str(), SkipReason::Redacted.as_str());
}

// Also: no version for an update that changes nothing.

#[test]
fn a_write_that_changes_nothing_makes_no_version() {
    let _serial = SERIAL.lock();
    let h = HistoryStore::open(InMemoryStore::new(), MemoryLog::new()).expect("h");
    let w = claude_memory::store::WriteMode::Overwrite;
    h.write(&p("/memories/a.md"), b"same\n", w).expect("w");
    h.write(&p("/memories/a.md"), b"same\n", w).expect("w");
    assert_eq!(h.versions(&Query::default()).expect("v").len(), 1);
    let _ = Arc::new(());
}
