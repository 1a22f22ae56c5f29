//! Contract cases on the store primitives themselves: write modes,
//! rename and delete, list and stat, `update`, concurrent edits and files
//! over the size limit.

use serde_json::json;

use super::helpers::{
    bytes, create, err, exists, insert, ok, path, put, put_unless_refused, replace, text_of, tool,
    view, view_range,
};
use crate::path::MemoryPath;
use crate::store::{
    Abort, EntryKind, MemoryStore, MemoryStoreExt as _, Quota, StoreError, Updated, WriteMode,
};

fn store_err<T: std::fmt::Debug>(result: Result<T, StoreError>) -> StoreError {
    match result {
        Ok(v) => panic!("expected a store error, got {v:?}"),
        Err(e) => e,
    }
}

/// `Create` is create-if-absent, `Overwrite` never replaces a directory,
/// `Update` is a compare-and-swap on the version read.
pub fn store_write_modes(store: &dyn MemoryStore) {
    let a = path("/memories/a.txt");
    assert!(store.write(&a, b"one", WriteMode::Create).is_ok());
    assert!(matches!(
        store_err(store.write(&a, b"two", WriteMode::Create)),
        StoreError::AlreadyExists { .. }
    ));
    let first = store.read(&a, u64::MAX).map(|f| f.version).ok();
    let again = store.read(&a, u64::MAX).map(|f| f.version).ok();
    assert!(
        first.is_some() && first == again,
        "an unchanged file keeps its version"
    );
    assert!(store.write(&a, b"two", WriteMode::Overwrite).is_ok());
    let second = store.read(&a, u64::MAX).map(|f| f.version).ok();
    assert_ne!(first, second, "a write changes the version");
    if let Some(stale) = first {
        assert!(matches!(
            store_err(store.write(&a, b"lost", WriteMode::Update(stale))),
            StoreError::Conflict { .. }
        ));
    }
    assert_eq!(bytes(store, "/memories/a.txt"), b"two");
    if let Some(current) = second {
        assert!(
            store
                .write(&a, b"three", WriteMode::Update(current))
                .is_ok()
        );
    }
    assert_eq!(bytes(store, "/memories/a.txt"), b"three");
    let missing = path("/memories/missing.txt");
    if let Some(v) = second {
        assert!(matches!(
            store_err(store.write(&missing, b"x", WriteMode::Update(v))),
            StoreError::NotFound { .. }
        ));
    }
    assert!(!exists(store, "/memories/missing.txt"));
    match store_err(store.write(&path("/memories/a.txt/b/c"), b"x", WriteMode::Create)) {
        StoreError::ParentNotDirectory { parent, .. } => {
            assert_eq!(parent.normalized(), "/memories/a.txt")
        }
        other => panic!("expected ParentNotDirectory, got {other:?}"),
    }
    put(store, "/memories/d/x", b"x");
    assert!(matches!(
        store_err(store.write(&path("/memories/d"), b"x", WriteMode::Overwrite)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.write(&path("/memories/d"), b"x", WriteMode::Create)),
        StoreError::AlreadyExists { .. }
    ));
    assert!(matches!(
        store_err(store.read(&path("/memories/d"), u64::MAX)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.read(&path("/memories/zzz"), u64::MAX)),
        StoreError::NotFound { .. }
    ));
}

/// `rename` never overwrites; `delete` is recursive; misses are `NotFound`.
pub fn store_rename_and_delete(store: &dyn MemoryStore) {
    put(store, "/memories/a", b"a");
    put(store, "/memories/b", b"b");
    assert!(matches!(
        store_err(store.rename(&path("/memories/a"), &path("/memories/b"))),
        StoreError::AlreadyExists { .. }
    ));
    assert!(matches!(
        store_err(store.rename(&path("/memories/zz"), &path("/memories/c"))),
        StoreError::NotFound { .. }
    ));
    assert_eq!(bytes(store, "/memories/a"), b"a");
    assert_eq!(bytes(store, "/memories/b"), b"b");
    assert!(
        store
            .rename(&path("/memories/a"), &path("/memories/n/c"))
            .is_ok()
    );
    assert_eq!(bytes(store, "/memories/n/c"), b"a");
    assert!(store.delete(&path("/memories/n")).is_ok());
    assert!(!exists(store, "/memories/n/c"));
    assert!(matches!(
        store_err(store.delete(&path("/memories/n"))),
        StoreError::NotFound { .. }
    ));
}

/// `rename` refuses a move that would put an entry below the source at a
/// path longer than the destination's [`limit`](MemoryPath::limit)
/// (1,024 bytes: SPEC §2, every entry a store holds has a path the model
/// can name) with [`StoreError::PathTooLong`], and moves nothing; a move
/// that stays within it succeeds, up to exactly the limit.
pub fn store_rename_refuses_paths_past_the_limit(store: &dyn MemoryStore) {
    // /memories/d + nine 100-byte directories + a 103-byte name: 1,024
    // bytes (components of at most 127 bytes, which every store takes,
    // an encrypted one included).
    let dirs = ["a", "b", "c", "e", "g", "h", "i", "j", "k"]
        .map(|c| c.repeat(100))
        .join("/");
    let name = format!("{}.md", "x".repeat(100));
    let deep = format!("/memories/d/{dirs}/{name}");
    assert_eq!(deep.len(), crate::path::MAX_PATH_BYTES);
    put(store, &deep, b"deep");
    // One byte deeper: refused, nothing moved.
    match store_err(store.rename(&path("/memories/d"), &path("/memories/dd"))) {
        StoreError::PathTooLong { limit, .. } => assert_eq!(limit, crate::path::MAX_PATH_BYTES),
        other => panic!("expected PathTooLong, got {other:?}"),
    }
    assert_eq!(bytes(store, &deep), b"deep");
    assert!(!exists(store, "/memories/dd"));
    // Into a deeper directory: refused too.
    put(store, "/memories/n/keep", b"k");
    assert!(matches!(
        store_err(store.rename(&path("/memories/d"), &path("/memories/n/d"))),
        StoreError::PathTooLong { .. }
    ));
    assert_eq!(bytes(store, &deep), b"deep");
    assert!(!exists(store, "/memories/n/d"));
    // The same length: exactly the limit, allowed.
    assert!(
        store
            .rename(&path("/memories/d"), &path("/memories/f"))
            .is_ok()
    );
    assert_eq!(bytes(store, &format!("/memories/f/{dirs}/{name}")), b"deep");
    // A file moved deeper is checked by its own path, already parsed.
    assert!(
        store
            .rename(&path("/memories/n/keep"), &path("/memories/n/m/keep"))
            .is_ok()
    );
}

/// `list` shows direct children with hidden names; `stat` reports kinds,
/// sizes and `None` below a file; `total_size` counts every file.
pub fn store_list_and_stat(store: &dyn MemoryStore) {
    put(store, "/memories/.h", b"hh");
    put(store, "/memories/d/f", b"fff");
    put(store, "/memories/g", b"g");
    let before = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
    let listed = store.list(&MemoryPath::root());
    if let Ok(entries) = &listed {
        for e in entries.iter().filter(|e| e.kind == EntryKind::File) {
            assert!(
                e.modified.is_some_and(|m| m >= before),
                "{} has no recent modification time",
                e.name
            );
        }
    }
    let mut names: Vec<(String, EntryKind, u64)> = match listed {
        Ok(entries) => entries
            .into_iter()
            .map(|e| (e.name, e.kind, e.len))
            .collect(),
        Err(e) => panic!("list failed: {e}"),
    };
    names.sort();
    assert_eq!(
        names,
        vec![
            (".h".to_owned(), EntryKind::File, 2),
            ("d".to_owned(), EntryKind::Directory, 0),
            ("g".to_owned(), EntryKind::File, 1),
        ]
    );
    assert!(matches!(
        store_err(store.list(&path("/memories/g"))),
        StoreError::NotADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.list(&path("/memories/none"))),
        StoreError::NotFound { .. }
    ));
    let stat = |p: &str| store.stat(&path(p)).ok().flatten().map(|m| (m.kind, m.len));
    let written = store
        .stat(&path("/memories/g"))
        .ok()
        .flatten()
        .and_then(|m| m.modified);
    assert!(
        written.is_some_and(|m| m >= before),
        "stat reports when a file was written"
    );
    assert_eq!(stat("/memories"), Some((EntryKind::Directory, 0)));
    assert_eq!(stat("/memories/d/f"), Some((EntryKind::File, 3)));
    assert_eq!(stat("/memories/g/x"), None);
    assert_eq!(store.total_size().ok(), Some(6));
}

/// Concurrent edits of one file: every edit reported as a success is in
/// the final file, and nothing else is.
pub fn concurrent_edits_are_never_lost(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/log.txt", "");
    let threads = 4;
    let per_thread = 25;
    let succeeded: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let t = &t;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for j in 0..per_thread {
                        let line = format!("t{i}-{j}");
                        if !t.dispatch(&insert("/memories/log.txt", 0, &line)).is_error {
                            mine.push(line);
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let text = String::from_utf8(bytes(store, "/memories/log.txt")).unwrap_or_default();
    let mut got: Vec<&str> = text.lines().collect();
    let mut want: Vec<&str> = succeeded.iter().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(
        got, want,
        "the file holds exactly the edits reported as successful"
    );
    assert!(!want.is_empty(), "some edits succeed");
}

/// A file over the size limit (placed by someone else) can be viewed in
/// ranges, but edits refuse it before reading it whole; `read` with a limit
/// reports [`StoreError::TooLarge`].
pub fn oversized_files_are_viewed_but_never_read_whole_for_edits(store: &dyn MemoryStore) {
    // 17 bytes a line; numbered, 23 characters (24 with the newline), so
    // 16,000 characters hold 666 lines.
    let line = "0123456789abcdef\n";
    let big: String = line.repeat(70_000); // 1,190,000 bytes, 70,000 lines
    if !put_unless_refused(store, "/memories/big.txt", big.as_bytes()) {
        return;
    }
    let t = tool(store);
    ok(
        &t,
        view_range("/memories/big.txt", json!([69_999, -1])),
        "Here's the content of /memories/big.txt with line numbers:\n 69999\t0123456789abcdef\n 70000\t0123456789abcdef",
    );
    let view = t.dispatch(&view("/memories/big.txt"));
    assert!(!view.is_error);
    assert!(
        text_of(&view).ends_with(
            "[Output truncated: showing lines 1-666 of 70000. Use view_range to see the rest.]"
        ),
        "{}",
        &text_of(&view)[text_of(&view).len().saturating_sub(200)..]
    );
    err(
        &t,
        replace("/memories/big.txt", "0123", Some("x")),
        "Error: File /memories/big.txt is 1190000 bytes, over the limit of 1048576 bytes, so it cannot be edited",
    );
    err(
        &t,
        insert("/memories/big.txt", 0, "x"),
        "Error: File /memories/big.txt is 1190000 bytes, over the limit of 1048576 bytes, so it cannot be edited",
    );
    match store.read(&path("/memories/big.txt"), 1000) {
        Err(StoreError::TooLarge { len, .. }) => assert_eq!(len, 1_190_000),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(bytes(store, "/memories/big.txt").len(), 1_190_000);
}

/// `update` hands the change the current bytes and writes what it returns,
/// or nothing on [`Abort`](crate::store::Abort); it refuses missing files,
/// directories and files over the limit without calling the change.
pub fn store_update_writes_or_aborts(store: &dyn MemoryStore) {
    use crate::store::{Abort, Updated};
    put(store, "/memories/u.md", b"one");
    let p = path("/memories/u.md");
    let mut seen = Vec::new();
    let done = store.update(&p, 100, &mut |old: &[u8]| {
        seen.push(old.to_vec());
        Ok([old, b" two"].concat())
    });
    assert_eq!(done.ok(), Some(Updated::Written(b"one two".to_vec())));
    assert_eq!(seen.last().map(Vec::as_slice), Some(&b"one"[..]));
    assert_eq!(bytes(store, "/memories/u.md"), b"one two");
    let aborted = store.update(&p, 100, &mut |_: &[u8]| Err(Abort));
    assert_eq!(aborted.ok(), Some(Updated::Aborted));
    assert_eq!(bytes(store, "/memories/u.md"), b"one two");
    let mut called = false;
    let mut never = |_: &[u8]| {
        called = true;
        Err(Abort)
    };
    assert!(matches!(
        store_err(store.update(&path("/memories/none"), 100, &mut never)),
        StoreError::NotFound { .. }
    ));
    put(store, "/memories/d/x", b"x");
    assert!(matches!(
        store_err(store.update(&path("/memories/d"), 100, &mut never)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.update(&p, 3, &mut never)),
        StoreError::TooLarge { .. }
    ));
    assert!(
        !called,
        "the change is not called when there is nothing to change"
    );
}

/// `write_opts` and `update_opts` with a quota: a write that would take the files
/// below the quota's scope (hidden ones included, nothing outside it) over
/// its limit is [`StoreError::StoreFull`] with the total it would have
/// made, and writes nothing, not even a parent directory. The bytes of a
/// replaced file are subtracted. With `Create`, an existing entry is
/// "already exists" first; the quota comes before the write's other checks.
pub fn store_quota_is_checked_with_the_write(store: &dyn MemoryStore) {
    let root = MemoryPath::root();
    let q = |max_bytes| Quota {
        scope: &root,
        max_bytes,
    };
    let full =
        |result: Result<crate::store::Version, StoreError>, at: &str, want: u64| match store_err(
            result,
        ) {
            StoreError::StoreFull { path, total, limit } => {
                assert_eq!(path.normalized(), at);
                assert_eq!((total, limit), (want, 10));
            }
            other => panic!("expected StoreFull, got {other:?}"),
        };
    put(store, "/memories/a/one.txt", b"12345");
    put(store, "/memories/.hidden", b"1");
    let two = path("/memories/a/two.txt");
    assert!(
        store
            .write_within(&two, b"12", WriteMode::Create, q(10))
            .is_ok()
    );
    // 8 bytes held; 3 more would be 11.
    let three = path("/memories/b/three.txt");
    full(
        store.write_within(&three, b"123", WriteMode::Create, q(10)),
        "/memories/b/three.txt",
        11,
    );
    assert!(!exists(store, "/memories/b/three.txt"));
    assert!(
        !exists(store, "/memories/b"),
        "a refused write made a parent"
    );
    assert_eq!(store.total_size().ok(), Some(8));
    // Exactly at the limit is allowed.
    assert!(
        store
            .write_within(&three, b"12", WriteMode::Create, q(10))
            .is_ok()
    );
    // Replacing subtracts the old bytes: 10 - 5 + 5 fits, + 6 does not.
    let one = path("/memories/a/one.txt");
    assert!(
        store
            .write_within(&one, b"abcde", WriteMode::Overwrite, q(10))
            .is_ok()
    );
    full(
        store.write_within(&one, b"abcdef", WriteMode::Overwrite, q(10)),
        "/memories/a/one.txt",
        11,
    );
    assert_eq!(bytes(store, "/memories/a/one.txt"), b"abcde");
    // "Already exists" comes before the quota; the quota before the rest.
    assert!(matches!(
        store_err(store.write_within(&one, b"123456789012", WriteMode::Create, q(10))),
        StoreError::AlreadyExists { .. }
    ));
    full(
        store.write_within(&path("/memories/a"), b"1", WriteMode::Overwrite, q(10)),
        "/memories/a",
        11,
    );
    full(
        store.write_within(
            &path("/memories/a/one.txt/x"),
            b"1",
            WriteMode::Create,
            q(10),
        ),
        "/memories/a/one.txt/x",
        11,
    );
    assert!(matches!(
        store_err(store.write_within(&path("/memories/a"), b"1", WriteMode::Overwrite, q(99))),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.write_within(
            &path("/memories/a/one.txt/x"),
            b"1",
            WriteMode::Create,
            q(99)
        )),
        StoreError::ParentNotDirectory { .. }
    ));
    // A scope counts the files below it only; it need not exist yet.
    let c = path("/memories/c");
    let in_c = Quota {
        scope: &c,
        max_bytes: 4,
    };
    let c1 = path("/memories/c/x.txt");
    assert!(
        store
            .write_within(&c1, b"1234", WriteMode::Create, in_c)
            .is_ok()
    );
    match store_err(store.write_within(&path("/memories/c/y.txt"), b"1", WriteMode::Create, in_c)) {
        StoreError::StoreFull { total, limit, .. } => assert_eq!((total, limit), (5, 4)),
        other => panic!("expected StoreFull, got {other:?}"),
    }
    assert!(!exists(store, "/memories/c/y.txt"));

    // A capped update: the change runs, then the quota is checked.
    store.delete(&c).ok();
    assert_eq!(store.total_size().ok(), Some(10));
    let mut calls = 0;
    let mut grow = |data: &[u8]| {
        calls += 1;
        Ok([data, b"+"].concat())
    };
    match store.update_within(&one, u64::MAX, q(10), &mut grow) {
        Err(StoreError::StoreFull { path, total, limit }) => {
            assert_eq!(path.normalized(), "/memories/a/one.txt");
            assert_eq!((total, limit), (11, 10));
        }
        other => panic!("expected StoreFull, got {other:?}"),
    }
    assert!(calls >= 1);
    assert_eq!(bytes(store, "/memories/a/one.txt"), b"abcde");
    let mut shrink = |data: &[u8]| Ok(data[1..].to_vec());
    assert_eq!(
        store.update_within(&one, u64::MAX, q(10), &mut shrink).ok(),
        Some(Updated::Written(b"bcde".to_vec()))
    );
    let mut grow = |data: &[u8]| Ok([data, b"+"].concat());
    assert_eq!(
        store.update_within(&one, u64::MAX, q(10), &mut grow).ok(),
        Some(Updated::Written(b"bcde+".to_vec()))
    );
    let mut never = |_: &[u8]| Err(Abort);
    assert_eq!(
        store.update_within(&one, u64::MAX, q(0), &mut never).ok(),
        Some(Updated::Aborted)
    );
    assert!(matches!(
        store.update_within(&path("/memories/none.txt"), u64::MAX, q(99), &mut never),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(store.total_size().ok(), Some(10));
}

/// `DeleteIf::FileWhere`: removes a file only if it is still a file that the
/// predicate accepts at that instant.
pub fn store_delete_file_if_decides_at_the_instant(store: &dyn MemoryStore) {
    put(store, "/memories/d/f.txt", b"abc");
    let f = path("/memories/d/f.txt");
    let mut seen = None;
    let mut no = |m: &crate::store::Metadata| {
        seen = Some((m.kind, m.len));
        false
    };
    assert_eq!(store.delete_file_if(&f, &mut no).ok(), Some(false));
    assert_eq!(seen, Some((EntryKind::File, 3)));
    assert!(exists(store, "/memories/d/f.txt"));
    let mut yes = |_: &crate::store::Metadata| true;
    for other in ["/memories/d", "/memories/missing.txt", "/memories"] {
        assert_eq!(
            store.delete_file_if(&path(other), &mut yes).ok(),
            Some(false)
        );
    }
    assert!(exists(store, "/memories/d"));
    let mut three = |m: &crate::store::Metadata| m.kind == EntryKind::File && m.len == 3;
    assert_eq!(store.delete_file_if(&f, &mut three).ok(), Some(true));
    assert!(!exists(store, "/memories/d/f.txt"));
    assert!(exists(store, "/memories/d"), "only the file is removed");
}

/// `list_tree`, where a store answers it, holds what `list` gives for every
/// directory below, and no more; below a directory that is missing or a
/// file it fails as `list` does. (A store may answer `None`: the walks
/// then list each directory.)
pub fn store_list_tree_agrees_with_list(store: &dyn MemoryStore) {
    put(store, "/memories/.h", b"hh");
    put(store, "/memories/g", b"g");
    put(store, "/memories/a/x", b"xx");
    put(store, "/memories/a/b/y", b"yyy");
    put(store, "/memories/a/b/c/z", b"zzzz");
    put(store, "/memories/e/f", b"f");
    assert!(store.delete(&path("/memories/e/f")).is_ok()); // e: empty
    let sorted = |mut v: Vec<crate::store::DirEntry>| {
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    };
    let mut answered = false;
    for top in ["/memories", "/memories/a", "/memories/a/b"] {
        let top = path(top);
        let mut tree = match store.list_tree(&top) {
            Ok(Some(tree)) => tree,
            Ok(None) => continue,
            Err(e) => panic!("list_tree {} failed: {e}", top.normalized()),
        };
        answered = true;
        let mut dirs = vec![(String::new(), top.clone())];
        while let Some((rel, dir)) = dirs.pop() {
            let listed = match store.list(&dir) {
                Ok(entries) => sorted(entries),
                Err(e) => panic!("list {} failed: {e}", dir.normalized()),
            };
            assert_eq!(
                sorted(tree.take(&rel)),
                listed,
                "list_tree of {} at {}",
                top.normalized(),
                dir.normalized()
            );
            for e in listed.iter().filter(|e| e.kind == EntryKind::Directory) {
                let Some(sub) = dir.join(&e.name) else {
                    continue;
                };
                let rel = if rel.is_empty() {
                    e.name.clone()
                } else {
                    format!("{rel}/{}", e.name)
                };
                dirs.push((rel, sub));
            }
        }
        assert!(
            tree.is_empty(),
            "list_tree of {} holds more",
            top.normalized()
        );
    }
    if answered {
        assert!(matches!(
            store.list_tree(&path("/memories/nope")),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.list_tree(&path("/memories/g")),
            Err(StoreError::NotADirectory { .. })
        ));
    }
}
