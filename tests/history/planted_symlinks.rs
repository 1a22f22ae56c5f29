//! Issue 30, item 9: a symbolic link planted in a filesystem store as a
//! final component is deleted or renamed itself (SPEC §2, §3), with the
//! history on as with it off. With the history on, both answered
//! "Refusing to follow a symbolic link" and the link stayed for good.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};

use claude_memory::history::{FileLog, HistoryStore, Query};
use claude_memory::{Config, FilesystemStore, MemoryStore, MemoryTool};
use serde_json::json;

/// `base/memories` is the store, holding `a.md` and two links to
/// `base/outside/secret.txt` (`link.md`, `other.md`), one to the outside
/// directory (`linkdir`).
fn planted(base: &Path) -> std::path::PathBuf {
    let root = base.join("memories");
    let outside = base.join("outside");
    fs::create_dir_all(&root).expect("root");
    fs::create_dir_all(&outside).expect("outside");
    fs::write(outside.join("secret.txt"), "top secret\n").expect("secret");
    fs::write(root.join("a.md"), "alpha\n").expect("a.md");
    for name in ["link.md", "other.md"] {
        symlink(outside.join("secret.txt"), root.join(name)).expect("symlink");
    }
    symlink(&outside, root.join("linkdir")).expect("symlink");
    root
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The calls of the attack and what each answered.
fn attack(tool: &MemoryTool<Box<dyn MemoryStore>>) -> Vec<(bool, String)> {
    [
        json!({"command": "delete", "path": "/memories/link.md"}),
        // A longer name and a shorter one (the depth check looks at the
        // source first when the path grows).
        json!({"command": "rename", "old_path": "/memories/other.md", "new_path": "/memories/other-moved.md"}),
        json!({"command": "rename", "old_path": "/memories/other-moved.md", "new_path": "/memories/o.md"}),
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/o.md"}),
        json!({"command": "delete", "path": "/memories/linkdir"}),
        json!({"command": "view", "path": "/memories/o.md"}),
    ]
    .iter()
    .map(|input| {
        let r = tool.dispatch(input);
        (r.is_error, r.text().unwrap_or_default().to_owned())
    })
    .collect()
}

#[test]
fn a_planted_final_symlink_is_deleted_and_renamed_itself_with_history_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut answers = Vec::new();
    // History off, on, and on with a segment limit (the managed profile's
    // depth check looks at the source too).
    for (history, segments) in [(false, None), (true, None), (true, Some(20))] {
        let base = dir.path().join(format!("{history}-{segments:?}"));
        let root = planted(&base);
        let store = FilesystemStore::open(&root).expect("store");
        let store: Box<dyn MemoryStore> = if history {
            Box::new(
                HistoryStore::open(store, FileLog::for_store(&root).expect("log"))
                    .expect("history"),
            )
        } else {
            Box::new(store)
        };
        let mut config = Config::default();
        config.max_path_segments = segments;
        let tool = MemoryTool::with_config(store, config);
        let got = attack(&tool);
        assert_eq!(
            got,
            [
                (false, "Successfully deleted /memories/link.md".to_owned()),
                (
                    false,
                    "Successfully renamed /memories/other.md to /memories/other-moved.md"
                        .to_owned()
                ),
                (
                    false,
                    "Successfully renamed /memories/other-moved.md to /memories/o.md".to_owned()
                ),
                (
                    true,
                    "Error: The destination /memories/o.md already exists".to_owned()
                ),
                (false, "Successfully deleted /memories/linkdir".to_owned()),
                (
                    true,
                    "Error: Refusing to follow a symbolic link for /memories/o.md".to_owned()
                ),
            ],
            "history {history}, segments {segments:?}"
        );
        assert!(!is_link(&root.join("link.md")) && !root.join("link.md").exists());
        assert!(!is_link(&root.join("linkdir")));
        assert!(is_link(&root.join("o.md")), "the link itself was moved");
        assert_eq!(
            fs::read_to_string(base.join("outside/secret.txt")).expect("secret"),
            "top secret\n",
            "the target is untouched"
        );
        assert!(base.join("outside").is_dir());
        answers.push(got);
        if history {
            // A link is no file of the memory: the history has no version
            // of it, and the real file's history is whole.
            let history = HistoryStore::open(
                FilesystemStore::open(&root).expect("store"),
                FileLog::for_store(&root).expect("log"),
            )
            .expect("history");
            let paths: Vec<String> = history
                .versions(&Query::default())
                .expect("records")
                .into_iter()
                .map(|v| v.path)
                .collect();
            assert_eq!(paths, ["/memories/a.md"], "only the baseline of a.md");
        }
    }
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "history on answers as history off"
    );
}

/// The same through the CLI, `--history` on a directory store.
#[cfg(feature = "cli")]
#[test]
fn a_planted_final_symlink_is_deleted_and_renamed_itself_by_the_cli_with_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = planted(dir.path());
    let calls = [
        json!({"type": "tool_use", "id": "t1", "name": "memory", "input": {"command": "delete", "path": "/memories/link.md"}}),
        json!({"type": "tool_use", "id": "t2", "name": "memory", "input": {"command": "rename", "old_path": "/memories/other.md", "new_path": "/memories/other-moved.md"}}),
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .arg("--root")
        .arg(&root)
        .args(["--history", "serve"])
        .env_remove("CLAUDE_MEMORY_STORE")
        .env_remove("CLAUDE_MEMORY_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the CLI");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        for c in &calls {
            writeln!(stdin, "{c}").expect("write");
        }
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Successfully deleted /memories/link.md"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Successfully renamed /memories/other.md to /memories/other-moved.md"),
        "{stdout}"
    );
    assert!(!stdout.contains("symbolic link"), "{stdout}");
    assert!(!is_link(&root.join("link.md")) && !is_link(&root.join("other.md")));
    assert!(is_link(&root.join("other-moved.md")));
    assert!(
        root.join(".claude-memory-history").is_dir(),
        "history is on"
    );
}
