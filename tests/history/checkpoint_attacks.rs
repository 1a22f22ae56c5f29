//! The history's checkpoint (the index of the live files an open starts
//! from) under attack: planted, lying, too large, a link, a FIFO, of
//! another history; a writer killed between its change and its
//! checkpoint; a full disk while one is saved; a prune after one. Each
//! open must end with the index the whole history gives, and no change
//! recorded twice or lost.
#![cfg(unix)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use claude_memory::history::{FileLog, HistoryStore, Query, Retention};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

fn open(root: &Path) -> HistoryStore<FilesystemStore> {
    HistoryStore::open(
        FilesystemStore::open(root).expect("store"),
        FileLog::for_store(root).expect("log"),
    )
    .expect("open")
}

fn checkpoint(root: &Path) -> PathBuf {
    root.join(".claude-memory-history/checkpoint.json")
}

/// A store whose history passed two checkpoint intervals: 30 files, each
/// rewritten, 2,100 versions in all.
fn written(root: &Path) {
    let h = open(root);
    for i in 0..2_100 {
        let text = format!("version {i}\n");
        h.write(
            &p(&format!("/memories/f{:02}.md", i % 30)),
            text.as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("write");
    }
}

/// The listing of the whole history, and the report of a reopen: a
/// reopen after an attack must repair nothing and lose nothing.
fn clean_reopen(root: &Path) -> usize {
    let h = open(root);
    assert!(h.repair_report().is_clean(), "{}", h.repair_report());
    let all = Query {
        limit: Some(usize::MAX),
        ..Query::default()
    };
    h.versions(&all).expect("versions").len()
}

#[test]
fn a_garbage_checkpoint_is_ignored_and_replaced() {
    let dir = tempfile::tempdir().expect("dir");
    written(dir.path());
    std::fs::write(checkpoint(dir.path()), b"{\"format\":\"no\x01").expect("plant");
    assert_eq!(clean_reopen(dir.path()), 2_100);
    let saved = std::fs::read(checkpoint(dir.path())).expect("a checkpoint again");
    assert!(saved.starts_with(b"{\"format\":\"claude-memory-history-index\""));
}

#[test]
fn a_checkpoint_that_lies_about_a_live_file_is_dropped_not_believed() {
    let dir = tempfile::tempdir().expect("dir");
    written(dir.path());
    drop(open(dir.path()));
    // The lie: f03.md holds other content, and f99.md exists.
    let mut cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint(dir.path())).expect("read"))
            .expect("json");
    let files = cp["files"].as_array_mut().expect("files");
    for entry in files.iter_mut() {
        if entry[0] == "/memories/f03.md" {
            entry[2] = serde_json::Value::from("0".repeat(64));
        }
    }
    files.push(serde_json::json!(["/memories/f99.md", 1, "1".repeat(64)]));
    std::fs::write(checkpoint(dir.path()), cp.to_string()).expect("plant");
    // Believed, it would record f03.md as changed and f99.md as deleted.
    assert_eq!(clean_reopen(dir.path()), 2_100);
}

#[test]
fn a_checkpoint_of_another_history_is_dropped() {
    let dir = tempfile::tempdir().expect("dir");
    let other = tempfile::tempdir().expect("other");
    written(dir.path());
    let h = open(other.path());
    h.write(&p("/memories/x.md"), b"x\n", WriteMode::Create)
        .expect("write");
    drop(h);
    drop(open(other.path()));
    std::fs::copy(checkpoint(other.path()), checkpoint(dir.path())).expect("copy");
    assert_eq!(clean_reopen(dir.path()), 2_100);
}

#[test]
fn a_checkpoint_planted_as_a_link_a_fifo_or_a_sparse_giant_is_no_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let elsewhere = tempfile::tempdir().expect("elsewhere");
    written(dir.path());
    let victim = elsewhere.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").expect("victim");
    let cp = checkpoint(dir.path());
    for plant in ["link", "fifo", "sparse"] {
        let _ = std::fs::remove_file(&cp);
        match plant {
            "link" => std::os::unix::fs::symlink(&victim, &cp).expect("link"),
            "fifo" => assert!(
                std::process::Command::new("mkfifo")
                    .arg(&cp)
                    .status()
                    .expect("mkfifo")
                    .success()
            ),
            _ => std::fs::File::create(&cp)
                .and_then(|f| f.set_len(1 << 30))
                .expect("sparse"),
        }
        assert_eq!(clean_reopen(dir.path()), 2_100, "{plant}");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious\n",
            "{plant}"
        );
        let meta = std::fs::symlink_metadata(&cp).expect("replaced");
        assert!(meta.is_file() && meta.len() < 1 << 20, "{plant}: replaced");
    }
}

/// A writer killed after its change, before its checkpoint (the
/// checkpoint left is an older one): the next open replays the longer
/// stretch after it and repairs nothing.
#[test]
fn a_writer_killed_between_its_change_and_its_checkpoint_costs_a_longer_replay() {
    let dir = tempfile::tempdir().expect("dir");
    let h = open(dir.path());
    for i in 0..900 {
        h.write(
            &p("/memories/a.md"),
            format!("{i}\n").as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("write");
    }
    drop(h);
    drop(open(dir.path()));
    let old = std::fs::read(checkpoint(dir.path())).expect("an older checkpoint");
    let h = open(dir.path());
    for i in 0..1_500 {
        h.write(
            &p("/memories/b.md"),
            format!("{i}\n").as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("write");
    }
    drop(h);
    // As if the checkpoint after those changes had never been saved.
    std::fs::write(checkpoint(dir.path()), old).expect("put the older one back");
    assert_eq!(clean_reopen(dir.path()), 2_400);
}

/// A prune removes versions an open would replay after the checkpoint
/// (a rename there would leave its source live): it saves a checkpoint
/// first, so the reopen's index is the history's.
#[test]
fn a_prune_after_a_checkpoint_leaves_no_renamed_file_behind_in_the_index() {
    let dir = tempfile::tempdir().expect("dir");
    let h = open(dir.path());
    h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("write");
    drop(h);
    drop(open(dir.path())); // a checkpoint with a.md
    let h = open(dir.path());
    h.rename(&p("/memories/a.md"), &p("/memories/b.md"))
        .expect("rename");
    h.write(&p("/memories/b.md"), b"b\n", WriteMode::Overwrite)
        .expect("write");
    // The checkpoint is from before the rename; the rename is the only
    // version that moved a.md, and `--keep 1` prunes it.
    let removed = h
        .prune(&Retention {
            max_age: None,
            keep_per_file: Some(1),
        })
        .expect("prune");
    assert!(!removed.is_empty());
    drop(h);
    let reopened = open(dir.path());
    assert!(
        reopened.repair_report().is_clean(),
        "{}",
        reopened.repair_report()
    );
}

/// A full disk while a checkpoint is saved: the change it follows is made
/// and kept, the old checkpoint stays, and the next open is clean.
#[test]
fn a_full_disk_while_checkpointing_loses_no_change() {
    let Some((_dir, mnt)) = small_tmpfs("2m") else {
        return;
    };
    let _unmount = Unmount(mnt.clone());
    let root = mnt.join("m");
    let h = open(&root);
    // 400 files: a checkpoint of about 60 KB.
    for i in 0..400 {
        h.write(
            &p(&format!("/memories/f{i:03}.md")),
            b"x\n",
            WriteMode::Create,
        )
        .expect("write");
    }
    for i in 400..995 {
        h.write(
            &p("/memories/a.md"),
            format!("{i}\n").as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("write");
    }
    // Leave room for a few appends, not for a checkpoint's copy.
    let filler = mnt.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    drop(f);
    let room = 24_576u64;
    std::fs::File::options()
        .write(true)
        .open(&filler)
        .and_then(|f| {
            let len = f.metadata()?.len();
            f.set_len(len.saturating_sub(room))
        })
        .expect("room");
    let mut made = 0;
    for i in 995..1_010 {
        if h.write(
            &p("/memories/a.md"),
            format!("{i}\n").as_bytes(),
            WriteMode::Overwrite,
        )
        .is_ok()
        {
            made += 1;
        }
    }
    assert!(made > 0, "some changes fit");
    drop(h);
    std::fs::remove_file(&filler).expect("room again");
    let reopened = open(&root);
    assert!(
        reopened.repair_report().is_clean(),
        "{}",
        reopened.repair_report()
    );
    let now = reopened
        .read(&p("/memories/a.md"), 1 << 20)
        .expect("read")
        .data;
    let latest = reopened
        .versions(&Query {
            limit: Some(1),
            ..Query::default()
        })
        .expect("versions");
    let latest = reopened.version(latest[0].id).expect("version");
    assert_eq!(latest.content.as_deref(), Some(&now[..]));
}

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
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_TMPFS").is_none(),
            "cannot mount a tmpfs"
        );
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
