//! The journal (`FileLog`) under a dead writer, a second writer and
//! lines at the limit: an id names one version for good (a cut writes a
//! mark, so no id is given twice), a handle notices a journal cut back
//! and regrown, a torn batch is cut off without reading the journal, a
//! line of exactly the limit is readable, a redaction never grows a line
//! past it, and a prune leaves each file's history a walk.
#![cfg(target_os = "linux")]

use std::path::Path;

use claude_memory::FilesystemStore;
use claude_memory::history::{
    ChangeOp, FileLog, Filter, HistoryLog, HistoryStore, Order, Query, Retention, Revision,
    sha256_hex,
};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};

#[path = "../history_support/mod.rs"]
mod support;
use support::*;
fn open_with_limit(root: &Path, limit: u64) -> HistoryStore<FilesystemStore> {
    HistoryStore::open_with_limit(
        FilesystemStore::open(root).expect("store"),
        FileLog::for_store(root).expect("log"),
        limit,
    )
    .expect("open")
}
/// Every id in the journal, oldest first, as the log's full scan gives.
fn ids_in<L: HistoryLog + ?Sized>(log: &L) -> Vec<u64> {
    log.find(&Filter::default(), Order::Oldest, usize::MAX)
        .expect("find")
        .iter()
        .map(|v| v.id)
        .collect()
}
/// What a writer killed after its append and before its store change
/// leaves: its versions in the journal (appended through the log, as a
/// real writer does), the change never made.
fn dead_append(root: &Path, versions: &mut [Revision]) {
    let dead = FileLog::for_store(root).expect("log");
    dead.append(versions).expect("append");
}

/// A killed writer's edit of `/memories/a.md` (file `file`) to `text`,
/// as call `call`: its version in the journal, the file never changed.
fn dead_edit(root: &Path, file: u64, text: &[u8], call: &str) {
    dead_append(
        root,
        &mut [revision(
            ChangeOp::Modified,
            "/memories/a.md",
            Some(text),
            text,
            file,
            Some(file),
            call,
        )],
    );
}

fn revision(
    op: ChangeOp,
    path: &str,
    content: Option<&[u8]>,
    sha_of: &[u8],
    file: u64,
    prev: Option<u64>,
    call: &str,
) -> Revision {
    Revision {
        id: 0,
        file,
        op,
        path: path.into(),
        from: None,
        time: std::time::SystemTime::now(),
        actor: None,
        call: Some(call.into()),
        sha256: sha256_hex(sha_of),
        size: sha_of.len() as u64,
        content: content.map(<[u8]>::to_vec),
        redacted: false,
        note: None,
        prev,
    }
}
/// 100 versions of a 1 MiB file: about 100 MiB of journal.
fn big_history(h: &HistoryStore<FilesystemStore>, path: &str) {
    for i in 0..100 {
        let mut text = format!("{i:04}\n").into_bytes();
        text.resize(1 << 20, b'x');
        h.write(&p(path), &text, WriteMode::Overwrite).expect("big");
    }
}

/// The length of the journal line of version `id` (without its newline).
fn line_len(root: &Path, id: u64) -> usize {
    let data = std::fs::read(journal(root)).expect("journal");
    let prefix = format!("{{\"id\":{id},");
    data.split(|b| *b == b'\n')
        .find(|l| l.starts_with(prefix.as_bytes()))
        .map(<[u8]>::len)
        .expect("line")
}

/// A model's write whose journal line, newline included, is exactly the
/// 64 MiB a read takes: it is shown, and the next rewrite (a redaction
/// of another file) keeps it and the version after it.
#[test]
fn a_version_line_of_exactly_the_limit_is_shown_and_kept_by_a_rewrite() {
    const MAX_LINE: usize = 64 * 1024 * 1024;
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open_with_limit(root, 100 << 20);
    h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
        .expect("a");
    // Calibration: 3 control bytes, base64 "AQEB", at a 14-byte path.
    h.write(&p("/memories/c.md"), &[1, 1, 1], WriteMode::Create)
        .expect("calibration");
    let cal = line_len(root, 2);
    // A version of 3m bytes at a path k bytes longer: its line is
    // cal - 4 - 1 (base64, size "3") + 4m + 8 (size digits) + k; with
    // its newline, exactly the limit.
    let base = MAX_LINE - 1 + 5 - 8 - cal;
    let k = base % 4;
    let m = (base - k) / 4;
    let path = format!("/memories/b{}.md", "x".repeat(k));
    let big = vec![1u8; 3 * m];
    h.write(&p(&path), &big, WriteMode::Create)
        .expect("the store takes it");
    assert_eq!(
        line_len(root, 3) + 1,
        MAX_LINE,
        "calibration of the big line"
    );
    h.write(&p("/memories/s.md"), b"secret 42\n", WriteMode::Create)
        .expect("secret");
    let shown = h.version(3).map(|v| v.content.map(|c| c.len()));
    let (changed, _) = h.redact_text(b"secret 42").expect("redact --text");
    let listed: Vec<u64> = h
        .versions(&all())
        .expect("list")
        .iter()
        .map(|v| v.id)
        .collect();
    assert!(
        matches!(shown, Ok(Some(n)) if n == 3 * m) && listed == [1, 2, 3, 4],
        "show v3 (a {MAX_LINE}-byte line): {shown:?}; after redact --text (changed {changed:?}) \
         the history lists {listed:?}"
    );
}

/// A writer killed after its append: the next open cuts its version off
/// and saves a checkpoint; the open after that reads from the checkpoint,
/// not the whole journal (the cut leaves a mark of the last id, so the
/// checkpoint is never ahead of the journal).
#[test]
fn the_open_after_a_dead_writers_version_is_cut_reads_a_bounded_amount() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    {
        let h = open(root);
        big_history(&h, "/memories/big.md");
        h.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)
            .expect("a");
    }
    drop(open(root)); // a checkpoint at the last id
    let a = open(root).versions(&all()).expect("list").len() as u64; // a.md's id
    dead_edit(root, a, b"never written\n", "toolu_dead");
    let repairer = open(root);
    assert_eq!(
        repairer.repair_report().dropped,
        vec![a + 1],
        "the dead version"
    );
    drop(repairer);
    let journal_len = std::fs::metadata(journal(root)).expect("journal").len();
    let read = cost(|| drop(open(root)));
    let again = cost(|| drop(open(root)));
    assert!(
        read < journal_len / 4,
        "the open after the repair read {:.1} MiB of a {:.1} MiB journal (the one after: {:.1} MiB)",
        mib(read),
        mib(journal_len),
        mib(again)
    );
}

/// An operator lists a dead writer's version (v2, toolu_dead); the next
/// open cuts it off. The next writer's version gets a new id: v2 never
/// names another change.
#[test]
fn a_dead_writers_listed_id_is_never_given_to_another_version() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    drop(open(root));
    {
        let h = open(root);
        write_by(&h, "/memories/a.md", b"a\n", "toolu_a");
    }
    dead_edit(root, 1, b"never written\n", "toolu_dead");
    // The operator lists the history (read only: no repair).
    let listed = HistoryStore::inspect(
        FilesystemStore::open(root).expect("store"),
        FileLog::for_store_read_only(root).expect("log"),
    )
    .expect("inspect")
    .versions(&all())
    .expect("list");
    let seen: Vec<(u64, Option<String>)> = listed.iter().map(|v| (v.id, v.call.clone())).collect();
    assert_eq!(
        seen,
        vec![(1, Some("toolu_a".into())), (2, Some("toolu_dead".into()))]
    );
    drop(open(root)); // repair: the dead version is dropped
    let w = open(root);
    write_by(&w, "/memories/p.md", b"p\n", "toolu_next");
    let after: Vec<(u64, Option<String>)> = w
        .versions(&all())
        .expect("list")
        .iter()
        .map(|v| (v.id, v.call.clone()))
        .collect();
    assert!(
        after
            .iter()
            .all(|(id, call)| *id > 2 || seen.contains(&(*id, call.clone()))),
        "listed before the repair: {seen:?}; after: {after:?} (id 2 names another change)"
    );
}

/// A long-running writer R cuts a dead writer's version at its open;
/// another writer P edits a.md; R's next edit catches up with P's, so
/// a.md's history walked by `prev` is the scan of its file.
#[test]
fn a_writer_whose_repair_cut_a_dead_version_still_links_the_next_writers_edit() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    drop(open(root));
    {
        let h = open(root);
        write_by(&h, "/memories/a.md", b"a\n", "toolu_a");
    }
    dead_edit(root, 1, b"never written\n", "toolu_dead");
    let r = open(root); // long-running: its repair cuts the dead version
    assert_eq!(r.repair_report().dropped, vec![2]);
    let w = open(root);
    write_by(&w, "/memories/a.md", b"a\nP's edit\n", "toolu_p");
    drop(w);
    write_by(&r, "/memories/a.md", b"a\nP's edit\nR's edit\n", "toolu_r");
    drop(r);
    let h = open(root);
    let scan: Vec<(u64, Option<String>)> = h
        .log()
        .find(&Filter::default(), Order::Oldest, usize::MAX)
        .expect("scan")
        .iter()
        .filter(|v| claude_memory::history::file_of(v) == 1)
        .map(|v| (v.id, v.call.clone()))
        .collect();
    let walked: Vec<(u64, Option<String>)> = h
        .versions(&Query {
            path: Some(p("/memories/a.md")),
            limit: Some(100),
            ..Query::default()
        })
        .expect("history of a.md")
        .iter()
        .map(|v| (v.id, v.call.clone()))
        .collect();
    assert!(
        walked == scan && scan.len() == 3,
        "history /memories/a.md: {walked:?}; a full scan of its file: {scan:?}; repair: {}",
        h.repair_report()
    );
}

/// A handle H sees the journal with a dead version in it (its last id
/// 2); another writer's open cuts it off (leaving a mark of id 2) and
/// that writer makes two edits (v3, v4) whose lines fill the journal
/// back to the length H saw. The bytes where H's last line was changed:
/// H rereads the tail and gives no id twice.
#[test]
fn a_journal_cut_back_and_regrown_to_the_length_a_handle_saw_is_reread() {
    let len = |root: &Path| std::fs::metadata(journal(root)).expect("journal").len();
    // What happens to the journal: returns its length with the dead line
    // and after the other writer's edits.
    let run = |root: &Path, pad: usize, h: &mut Option<HistoryStore<FilesystemStore>>| {
        drop(open(root));
        write_by(&open(root), "/memories/a.md", b"a0\n", "toolu_00");
        let handle = h.insert(open(root)); // long-running (serve)
        let dead = vec![b'x'; pad];
        dead_edit(root, 1, &dead, "toolu_dd");
        let with_dead = len(root);
        // H lists the history: it has now seen the journal with the dead line.
        handle.versions(&all()).expect("list");
        let other = open(root); // its repair cuts the dead version
        write_by(&other, "/memories/a.md", b"p3\n", "toolu_p3");
        write_by(&other, "/memories/a.md", b"p4\n", "toolu_p4");
        (with_dead, len(root))
    };
    // Calibration in a scratch history: the dead text padded to match.
    let scratch = tempfile::tempdir().expect("dir");
    let (with_dead, after) = run(scratch.path(), 100, &mut None);
    let pad = (100 + after - with_dead) as usize;

    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let mut h = None;
    let (with_dead, after) = run(root, pad, &mut h);
    assert_eq!(after, with_dead, "calibration: the same length");
    let h = h.expect("H");
    write_by(&h, "/memories/h.md", b"h\n", "toolu_hh");
    let listed: Vec<(u64, Option<String>)> = h
        .versions(&all())
        .expect("list")
        .iter()
        .map(|v| (v.id, v.call.clone()))
        .collect();
    let ids: std::collections::BTreeSet<u64> = listed.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 4, "each version its own id: {listed:?}");
}

/// A writer killed inside a batch (a directory delete: the kill inside
/// its second line) leaves a complete version and a torn one. The next
/// model call cuts both off, reading the tail only.
#[test]
fn a_dead_writers_torn_batch_is_cut_off_without_reading_the_journal() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open(root);
    big_history(&h, "/memories/big.md");
    write_by(&h, "/memories/d/a.md", b"a\n", "toolu_a");
    write_by(&h, "/memories/d/b.md", b"b\n", "toolu_b");
    let n = ids_in(h.log()).len() as u64; // b.md's id; a.md's is n - 1
    let before = std::fs::metadata(journal(root)).expect("journal").len();
    // The killed writer's delete of /memories/d: two versions in one write.
    dead_append(
        root,
        &mut [
            revision(
                ChangeOp::Deleted,
                "/memories/d/a.md",
                None,
                b"a\n",
                n - 1,
                Some(n - 1),
                "toolu_rm",
            ),
            revision(
                ChangeOp::Deleted,
                "/memories/d/b.md",
                None,
                b"b\n",
                n,
                Some(n),
                "toolu_rm",
            ),
        ],
    );
    // The kill fell inside the second line: cut the file there.
    let data = std::fs::read(journal(root)).expect("journal");
    let first_end = before as usize
        + data[before as usize..]
            .iter()
            .position(|b| *b == b'\n')
            .expect("nl")
        + 1;
    let torn = first_end + (data.len() - first_end) / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(journal(root))
        .expect("journal")
        .set_len(torn as u64)
        .expect("tear");
    let journal_len = torn as u64;
    let read = cost(|| write_by(&h, "/memories/c.md", b"c\n", "toolu_c"));
    assert!(
        read < journal_len / 4,
        "the model's next create read {:.1} MiB of a {:.1} MiB journal",
        mib(read),
        mib(journal_len)
    );
}

/// `prune --keep 2` drops a file's oldest versions: the rewrite links the
/// kept ones to each other and marks the oldest kept as first, so the
/// file's history reads its versions, not the journal back to its start.
#[test]
fn after_a_prune_one_files_history_is_still_a_walk() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open(root);
    h.write(&p("/memories/a.md"), b"a 1\n", WriteMode::Create)
        .expect("a");
    // Other files: one 1 MiB version each, all kept by --keep 2.
    for i in 0..100 {
        let mut text = format!("{i:04}\n").into_bytes();
        text.resize(1 << 20, b'x');
        h.write(
            &p(&format!("/memories/big{i:03}.md")),
            &text,
            WriteMode::Create,
        )
        .expect("big");
    }
    h.write(&p("/memories/a.md"), b"a 2\n", WriteMode::Overwrite)
        .expect("a 2");
    h.write(&p("/memories/a.md"), b"a 3\n", WriteMode::Overwrite)
        .expect("a 3");
    let removed = h
        .prune(&Retention {
            max_age: None,
            keep_per_file: Some(2),
        })
        .expect("prune");
    assert_eq!(removed, vec![1], "a.md's first version");
    let journal_len = std::fs::metadata(journal(root)).expect("journal").len();
    let mut got = Vec::new();
    let read = cost(|| {
        got = h
            .versions(&Query {
                path: Some(p("/memories/a.md")),
                limit: Some(10),
                ..Query::default()
            })
            .expect("history of a.md");
    });
    assert_eq!(got.len(), 2);
    assert!(
        read < journal_len / 4,
        "history /memories/a.md --limit 10 read {:.1} MiB of a {:.1} MiB journal",
        mib(read),
        mib(journal_len)
    );
}

/// `redact --text` of a two-byte secret repeated grows a 14 MiB version
/// to 70 MiB of line: the version is kept, without its content, and the
/// next rewrite keeps it.
#[test]
fn redact_text_that_grows_a_line_past_the_limit_keeps_the_version_without_content() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path();
    let h = open_with_limit(root, 32 << 20);
    let text = b"pw".repeat(7 << 20);
    h.write(&p("/memories/a.md"), &text, WriteMode::Create)
        .expect("a");
    h.write(&p("/memories/b.md"), b"after\n", WriteMode::Create)
        .expect("b");
    h.redact_text(b"pw").expect("redact --text");
    let shown = h.version(1).map(|v| v.redacted);
    // Any later rewrite (here a redaction of b.md) drops what it cannot read.
    h.redact(2).expect("redact v2");
    let listed: Vec<u64> = h
        .versions(&all())
        .expect("list")
        .iter()
        .map(|v| v.id)
        .collect();
    assert!(
        shown.is_ok() && listed == [1, 2],
        "show v1 after redact --text: {shown:?}; listed after the next rewrite: {listed:?}"
    );
}
