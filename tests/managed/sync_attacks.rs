//! The sync under attack: each test is a reproduction from the review of
//! `ManagedStore::sync` and `claude-memory sync`, named for its attack,
//! against the emulator of the memory stores API (`.ci/managed.sh`).
#![cfg(feature = "managed")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use claude_memory::store::{
    Change, DeleteOptions, DirEntry, FileContent, MemoryStoreExt as _, Metadata, RenameOptions,
    StoreError, StoreResult, UpdateOptions, Updated, Version, WriteOptions,
};
use claude_memory::sync::{SyncEvent, SyncOptions, SyncOutcome, SyncState};
use claude_memory::{FilesystemStore, InMemoryStore, ManagedStore, MemoryPath, MemoryStore};
use serde_json::json;

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{cli, fresh, http, memories, memories_with_ids, put};

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

/// A store whose writes fail (a full disk) after `left` more succeed.
struct FillsUp(InMemoryStore, AtomicUsize);

impl MemoryStore for FillsUp {
    fn stat(&self, p: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.0.stat(p)
    }
    fn read(&self, p: &MemoryPath, l: u64) -> StoreResult<FileContent> {
        self.0.read(p, l)
    }
    fn list(&self, d: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.0.list(d)
    }
    fn write_opts(&self, p: &MemoryPath, d: &[u8], o: WriteOptions<'_>) -> StoreResult<Version> {
        if self
            .1
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_err()
        {
            return Err(StoreError::Io {
                op: claude_memory::store::Op::Write,
                path: p.clone(),
                source: std::io::Error::from_raw_os_error(28),
            });
        }
        self.0.write_opts(p, d, o)
    }
    fn update_opts(
        &self,
        p: &MemoryPath,
        o: UpdateOptions<'_>,
        c: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.0.update_opts(p, o, c)
    }
    fn delete_opts(&self, p: &MemoryPath, o: DeleteOptions<'_>) -> StoreResult<bool> {
        self.0.delete_opts(p, o)
    }
    fn rename_opts(&self, f: &MemoryPath, t: &MemoryPath, o: RenameOptions<'_>) -> StoreResult<()> {
        self.0.rename_opts(f, t, o)
    }
}

/// Every file wiped, then the rebuild cut short by a full disk: the
/// emptied state was saved before any file came back, so the files not
/// yet back are pulled later, never deleted on the service.
#[test]
fn attack_a_rebuild_cut_short_never_deletes_on_the_service() {
    let Some((remote, id)) = fresh() else { return };
    for i in 0..20 {
        put(&id, &format!("/m{i:02}.md"), "memory\n");
    }
    let local = FillsUp(InMemoryStore::new(), AtomicUsize::new(usize::MAX));
    let mut state = SyncState::new();
    pass(&remote, &local, &mut state);
    for i in 0..20 {
        local
            .delete(&path(&format!("/memories/m{i:02}.md")))
            .expect("wipe");
    }
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert!(
        matches!(report.outcome, SyncOutcome::Recovered(_)),
        "{report:?}"
    );
    let saved = serde_json::to_string(&state).expect("the state the caller saves");
    // The rebuild: 5 files fit, then the disk is full.
    local.1.store(5, Ordering::SeqCst);
    let events = pass(&remote, &local, &mut state);
    assert!(events.iter().any(|e| matches!(e, SyncEvent::Failed(..))));
    // Killed here: the next process starts from the saved (emptied) state.
    let mut state: SyncState = serde_json::from_str(&saved).expect("load");
    local.1.store(usize::MAX, Ordering::SeqCst);
    for _ in 0..3 {
        pass(&remote, &local, &mut state);
    }
    assert_eq!(memories(&id).len(), 20, "nothing deleted on the service");
    assert_eq!(
        text(&local, "/memories/m19.md").as_deref(),
        Some("memory\n")
    );
}

/// A file gone on both sides, then back and deleted again: its old
/// absence record does not let the new deletion skip the wait.
#[test]
fn attack_an_old_absence_record_never_skips_the_corroboration_window() {
    let Some((remote, id)) = fresh() else { return };
    for f in ["f1", "f2", "f3"] {
        put(&id, &format!("/{f}.md"), "x\n");
    }
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    let wait = SyncOptions {
        corroborate: Duration::from_secs(2),
        ..SyncOptions::default()
    };
    let run = |state: &mut SyncState| remote.sync(&local, state, &wait).expect("sync").events;
    run(&mut state);
    local.delete(&path("/memories/f1.md")).expect("delete");
    assert_eq!(
        run(&mut state),
        [SyncEvent::DeletePending("/memories/f1.md".into())]
    );
    let mem = memories_with_ids(&id)[0].1.clone();
    http(
        "DELETE",
        &format!("/v1/memory_stores/{id}/memories/{mem}"),
        None,
    );
    run(&mut state);
    std::thread::sleep(Duration::from_millis(2100));
    put(&id, "/f1.md", "important, recreated\n");
    assert_eq!(
        run(&mut state),
        [SyncEvent::Pulled("/memories/f1.md".into())]
    );
    local
        .delete(&path("/memories/f1.md"))
        .expect("delete again");
    assert_eq!(
        run(&mut state),
        [SyncEvent::DeletePending("/memories/f1.md".into())]
    );
    assert!(memories(&id).iter().any(|(p, _)| p == "/f1.md"));
}

fn patch(id: &str, fields: serde_json::Value, method: &str) {
    let body = json!({"memory_store_id": id, "count": 1, "method": method, "fields": fields});
    let (code, answer) = http("POST", "/_emulator/patch", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// The service answers a retrieve without content (or with other bytes
/// than its sha names): nothing is written, so neither side is emptied.
#[test]
fn attack_a_retrieve_without_content_never_empties_the_file_or_the_memory() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/notes.md", "precious notes v1\n");
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    pass(&remote, &local, &mut state);
    let mem = memories_with_ids(&id)[0].1.clone();
    managed_support::overwrite(&id, &mem, "precious notes v2\n");
    for fields in [
        json!({"content": null}),
        json!({"content": "other bytes\n"}),
    ] {
        patch_after_listing(&id, fields);
        let events = pass(&remote, &local, &mut state);
        assert!(
            matches!(&events[..], [SyncEvent::Failed(_, why)] if why.contains("sha256")),
            "{events:?}"
        );
        assert_eq!(
            text(&local, "/memories/notes.md").as_deref(),
            Some("precious notes v1\n")
        );
    }
    pass(&remote, &local, &mut state);
    assert_eq!(
        text(&local, "/memories/notes.md").as_deref(),
        Some("precious notes v2\n")
    );
    assert_eq!(memories(&id)[0].1, "precious notes v2\n");
}

/// The patch lands on the answer after the pass's listing: the pass
/// lists first (one GET), so the patch waits for that GET to go by.
fn patch_after_listing(id: &str, fields: serde_json::Value) {
    // Two patches: an empty one the listing consumes, then the real one.
    patch(id, json!({}), "GET");
    patch(id, fields, "GET");
}

/// A memory the listing says is over the service's cap is never fetched.
#[test]
fn attack_a_memory_over_the_service_cap_is_not_pulled() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/huge.md", "small, but listed as 300 MB\n");
    patch(&id, json!({"content_size_bytes": 300_000_000u64}), "GET");
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    let events = pass(&remote, &local, &mut state);
    assert!(
        matches!(&events[..], [SyncEvent::Failed(_, why)] if why.contains("larger")),
        "{events:?}"
    );
    assert!(text(&local, "/memories/huge.md").is_none());
}

/// A file over a memory's size is refused without being read (a sparse
/// 1 GiB file), and a hard-linked file the store will not read is
/// reported while every other file syncs.
#[test]
fn attack_huge_and_hard_linked_files_never_stop_a_pass() {
    let Some((remote, id)) = fresh() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::File::create(dir.path().join("sparse.md"))
        .and_then(|f| f.set_len(1 << 30))
        .expect("sparse");
    std::fs::write(dir.path().join("ok.md"), "fine\n").expect("write");
    std::fs::write(dir.path().join("linked.md"), "two names\n").expect("write");
    std::fs::hard_link(
        dir.path().join("linked.md"),
        dir.path().join("other-name.txt"),
    )
    .expect("hard link");
    let local = FilesystemStore::open(dir.path()).expect("store");
    let mut state = SyncState::new();
    let events = pass(&remote, &local, &mut state);
    assert!(
        events.contains(&SyncEvent::Pushed("/memories/ok.md".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&SyncEvent::Refused(
            "/memories/sparse.md".into(),
            "over 102,400 bytes"
        )),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SyncEvent::Failed(p, _) if p == "/memories/linked.md")),
        "{events:?}"
    );
    let names: Vec<String> = memories(&id).into_iter().map(|(p, _)| p).collect();
    assert_eq!(names, ["/ok.md"]);
    assert!(
        !pass(&remote, &local, &mut state)
            .iter()
            .any(|e| matches!(e, SyncEvent::Refused(..)))
    );
}

/// Names with terminal escapes, from the store or the service, are
/// printed escaped; a state file inside the store is refused.
#[test]
fn attack_event_output_escapes_control_characters_and_the_state_stays_out_of_the_store() {
    let Some((_, id)) = fresh() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("evil\u{1b}[2J\u{7}.md"), "x\n").expect("plant");
    let target = format!("managed:{id}");
    let out = cli(dir.path(), &["sync", &target, "--once"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not a valid memory path"), "{stdout}");
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    let inside = dir.path().join("sync.json");
    let out = cli(
        dir.path(),
        &[
            "sync",
            &target,
            "--once",
            "--state",
            inside.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("inside the store"));
}
