//! The history's log under attack. Its checkpoint (the index of the live
//! files an open starts from): planted, lying, too large, a link, a FIFO,
//! a directory, of another history, undecryptable; a writer killed
//! between its change and its checkpoint; a full disk while one is saved;
//! a prune after one. Each open must end with the index the whole history
//! gives, and no change recorded twice or lost. Then the journal's reads
//! (a torn id, a dead writer's version, a line over the limit, the bytes
//! an open, a listing or a show reads) and the versions API's revert of
//! changes.
#![cfg(unix)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use claude_memory::history::{FileLog, HistoryStore, MemoryLog, Query, Retention, Versions};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore};

#[path = "../history_support/mod.rs"]
mod support;
use support::*;
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
    files.push(serde_json::json!([
        "/memories/f99.md",
        1,
        "1".repeat(64),
        5
    ]));
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
/// Promise: "ids are never reused, across processes too". A writer killed
/// mid-append leaves a torn last line; when the tear falls inside the id's
/// digits (`{"id":1` of `{"id":13,…`), a long-running writer in another
/// process reads "the last id" from that torn line (the journal's tail
/// only, no parse) and gives out ids that are already taken. The old code
/// parsed whole lines, and a torn one counted for nothing.
#[test]
fn a_torn_last_line_cut_in_its_id_never_makes_another_writer_reuse_ids() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    // Writer B: a long-running process (serve), opened first.
    let b = open(root);
    // Writer A: 12 changes, then killed while appending its 13th version:
    // the page boundary of its write fell after `{"id":1`.
    let a = open(root);
    for i in 0..12 {
        a.write(&p(&format!("/memories/a{i}.md")), b"a\n", WriteMode::Create)
            .expect("write");
    }
    drop(a);
    let mut j = std::fs::OpenOptions::new()
        .append(true)
        .open(journal(root))
        .expect("journal");
    j.write_all(b"{\"id\":1").expect("torn line");
    drop(j);
    // B's next change.
    b.write(&p("/memories/b.md"), b"b\n", WriteMode::Create)
        .expect("write");
    let ids: Vec<u64> = b
        .log()
        .find(
            &claude_memory::history::Filter::default(),
            claude_memory::history::Order::Oldest,
            usize::MAX,
        )
        .expect("find")
        .iter()
        .map(|v| v.id)
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        ids.len(),
        "ids in the journal, in order: {ids:?} (B's version reused a taken id)"
    );
    assert_eq!(ids.last(), Some(&13), "B's version: {ids:?}");
}

/// Promise: revert_changes undoes what one call did; "a file changed
/// since by another actor [is] left and said". A call that edits a file,
/// then another call's edit, then the first call's again: the revert of
/// the first call puts the file back as it was before it, silently
/// undoing the other call's change, and reports nothing skipped.
#[test]
fn a_revert_of_a_call_leaves_a_file_another_call_changed_between_its_own() {
    let h = HistoryStore::open(InMemoryStore::new(), MemoryLog::new()).expect("open");
    write_by(&h, "/memories/a.md", "base\n", "toolu_setup");
    write_by(&h, "/memories/a.md", "base\nevil 1\n", "toolu_evil");
    write_by(&h, "/memories/a.md", "base\nevil 1\nGOOD\n", "toolu_good");
    write_by(
        &h,
        "/memories/a.md",
        "base\nevil 1\nGOOD\nevil 2\n",
        "toolu_evil",
    );
    let by = Query {
        call: Some("toolu_evil".into()),
        ..Query::default()
    };
    let report = h
        .revert_changes(&by, "revert of call toolu_evil")
        .expect("revert");
    let now = h.read(&p("/memories/a.md"), 1 << 20).expect("read").data;
    let now = String::from_utf8(now).expect("utf8");
    assert!(
        now.contains("GOOD") || !report.skipped.is_empty(),
        "toolu_good's change is gone without a word: file now {now:?}, report {report:?}"
    );
}

/// Promise: "Nothing a model's call or a history command does reads the
/// whole history: an open reads the checkpoint and the versions after it
/// … and each live file once; a listing is one page of records; show,
/// diff and revert read their versions by id". On the journal, each of
/// these reads the whole journal backwards or forwards: an open after a
/// file appeared outside the history (one full scan per such file, to
/// ask the log whether the checkpoint lies about it), an open after a
/// file was deleted outside it, one file's history, `show` of a rename of
/// a file last written long ago, `history --since` (the CLI streams it
/// with `each`, from the journal's start).
#[cfg(target_os = "linux")]
#[test]
fn opens_listings_and_show_never_read_the_whole_journal() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open(root);
    h.write(&p("/memories/early.md"), b"early\n", WriteMode::Create)
        .expect("early");
    h.write(&p("/memories/gone.md"), b"gone\n", WriteMode::Create)
        .expect("gone");
    // Old history: 120 versions of a 1 MiB file (about 120 MiB of journal).
    for i in 0..120 {
        let mut text = format!("{i:04}\n").into_bytes();
        text.resize(1 << 20, b'x');
        h.write(&p("/memories/big.md"), &text, WriteMode::Overwrite)
            .expect("big");
    }
    // Recent history: 1,100 small edits (a checkpoint at 1,000).
    for k in 0..1_100 {
        let text = format!("small {k}\n");
        h.write(
            &p(&format!("/memories/s{:02}.md", k % 30)),
            text.as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("small");
    }
    let since = std::time::SystemTime::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    h.rename(&p("/memories/early.md"), &p("/memories/moved.md"))
        .expect("rename");
    drop(h);
    drop(open(root)); // saves a checkpoint at the last id
    let journal_len = std::fs::metadata(journal(root)).expect("journal").len();

    let mut costs: Vec<(&str, u64)> = Vec::new();
    costs.push(("reopen, nothing changed", cost(|| drop(open(root)))));
    std::fs::write(root.join("outside.md"), "dropped in by hand\n").expect("outside");
    costs.push((
        "reopen after one file was created outside the history",
        cost(|| drop(open(root))),
    ));
    std::fs::remove_file(root.join("gone.md")).expect("rm");
    costs.push((
        "reopen after one file was deleted outside the history",
        cost(|| drop(open(root))),
    ));
    let h = open(root);
    costs.push((
        "history /memories/moved.md --limit 10",
        cost(|| {
            h.versions(&Query {
                path: Some(p("/memories/moved.md")),
                limit: Some(10),
                ..Query::default()
            })
            .expect("versions");
        }),
    ));
    let rename = h
        .versions(&Query {
            limit: Some(1),
            prefix: Some(p("/memories/moved.md")),
            ..Query::default()
        })
        .expect("versions")[0]
        .id;
    costs.push((
        "show of the rename",
        cost(|| {
            h.version(rename).expect("show");
        }),
    ));
    costs.push((
        "history --since (the CLI's each())",
        cost(|| {
            h.each(
                &Query {
                    since: Some(since),
                    ..Query::default()
                },
                &mut |_| Ok(()),
            )
            .expect("each");
        }),
    ));
    costs.push((
        "history --since --limit 100",
        cost(|| {
            h.versions(&Query {
                since: Some(since),
                limit: Some(100),
                ..Query::default()
            })
            .expect("versions");
        }),
    ));
    let report: Vec<String> = costs
        .iter()
        .map(|(what, n)| format!("{what}: {:.1} MiB", *n as f64 / (1 << 20) as f64))
        .collect();
    eprintln!("{}", report.join("\n"));
    let whole = costs.iter().filter(|(_, n)| *n > journal_len / 4).count();
    assert_eq!(
        whole,
        0,
        "journal {:.1} MiB; read:\n{}",
        journal_len as f64 / (1 << 20) as f64,
        report.join("\n")
    );
}

/// Promise: a planted checkpoint "is no checkpoint and is replaced". A
/// directory at `checkpoint.json` is read as none, and never replaced
/// (the rename over it fails, silently): every open from then on reads
/// the whole history, and holds every record after the (missing)
/// checkpoint in memory.
#[test]
fn a_directory_planted_at_the_checkpoint_is_replaced() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    {
        let h = open(root);
        for i in 0..1_100 {
            h.write(
                &p("/memories/a.md"),
                format!("{i}\n").as_bytes(),
                WriteMode::Overwrite,
            )
            .expect("write");
        }
    }
    let cp = checkpoint(root);
    std::fs::remove_file(&cp).expect("rm");
    std::fs::create_dir(&cp).expect("plant a directory");
    drop(open(root));
    drop(open(root));
    let meta = std::fs::symlink_metadata(&cp).expect("meta");
    assert!(
        meta.is_file(),
        "checkpoint.json is still a directory after two opens"
    );
}

/// The versions API with an empty query: `revert_changes` undoes "every
/// change `by` selects", and an empty query selects every change ever
/// made, so one call with `Query::default()` (a caller that forgot to set
/// the actor, or built the query from an empty option) deletes every file
/// in the store, baseline files included.
#[test]
fn revert_changes_with_an_empty_query_is_refused() {
    let inner = InMemoryStore::new();
    inner
        .write(
            &p("/memories/before.md"),
            b"was there first\n",
            WriteMode::Create,
        )
        .expect("before");
    let h = HistoryStore::open(inner, MemoryLog::new()).expect("open");
    write_by(&h, "/memories/a.md", "a\n", "toolu_1");
    write_by(&h, "/memories/b.md", "b\n", "toolu_2");
    let report = h.revert_changes(&Query::default(), "oops");
    let left: Vec<bool> = ["/memories/before.md", "/memories/a.md", "/memories/b.md"]
        .iter()
        .map(|f| h.read(&p(f), 1 << 20).is_ok())
        .collect();
    assert!(
        report.is_err() || left.iter().any(|l| *l),
        "an empty query reverted everything: {report:?}, files left {left:?}"
    );
}

/// Promise: "bounded memory per call", "nothing a model's call … reads
/// the whole history". A writer killed after its append and before its
/// change (SIGKILL, the case repair exists for) leaves a version; the next
/// writer's ordinary change finds it and drops it, and dropping a version
/// that is not the caller's own last batch rewrites the journal: the
/// whole journal read into memory (every version's content) and written
/// again, inside a model's call.
#[cfg(target_os = "linux")]
#[test]
fn a_dead_writers_version_is_cut_off_without_reading_the_journal() {
    use claude_memory::history::{ChangeOp, HistoryLog, Revision, sha256_hex};
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open(root);
    for i in 0..100 {
        let mut text = format!("{i:04}\n").into_bytes();
        text.resize(1 << 20, b'x');
        h.write(&p("/memories/big.md"), &text, WriteMode::Overwrite)
            .expect("big");
    }
    h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("a");
    let journal_len = std::fs::metadata(journal(root)).expect("journal").len();
    // Another process: appends the version of its edit of a.md, then is
    // killed before the edit.
    {
        let dead = FileLog::for_store(root).expect("log");
        let text = b"never written\n";
        let mut v = [Revision {
            id: 0,
            file: 0,
            op: ChangeOp::Modified,
            path: "/memories/a.md".into(),
            from: None,
            time: std::time::SystemTime::now(),
            actor: Some("dead".into()),
            call: Some("toolu_dead".into()),
            sha256: sha256_hex(text),
            size: text.len() as u64,
            content: Some(text.to_vec()),
            redacted: false,
            note: None,
            prev: None,
        }];
        dead.append(&mut v).expect("append");
    }
    let read = cost(|| {
        h.write(&p("/memories/c.md"), b"c\n", WriteMode::Create)
            .expect("the model's next create");
    });
    assert!(
        read < journal_len / 4,
        "one create read {:.1} MiB of a {:.1} MiB journal",
        read as f64 / (1 << 20) as f64,
        journal_len as f64 / (1 << 20) as f64
    );
}

/// Promise: every change is kept; redaction erases content. With a file
/// limit over about 48 MiB (`Config::with_max_file_size`, and
/// `open_with_limit` as the docs say), one model write makes a journal
/// line over the 64 MiB `MAX_LINE`: its version is appended, but it can
/// never be read back (`show` says there is no such version), and the
/// next rewrite of the journal (any redaction, prune, or a dead writer's
/// drop) leaves it out without a word.
#[test]
fn a_version_over_the_journals_line_limit_is_kept_without_its_content() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = HistoryStore::open_with_limit(
        FilesystemStore::open(root).expect("store"),
        FileLog::for_store(root).expect("log"),
        100 << 20,
    )
    .expect("open");
    h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("a");
    // 50 MiB of text with a control character every 4 bytes: stored as
    // base64, about 67 MiB on one line.
    let big: Vec<u8> = (0..50u32 << 20)
        .map(|i| if i % 4 == 0 { 1 } else { b'y' })
        .collect();
    h.write(&p("/memories/big.md"), &big, WriteMode::Create)
        .expect("the store takes it");
    h.write(&p("/memories/b.md"), b"b\n", WriteMode::Create)
        .expect("b");
    let ids: Vec<u64> = h
        .versions(&all())
        .expect("list")
        .iter()
        .map(|v| v.id)
        .collect();
    let shown = (1..=3)
        .map(|id| h.version(id).map(|v| v.path))
        .collect::<Vec<_>>();
    assert!(
        ids == [1, 2, 3] && shown.iter().all(Result::is_ok),
        "versions listed {ids:?}; shown: {shown:?}"
    );
    let big = h.version(2).expect("show");
    assert!(big.content.is_none(), "its content is not in the journal");
    assert!(
        big.note
            .as_deref()
            .is_some_and(|n| n.starts_with("content not recorded")),
        "{:?}",
        big.note
    );
    assert_eq!(big.size, 50 << 20, "its size and hash are");
}

/// Promise: "a garbage checkpoint is ignored and replaced". On an
/// encrypted store (the CLI with `--key-file`: `SealedLog` over the
/// journal), a checkpoint that does not open with the store's keys (one
/// byte planted, or one sealed with a key since removed) fails the open:
/// no process can open the store with history until it is deleted by
/// hand.
#[test]
fn a_garbage_checkpoint_of_a_sealed_log_is_no_checkpoint() {
    use claude_memory::history::SealedLog;
    use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let ring = Keyring::new(Key::generate().expect("key"));
    let open_sealed = || {
        let enc = EncryptedStore::open(FilesystemStore::open(root).expect("store"), ring.clone())
            .expect("encrypted");
        let log = SealedLog::new(FileLog::for_store(root).expect("log"), &enc);
        HistoryStore::open(enc, log)
    };
    {
        let h = open_sealed().expect("open");
        h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
            .expect("a");
    }
    drop(open_sealed().expect("reopen")); // saves a checkpoint
    assert!(checkpoint(root).exists());
    std::fs::write(checkpoint(root), b"x").expect("plant");
    let reopened = open_sealed();
    assert!(reopened.is_ok(), "{:?}", reopened.err());
}
