//! `--profile managed`, `check` and `stats --profile managed` from the
//! shell (feature `cli`).
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

fn run(root: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("CLAUDE_MEMORY_DIR")
        .env_remove("CLAUDE_MEMORY_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run claude-memory");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn serve_under_the_profile_refuses_what_would_not_fit_and_check_lists_the_rest() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    let deep = format!("/memories/{}f.md", "d/".repeat(20));
    let big = "x".repeat(102_401);
    let calls = format!(
        "{}\n{}\n{}\n",
        serde_json::json!({"command": "create", "path": "/memories/ok.md", "file_text": "fine\n"}),
        serde_json::json!({"command": "create", "path": deep, "file_text": "x"}),
        serde_json::json!({"command": "create", "path": "/memories/big.md", "file_text": big}),
    );
    let out = run(&root, &["--profile", "managed", "serve"], &calls);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].get("is_error"), None);
    assert_eq!(lines[1]["is_error"], true);
    assert_eq!(lines[2]["is_error"], true);

    // Everything the tool wrote fits.
    let out = run(&root, &["check"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "everything fits a managed Memory Store\n"
    );

    // Files brought another way are listed; check exits 1.
    std::fs::write(root.join("blob.bin"), [0xffu8, 0x00]).expect("write");
    std::fs::write(root.join("big.md"), vec![b'a'; 102_401]).expect("write");
    let out = run(&root, &["check"], "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "/memories/big.md: 102401 bytes (limit 102400)\n/memories/blob.bin: not UTF-8 text\n2 entries would not fit a managed Memory Store\n"
    );
    let out = run(&root, &["--profile", "managed", "stats"], "");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout)
            .ends_with("managed Memory Stores: 2 would not fit (run `check` for the list)\n"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&root, &["stats"], "");
    assert!(!text(&out.stdout).contains("managed"));
    // An unknown profile is a usage error.
    let out = run(&root, &["--profile", "nope", "stats"], "");
    assert_eq!(out.status.code(), Some(2));
}
