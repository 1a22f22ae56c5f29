//! Sync: keeps any store of the crate and a managed memory store in step,
//! by the rules of the SDKs' own engine (Python `anthropic` 2.14,
//! `lib/tools/_memories.py`), so a folder an agent uses through this crate
//! and a managed agent's store hold the same memories.
//!
//! - `local`: the local store's side (scan, conditional writes).
//! - `merge`: the rules for one path, and the requests they make.

mod local;
mod merge;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::path::{MemoryPath, is_reserved};
use crate::store::ManagedStore;
use crate::store::managed::api::Memory;
use crate::store::{MemoryStore, StoreError, StoreResult};

/// The marker file at the local store's root: `version 1\n{store id}`, as
/// the SDKs write it. A sync trusts the local store only while it names
/// the memory store; it is never synced itself.
pub const MARKER_FILE: &str = ".anthropic-memory-store";

/// The SDKs' default time between syncs.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);

/// The shortest time between syncs the SDKs allow: each pass lists the
/// whole memory store.
pub const MIN_INTERVAL: Duration = Duration::from_secs(5);

/// Whether a file deleted locally deletes its memory on the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeleteMode {
    /// Yes, once its absence is corroborated, and at most a few per pass.
    #[default]
    Enabled,
    /// Run the same checks, and only report what would be deleted.
    LogOnly,
    /// Never delete a memory; the file comes back on the next download.
    Disabled,
}

/// How one sync pass behaves. Options as values:
/// `SyncOptions { read_only: true, ..SyncOptions::default() }`.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Whether local deletions reach the service ([`DeleteMode::Enabled`]).
    pub deletes: DeleteMode,
    /// Only pull: for a memory store the agent may only read, or a local
    /// copy that must never change the service.
    pub read_only: bool,
    /// How long a file must stay missing before its memory is deleted (30 s,
    /// as the SDKs wait): an editor's delete-and-rewrite, or a folder
    /// briefly unmounted, is not a deletion.
    pub corroborate: Duration,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            deletes: DeleteMode::Enabled,
            read_only: false,
            corroborate: Duration::from_secs(30),
        }
    }
}

/// What a sync remembers between passes, to tell a change from a conflict:
/// each path's sha256 as both sides last agreed on it. Keep it with the
/// local store (the CLI writes it as JSON beside the store), one per
/// memory store; a lost state is safe (the next pass is a first one,
/// which deletes nothing).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncState {
    /// The memory store this state belongs to (empty before the first pass).
    #[serde(default)]
    store: String,
    /// `path → sha` as of the last pass that saw both sides agree.
    #[serde(default)]
    baseline: BTreeMap<String, String>,
    /// `path → sha` the service refused; tried again once the file changes.
    #[serde(default)]
    refused: BTreeMap<String, String>,
    /// `path → when (Unix ms)` a file was first seen missing.
    #[serde(default)]
    missing_since: BTreeMap<String, u64>,
    /// `path → sha` sent with no answer: settled by the next listing.
    #[serde(default)]
    sent: BTreeMap<String, String>,
}

impl SyncState {
    /// The state of a sync that has not run yet.
    pub fn new() -> Self {
        SyncState::default()
    }

    /// Files the service refused, unchanged since: not in step, though
    /// no pass reports them again.
    pub fn refused(&self) -> usize {
        self.refused.len()
    }
}

/// How a pass went as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncOutcome {
    /// Both sides were reconciled, path by path.
    Synced,
    /// The first pass: the marker was written and the two sides merged
    /// without a base, so nothing was deleted and a path that differs on
    /// the two sides was left alone on both ([`SyncEvent::Differs`]).
    Joined,
    /// The local store is to be rebuilt from the service, sending
    /// nothing: its marker and files were gone, or every file vanished at
    /// once (a wipe is not a list of deletions). This pass only wrote the
    /// marker and emptied the state: save the state, then pass again,
    /// which brings every memory back.
    Recovered(&'static str),
    /// Nothing was done: the marker is gone or names another store while
    /// files remain, so those files may not be this store's to upload or
    /// to delete from.
    Untrusted(&'static str),
}

/// One thing a pass did or declined to do, by path (`/memories/…`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncEvent {
    /// The memory's content was written to the local file.
    Pulled(String),
    /// The local file's content was sent to the memory.
    Pushed(String),
    /// The memory was deleted on the service, so the file was removed.
    RemovedLocally(String),
    /// The file was deleted locally (and stayed so), so the memory was.
    DeletedRemotely(String),
    /// [`DeleteMode::LogOnly`]: this memory would have been deleted.
    WouldDelete(String),
    /// Changed on both sides since the last pass: the service's version
    /// was kept (it is pulled over the file), as the SDKs do.
    ServiceWon(String),
    /// Deleted locally but changed on the service: the file comes back.
    Restored(String),
    /// Deleted on the service but edited locally: the file is the only
    /// copy, so the memory is created again from it.
    Recreated(String),
    /// Deleted on the service but edited locally, with a read-only sync:
    /// the file stays, unsynced.
    KeptUnsynced(String),
    /// The service refused the file, or would (size, segments, not UTF-8
    /// text, its cap), and why: reported once, tried again when the file
    /// changes.
    Refused(String, &'static str),
    /// Deleted here: its memory is deleted once the file has been missing
    /// for [`SyncOptions::corroborate`] (a later pass sends it).
    DeletePending(String),
    /// [`SyncOptions::read_only`]: changed or deleted here, not sent.
    NotPushed(String),
    /// Both sides hold this path with different content and no pass ever
    /// saw them agree: neither is touched. Make them equal, or delete one.
    Differs(String),
    /// A name no memory path can spell, on either side: skipped.
    Unspellable(String),
    /// The service holds a memory at this name and memories below it; a
    /// local store holds a file or a directory at one name, never both,
    /// so this memory is not synced (the memories below are).
    Shadowed(String),
    /// Changed during the pass (on the service between its listing and a
    /// request, or here between the scan and a write): left as it is; the
    /// next pass applies the rules to both changes.
    Raced(String),
    /// This path failed (the service or the local store); the next pass
    /// tries again.
    Failed(String, String),
    /// The per-pass cap held back this many deletions for later passes.
    DeletesHeld(usize),
    /// [`DeleteMode::Disabled`]: this many locally deleted memories stay.
    DeletesSuppressed(usize),
}

impl fmt::Display for SyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncEvent::Pulled(p) => write!(f, "pulled {p}"),
            SyncEvent::Pushed(p) => write!(f, "pushed {p}"),
            SyncEvent::RemovedLocally(p) => write!(f, "removed {p} (deleted on the service)"),
            SyncEvent::DeletedRemotely(p) => write!(f, "deleted {p} on the service"),
            SyncEvent::WouldDelete(p) => {
                write!(f, "log-only: would delete {p} on the service")
            }
            SyncEvent::ServiceWon(p) => write!(
                f,
                "conflict: {p} changed on both sides; the service's version replaces the local edit (a --history store keeps it)"
            ),
            SyncEvent::Restored(p) => write!(
                f,
                "{p} was deleted here but changed on the service: restored"
            ),
            SyncEvent::Recreated(p) => write!(
                f,
                "{p} was deleted on the service but edited here: created again"
            ),
            SyncEvent::KeptUnsynced(p) => write!(
                f,
                "{p} was deleted on the service but edited here: kept, unsynced (read-only)"
            ),
            SyncEvent::Refused(p, why) => write!(
                f,
                "{p} does not fit a managed memory ({why}): not synced until it changes"
            ),
            SyncEvent::DeletePending(p) => write!(
                f,
                "{p} was deleted here: its memory is deleted once the file has stayed missing (a later pass)"
            ),
            SyncEvent::NotPushed(p) => write!(f, "read-only: {p} changed here, not sent"),
            SyncEvent::Differs(p) => write!(
                f,
                "conflict: {p} differs on the two sides, with no earlier sync to tell which is newer; left alone (make them equal or delete one)"
            ),
            SyncEvent::Unspellable(p) => write!(f, "skipped {p}: not a valid memory path"),
            SyncEvent::Shadowed(p) => write!(
                f,
                "skipped {p}: the service holds a memory at this name and memories below it, which no local store can hold at once (rename one on the service)"
            ),
            SyncEvent::Raced(p) => write!(
                f,
                "{p} changed during this pass: left as it is; the next pass decides"
            ),
            SyncEvent::Failed(p, why) => write!(f, "{p}: {why}; tried again next pass"),
            SyncEvent::DeletesHeld(n) => {
                write!(f, "delete cap reached: {n} deletions held for later passes")
            }
            SyncEvent::DeletesSuppressed(n) => write!(
                f,
                "deletes disabled: {n} locally deleted {} on the service",
                if *n == 1 {
                    "memory stays"
                } else {
                    "memories stay"
                }
            ),
        }
    }
}

impl SyncEvent {
    /// Whether the pass left this path out of step, so the two sides
    /// cannot be called in step (the CLI's `--once` then exits 1): a
    /// failure, a refusal, a conflict left alone, a race, a name that
    /// cannot be synced.
    pub fn left_out_of_step(&self) -> bool {
        matches!(
            self,
            SyncEvent::Failed(..)
                | SyncEvent::Refused(..)
                | SyncEvent::Differs(_)
                | SyncEvent::Unspellable(_)
                | SyncEvent::Shadowed(_)
                | SyncEvent::Raced(_)
        )
    }
}

/// What one pass did. Displayed, one line per event.
#[derive(Debug, Clone)]
pub struct SyncReport {
    /// How the pass went as a whole.
    pub outcome: SyncOutcome,
    /// Each path it changed or declined to change, in path order.
    pub events: Vec<SyncEvent>,
}

impl fmt::Display for SyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.outcome {
            SyncOutcome::Joined => writeln!(f, "first sync: both sides merged, nothing deleted")?,
            SyncOutcome::Recovered(why) => writeln!(f, "{why}: rebuilding from the service")?,
            SyncOutcome::Untrusted(why) => writeln!(f, "{why}: nothing synced")?,
            SyncOutcome::Synced => {}
        }
        for event in &self.events {
            writeln!(f, "{event}")?;
        }
        Ok(())
    }
}

/// The display form of a sync name.
fn shown(rel: &str) -> String {
    format!("{}/{rel}", crate::path::ROOT)
}

impl ManagedStore {
    /// One sync pass between `local` and this memory store, by the SDKs'
    /// rules: a change on one side reaches the other; a change on both
    /// takes the service's version and says so; a local deletion is sent
    /// (with the content it deletes as a precondition) only after it has
    /// lasted [`SyncOptions::corroborate`], and at most
    /// clamp(baseline / 4, 8, 50) a pass; a local store whose every file
    /// vanished at once is re-downloaded, not deleted remotely.
    ///
    /// `state` carries what the last pass saw; save it after each pass
    /// (it is [`Serialize`]), and pass again at once after a
    /// [`SyncOutcome::Recovered`] one. Write the local store through the same
    /// wrappers the agent uses (history, encryption) so the pass's own
    /// changes are kept as theirs are. A pass fails as a whole only when
    /// either side cannot be listed; a single path's failure is a
    /// [`SyncEvent::Failed`], tried again next pass.
    pub fn sync(
        &self,
        local: &dyn MemoryStore,
        state: &mut SyncState,
        options: &SyncOptions,
    ) -> StoreResult<SyncReport> {
        if !state.store.is_empty() && state.store != self.id {
            return Err(StoreError::Invalid {
                path: MemoryPath::root(),
                reason: "this sync state belongs to another memory store",
            });
        }
        let scan = local::scan(local, &self.id)?;
        let mut events: Vec<SyncEvent> = scan
            .unspellable
            .iter()
            .map(|p| SyncEvent::Unspellable(p.clone()))
            .chain(
                scan.unreadable
                    .iter()
                    .map(|(p, why)| SyncEvent::Failed(shown(p), why.clone())),
            )
            .collect();
        let mut outcome = if state.store.is_empty() {
            SyncOutcome::Joined
        } else {
            SyncOutcome::Synced
        };
        let untrusted = match scan.marker {
            local::Marker::Other if !scan.files.is_empty() => {
                Some("the marker file names another memory store")
            }
            local::Marker::Missing if outcome == SyncOutcome::Synced && !scan.files.is_empty() => {
                Some("the marker file is gone")
            }
            local::Marker::Ours => None,
            _ if outcome == SyncOutcome::Synced => {
                outcome = SyncOutcome::Recovered("the marker file and every file are gone");
                None
            }
            _ => None,
        };
        if let Some(why) = untrusted {
            return Ok(SyncReport {
                outcome: SyncOutcome::Untrusted(why),
                events,
            });
        }
        let (remote, shadowed) = self.remote(&mut events)?;
        merge::settle_sent(state, &remote);
        // One file gone is a deletion; every file gone at once is a wipe,
        // counted after settling so an upload that landed unheard counts.
        if outcome == SyncOutcome::Synced && scan.files.is_empty() && state.baseline.len() > 1 {
            outcome = SyncOutcome::Recovered("every file vanished at once");
        }
        // A first pass, or a rebuild: no base, so the merge deletes
        // nothing and leaves a path that differs alone on both sides.
        if outcome != SyncOutcome::Synced {
            local::stamp(local, &self.id)?;
            *state = SyncState {
                store: self.id.clone(),
                ..SyncState::default()
            };
        }
        // A rebuild stops here: the emptied state must be saved before
        // any file comes back, or a pass cut short would leave the old
        // baseline beside some files, and read the rest as deletions.
        if matches!(outcome, SyncOutcome::Recovered(_)) {
            return Ok(SyncReport { outcome, events });
        }
        merge::Pass::new(self, local, state, options, &mut events).run(
            &scan.files,
            &remote,
            &shadowed,
        );
        Ok(SyncReport { outcome, events })
    }

    /// Every memory of the store by sync name: the crate's own (reserved
    /// names) and the marker path left out, as the SDKs leave it out.
    /// The memories a local store cannot hold (a memory with memories
    /// below its name) are left out, and named in the second set: the pass
    /// leaves those paths as they are on both sides.
    fn remote(
        &self,
        events: &mut Vec<SyncEvent>,
    ) -> StoreResult<(BTreeMap<String, Memory>, BTreeSet<String>)> {
        let mut remote = BTreeMap::new();
        for m in self.below(&MemoryPath::root())? {
            let rel = m.path.strip_prefix('/').unwrap_or(&m.path);
            if rel == MARKER_FILE || rel.split('/').any(is_reserved) {
                continue;
            }
            // Spelled exactly: `//a.md` or `a.md`, trimmed, would land on
            // `/a.md` beside the memory there.
            if crate::store::managed::tree::memory_path(&m.path).is_none() {
                // As the service spells it: `a.md` shows as `/memoriesa.md`,
                // never as the valid `/memories/a.md`.
                events.push(SyncEvent::Unspellable(format!(
                    "{}{}",
                    crate::path::ROOT,
                    m.path
                )));
                continue;
            }
            remote.insert(rel.to_owned(), m);
        }
        // A memory `/x` beside memories below `/x/`: a local store holds
        // a file or a directory at one name, never both, so `/x` cannot
        // be synced. Said, never silently left behind.
        let shadowed: BTreeSet<String> = remote
            .keys()
            .filter(|rel| {
                let below = format!("{rel}/");
                remote
                    .range(below.clone()..)
                    .next()
                    .is_some_and(|(k, _)| k.starts_with(&below))
            })
            .cloned()
            .collect();
        for rel in &shadowed {
            remote.remove(rel);
            events.push(SyncEvent::Shadowed(shown(rel)));
        }
        Ok((remote, shadowed))
    }
}
