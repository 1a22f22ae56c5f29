//! Filesystem-only behaviour: symbolic links, modes, housekeeping files,
//! containment and what error messages may say.
//! Unix: the Windows equivalents are in `tests/stores/windows.rs`.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use claude_memory::{FilesystemStore, MemoryTool, ToolResult};
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    tool: MemoryTool<FilesystemStore>,
}

/// `base/memories` is the store; `base/outside` holds a secret file.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let base = fs::canonicalize(dir.path()).expect("canonical temp dir");
    let root = base.join("memories");
    let outside = base.join("outside");
    fs::create_dir(&outside).expect("outside dir");
    fs::write(outside.join("secret.txt"), "top secret\n").expect("secret");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open store"));
    Fixture {
        _dir: dir,
        base,
        root,
        outside,
        tool,
    }
}

impl Fixture {
    fn call(&self, input: Value) -> ToolResult {
        self.tool.dispatch(&input)
    }

    #[track_caller]
    fn expect(&self, input: Value, expected: &str, is_error: bool) {
        let result = self.call(input.clone());
        assert_eq!(result.text(), Some(expected), "input: {input}");
        assert_eq!(result.is_error, is_error, "is_error for {input}");
    }

    /// Every file and directory under `base` outside the store, with content.
    fn outside_snapshot(&self) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
        let mut out = BTreeMap::new();
        walk(&self.base, &self.root, &mut out);
        out
    }
}

fn walk(dir: &Path, skip: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
    for entry in fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path == skip {
            continue;
        }
        let meta = fs::symlink_metadata(&path).expect("metadata");
        if meta.is_dir() {
            out.insert(path.clone(), None);
            walk(&path, skip, out);
        } else {
            out.insert(path.clone(), Some(fs::read(&path).expect("read")));
        }
    }
}

fn refused(path: &str) -> String {
    format!("Error: Refusing to follow a symbolic link for {path}")
}

#[test]
fn symlinks_are_refused_for_reads_and_writes() {
    let f = fixture();
    symlink(&f.outside, f.root.join("link_dir")).expect("symlink");
    symlink(f.outside.join("secret.txt"), f.root.join("link_file")).expect("symlink");
    fs::create_dir(f.root.join("real")).expect("dir");
    symlink("../link_dir", f.root.join("real/rel_link")).expect("symlink");
    let before = f.outside_snapshot();

    for p in [
        "/memories/link_dir",
        "/memories/link_dir/secret.txt",
        "/memories/link_file",
        "/memories/real/rel_link/secret.txt",
    ] {
        f.expect(json!({"command": "view", "path": p}), &refused(p), true);
        f.expect(
            json!({"command": "str_replace", "path": p, "old_str": "top", "new_str": "x"}),
            &refused(p),
            true,
        );
        f.expect(
            json!({"command": "insert", "path": p, "insert_line": 0, "insert_text": "x"}),
            &refused(p),
            true,
        );
    }
    for p in [
        "/memories/link_dir/new.txt",
        "/memories/link_file",
        "/memories/real/rel_link/x/y.txt",
    ] {
        f.expect(
            json!({"command": "create", "path": p, "file_text": "x"}),
            &refused(p),
            true,
        );
    }
    f.expect(
        json!({"command": "create", "path": "/memories/a.txt", "file_text": "a"}),
        "File created successfully at: /memories/a.txt",
        false,
    );
    f.expect(
        json!({"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/link_dir/a.txt"}),
        &refused("/memories/link_dir/a.txt"),
        true,
    );
    f.expect(
        json!({"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/link_file"}),
        "Error: The destination /memories/link_file already exists",
        true,
    );
    f.expect(
        json!({"command": "delete", "path": "/memories/link_dir/secret.txt"}),
        &refused("/memories/link_dir/secret.txt"),
        true,
    );
    assert_eq!(
        f.outside_snapshot(),
        before,
        "nothing outside the root changed"
    );
}

#[test]
fn listings_leave_symlinks_out_of_entries_and_sizes() {
    let f = fixture();
    symlink(&f.outside, f.root.join("link_dir")).expect("symlink");
    symlink(f.outside.join("secret.txt"), f.root.join("link_file")).expect("symlink");
    fs::write(f.root.join("real.txt"), "12345").expect("write");
    f.expect(
        json!({"command": "view", "path": "/memories"}),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n5B\t/memories\n5B\t/memories/real.txt",
        false,
    );
}

#[test]
fn delete_and_rename_act_on_the_link_itself() {
    let f = fixture();
    symlink(&f.outside, f.root.join("link_dir")).expect("symlink");
    symlink(f.outside.join("secret.txt"), f.root.join("link_file")).expect("symlink");
    let before = f.outside_snapshot();
    f.expect(
        json!({"command": "delete", "path": "/memories/link_dir"}),
        "Successfully deleted /memories/link_dir",
        false,
    );
    f.expect(
        json!({"command": "rename", "old_path": "/memories/link_file", "new_path": "/memories/sub/moved"}),
        "Successfully renamed /memories/link_file to /memories/sub/moved",
        false,
    );
    assert!(fs::symlink_metadata(f.root.join("link_dir")).is_err());
    assert!(
        fs::symlink_metadata(f.root.join("sub/moved"))
            .expect("moved link")
            .file_type()
            .is_symlink()
    );
    f.expect(
        json!({"command": "delete", "path": "/memories/sub/moved"}),
        "Successfully deleted /memories/sub/moved",
        false,
    );
    assert_eq!(f.outside_snapshot(), before, "link targets untouched");
}

#[test]
fn a_directory_with_links_inside_is_deleted_without_following_them() {
    let f = fixture();
    fs::create_dir_all(f.root.join("d/e")).expect("dirs");
    symlink(&f.outside, f.root.join("d/e/out")).expect("symlink");
    let before = f.outside_snapshot();
    f.expect(
        json!({"command": "delete", "path": "/memories/d"}),
        "Successfully deleted /memories/d",
        false,
    );
    assert!(!f.root.join("d").exists());
    assert_eq!(f.outside_snapshot(), before);
}

#[test]
fn new_files_are_0600_and_new_directories_0700() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("fresh/memories");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert!(
        !tool
            .dispatch(
                &json!({"command": "create", "path": "/memories/a/b/c.txt", "file_text": "x"})
            )
            .is_error
    );
    assert_eq!(mode(&root.join("a")), 0o700);
    assert_eq!(mode(&root.join("a/b")), 0o700);
    assert_eq!(mode(&root.join("a/b/c.txt")), 0o600);
    assert!(!tool.dispatch(&json!({"command": "str_replace", "path": "/memories/a/b/c.txt", "old_str": "x", "new_str": "y"})).is_error);
    assert_eq!(
        mode(&root.join("a/b/c.txt")),
        0o600,
        "an edit keeps the file private"
    );
}

#[test]
fn names_are_stored_as_sent_and_housekeeping_stays_hidden() {
    let f = fixture();
    for (p, text) in [
        ("/memories/100%.md", "p"),
        ("/memories/a%20b.md", "s"),
        ("/memories/日本.md", "j"),
    ] {
        f.expect(
            json!({"command": "create", "path": p, "file_text": text}),
            &format!("File created successfully at: {p}"),
            false,
        );
    }
    f.expect(json!({"command": "insert", "path": "/memories/100%.md", "insert_line": 1, "insert_text": "q"}), "The file /memories/100%.md has been edited.", false);
    assert_eq!(fs::read(f.root.join("100%.md")).expect("file"), b"p\nq\n");
    assert!(f.root.join("a%20b.md").is_file());
    assert!(f.root.join("日本.md").is_file());
    let names: Vec<String> = fs::read_dir(&f.root)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".claude-memory.tmp")),
        "no temporary file left: {names:?}"
    );
    assert!(
        names.iter().any(|n| n == ".claude-memory.lock"),
        "the lock file lives in the root"
    );
    let listing = f.call(json!({"command": "view", "path": "/memories"}));
    assert!(
        !listing
            .text()
            .unwrap_or_default()
            .contains(".claude-memory")
    );
}

#[test]
fn hostile_paths_never_touch_the_outside() {
    let f = fixture();
    fs::create_dir(f.base.join("memories_backup")).expect("sibling");
    fs::write(f.base.join("memories_backup/a"), "keep").expect("sibling file");
    let before = f.outside_snapshot();
    let hostile = [
        "/memories/../outside/secret.txt",
        "/memories/%2e%2e/outside/secret.txt",
        "/memories/%252e%252e/outside/secret.txt",
        "/memories/..%2foutside%2fsecret.txt",
        "/memories_backup/a",
        "/memories/..\\outside\\secret.txt",
        "/memories/\u{0}../outside",
    ];
    for p in hostile {
        for input in [
            json!({"command": "view", "path": p}),
            json!({"command": "create", "path": p, "file_text": "pwned"}),
            json!({"command": "str_replace", "path": p, "old_str": "top", "new_str": "pwned"}),
            json!({"command": "insert", "path": p, "insert_line": 0, "insert_text": "pwned"}),
            json!({"command": "delete", "path": p}),
            json!({"command": "rename", "old_path": p, "new_path": "/memories/stolen"}),
            json!({"command": "rename", "old_path": "/memories/x", "new_path": p}),
        ] {
            let result = f.call(input.clone());
            assert!(result.is_error, "{input} was accepted");
            assert!(
                !result.text().unwrap_or_default().contains("top secret"),
                "{input} leaked content"
            );
        }
    }
    assert_eq!(
        f.outside_snapshot(),
        before,
        "nothing outside the root changed"
    );
    assert!(!f.root.join("stolen").exists());
}

#[test]
fn no_message_contains_a_host_path_or_os_error_text() {
    let f = fixture();
    let root_text = f.root.to_string_lossy().into_owned();
    let base_text = f.base.to_string_lossy().into_owned();
    let mut messages = Vec::new();
    let script = [
        json!({"command": "create", "path": "/memories/a.txt", "file_text": "a"}),
        json!({"command": "create", "path": "/memories/a.txt", "file_text": "a"}),
        json!({"command": "view", "path": "/memories/nope"}),
        json!({"command": "create", "path": "/memories/a.txt/b", "file_text": "a"}),
        json!({"command": "rename", "old_path": "/memories/x", "new_path": "/memories/y"}),
        json!({"command": "delete", "path": "/memories/x"}),
    ];
    for input in &script {
        messages.push(f.call(input.clone()).text().unwrap_or_default().to_owned());
    }
    // Pull the directory out from under the store: real I/O errors follow.
    fs::remove_dir_all(&f.root).expect("remove root");
    let failed = f.call(json!({"command": "create", "path": "/memories/b.txt", "file_text": "b"}));
    assert_eq!(
        failed.text(),
        Some("Error: Could not write (no such file or directory) for /memories/b.txt")
    );
    assert!(failed.is_error);
    messages.push(failed.text().unwrap_or_default().to_owned());
    for input in &script {
        messages.push(f.call(input.clone()).text().unwrap_or_default().to_owned());
    }
    for m in &messages {
        assert!(
            !m.contains(&root_text) && !m.contains(&base_text),
            "host path leaked: {m}"
        );
        assert!(
            !m.contains("os error") && !m.contains("Os {"),
            "OS error text leaked: {m}"
        );
    }
}

#[test]
fn memories_survive_a_new_store_on_the_same_directory() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("open"));
        assert!(
            !tool
                .dispatch(
                    &json!({"command": "create", "path": "/memories/k.md", "file_text": "kept\n"})
                )
                .is_error
        );
    }
    let tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("reopen"));
    let result = tool.dispatch(&json!({"command": "view", "path": "/memories/k.md"}));
    assert_eq!(
        result.text(),
        Some("Here's the content of /memories/k.md with line numbers:\n     1\tkept")
    );
}
