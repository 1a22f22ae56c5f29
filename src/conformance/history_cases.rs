//! History cases: a [`HistoryStore`](crate::history::HistoryStore) over
//! the store under test keeps every change, attributable and reversible,
//! and out of the model's sight. Each case gets a fresh, empty store and
//! a function opening its history log (again, for the reopen cases).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::config::Config;
use crate::history::{ChangeOp, HistoryLog, HistoryStore, Query, Retention, sha256_hex};
use crate::path::MemoryPath;
use crate::store::{MemoryStore, MemoryStoreExt as _, WriteMode};
use crate::tool::MemoryTool;

/// Opens the history log of the store under test (the same log each time).
pub type OpenLog<'a> = &'a dyn Fn() -> Arc<dyn HistoryLog>;

type Store<'a> = HistoryStore<&'a dyn MemoryStore>;

fn open<'a>(store: &'a dyn MemoryStore, log: OpenLog<'_>) -> Store<'a> {
    HistoryStore::open(store, log())
        .expect("open the history")
        .with_label("agent-1")
}

fn call(tool: &MemoryTool<Store<'_>>, id: &str, input: Value) -> String {
    let r = tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
    assert!(!r.is_error, "{id} failed: {:?}", r.text());
    r.text().unwrap_or_default().to_owned()
}

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

/// Every version, with its content (a listing holds records only).
fn all(h: &Store<'_>) -> Vec<crate::history::Revision> {
    h.versions(&Query::default())
        .expect("versions")
        .into_iter()
        .map(|v| h.version(v.id).expect("version"))
        .collect()
}

fn read(h: &Store<'_>, path: &str) -> Option<String> {
    h.read(&p(path), u64::MAX)
        .ok()
        .map(|f| String::from_utf8(f.data).expect("UTF-8"))
}

/// Create, `str_replace`, insert, rename and delete each record one
/// version: monotonic id, path(s), operation, actor and call, sha256,
/// size and content (a delete's is the content removed).
pub fn history_records_every_change(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let tool = MemoryTool::new(open(store, log));
    call(
        &tool,
        "toolu_c",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"}),
    );
    call(
        &tool,
        "toolu_s",
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"}),
    );
    call(
        &tool,
        "toolu_i",
        json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "zero"}),
    );
    call(
        &tool,
        "toolu_r",
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
    );
    call(
        &tool,
        "toolu_d",
        json!({"command": "delete", "path": "/memories/b.md"}),
    );
    let v = all(tool.store());
    type Row<'a> = (
        ChangeOp,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
    );
    let got: Vec<Row<'_>> = v
        .iter()
        .map(|v| {
            (
                v.op,
                v.path.as_str(),
                v.from.as_deref(),
                v.call.as_deref(),
                v.actor.as_deref(),
            )
        })
        .collect();
    let a = Some("agent-1");
    assert_eq!(
        got,
        [
            (
                ChangeOp::Created,
                "/memories/a.md",
                None,
                Some("toolu_c"),
                a
            ),
            (
                ChangeOp::Modified,
                "/memories/a.md",
                None,
                Some("toolu_s"),
                a
            ),
            (
                ChangeOp::Modified,
                "/memories/a.md",
                None,
                Some("toolu_i"),
                a
            ),
            (
                ChangeOp::Renamed,
                "/memories/b.md",
                Some("/memories/a.md"),
                Some("toolu_r"),
                a
            ),
            (
                ChangeOp::Deleted,
                "/memories/b.md",
                None,
                Some("toolu_d"),
                a
            ),
        ]
    );
    assert!(v.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
    assert!(v.windows(2).all(|w| w[0].time <= w[1].time), "times");
    assert!(
        v.iter().all(|x| x.file == v[0].file),
        "one file across the rename"
    );
    let texts: Vec<Option<String>> = v.iter().map(|v| v.text()).collect();
    let final_text = "zero\none\nTWO\n";
    assert_eq!(
        texts,
        [
            Some("one\ntwo\n".to_owned()),
            Some("one\nTWO\n".to_owned()),
            Some(final_text.to_owned()),
            Some(final_text.to_owned()),
            Some(final_text.to_owned()),
        ]
    );
    assert_eq!(v[4].sha256, sha256_hex(final_text.as_bytes()));
    assert_eq!(v[4].size, final_text.len() as u64);
    // The model-facing answers are unchanged.
    let tool = MemoryTool::new(open(store, log));
    let r = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        r.text(),
        Some(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories"
        )
    );
}

/// A directory rename records one version per file, a directory delete
/// one per file with its content; a file's history follows renames.
pub fn history_follows_renames_and_directories(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let tool = MemoryTool::new(open(store, log));
    call(
        &tool,
        "t1",
        json!({"command": "create", "path": "/memories/d/x.md", "file_text": "x"}),
    );
    call(
        &tool,
        "t2",
        json!({"command": "create", "path": "/memories/d/sub/y.md", "file_text": "y"}),
    );
    call(
        &tool,
        "t3",
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    );
    call(
        &tool,
        "t4",
        json!({"command": "str_replace", "path": "/memories/e/x.md", "old_str": "x", "new_str": "x2"}),
    );
    let h = tool.store();
    let by_new = h
        .versions(&Query {
            path: Some(p("/memories/e/x.md")),
            ..Query::default()
        })
        .expect("versions");
    let ids: Vec<(ChangeOp, &str)> = by_new.iter().map(|v| (v.op, v.path.as_str())).collect();
    assert_eq!(
        ids,
        [
            (ChangeOp::Created, "/memories/d/x.md"),
            (ChangeOp::Renamed, "/memories/e/x.md"),
            (ChangeOp::Modified, "/memories/e/x.md"),
        ]
    );
    let by_old = h
        .versions(&Query {
            path: Some(p("/memories/d/x.md")),
            ..Query::default()
        })
        .expect("versions");
    assert_eq!(by_old, by_new, "the old path finds the same file");
    call(
        &tool,
        "t5",
        json!({"command": "delete", "path": "/memories/e"}),
    );
    let deleted: Vec<(String, Option<String>)> = all(h)
        .into_iter()
        .filter(|v| v.call.as_deref() == Some("t5"))
        .map(|v| (v.path.clone(), v.text()))
        .collect();
    assert_eq!(
        deleted,
        [
            ("/memories/e/sub/y.md".to_owned(), Some("y".to_owned())),
            ("/memories/e/x.md".to_owned(), Some("x2".to_owned())),
        ]
    );
}

/// A refused command records nothing.
pub fn history_failed_changes_leave_no_version(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let config = Config::default().with_max_file_size(10);
    let tool = MemoryTool::with_config(open(store, log), config);
    call(
        &tool,
        "ok",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a"}),
    );
    call(
        &tool,
        "ok2",
        json!({"command": "create", "path": "/memories/b.md", "file_text": "b"}),
    );
    for input in [
        json!({"command": "create", "path": "/memories/a.md", "file_text": "again"}),
        json!({"command": "create", "path": "/memories/big.md", "file_text": "far too long"}),
        json!({"command": "create", "path": "/memories/a.md/x", "file_text": "x"}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "zzz", "new_str": "y"}),
        json!({"command": "insert", "path": "/memories/a.md", "insert_line": 9, "insert_text": "y"}),
        json!({"command": "delete", "path": "/memories/missing.md"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
        json!({"command": "rename", "old_path": "/memories/missing.md", "new_path": "/memories/c.md"}),
        json!({"command": "delete", "path": "/memories/.claude-memory-history"}),
        json!({"command": "view", "path": "/memories/.claude-memory-history/journal.jsonl"}),
    ] {
        let r = tool
            .dispatch(&json!({"type": "tool_use", "id": "bad", "name": "memory", "input": input}));
        assert!(r.is_error, "{input} should fail");
    }
    assert_eq!(all(tool.store()).len(), 2);
    assert!(
        all(tool.store())
            .iter()
            .all(|v| v.call.as_deref() != Some("bad"))
    );
}

/// The history is out of sight: views list live files only, the store
/// size limit counts live files only, and a fresh handler sees only them.
pub fn history_is_invisible_to_the_model(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let config = Config::default().with_max_store_size(100);
    let tool = MemoryTool::with_config(open(store, log), config);
    let text = "x".repeat(60);
    for i in 0..5 {
        call(
            &tool,
            "w",
            json!({"command": "create", "path": "/memories/f.md", "file_text": text}),
        );
        call(
            &tool,
            "d",
            json!({"command": "delete", "path": "/memories/f.md"}),
        );
        assert!(i < 5);
    }
    // 600 bytes of history, 60 live: another 30 fit under 100.
    call(
        &tool,
        "w",
        json!({"command": "create", "path": "/memories/f.md", "file_text": text}),
    );
    call(
        &tool,
        "w2",
        json!({"command": "create", "path": "/memories/g.md", "file_text": "y".repeat(30)}),
    );
    let r = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        r.text(),
        Some(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n90B\t/memories\n60B\t/memories/f.md\n30B\t/memories/g.md"
        )
    );
    assert_eq!(tool.store().total_size().expect("total"), 90);
    assert_eq!(all(tool.store()).len(), 12);
}

/// Listing by path, prefix, time range and actor.
pub fn history_queries_filter(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let tool = MemoryTool::new(open(store, log));
    call(
        &tool,
        "t1",
        json!({"command": "create", "path": "/memories/a/1.md", "file_text": "1"}),
    );
    call(
        &tool,
        "t2",
        json!({"command": "create", "path": "/memories/b/2.md", "file_text": "2"}),
    );
    std::thread::sleep(Duration::from_millis(5));
    let middle = SystemTime::now();
    std::thread::sleep(Duration::from_millis(5));
    call(
        &tool,
        "t3",
        json!({"command": "create", "path": "/memories/a/3.md", "file_text": "3"}),
    );
    let h = tool.store();
    let paths = |q: Query| -> Vec<String> {
        h.versions(&q)
            .expect("versions")
            .into_iter()
            .map(|v| v.path)
            .collect()
    };
    let prefix = Query {
        prefix: Some(p("/memories/a")),
        ..Query::default()
    };
    assert_eq!(paths(prefix), ["/memories/a/1.md", "/memories/a/3.md"]);
    let since = Query {
        since: Some(middle),
        ..Query::default()
    };
    assert_eq!(paths(since), ["/memories/a/3.md"]);
    let until = Query {
        until: Some(middle),
        ..Query::default()
    };
    assert_eq!(paths(until), ["/memories/a/1.md", "/memories/b/2.md"]);
    let actor = Query {
        actor: Some("t2".into()),
        ..Query::default()
    };
    assert_eq!(paths(actor), ["/memories/b/2.md"]);
    let label = Query {
        actor: Some("agent-1".into()),
        ..Query::default()
    };
    assert_eq!(paths(label).len(), 3);
    let one = h.versions(&Query::default()).expect("versions")[1].clone();
    assert_eq!(h.version(one.id).expect("show").clone_record(), one);
    assert!(h.version(9_999).is_err());
}

/// Diff two versions, revert a file (a new version), restore a prefix or
/// the whole store to a point in time.
pub fn history_diff_revert_restore(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let tool = MemoryTool::new(open(store, log));
    call(
        &tool,
        "t1",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "keep\nold\n"}),
    );
    call(
        &tool,
        "t2",
        json!({"command": "create", "path": "/memories/b.md", "file_text": "b\n"}),
    );
    std::thread::sleep(Duration::from_millis(5));
    let clean = SystemTime::now();
    std::thread::sleep(Duration::from_millis(5));
    call(
        &tool,
        "t3",
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "old", "new_str": "new"}),
    );
    call(
        &tool,
        "t4",
        json!({"command": "delete", "path": "/memories/b.md"}),
    );
    call(
        &tool,
        "t5",
        json!({"command": "create", "path": "/memories/c.md", "file_text": "c\n"}),
    );
    let h = tool.store();
    let v = all(h);
    let diff = h.diff(v[0].id, Some(v[2].id)).expect("diff");
    let expected = format!(
        "--- /memories/a.md@v{}\n+++ /memories/a.md@v{}\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n",
        v[0].id, v[2].id
    );
    assert_eq!(diff, expected);
    let to_now = h.diff(v[0].id, None).expect("diff to now");
    assert!(to_now.contains("+++ /memories/a.md (now)\n"), "{to_now}");
    // Revert one file: a new version with the old content.
    let reverted = h.revert(v[0].id).expect("revert").expect("a new version");
    assert_eq!(read(h, "/memories/a.md").as_deref(), Some("keep\nold\n"));
    let rv = h.version(reverted).expect("show");
    assert_eq!(rv.op, ChangeOp::Modified);
    assert_eq!(rv.note, Some(format!("revert to v{}", v[0].id)));
    assert_eq!(h.revert(v[0].id).expect("again"), None, "nothing to do");
    // Revert a delete: the content comes back.
    h.revert(v[3].id).expect("undelete");
    assert_eq!(read(h, "/memories/b.md").as_deref(), Some("b\n"));
    h.delete(&p("/memories/b.md")).expect("delete again");
    h.write(&p("/memories/a.md"), b"changed\n", WriteMode::Overwrite)
        .expect("write");
    // Restore a prefix: only a.md.
    let r = h
        .restore(clean, Some(&p("/memories/a.md")))
        .expect("restore");
    assert_eq!(r.written, ["/memories/a.md"]);
    assert!(r.deleted.is_empty() && r.failed.is_empty());
    assert_eq!(read(h, "/memories/b.md"), None);
    // Restore everything.
    let r = h.restore(clean, None).expect("restore");
    assert_eq!(r.written, ["/memories/b.md"]);
    assert_eq!(r.deleted, ["/memories/c.md"]);
    assert_eq!(read(h, "/memories/a.md").as_deref(), Some("keep\nold\n"));
    assert_eq!(read(h, "/memories/b.md").as_deref(), Some("b\n"));
    assert_eq!(read(h, "/memories/c.md"), None);
    let last = all(h);
    assert!(
        last.last()
            .and_then(|v| v.note.as_deref())
            .is_some_and(|n| n.starts_with("restore to ")),
        "{last:?}"
    );
}

/// Redaction erases content and keeps the record; pruning by count and
/// by age keeps the latest version of every live file.
pub fn history_redact_and_prune(store: &dyn MemoryStore, log: OpenLog<'_>) {
    let tool = MemoryTool::new(open(store, log));
    call(
        &tool,
        "t1",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "secret\n"}),
    );
    for i in 0..4 {
        call(
            &tool,
            "t",
            json!({"command": "create", "path": format!("/memories/n{i}.md"), "file_text": "n"}),
        );
    }
    for _ in 0..3 {
        call(
            &tool,
            "t",
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "x"}),
        );
    }
    call(
        &tool,
        "t",
        json!({"command": "delete", "path": "/memories/n0.md"}),
    );
    let h = tool.store();
    let first = all(h)[0].clone();
    h.redact(first.id).expect("redact");
    let shown = h.version(first.id).expect("show");
    assert!(shown.redacted && shown.content.is_none());
    assert_eq!(
        (shown.sha256.as_str(), shown.size),
        (first.sha256.as_str(), first.size)
    );
    assert!(h.redact(9_999).is_err());
    assert!(h.revert(first.id).is_err(), "nothing to revert to");
    // Two per file: a.md keeps its last two, n0.md (deleted) its two.
    let removed = h
        .prune(&Retention {
            keep_per_file: Some(2),
            max_age: None,
        })
        .expect("prune");
    assert_eq!(removed.len(), 2);
    assert_eq!(all(h).len(), 7);
    // By age: everything old goes but the latest version of live files.
    let removed = h
        .prune(&Retention {
            keep_per_file: None,
            max_age: Some(Duration::ZERO),
        })
        .expect("prune");
    assert_eq!(removed.len(), 3);
    let left: Vec<String> = all(h).into_iter().map(|v| v.path).collect();
    assert_eq!(
        left,
        [
            "/memories/n1.md",
            "/memories/n2.md",
            "/memories/n3.md",
            "/memories/a.md"
        ]
    );
    // Still consistent: a reopen has nothing to repair.
    let again = open(store, log);
    assert!(
        again.repair_report().is_clean(),
        "{}",
        again.repair_report()
    );
}

/// Opening repairs: a version whose change never happened (a crash
/// between the two) is dropped; a change made without a version is
/// recorded; files present when history is turned on get a baseline.
pub fn history_repair_on_open(store: &dyn MemoryStore, log: OpenLog<'_>) {
    store
        .write(&p("/memories/before.md"), b"before", WriteMode::Create)
        .expect("write");
    let h = open(store, log);
    let base = all(&h);
    assert_eq!(h.repair_report().recorded.len(), 1);
    assert_eq!(base[0].op, ChangeOp::Created);
    assert!(
        base[0]
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("baseline"))
    );
    assert!(open(store, log).repair_report().is_clean());
    // A crash after the version, before the change: a write-ahead version
    // with no change behind it.
    let mut ghost = base[0].clone();
    ghost.op = ChangeOp::Modified;
    ghost.content = Some(b"never written".to_vec());
    ghost.sha256 = sha256_hex(b"never written");
    let mut batch = [ghost];
    log().append(&mut batch).expect("append");
    // A change behind the history's back.
    store
        .write(&p("/memories/outside.md"), b"outside", WriteMode::Create)
        .expect("write");
    let h = open(store, log);
    assert_eq!(h.repair_report().dropped, [batch[0].id]);
    assert_eq!(h.repair_report().recorded.len(), 1);
    let v = all(&h);
    let last = v.last().expect("a version");
    assert_eq!(
        (last.op, last.path.as_str()),
        (ChangeOp::Created, "/memories/outside.md")
    );
    assert!(v.iter().all(|x| x.id != batch[0].id));
    assert!(open(store, log).repair_report().is_clean());
}

/// Everything one actor did (a consolidation run, a model's session) is
/// undone by one command: files it created removed, edited ones put back,
/// renamed ones moved back, deleted ones brought back; a file another
/// actor changed since is left as it is, and said. The versions API does
/// it, so the same holds on every store.
pub fn history_revert_changes_undoes_one_actor(store: &dyn MemoryStore, log: OpenLog<'_>) {
    use crate::history::Versions as _;
    let agent = MemoryTool::new(open(store, log));
    for (id, path, text) in [
        ("a1", "/memories/keep.md", "keep\n"),
        ("a2", "/memories/edit.md", "v1\n"),
        ("a3", "/memories/move.md", "m\n"),
        ("a4", "/memories/gone.md", "g\n"),
        ("a5", "/memories/later.md", "l1\n"),
    ] {
        call(
            &agent,
            id,
            json!({"command": "create", "path": path, "file_text": text}),
        );
    }
    let dream = MemoryTool::new(
        HistoryStore::open(store, log())
            .expect("open")
            .with_label("dream:7"),
    );
    for (id, input) in [
        (
            "d1",
            json!({"command": "str_replace", "path": "/memories/edit.md", "old_str": "v1", "new_str": "v2"}),
        ),
        (
            "d2",
            json!({"command": "rename", "old_path": "/memories/move.md", "new_path": "/memories/moved.md"}),
        ),
        (
            "d3",
            json!({"command": "delete", "path": "/memories/gone.md"}),
        ),
        (
            "d4",
            json!({"command": "create", "path": "/memories/new.md", "file_text": "n\n"}),
        ),
        (
            "d5",
            json!({"command": "str_replace", "path": "/memories/later.md", "old_str": "l1", "new_str": "l2"}),
        ),
    ] {
        call(&dream, id, input);
    }
    call(
        &agent,
        "a6",
        json!({"command": "str_replace", "path": "/memories/later.md", "old_str": "l2", "new_str": "l3"}),
    );
    let h = agent.store();
    let by = Query {
        actor: Some("dream:7".into()),
        ..Query::default()
    };
    let report = h.revert_changes(&by, "revert of dream:7").expect("revert");
    let mut reverted = report.reverted.clone();
    reverted.sort();
    assert_eq!(
        reverted,
        [
            ("/memories/edit.md".to_owned(), "rewritten"),
            ("/memories/gone.md".to_owned(), "restored"),
            ("/memories/move.md".to_owned(), "moved back"),
            ("/memories/new.md".to_owned(), "deleted"),
        ]
    );
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].0, "/memories/later.md");
    assert_eq!(read(h, "/memories/edit.md").as_deref(), Some("v1\n"));
    assert_eq!(read(h, "/memories/move.md").as_deref(), Some("m\n"));
    assert_eq!(read(h, "/memories/moved.md"), None);
    assert_eq!(read(h, "/memories/gone.md").as_deref(), Some("g\n"));
    assert_eq!(read(h, "/memories/new.md"), None);
    assert_eq!(read(h, "/memories/later.md").as_deref(), Some("l3\n"));
    assert_eq!(read(h, "/memories/keep.md").as_deref(), Some("keep\n"));
    // The revert's changes are versions of their own, noted.
    let noted = all(h)
        .into_iter()
        .filter(|v| v.note.as_deref() == Some("revert of dream:7"))
        .count();
    assert!(noted >= 4, "{noted} versions noted");
    // A call's changes alone.
    call(
        &agent,
        "a7",
        json!({"command": "create", "path": "/memories/once.md", "file_text": "o\n"}),
    );
    let by_call = Query {
        call: Some("a7".into()),
        ..Query::default()
    };
    let report = h
        .revert_changes(&by_call, "revert of call a7")
        .expect("revert");
    assert_eq!(
        report.reverted,
        [("/memories/once.md".to_owned(), "deleted")]
    );
    assert_eq!(read(h, "/memories/once.md"), None);
}
