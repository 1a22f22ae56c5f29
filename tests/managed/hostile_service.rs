//! The managed store and sync against a service that answers wrongly, on
//! purpose or by a bug, and against local processes around the sync: each
//! test is an attack, against the emulator of the memory stores API
//! (`.ci/managed.sh`), whose patch, fault, race and normalise controls play
//! the faulty service.
#![cfg(feature = "managed")]

use std::time::Duration;

use claude_memory::backup::{Backup, ImportOptions};
use claude_memory::history::{HistoryError, Query, Versions as _};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::sync::{SyncEvent, SyncOptions, SyncState};
use claude_memory::{FilesystemStore, InMemoryStore, ManagedStore, MemoryPath, MemoryStore};
use claude_memory::{MemoryTool, StoreError};
use serde_json::{Value, json};

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{
    cli, fault_with, fresh, http, memories, memories_with_ids, overwrite, put, race,
};

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

fn at_once() -> SyncOptions {
    SyncOptions {
        corroborate: Duration::ZERO,
        ..SyncOptions::default()
    }
}

fn pass(remote: &ManagedStore, local: &dyn MemoryStore, state: &mut SyncState) -> Vec<SyncEvent> {
    remote.sync(local, state, &at_once()).expect("sync").events
}

fn text(store: &dyn MemoryStore, p: &str) -> Option<String> {
    store
        .read(&path(p), u64::MAX)
        .ok()
        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

/// The next `count` answers to `method` on store `id` have `fields` merged
/// in (into the items that match `matching`, if given).
fn patch(id: &str, count: u32, method: &str, fields: Value, matching: Option<Value>) {
    let mut body =
        json!({"memory_store_id": id, "count": count, "method": method, "fields": fields});
    if let Some(m) = matching {
        body["match"] = m;
    }
    let (code, answer) = http("POST", "/_emulator/patch", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// Drops the pending patches of store `id`: the service answers rightly.
fn unpatch(id: &str) {
    let (code, answer) = http(
        "POST",
        "/_emulator/unpatch",
        Some(&json!({"memory_store_id": id})),
    );
    assert_eq!(code, 200, "{answer}");
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The service lists a 4-byte memory, then its retrieve sends 5,000,000
/// bytes with their own (matching) sha: nothing is written, and once the
/// service answers rightly the sync converges.
#[test]
fn an_oversized_body_behind_a_small_listing_is_never_pulled() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/t2.md", "abcd");
    let big = "x".repeat(5_000_000);
    // The pass lists (one GET), then retrieves: the first patch is the
    // listing's, and changes nothing.
    patch(&id, 1, "GET", json!({}), None);
    patch(
        &id,
        1,
        "GET",
        json!({"content": big, "content_sha256": sha256(big.as_bytes()), "content_size_bytes": 5_000_000}),
        None,
    );
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    let events = pass(&remote, &local, &mut state);
    assert!(
        matches!(&events[..], [SyncEvent::Failed(p, why)] if p == "/memories/t2.md" && why.contains("size")),
        "{events:?}"
    );
    assert!(events[0].left_out_of_step());
    assert_eq!(text(&local, "/memories/t2.md"), None, "nothing written");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Pulled("/memories/t2.md".into())]
    );
    assert_eq!(text(&local, "/memories/t2.md").as_deref(), Some("abcd"));
    assert_eq!(pass(&remote, &local, &mut state), []);
}

/// A retrieve whose body does not match its sha: `view` answers SPEC §4's
/// integrity error, and an edit on it never stores the corruption.
#[test]
fn a_corrupted_read_is_refused_and_never_written_back() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/h.md", "hello\n");
    let tool = MemoryTool::new(remote);
    patch(&id, 20, "GET", json!({"content": "hello\nTAMPERED"}), None);
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories/h.md"}));
    assert!(view.is_error);
    assert_eq!(
        view.text(),
        Some("Error: Could not read /memories/h.md: its stored content failed the integrity check")
    );
    let edit = tool.dispatch(&json!({"command": "str_replace", "path": "/memories/h.md",
        "old_str": "hello", "new_str": "HELLO"}));
    assert!(edit.is_error, "{:?}", edit.text());
    unpatch(&id);
    assert_eq!(memories(&id), [("/h.md".into(), "hello\n".into())]);
}

/// A version whose content does not match its sha is refused: shown or
/// reverted, it would pass for the real one.
#[test]
fn a_corrupted_version_is_never_shown_or_reverted_to() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/v.md", "one\n");
    let mem = memories_with_ids(&id)[0].1.clone();
    overwrite(&id, &mem, "two\n");
    let first = remote.history(&Query::default()).expect("versions")[0].clone();
    patch(&id, 20, "GET", json!({"content": "forged\n"}), None);
    assert!(matches!(
        remote.show(&first.id),
        Err(HistoryError::Store(StoreError::Integrity { .. }))
    ));
    assert!(matches!(
        remote.revert_to(&first.id),
        Err(HistoryError::Store(StoreError::Integrity { .. }))
    ));
    unpatch(&id);
    assert_eq!(memories(&id), [("/v.md".into(), "two\n".into())]);
}

/// An upload the service raced (its precondition failed): the pass says
/// so and is not in step (the CLI exits 1), never "in step".
#[test]
fn an_upload_the_service_raced_is_said_and_the_pass_is_not_in_step() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/r.md", "base\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let target = format!("managed:{id}");
    let first = cli(dir.path(), &["sync", &target, "--once"]);
    assert!(first.status.success(), "{}", stdout(&first));
    std::fs::write(dir.path().join("r.md"), "edited here\n").expect("edit");
    race(&id, 1);
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("/memories/r.md changed during this pass"),
        "{said}"
    );
    assert!(!said.contains("in step"), "{said}");
}

/// The service holds a memory `/x` and a memory `/x/y.md`: a local store
/// can hold only one of them; the pass names the other and is not in step.
#[test]
fn a_memory_beside_memories_below_its_name_is_said_and_the_pass_is_not_in_step() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/x", "a file named x\n");
    put(&id, "/x/y.md", "below x\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let target = format!("managed:{id}");
    for _ in 0..2 {
        let out = cli(dir.path(), &["sync", &target, "--once"]);
        let said = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains("skipped /memories/x: the service holds a memory at this name"),
            "{said}"
        );
        assert!(!said.contains("in step"), "{said}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/y.md"))
            .ok()
            .as_deref(),
        Some("below x\n")
    );
    assert_eq!(memories(&id).len(), 2, "nothing deleted on the service");
}

/// A link planted at the state's old temporary name, and the state's
/// directory missing: the state goes to a private file of its own, the
/// link's target is untouched, and the directory is made.
#[cfg(unix)]
#[test]
fn the_state_is_never_written_through_a_planted_link_and_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some((_, id)) = fresh() else { return };
    put(&id, "/s.md", "synced\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    std::fs::create_dir(&store).expect("store");
    let ext = dir.path().join("ext");
    std::fs::create_dir(&ext).expect("ext");
    let victim = dir.path().join("VICTIM");
    std::fs::write(&victim, "precious\n").expect("victim");
    std::os::unix::fs::symlink(&victim, ext.join("s.json.tmp")).expect("plant");
    let state = ext.join("s.json");
    let target = format!("managed:{id}");
    let out = cli(
        &store,
        &[
            "sync",
            &target,
            "--once",
            "--state",
            state.to_str().expect("utf-8"),
        ],
    );
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    let meta = std::fs::symlink_metadata(&state).expect("state");
    assert!(
        meta.file_type().is_file(),
        "the state is a file, not a link"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let lock = std::fs::metadata(ext.join("s.json.lock")).expect("lock");
    assert_eq!(lock.permissions().mode() & 0o777, 0o600);
    // A directory that does not exist yet is made (private).
    let deep = dir.path().join("new/deeper/s.json");
    let out = cli(
        &store,
        &[
            "sync",
            &target,
            "--once",
            "--state",
            deep.to_str().expect("utf-8"),
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(deep.is_file());
    let made = std::fs::metadata(dir.path().join("new/deeper")).expect("dir");
    assert_eq!(made.permissions().mode() & 0o777, 0o700);
}

/// A symbolic link in a synced file's place is said for what it is, on
/// every pass, and never taken for a deletion.
#[cfg(unix)]
#[test]
fn a_link_in_a_synced_files_place_is_said_and_never_deletes_the_memory() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/l.md", "kept\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let local = FilesystemStore::open(dir.path()).expect("store");
    let mut state = SyncState::new();
    pass(&remote, &local, &mut state);
    std::fs::remove_file(dir.path().join("l.md")).expect("remove");
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("l.md")).expect("link");
    for _ in 0..3 {
        let events = pass(&remote, &local, &mut state);
        assert!(
            matches!(&events[..], [SyncEvent::Failed(p, why)] if p == "/memories/l.md" && why.contains("symbolic link")),
            "{events:?}"
        );
    }
    assert_eq!(memories(&id), [("/l.md".into(), "kept\n".into())]);
}

/// A create the service applied but whose answer was lost (503): the
/// import is undone whole, and a second import succeeds.
#[test]
fn an_import_whose_create_answer_was_lost_leaves_nothing_behind() {
    let Some((remote, id)) = fresh() else { return };
    let source = InMemoryStore::new();
    for name in ["a", "b", "c"] {
        source
            .write(
                &path(&format!("/memories/{name}.md")),
                name.as_bytes(),
                WriteMode::Create,
            )
            .expect("source");
    }
    let backup = Backup::of_store(&source).expect("backup");
    // The second create is applied, and its answer lost.
    fault_with(
        json!({"memory_store_id": id, "status": 503, "method": "POST", "skip": 1, "after": true}),
    );
    let failed = backup
        .restore(&remote, &ImportOptions::new())
        .expect_err("the import fails");
    assert!(
        failed.to_string().contains("nothing was imported"),
        "{failed}"
    );
    assert_eq!(memories(&id), [], "nothing left on the service");
    let report = backup
        .restore(&remote, &ImportOptions::new())
        .expect("a second import");
    assert_eq!(report.created, 3);
}

/// A service that keeps CRLF as LF: the file is sent once, the pass says
/// the service changed it, and no later pass sends it again.
#[test]
fn a_service_that_normalises_content_is_said_once_never_pushed_again() {
    let Some((remote, id)) = fresh() else { return };
    let (code, answer) = http(
        "POST",
        "/_emulator/normalise",
        Some(&json!({"memory_store_id": id, "crlf": true})),
    );
    assert_eq!(code, 200, "{answer}");
    let local = InMemoryStore::new();
    local
        .write(
            &path("/memories/w.md"),
            b"windows\r\nlines\r\n",
            WriteMode::Create,
        )
        .expect("write");
    let mut state = SyncState::new();
    let events = pass(&remote, &local, &mut state);
    assert!(
        matches!(&events[..], [SyncEvent::Refused(p, why)] if p == "/memories/w.md" && why.contains("other content")),
        "{events:?}"
    );
    let before = managed_support::requests(&id);
    for _ in 0..3 {
        assert_eq!(pass(&remote, &local, &mut state), []);
    }
    // Three passes, each one listing and nothing else.
    assert_eq!(managed_support::requests(&id) - before, 3);
    assert_eq!(memories(&id), [("/w.md".into(), "windows\nlines\n".into())]);
}

/// Version ids, times and actors from the service with terminal escapes
/// and newlines are printed escaped by `history` and `diff`.
#[test]
fn version_fields_from_the_service_are_printed_escaped() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/e.md", "one\n");
    let mem = memories_with_ids(&id)[0].1.clone();
    overwrite(&id, &mem, "two\n");
    let target = format!("managed:{id}");
    let evil = "memver_01evil\u{1b}[31m\nforged line";
    patch(
        &id,
        10,
        "GET",
        json!({"id": evil}),
        Some(json!({"type": "memory_version"})),
    );
    let history = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .args(["--store", &target, "history"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env(
            "ANTHROPIC_BASE_URL",
            managed_support::endpoint().expect("emulator").0,
        )
        .output()
        .expect("history");
    let said = stdout(&history);
    assert!(history.status.success(), "{said}");
    assert!(
        said.contains("memver_01evil\\x1b[31m\\nforged line"),
        "{said}"
    );
    assert!(
        !said.contains('\u{1b}') && !said.contains("\nforged"),
        "{said:?}"
    );
}

/// The service lists paths this store never writes (`//m.md`, `a.md`):
/// trimmed, they would land on `/m.md` and `/a.md`, beside the memories
/// there. They are skipped, by the sync and by a directory view.
#[test]
fn paths_not_spelled_as_the_store_spells_them_are_skipped() {
    for listed in ["//m.md", "m.md"] {
        let Some((remote, id)) = fresh() else { return };
        put(&id, "/m.md", "the real m\n");
        put(&id, "/z.md", "listed under another spelling of m.md\n");
        let local = InMemoryStore::new();
        let mut state = SyncState::new();
        let disguise = || {
            patch(
                &id,
                1,
                "GET",
                json!({"path": listed}),
                Some(json!({"path": "/z.md"})),
            );
        };
        disguise();
        let events = pass(&remote, &local, &mut state);
        assert_eq!(
            events,
            [
                SyncEvent::Unspellable(format!("/memories{listed}")),
                SyncEvent::Pulled("/memories/m.md".into()),
            ],
            "{listed}"
        );
        assert_eq!(
            text(&local, "/memories/m.md").as_deref(),
            Some("the real m\n")
        );
        // A directory view over the same listing shows m.md once.
        disguise();
        let tool = MemoryTool::new(remote);
        let view = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
        let shown = view.text().unwrap_or_default().to_owned();
        assert_eq!(shown.matches("m.md").count(), 1, "{listed}: {shown}");
    }
}

/// `redact` of the current version of a live memory: the service refuses
/// it, and the CLI says why and what to do.
#[test]
fn redacting_the_current_version_is_refused_with_what_to_do() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/c.md", "live\n");
    let current = remote.history(&Query::default()).expect("versions")[0].clone();
    let (url, key) = managed_support::endpoint().expect("emulator");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .args([
            "--store",
            &format!("managed:{id}"),
            "redact",
            &current.id.to_string(),
        ])
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", url)
        .output()
        .expect("redact");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the current version of a live memory cannot be redacted"),
        "{said}"
    );
    assert_eq!(memories(&id), [("/c.md".into(), "live\n".into())]);
}
