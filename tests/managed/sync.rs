//! `ManagedStore::sync`'s rules, against the emulator of the memory stores
//! API (`.ci/managed.sh` starts it). The CLI's `sync`, and its convergence
//! with the official SDK's engine, are in `sync_cli.rs`.
#![cfg(feature = "managed")]

use std::time::Duration;

use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::sync::{
    DeleteMode, MARKER_FILE, SyncEvent, SyncOptions, SyncOutcome, SyncState,
};
use claude_memory::{InMemoryStore, ManagedStore, MemoryPath, MemoryStore};

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{fresh, memories, memories_with_ids, overwrite, put};

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

fn write(store: &dyn MemoryStore, p: &str, text: &str) {
    store
        .write(&path(p), text.as_bytes(), WriteMode::Overwrite)
        .expect("write");
}

fn text(store: &dyn MemoryStore, p: &str) -> Option<String> {
    store
        .read(&path(p), u64::MAX)
        .ok()
        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
}

/// Deletes take effect on the pass that first sees them gone.
fn at_once() -> SyncOptions {
    SyncOptions {
        corroborate: Duration::ZERO,
        ..SyncOptions::default()
    }
}

fn pass(remote: &ManagedStore, local: &dyn MemoryStore, state: &mut SyncState) -> Vec<SyncEvent> {
    pass_with(remote, local, state, &at_once())
}

fn pass_with(
    remote: &ManagedStore,
    local: &dyn MemoryStore,
    state: &mut SyncState,
    options: &SyncOptions,
) -> Vec<SyncEvent> {
    let report = remote.sync(local, state, options).expect("sync");
    assert!(
        !matches!(report.outcome, SyncOutcome::Untrusted(_)),
        "{report:?}"
    );
    report.events
}

fn at(p: &str) -> String {
    format!("/memories/{p}")
}

fn remote_text(id: &str, p: &str) -> Option<String> {
    memories(id)
        .into_iter()
        .find(|(q, _)| q == p)
        .map(|(_, c)| c)
}

/// A synced pair: the remote holds `/seed.md`, the local store a copy.
fn synced() -> Option<(ManagedStore, String, InMemoryStore, SyncState)> {
    let (remote, id) = fresh()?;
    put(&id, "/seed.md", "seed\n");
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert_eq!(report.outcome, SyncOutcome::Joined);
    assert_eq!(report.events, [SyncEvent::Pulled(at("seed.md"))]);
    Some((remote, id, local, state))
}

#[test]
fn the_first_pass_merges_both_sides_deletes_nothing_and_leaves_a_difference_alone() {
    let Some((remote, id)) = fresh() else { return };
    put(&id, "/only-there.md", "there\n");
    put(&id, "/both.md", "the service's\n");
    let local = InMemoryStore::new();
    write(&local, "/memories/only-here.md", "here\n");
    write(&local, "/memories/both.md", "mine\n");
    let mut state = SyncState::new();
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert_eq!(report.outcome, SyncOutcome::Joined);
    assert_eq!(
        report.events,
        [
            SyncEvent::Differs(at("both.md")),
            SyncEvent::Pushed(at("only-here.md")),
            SyncEvent::Pulled(at("only-there.md")),
        ]
    );
    assert_eq!(text(&local, "/memories/both.md").as_deref(), Some("mine\n"));
    assert_eq!(
        remote_text(&id, "/both.md").as_deref(),
        Some("the service's\n")
    );
    assert_eq!(remote_text(&id, "/only-here.md").as_deref(), Some("here\n"));
    assert_eq!(
        text(&local, &format!("/memories/{MARKER_FILE}")),
        Some(format!("version 1\n{id}")),
        "the marker, as the SDKs write it"
    );
    assert!(
        remote_text(&id, &format!("/{MARKER_FILE}")).is_none(),
        "never synced"
    );
    // Made equal by hand, the path is in step from then on.
    write(&local, "/memories/both.md", "the service's\n");
    assert_eq!(pass(&remote, &local, &mut state), []);
}

#[test]
fn a_change_on_one_side_reaches_the_other_keeping_the_memory_id() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    let before = memories_with_ids(&id);
    write(&local, "/memories/seed.md", "seed, edited here\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Pushed(at("seed.md"))]
    );
    let after = memories_with_ids(&id);
    assert_eq!(after[0].1, before[0].1, "an update, not a new memory");
    assert_eq!(after[0].2, "seed, edited here\n");

    overwrite(&id, &after[0].1, "seed, edited there\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Pulled(at("seed.md"))]
    );
    assert_eq!(
        text(&local, "/memories/seed.md").as_deref(),
        Some("seed, edited there\n")
    );
    assert_eq!(pass(&remote, &local, &mut state), [], "in step");
}

#[test]
fn a_change_on_both_sides_keeps_the_services_version_and_says_so() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    write(&local, "/memories/seed.md", "here\n");
    overwrite(&id, &memories_with_ids(&id)[0].1, "there\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [
            SyncEvent::ServiceWon(at("seed.md")),
            SyncEvent::Pulled(at("seed.md"))
        ]
    );
    assert_eq!(
        text(&local, "/memories/seed.md").as_deref(),
        Some("there\n")
    );
}

#[test]
fn a_local_delete_waits_for_corroboration_then_goes_with_its_precondition() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    put(&id, "/keep.md", "keep\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Pulled(at("keep.md"))]
    );
    local.delete(&path("/memories/seed.md")).expect("delete");
    let patient = SyncOptions::default();
    assert_eq!(
        pass_with(&remote, &local, &mut state, &patient),
        [SyncEvent::DeletePending(at("seed.md"))]
    );
    assert!(remote_text(&id, "/seed.md").is_some(), "not before 30 s");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::DeletedRemotely(at("seed.md"))]
    );
    assert!(remote_text(&id, "/seed.md").is_none());
}

#[test]
fn a_local_delete_of_a_memory_changed_there_restores_it() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    local.delete(&path("/memories/seed.md")).expect("delete");
    overwrite(&id, &memories_with_ids(&id)[0].1, "changed there\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [
            SyncEvent::Restored(at("seed.md")),
            SyncEvent::Pulled(at("seed.md"))
        ]
    );
    assert_eq!(
        text(&local, "/memories/seed.md").as_deref(),
        Some("changed there\n")
    );
}

/// The delete races another writer: its precondition fails and the
/// memory, changed, comes back on the next pass.
#[test]
fn attack_a_delete_racing_a_remote_edit_loses_nothing() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    put(&id, "/other.md", "other\n");
    pass(&remote, &local, &mut state);
    local.delete(&path("/memories/seed.md")).expect("delete");
    managed_support::race(&id, 1);
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Raced(at("seed.md"))]
    );
    let kept = remote_text(&id, "/seed.md").expect("the raced memory stays");
    assert_ne!(kept, "seed\n");
    assert_eq!(
        pass(&remote, &local, &mut state)[0],
        SyncEvent::Restored(at("seed.md"))
    );
    assert_eq!(text(&local, "/memories/seed.md"), Some(kept));
}

#[test]
fn a_memory_deleted_there_is_removed_here_unless_edited_here() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    put(&id, "/edited.md", "v1\n");
    pass(&remote, &local, &mut state);
    let ids = memories_with_ids(&id);
    for (_, mem, _) in &ids {
        managed_support::http(
            "DELETE",
            &format!("/v1/memory_stores/{id}/memories/{mem}"),
            None,
        );
    }
    write(&local, "/memories/edited.md", "v2, here\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [
            SyncEvent::Recreated(at("edited.md")),
            SyncEvent::Pushed(at("edited.md")),
            SyncEvent::RemovedLocally(at("seed.md")),
        ]
    );
    assert!(text(&local, "/memories/seed.md").is_none());
    assert_eq!(
        remote_text(&id, "/edited.md").as_deref(),
        Some("v2, here\n")
    );
}

#[test]
fn every_file_vanishing_at_once_is_a_wipe_rebuilt_not_deleted() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    put(&id, "/two.md", "2\n");
    put(&id, "/three.md", "3\n");
    pass(&remote, &local, &mut state);
    for f in ["seed.md", "two.md", "three.md"] {
        local.delete(&path(&at(f))).expect("delete");
    }
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert!(
        matches!(report.outcome, SyncOutcome::Recovered(_)),
        "{report:?}"
    );
    assert!(
        text(&local, "/memories/two.md").is_none(),
        "the state first"
    );
    // The caller saves the emptied state; the next pass brings all back.
    assert_eq!(pass(&remote, &local, &mut state).len(), 3);
    assert_eq!(memories(&id).len(), 3, "nothing deleted on the service");
    assert_eq!(text(&local, "/memories/two.md").as_deref(), Some("2\n"));
}

#[test]
fn a_missing_or_foreign_marker_with_files_left_syncs_nothing() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    let marker = path(&format!("/memories/{MARKER_FILE}"));
    write(&local, "/memories/new.md", "new\n");
    local.delete(&marker).expect("delete the marker");
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert_eq!(
        report.outcome,
        SyncOutcome::Untrusted("the marker file is gone")
    );
    write(&local, marker.as_str(), "version 1\nmemstore_someone_else");
    let report = remote.sync(&local, &mut state, &at_once()).expect("sync");
    assert!(
        matches!(report.outcome, SyncOutcome::Untrusted(_)),
        "{report:?}"
    );
    assert!(remote_text(&id, "/new.md").is_none(), "nothing uploaded");
}

#[test]
fn a_read_only_sync_only_pulls() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    let ro = SyncOptions {
        read_only: true,
        ..at_once()
    };
    write(&local, "/memories/mine.md", "mine\n");
    local.delete(&path("/memories/seed.md")).expect("delete");
    put(&id, "/theirs.md", "theirs\n");
    assert_eq!(
        pass_with(&remote, &local, &mut state, &ro),
        [
            SyncEvent::NotPushed(at("mine.md")),
            SyncEvent::NotPushed(at("seed.md")),
            SyncEvent::Pulled(at("theirs.md")),
        ]
    );
    assert_eq!(remote_text(&id, "/seed.md").as_deref(), Some("seed\n"));
    assert!(remote_text(&id, "/mine.md").is_none());
}

#[test]
fn deletes_are_capped_per_pass_and_log_only_or_disabled_send_none() {
    let Some((remote, id)) = fresh() else { return };
    for i in 0..40 {
        put(&id, &format!("/f{i:02}.md"), "x\n");
    }
    let local = InMemoryStore::new();
    let mut state = SyncState::new();
    pass(&remote, &local, &mut state);
    for i in 0..20 {
        local
            .delete(&path(&format!("/memories/f{i:02}.md")))
            .expect("delete");
    }
    let off = SyncOptions {
        deletes: DeleteMode::Disabled,
        ..at_once()
    };
    assert_eq!(
        pass_with(&remote, &local, &mut state, &off),
        [SyncEvent::DeletesSuppressed(20)]
    );
    let dry = SyncOptions {
        deletes: DeleteMode::LogOnly,
        ..at_once()
    };
    let events = pass_with(&remote, &local, &mut state, &dry);
    assert_eq!(events.len(), 11, "{events:?}");
    assert_eq!(events[10], SyncEvent::DeletesHeld(10));
    assert_eq!(memories(&id).len(), 40);
    // clamp(40 / 4, 8, 50) = 10 a pass.
    let events = pass(&remote, &local, &mut state);
    assert_eq!(
        events.last(),
        Some(&SyncEvent::DeletesHeld(10)),
        "{events:?}"
    );
    assert_eq!(memories(&id).len(), 30);
    // Then clamp(30 / 4, 8, 50) = 8.
    pass(&remote, &local, &mut state);
    assert_eq!(memories(&id).len(), 22);
}

#[test]
fn what_the_service_refuses_is_reported_once_and_tried_when_it_changes() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    write(&local, "/memories/big.md", &"x".repeat(102_401));
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Refused(at("big.md"), "over 102,400 bytes")]
    );
    assert_eq!(pass(&remote, &local, &mut state), [], "once");
    assert_eq!(state.refused(), 1, "and counted");
    write(&local, "/memories/big.md", "small now\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Pushed(at("big.md"))]
    );
    assert_eq!(remote_text(&id, "/big.md").as_deref(), Some("small now\n"));
}

#[test]
fn a_lost_state_is_a_first_pass_again_and_deletes_nothing() {
    let Some((remote, id, local, _)) = synced() else {
        return;
    };
    local.delete(&path("/memories/seed.md")).expect("delete");
    let mut lost = SyncState::new();
    let report = remote.sync(&local, &mut lost, &at_once()).expect("sync");
    assert_eq!(report.outcome, SyncOutcome::Joined);
    assert_eq!(report.events, [SyncEvent::Pulled(at("seed.md"))]);
    assert_eq!(remote_text(&id, "/seed.md").as_deref(), Some("seed\n"));
}

#[test]
fn a_state_of_another_memory_store_is_refused() {
    let Some((_, _, local, mut state)) = synced() else {
        return;
    };
    let Some((other, _)) = fresh() else { return };
    let e = other
        .sync(&local, &mut state, &at_once())
        .expect_err("refused");
    assert!(e.to_string().contains("another memory store"), "{e}");
}

#[test]
fn a_path_no_memory_path_can_spell_is_skipped_and_said() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    let long = format!("/{}.md", "n".repeat(300));
    put(&id, &long, "long name\n");
    assert_eq!(
        pass(&remote, &local, &mut state),
        [SyncEvent::Unspellable(format!("/memories{long}"))]
    );
}

/// The model edits a file while a pass is about to pull over it: the
/// pass's write checks the file still holds what it scanned, so the edit
/// stays (the next pass sees both changes and says so).
#[test]
fn attack_an_edit_made_during_a_pass_is_never_overwritten_unseen() {
    struct EditsFirst(InMemoryStore, std::sync::atomic::AtomicBool);
    impl MemoryStore for EditsFirst {
        fn stat(
            &self,
            p: &MemoryPath,
        ) -> claude_memory::store::StoreResult<Option<claude_memory::store::Metadata>> {
            self.0.stat(p)
        }
        fn read(
            &self,
            p: &MemoryPath,
            l: u64,
        ) -> claude_memory::store::StoreResult<claude_memory::store::FileContent> {
            self.0.read(p, l)
        }
        fn list(
            &self,
            d: &MemoryPath,
        ) -> claude_memory::store::StoreResult<Vec<claude_memory::store::DirEntry>> {
            self.0.list(d)
        }
        fn write_opts(
            &self,
            p: &MemoryPath,
            d: &[u8],
            o: claude_memory::store::WriteOptions<'_>,
        ) -> claude_memory::store::StoreResult<claude_memory::store::Version> {
            self.0.write_opts(p, d, o)
        }
        fn update_opts(
            &self,
            p: &MemoryPath,
            o: claude_memory::store::UpdateOptions<'_>,
            c: &mut claude_memory::store::Change<'_>,
        ) -> claude_memory::store::StoreResult<claude_memory::store::Updated> {
            if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.0
                    .write(p, b"the model's edit\n", WriteMode::Overwrite)?;
            }
            self.0.update_opts(p, o, c)
        }
        fn delete_opts(
            &self,
            p: &MemoryPath,
            o: claude_memory::store::DeleteOptions<'_>,
        ) -> claude_memory::store::StoreResult<bool> {
            self.0.delete_opts(p, o)
        }
        fn rename_opts(
            &self,
            f: &MemoryPath,
            t: &MemoryPath,
            o: claude_memory::store::RenameOptions<'_>,
        ) -> claude_memory::store::StoreResult<()> {
            self.0.rename_opts(f, t, o)
        }
    }
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    let racing = EditsFirst(local, false.into());
    overwrite(&id, &memories_with_ids(&id)[0].1, "there\n");
    assert_eq!(
        pass(&remote, &racing, &mut state),
        [SyncEvent::Raced(at("seed.md"))]
    );
    assert_eq!(
        text(&racing, "/memories/seed.md").as_deref(),
        Some("the model's edit\n")
    );
    assert_eq!(
        pass(&remote, &racing, &mut state)[0],
        SyncEvent::ServiceWon(at("seed.md"))
    );
}

#[test]
fn sync_runs_inside_a_tokio_runtime() {
    let Some((remote, id, local, mut state)) = synced() else {
        return;
    };
    put(&id, "/async.md", "async\n");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (local, events) = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let events = pass(&remote, &local, &mut state);
            (local, events)
        })
        .await
        .expect("join")
    });
    assert_eq!(events, [SyncEvent::Pulled(at("async.md"))]);
    assert_eq!(
        text(&local, "/memories/async.md").as_deref(),
        Some("async\n")
    );
}
