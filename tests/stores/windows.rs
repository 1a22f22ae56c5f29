//! The filesystem store on Windows: reparse points (symbolic links and
//! junctions) planted in the root or swapped in during calls never lead a
//! command outside; names Windows cannot store are refused with a reason;
//! names differing only in case are one entry. The Windows counterparts of
//! `tests/stores/filesystem.rs` and `tests/stores/filesystem_attacks_and_load.rs` (Unix).
//!
//! Creating a symbolic link needs a privilege (or Developer Mode); where it
//! is missing the link is made as a junction (`mklink /J`), and where
//! neither can be made the test says so and checks nothing more.
#![cfg(windows)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use claude_memory::{FilesystemStore, MemoryTool, ToolResult};
use serde_json::{Value, json};

fn call(tool: &MemoryTool<FilesystemStore>, input: Value) -> ToolResult {
    tool.dispatch(&input)
}

fn text(r: &ToolResult) -> String {
    r.text().unwrap_or_default().to_owned()
}

/// Every file below `dir` (not following links) with its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = fs::symlink_metadata(e.path()).expect("meta");
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                out.insert(e.path(), fs::read(e.path()).unwrap_or_default());
            }
        }
    }
    out
}

/// A directory link at `link` to `target`: a symbolic link, or a junction
/// where symbolic links need a privilege this process lacks.
/// Only a link Windows itself reports as a reparse point counts (Wine 8
/// "creates" directory links no Win32 call can then see).
fn dir_link(target: &Path, link: &Path) -> bool {
    use std::os::windows::fs::MetadataExt;
    let visible = || fs::symlink_metadata(link).is_ok_and(|m| m.file_attributes() & 0x400 != 0);
    if std::os::windows::fs::symlink_dir(target, link).is_ok() && visible() {
        return true;
    }
    remove_link(link);
    std::process::Command::new("cmd")
        .args(["/C", "mklink", "/J"])
        .arg(link)
        .arg(target)
        .output()
        .is_ok_and(|o| o.status.success())
        && visible()
}

fn remove_link(link: &Path) {
    let _ = fs::remove_dir(link).or_else(|_| fs::remove_file(link));
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    fs::create_dir_all(&root).expect("root");
    fs::create_dir_all(outside.join("sub")).expect("outside");
    fs::write(outside.join("secret.md"), "outside secret\n").expect("secret");
    fs::write(outside.join("sub").join("x.md"), "x\n").expect("x");
    Setup {
        _dir: dir,
        root,
        outside,
    }
}

#[test]
fn planted_links_are_refused_and_never_followed() {
    let s = setup();
    let tool = MemoryTool::new(FilesystemStore::open(&s.root).expect("open"));
    if !dir_link(&s.outside, &s.root.join("link")) {
        eprintln!("neither a symbolic link nor a junction could be made: skipped");
        return;
    }
    let before = snapshot(&s.outside);
    for input in [
        json!({"command": "view", "path": "/memories/link/secret.md"}),
        json!({"command": "view", "path": "/memories/link"}),
        json!({"command": "create", "path": "/memories/link/new.md", "file_text": "x"}),
        json!({"command": "str_replace", "path": "/memories/link/secret.md",
               "old_str": "secret", "new_str": "changed"}),
        json!({"command": "insert", "path": "/memories/link/secret.md",
               "insert_line": 0, "insert_text": "x\n"}),
        json!({"command": "rename", "old_path": "/memories/link/secret.md",
               "new_path": "/memories/stolen.md"}),
        json!({"command": "delete", "path": "/memories/link/sub"}),
    ] {
        let r = call(&tool, input.clone());
        assert!(r.is_error, "{input}: {}", text(&r));
        assert!(!text(&r).contains("outside secret"), "{input}");
    }
    // The listing leaves the link out; deleting it removes the link only.
    let r = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert!(!text(&r).contains("link"), "{}", text(&r));
    let r = call(
        &tool,
        json!({"command": "delete", "path": "/memories/link"}),
    );
    assert!(!r.is_error, "{}", text(&r));
    assert!(fs::symlink_metadata(s.root.join("link")).is_err());
    assert_eq!(snapshot(&s.outside), before);
}

/// A thread swaps a directory in the root for a link to an outside
/// directory and back, as fast as it can, while commands run through it.
#[test]
fn links_swapped_in_during_calls_never_lead_outside() {
    let s = setup();
    let probe = s.root.join("probe");
    if !dir_link(&s.outside, &probe) {
        eprintln!("neither a symbolic link nor a junction could be made: skipped");
        return;
    }
    remove_link(&probe);
    let tool = Arc::new(MemoryTool::new(
        FilesystemStore::builder(&s.root)
            .durable(false)
            .open()
            .expect("open"),
    ));
    let before = snapshot(&s.outside);
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (root, outside) = (s.root.clone(), s.outside.clone());
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            let d = root.join("d");
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::create_dir(&d);
                let _ = fs::write(d.join("secret.md"), "inside\n");
                std::thread::yield_now();
                let _ = fs::remove_dir_all(&d);
                remove_link(&d);
                if dir_link(&outside, &d) {
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::yield_now();
                remove_link(&d);
            }
        })
    };
    let mut leaked = 0;
    for i in 0..300 {
        let name = format!("/memories/d/f{i}.md");
        let answers = [
            call(
                &tool,
                json!({"command": "create", "path": name, "file_text": "new\n"}),
            ),
            call(
                &tool,
                json!({"command": "view", "path": "/memories/d/secret.md"}),
            ),
            call(&tool, json!({"command": "view", "path": "/memories/d"})),
            call(
                &tool,
                json!({"command": "str_replace", "path": "/memories/d/secret.md",
                               "old_str": "secret", "new_str": "changed"}),
            ),
            call(
                &tool,
                json!({"command": "delete", "path": "/memories/d/sub"}),
            ),
            call(
                &tool,
                json!({"command": "delete", "path": "/memories/d/secret.md"}),
            ),
        ];
        leaked += answers
            .iter()
            .filter(|r| text(r).contains("outside secret"))
            .count();
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    remove_link(&s.root.join("d"));
    println!(
        "{} swaps; outside reads: {leaked}",
        swaps.load(Ordering::Relaxed)
    );
    assert_eq!(leaked, 0);
    assert_eq!(
        snapshot(&s.outside),
        before,
        "the outside directory changed"
    );
}

#[test]
fn names_windows_cannot_store_are_refused_with_a_reason() {
    let s = setup();
    let tool = MemoryTool::new(FilesystemStore::open(&s.root).expect("open"));
    for p in [
        "/memories/CON",
        "/memories/aux.md",
        "/memories/a./b.md",
        "/memories/a:b.md",
    ] {
        let r = call(
            &tool,
            json!({"command": "create", "path": p, "file_text": "x"}),
        );
        assert!(r.is_error);
        assert!(
            text(&r).starts_with(&format!("Error: The path {p} is not a valid memory path: ")),
            "{}",
            text(&r)
        );
        let r = call(&tool, json!({"command": "view", "path": p}));
        assert!(r.is_error);
        assert!(!text(&r).contains("os error"), "{}", text(&r));
    }
    let r = call(
        &tool,
        json!({"command": "create", "path": "/memories/ok.md", "file_text": "x"}),
    );
    assert!(!r.is_error);
    let r = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/ok.md",
                                "new_path": "/memories/nul"}),
    );
    assert!(text(&r).contains("not a valid memory path"), "{}", text(&r));
}

/// A crashed writer's temporary files stay through an open (which walks
/// nothing) and go when a listing of their directory finds them.
#[test]
fn leftover_temporary_files_go_when_their_directory_is_listed() {
    let s = setup();
    fs::create_dir_all(s.root.join("a")).expect("dir");
    fs::write(s.root.join(".claude-memory.tmp.99999.1"), "half").expect("temp");
    fs::write(s.root.join("a").join(".claude-memory.tmp.99999.2"), "half").expect("temp");
    fs::write(s.root.join("a").join("keep.md"), "keep").expect("file");
    let tool = MemoryTool::new(FilesystemStore::open(&s.root).expect("open"));
    assert!(s.root.join(".claude-memory.tmp.99999.1").exists());
    let view = call(&tool, json!({"command": "view", "path": "/memories/a"}));
    assert!(!text(&view).contains(".claude-memory"), "{}", text(&view));
    assert!(!s.root.join("a").join(".claude-memory.tmp.99999.2").exists());
    assert!(s.root.join(".claude-memory.tmp.99999.1").exists());
    call(&tool, json!({"command": "view", "path": "/memories"}));
    assert!(!s.root.join(".claude-memory.tmp.99999.1").exists());
    assert!(s.root.join("a").join("keep.md").exists());
}

/// A crash's temporary file under the name a new handle's first write
/// takes (the same pid, reused): the write removes it and succeeds; a
/// directory holding only leftovers is removed as empty.
#[test]
fn leftovers_never_fail_a_write_or_keep_a_directory_from_being_empty() {
    use claude_memory::store::MemoryStoreExt as _;
    let s = setup();
    let reused = s
        .root
        .join(format!(".claude-memory.tmp.{}.0", std::process::id()));
    fs::write(&reused, "half").expect("leftover");
    fs::create_dir_all(s.root.join("e")).expect("dir");
    fs::write(s.root.join("e").join(".claude-memory.tmp.99999.3"), "half").expect("leftover");
    let store = FilesystemStore::open(&s.root).expect("open");
    let e = claude_memory::MemoryPath::parse("/memories/e").expect("path");
    assert_eq!(store.remove_empty_dir(&e).ok(), Some(true));
    assert!(!s.root.join("e").exists());
    let tool = MemoryTool::new(store);
    let made = call(
        &tool,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a"}),
    );
    assert_eq!(text(&made), "File created successfully at: /memories/a.md");
    assert!(!reused.exists());
}

#[test]
fn no_temporary_file_outlives_a_command() {
    let s = setup();
    let tool = MemoryTool::new(FilesystemStore::open(&s.root).expect("open"));
    for i in 0..20 {
        let p = format!("/memories/dir{}/f{i}.md", i % 3);
        call(
            &tool,
            json!({"command": "create", "path": p, "file_text": "a\n"}),
        );
        call(
            &tool,
            json!({"command": "create", "path": p, "file_text": "again\n"}),
        );
        call(
            &tool,
            json!({"command": "str_replace", "path": p, "old_str": "a", "new_str": "b"}),
        );
    }
    let leftovers: Vec<_> = snapshot(&s.root)
        .into_keys()
        .filter(|p| p.to_string_lossy().contains(".claude-memory.tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
