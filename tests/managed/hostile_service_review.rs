//! More attacks on the managed store, the sync and import under a faulty
//! service or a local process, each a reproduction from a review of the
//! first round of fixes; each failed before its fix. Against the emulator (`.ci/managed.sh`).
#![cfg(feature = "managed")]

use std::path::Path;
use std::time::{Duration, Instant};

use claude_memory::backup::{Backup, ImportOptions};
use claude_memory::history::{HistoryError, Query, Versions as _};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{InMemoryStore, MemoryPath, StoreError};
use serde_json::{Value, json};

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{
    cli, fault_with, fresh, http, memories, memories_with_ids, overwrite, put, race,
};

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

fn patch(id: &str, count: u32, method: &str, fields: Value, matching: Option<Value>) {
    let mut body =
        json!({"memory_store_id": id, "count": count, "method": method, "fields": fields});
    if let Some(m) = matching {
        body["match"] = m;
    }
    let (code, answer) = http("POST", "/_emulator/patch", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

fn unpatch(id: &str) {
    let (code, answer) = http(
        "POST",
        "/_emulator/unpatch",
        Some(&json!({"memory_store_id": id})),
    );
    assert_eq!(code, 200, "{answer}");
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn once(dir: &Path, id: &str) -> std::process::Output {
    cli(dir, &["sync", &format!("managed:{id}"), "--once"])
}

/// R1. A link planted at the state path itself, while `sync` runs in a
/// loop: the next save replaces the link's target (any file the user can
/// write, outside the store) with the state JSON. The old code renamed a
/// temporary file over the path, replacing the link, never its target.
#[cfg(unix)]
#[test]
fn a_link_planted_at_the_state_path_never_redirects_the_state() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/s.md", "synced\n");
    let top = tempfile::tempdir().expect("tempdir");
    let store = top.path().join("store");
    std::fs::create_dir(&store).expect("store");
    let victim = top.path().join("VICTIM.rc");
    std::fs::write(&victim, "precious\n").expect("victim");
    let state = store.join(format!(".claude-memory-sync-{id}.json"));
    let (url, key) = managed_support::endpoint().expect("emulator");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .arg("--store")
        .arg(&store)
        .args(["sync", &format!("managed:{id}"), "--interval", "5s"])
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while !state.is_file() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(state.is_file(), "the first pass saved its state");
    // The planted link (a local process that can write the store's folder).
    std::fs::remove_file(&state).expect("remove");
    std::os::unix::fs::symlink(&victim, &state).expect("plant");
    let start = Instant::now();
    while std::fs::read_to_string(&victim).ok().as_deref() == Some("precious\n")
        && start.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n",
        "the file the planted link names was replaced by the sync state"
    );
}

/// R2. The temporary name the state is now written under
/// (`.{name}.tmp.{pid}.{n}`, src/backup/output.rs create_temp) is
/// `..claude-memory-sync-….json.tmp.…` for the default state: not a
/// reserved name. One left by a killed sync (SIGKILL, power loss between
/// the temporary file's creation and its rename) is a memory to the next
/// pass, and is uploaded: the whole state (every path and sha) becomes a
/// memory a managed agent reads.
#[test]
fn a_state_temporary_left_by_a_killed_sync_is_never_uploaded() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/a.md", "a\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let first = once(dir.path(), &id);
    assert!(first.status.success(), "{}", said(&first));
    // What a sync killed while saving leaves beside the default state.
    let name = format!(".claude-memory-sync-{id}.json");
    let state = std::fs::read(dir.path().join(&name)).expect("state");
    std::fs::write(
        dir.path().join(".claude-memory-sync-state.tmp.4242.0"),
        state,
    )
    .expect("leftover");
    let out = once(dir.path(), &id);
    let leaked: Vec<_> = memories(&id)
        .into_iter()
        .filter(|(p, _)| p.contains("claude-memory-sync"))
        .collect();
    assert!(leaked.is_empty(), "uploaded: {leaked:?}\n{}", said(&out));
}

/// R3. The listing names a memory whose retrieve answers 404 (a lying
/// listing, or a memory deleted between listing and retrieve): the pull
/// is skipped silently, and `--once` says "in step" and exits 0 while
/// /p.md is on the service and not here.
#[test]
fn a_listed_memory_whose_retrieve_is_404_is_not_in_step() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/p.md", "on the service\n");
    patch(
        &id,
        20,
        "GET",
        json!({"id": "mem_01gonegonegonegonegonego"}),
        Some(json!({"path": "/p.md"})),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out = once(dir.path(), &id);
    unpatch(&id);
    let text = said(&out);
    assert!(!dir.path().join("p.md").exists());
    assert!(!text.contains("in step"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// R4. A deletion whose precondition the service raced (another writer
/// changed the memory): `delete()` keeps the baseline and says nothing,
/// unlike an upload's race (SyncEvent::Raced). `--once` says "in step"
/// and exits 0 while the file is gone here and the memory changed there.
#[test]
fn a_delete_the_service_raced_is_said_and_not_in_step() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/r.md", "base\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let first = once(dir.path(), &id);
    assert!(first.status.success(), "{}", said(&first));
    std::fs::remove_file(dir.path().join("r.md")).expect("remove");
    // The file has been missing for longer than 30 s.
    let state_file = dir.path().join(format!(".claude-memory-sync-{id}.json"));
    let mut state: Value =
        serde_json::from_slice(&std::fs::read(&state_file).expect("state")).expect("json");
    state["missing_since"] = json!({"r.md": 1});
    std::fs::write(&state_file, state.to_string()).expect("state");
    race(&id, 1);
    let out = once(dir.path(), &id);
    let text = said(&out);
    assert_eq!(memories(&id), [("/r.md".into(), "base\nrace\n".into())]);
    assert!(!dir.path().join("r.md").exists());
    assert!(!text.contains("in step"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// R5. An empty local directory where the service holds a file: every
/// pull is a create that finds something there (Checked::Moved), which
/// the pass drops silently; every `--once` says "in step" and exits 0,
/// and /notes never arrives.
#[test]
fn a_directory_where_the_service_holds_a_file_is_not_in_step() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/notes", "a file on the service\n");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("notes")).expect("dir");
    let first = once(dir.path(), &id);
    let out = once(dir.path(), &id);
    let text = format!("{}---\n{}", said(&first), said(&out));
    assert!(dir.path().join("notes").is_dir());
    assert!(!text.contains("in step"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

/// R6. The undo of an "unsure" create checks the path holds what was
/// sent, then deletes it unconditionally (`store.delete`): the managed
/// store's delete re-reads and retries on a 409, so another writer's edit
/// made between the check and the delete is deleted.
#[test]
fn an_import_undo_never_deletes_another_writers_edit() {
    let Some((remote, id)) = fresh() else { return };
    let source = InMemoryStore::new();
    source
        .write(&path("/memories/a.md"), b"a", WriteMode::Create)
        .expect("source");
    let backup = Backup::of_store(&source).expect("backup");
    // The create is applied and its answer lost; then another writer
    // edits the memory just before the undo's delete lands.
    fault_with(json!({"memory_store_id": id, "status": 503, "method": "POST", "after": true}));
    race(&id, 1);
    let failed = backup
        .restore(&remote, &ImportOptions::new())
        .expect_err("the import fails");
    assert_eq!(
        memories(&id),
        [("/a.md".into(), "arace\n".into())],
        "the other writer's edit is gone ({failed})"
    );
}

/// R7. An empty directory's placeholder create whose answer is lost: the
/// MakeDir step has no "unsure" undo, and the directory's undo sees the
/// placeholder as someone else's file, so the import says "nothing was
/// imported" and leaves /empty/.import-placeholder on the service.
#[test]
fn an_import_whose_placeholder_create_answer_was_lost_leaves_nothing_behind() {
    let Some((remote, id)) = fresh() else { return };
    let backup: Backup = serde_json::from_value(json!({
        "format": "claude-memory-export", "version": 2,
        "files": [{"path": "/memories/empty", "directory": true}]
    }))
    .expect("backup");
    fault_with(json!({"memory_store_id": id, "status": 503, "method": "POST", "after": true}));
    let failed = backup
        .restore(&remote, &ImportOptions::new())
        .expect_err("the import fails");
    assert!(
        failed.to_string().contains("nothing was imported"),
        "{failed}"
    );
    assert_eq!(memories(&id), [], "left on the service ({failed})");
}

/// R8. A version with content and a null content_sha256: show()
/// checks only when both are present, so the body is taken unchecked and
/// revert_to stores it on the service.
#[test]
fn a_version_with_content_and_no_sha_is_never_reverted_to() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/v.md", "one\n");
    let mem = memories_with_ids(&id)[0].1.clone();
    overwrite(&id, &mem, "two\n");
    let first = remote.history(&Query::default()).expect("versions")[0].clone();
    patch(
        &id,
        20,
        "GET",
        json!({"content": "forged\n", "content_sha256": null}),
        Some(json!({"type": "memory_version"})),
    );
    let reverted = remote.revert_to(&first.id);
    unpatch(&id);
    assert!(
        matches!(
            reverted,
            Err(HistoryError::Store(StoreError::Integrity { .. }))
        ),
        "{reverted:?}"
    );
    assert_eq!(memories(&id), [("/v.md".into(), "two\n".into())]);
}

/// R9. `history copy` from a managed store prints the service's version
/// id raw in its failure (`{} failed: …`, step.source): Failure::Failed
/// escapes control characters but keeps `\n`, so the id forges a line
/// (and a bidi override such as U+202E passes as it is).
#[test]
fn history_copy_prints_the_services_version_ids_escaped() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/a.md", "a\n");
    put(&id, "/b.md", "b\n");
    let a = memories_with_ids(&id)[0].1.clone();
    // Another client renames a.md to c.md (a version with path /c.md)...
    let (code, body) = http(
        "POST",
        &format!("/v1/memory_stores/{id}/memories/{a}"),
        Some(&json!({"path": "/c.md"})),
    );
    assert_eq!(code, 200, "{body}");
    // ...which the listing says went to /b.md, under a forged id: the
    // replay's rename fails, and the failure names the id.
    patch(
        &id,
        20,
        "GET",
        json!({"path": "/b.md", "id": "memver_01x\nclaude-memory: FORGED LINE"}),
        Some(json!({"type": "memory_version", "path": "/c.md"})),
    );
    let dest = tempfile::tempdir().expect("tempdir");
    let out = cli(
        format!("managed:{id}"),
        &[
            "history",
            "copy",
            "--to",
            dest.path().to_str().expect("utf-8"),
        ],
    );
    unpatch(&id);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.lines().any(|l| l.starts_with("claude-memory: FORGED")),
        "{err:?}"
    );
}

/// R10. A FIFO planted at the lock path (or the state path): the lock is
/// opened O_WRONLY without O_NONBLOCK, and the state read with
/// `std::fs::read`, both of which wait for the other end for ever; a
/// `--once` from cron never returns (and the one stuck on the state
/// holds the lock, so every later run says another sync is running).
#[cfg(unix)]
#[test]
fn a_fifo_at_the_lock_or_state_path_never_hangs_the_sync() {
    let Some((_, id)) = fresh() else { return };
    let mut hung = Vec::new();
    for suffix in [".lock", ""] {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir
            .path()
            .join(format!(".claude-memory-sync-{id}.json{suffix}"));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let (url, key) = managed_support::endpoint().expect("emulator");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
            .arg("--store")
            .arg(dir.path())
            .args(["sync", &format!("managed:{id}"), "--once"])
            .env("ANTHROPIC_API_KEY", key)
            .env("ANTHROPIC_BASE_URL", url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let start = Instant::now();
        let mut exited = false;
        while start.elapsed() < Duration::from_secs(20) {
            if child.try_wait().expect("wait").is_some() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !exited {
            let _ = child.kill();
            hung.push(format!("state{suffix}"));
        }
        let _ = child.wait();
    }
    assert!(
        hung.is_empty(),
        "a FIFO at these paths hangs sync --once: {hung:?}"
    );
}
