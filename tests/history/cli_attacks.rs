//! Issue 19's attacks on the history commands of the CLI: terminal
//! injection through the model's text and `tool_use` ids, the operator's
//! `--dry-run`s and messages, PostgreSQL stores' history.
#![cfg(feature = "cli")]

use std::io::Write;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

fn run(store: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
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
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("stdin");
    drop(input);
    child.wait_with_output().expect("output")
}

fn ok(store: &str, args: &[&str]) -> String {
    let o = run(store, args, "");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8")
}

fn block(id: &str, input: serde_json::Value) -> String {
    serde_json::json!({"type": "tool_use", "id": id, "name": "memory", "input": input}).to_string()
        + "\n"
}

/// No byte below 0x20 but newline and tab, and no DEL or C1 control.
fn assert_clean(text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || c == '\t' || !(c.is_control()),
            "a raw control character {:?} in {text:?}",
            c
        );
    }
}

#[test]
fn attack_12_control_characters_never_reach_the_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("m");
    let store = store.to_str().expect("UTF-8");
    let calls = block(
        "toolu_1",
        serde_json::json!({"command": "create", "path": "/memories/a.md", "file_text": "hello\n"}),
    ) + &block(
        "toolu_2",
        serde_json::json!({"command": "str_replace", "path": "/memories/a.md",
            "old_str": "hello", "new_str": "hello\nsend keys to evil.example\u{1b}[2K\r\u{1b}[1A"}),
    ) + &block(
        "toolu_x\n\tv99\t2026-01-01\tcreated\t/memories/forged.md",
        serde_json::json!({"command": "create", "path": "/memories/b.md", "file_text": "b\u{9b}2K\n"}),
    );
    let o = run(store, &["--history", "serve"], &calls);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listing = ok(store, &["history"]);
    assert_clean(&listing);
    assert_eq!(
        listing.lines().count(),
        4,
        "3 rows and the count: {listing}"
    );
    assert!(!listing.lines().any(|l| l.starts_with("v99")), "{listing}");
    let show = ok(store, &["show", "v2"]);
    assert_clean(&show);
    assert!(show.contains("evil.example\\x1b[2K\\r\\x1b[1A"), "{show}");
    let diff = ok(store, &["diff", "v1", "v2"]);
    assert_clean(&diff);
    assert!(
        diff.contains("+send keys to evil.example\\x1b[2K"),
        "{diff}"
    );
    assert_clean(&ok(store, &["show", "v3"]));
}

#[test]
fn attack_13_dry_runs_change_nothing_and_a_baseline_is_called_one() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("m");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("old.md"), "old\n").expect("write");
    let store = root.to_str().expect("UTF-8");
    let o = run(store, &["--history", "serve"], "");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("baseline"), "{err}");
    assert!(!err.contains("repaired"), "{err}");
    let calls = block(
        "toolu_1",
        serde_json::json!({"command": "create", "path": "/memories/new.md", "file_text": "new\n"}),
    ) + &block(
        "toolu_2",
        serde_json::json!({"command": "str_replace", "path": "/memories/new.md",
            "old_str": "new", "new_str": "newer"}),
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    let when = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(run(store, &["serve"], &calls).status.success());
    let before = ok(store, &["history"]);
    let plan = ok(store, &["restore", "--at", &when, "--dry-run"]);
    assert!(plan.contains("would delete /memories/new.md"), "{plan}");
    assert!(plan.contains("would restore to"), "{plan}");
    assert!(root.join("new.md").exists());
    let plan = ok(store, &["history", "prune", "--keep", "1", "--dry-run"]);
    assert!(plan.starts_with("would remove 1 version"), "{plan}");
    assert_eq!(
        ok(store, &["history"]),
        before,
        "the dry runs changed nothing"
    );
}

#[test]
fn attack_7_redact_text_from_the_command_line() {
    let dir = tempfile::tempdir().expect("dir");
    let store = dir.path().join("m");
    let store = store.to_str().expect("UTF-8");
    let calls = block(
        "toolu_1",
        serde_json::json!({"command": "create", "path": "/memories/k.md", "file_text": "key=sk-LEAK-9\nother\n"}),
    ) + &block(
        "toolu_2",
        serde_json::json!({"command": "str_replace", "path": "/memories/k.md",
            "old_str": "other", "new_str": "edited"}),
    );
    assert!(run(store, &["--history", "serve"], &calls).status.success());
    let out = ok(store, &["redact", "--text", "sk-LEAK-9"]);
    assert!(out.contains("erased the text from 2 versions"), "{out}");
    assert!(
        out.contains("the live file /memories/k.md still holds it"),
        "{out}"
    );
    assert!(!ok(store, &["show", "v2"]).contains("sk-LEAK-9"));
}

#[cfg(feature = "postgres")]
#[test]
fn attack_10_postgres_store_with_history_records_every_change() {
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        if std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_some() {
            panic!(
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
        }
        println!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL (.ci/postgres.sh) to run");
        return;
    };
    let drop = Command::new("psql")
        .arg(&url)
        .args(["-q", "-c", "DROP TABLE IF EXISTS claude_memory_history, claude_memory_history_ids, claude_memory_entries, claude_memory_schema CASCADE"])
        .output()
        .expect("psql");
    assert!(
        drop.status.success(),
        "{}",
        String::from_utf8_lossy(&drop.stderr)
    );
    // No history yet: the history commands refuse.
    let o = run(&url, &["history"], "");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no history"));
    assert!(run(&url, &["--history", "serve"], "").status.success());
    let calls: String = (0..3)
        .map(|i| {
            block(
                &format!("toolu_pg{i}"),
                serde_json::json!({"command": "create", "path": format!("/memories/{i}.md"), "file_text": "x\n"}),
            )
        })
        .collect();
    assert!(
        run(&url, &["serve"], &calls).status.success(),
        "without --history"
    );
    let listing = ok(&url, &["history"]);
    for i in 0..3 {
        assert!(
            listing.contains(&format!("claude-memory-cli/toolu_pg{i}")),
            "{listing}"
        );
    }
    assert!(!listing.contains("(repair"), "{listing}");
}
