//! `claude-memory sync managed:ID` against the emulator of the memory
//! stores API, and beside the official SDK's own engine (`converge.py`):
//! two folders, one synced by each, converge on the same files.
#![cfg(feature = "managed")]

use std::process::Command;

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{cli, fresh, put};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

#[test]
fn cli_sync_once_keeps_its_state_beside_the_store_and_says_what_it_did() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/notes/a.md", "a\n");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("mine.md"), "mine\n").expect("write");
    let target = format!("managed:{id}");
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("first sync") && stdout.contains("pulled /memories/notes/a.md"));
    assert!(stdout.contains("pushed /memories/mine.md"), "{stdout}");
    assert!(
        dir.path()
            .join(format!(".claude-memory-sync-{id}.json"))
            .is_file()
    );
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("in step with {id}")
    );
    // The state stays out of every view.
    let out = cli(dir.path(), &["view", "/memories"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("claude-memory-sync"));
}

/// `--store DIR` naming a directory that does not exist: it is made (with
/// the state beside its files), and the memory store pulled into it, as
/// docs/managed.md says.
#[test]
fn cli_sync_into_a_directory_that_does_not_exist_makes_it() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/n.md", "n\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("not/yet");
    let out = cli(&store, &["sync", &format!("managed:{id}"), "--once"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(store.join("n.md")).ok().as_deref(),
        Some("n\n")
    );
}

#[test]
fn cli_sync_refuses_a_second_sync_on_one_state_and_bad_arguments() {
    let Some((_, id)) = fresh() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let target = format!("managed:{id}");
    assert!(
        cli(dir.path(), &["sync", &target, "--once"])
            .status
            .success()
    );
    let lock = std::fs::File::options()
        .write(true)
        .open(
            dir.path()
                .join(format!(".claude-memory-sync-{id}.json.lock")),
        )
        .expect("the lock file");
    lock.try_lock().expect("lock");
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another sync"));
    drop(lock);
    let state = dir.path().join(format!(".claude-memory-sync-{id}.json"));
    std::fs::write(&state, r#"{"version": 99}"#).expect("plant");
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an unknown state is not a fresh one"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a sync state file"));
    let state_dir = dir.path().to_str().expect("utf-8");
    for (args, says) in [
        (
            vec!["sync", &target, "--state", state_dir],
            "is a directory",
        ),
        (vec!["sync", &target, "--interval", "5"], "not a duration"),
        (vec!["sync", &target, "--interval", "2s"], "at least 5s"),
        (vec!["sync", id.as_str(), "--once"], "managed:MEMSTORE_ID"),
        (vec!["sync", &target, "--deletes", "sometimes"], "log-only"),
    ] {
        let out = cli(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}"
        );
    }
    let out = Command::new(BIN)
        .args([
            "--store",
            "sqlite:/nonexistent/x.db",
            "sync",
            &target,
            "--once",
        ])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--state"));
}

/// This crate's sync and the official SDK's engine, on two folders and
/// one store, converge on the same files (`converge.py`).
#[test]
fn ours_and_the_sdks_sync_converge() {
    let Some((url, key)) = managed_support::endpoint() else {
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/managed/converge.py");
    let out = Command::new("python3")
        .args([script, &url, &key, BIN])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
