//! The rules for one path, as the SDKs' engine applies them, and the
//! requests they make. Each compares three shas: the local file's, the
//! memory's, and the baseline (what both sides last agreed on).

use std::collections::{BTreeMap, BTreeSet};

use super::local::{self, Checked, UNREADABLE};
use super::{DeleteMode, SyncEvent, SyncOptions, SyncState, shown};
use crate::store::managed::ManagedStore;
use crate::store::managed::api::{Fail, Memory};
use crate::store::managed::ops::{MAX_BYTES, MAX_SEGMENTS};
use crate::store::{MemoryStore, StoreError};

/// Why a path with a local directory where a file belongs is not synced.
const DIRECTORY_HERE: &str =
    "a directory is here and a file on the service: not synced until one of them is moved";

/// Bounds of the per-pass delete cap, as the SDKs set them.
const DELETE_CAP_FLOOR: usize = 8;
const DELETE_CAP_CEILING: usize = 50;

/// Forgets, after a listing, the shas sent with no answer: a memory that
/// holds exactly what was sent is that upload, landed, so it enters the
/// baseline instead of reading as a change on the service.
pub(super) fn settle_sent(state: &mut SyncState, remote: &BTreeMap<String, Memory>) {
    for (rel, sha) in std::mem::take(&mut state.sent) {
        if remote.get(&rel).is_some_and(|m| m.content_sha256 == sha) {
            state.baseline.insert(rel, sha);
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One pass over every path.
pub(super) struct Pass<'a> {
    store: &'a ManagedStore,
    local: &'a dyn MemoryStore,
    state: &'a mut SyncState,
    options: &'a SyncOptions,
    events: &'a mut Vec<SyncEvent>,
    /// Memories to fetch and write, with the sha the file must still have.
    pulls: Vec<(String, Memory, Option<String>)>,
    deletes_sent: usize,
    deletes_cap: usize,
    deletes_held: usize,
    deletes_suppressed: usize,
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        store: &'a ManagedStore,
        local: &'a dyn MemoryStore,
        state: &'a mut SyncState,
        options: &'a SyncOptions,
        events: &'a mut Vec<SyncEvent>,
    ) -> Pass<'a> {
        let cap = (state.baseline.len() / 4).clamp(DELETE_CAP_FLOOR, DELETE_CAP_CEILING);
        Pass {
            store,
            local,
            state,
            options,
            events,
            pulls: Vec::new(),
            deletes_sent: 0,
            deletes_cap: cap,
            deletes_held: 0,
            deletes_suppressed: 0,
        }
    }

    /// Reconciles every path either side or the baseline names, in order,
    /// then fetches what is to be pulled.
    pub(super) fn run(
        mut self,
        files: &BTreeMap<String, String>,
        remote: &BTreeMap<String, Memory>,
        shadowed: &BTreeSet<String>,
    ) {
        let paths: BTreeSet<String> = files
            .keys()
            .chain(remote.keys())
            .chain(self.state.baseline.keys())
            .cloned()
            .collect();
        let mut baseline = BTreeMap::new();
        for rel in &paths {
            let file = files.get(rel).map(String::as_str);
            let memory = remote.get(rel);
            let base = self.state.baseline.get(rel).cloned();
            let sha = match (file, memory, &base) {
                // The service holds a memory and a directory at this name:
                // both sides stay as they are (the pass said so).
                _ if shadowed.contains(rel) => base.clone(),
                // Gone here, unchanged there: a deletion to send.
                (None, Some(m), Some(b)) if m.content_sha256 == *b && !self.options.read_only => {
                    self.delete(rel, m, b)
                }
                // A file the store would not read: nothing is known of it.
                (Some(UNREADABLE), _, _) => base.clone(),
                _ => {
                    // Any other case ends an absence: a later one starts
                    // its own wait.
                    self.state.missing_since.remove(rel);
                    self.path(rel, file, memory, base.as_deref())
                }
            };
            if let Some(sha) = sha {
                baseline.insert(rel.clone(), sha);
            }
        }
        self.state.baseline = baseline;
        let pulls = std::mem::take(&mut self.pulls);
        self.pull(pulls);
        if self.deletes_held > 0 {
            self.events.push(SyncEvent::DeletesHeld(self.deletes_held));
        }
        if self.deletes_suppressed > 0 {
            self.events
                .push(SyncEvent::DeletesSuppressed(self.deletes_suppressed));
        }
    }

    /// Every rule but the deletion to send; the path's new baseline sha.
    fn path(
        &mut self,
        rel: &str,
        file: Option<&str>,
        memory: Option<&Memory>,
        base: Option<&str>,
    ) -> Option<String> {
        let read_only = self.options.read_only;
        let Some(memory) = memory else {
            let mut file = file?;
            let fresh;
            if let Some(base) = base {
                if file == base {
                    // Deleted there, unchanged here: remove the file.
                    match self.remove_local(rel, base) {
                        Removed::Gone => return None,
                        Removed::Kept => return Some(base.to_owned()),
                        Removed::Changed(sha) => {
                            fresh = sha;
                            file = &fresh;
                        }
                    }
                }
                // Deleted there, edited here: the file is the only copy.
                if read_only {
                    self.events.push(SyncEvent::KeptUnsynced(shown(rel)));
                    return None;
                }
                if self.state.refused.get(rel).map(String::as_str) != Some(file) {
                    self.events.push(SyncEvent::Recreated(shown(rel)));
                }
            }
            if read_only {
                self.events.push(SyncEvent::NotPushed(shown(rel)));
                return None;
            }
            if self.state.refused.get(rel).map(String::as_str) == Some(file) {
                return None;
            }
            return self.upload(rel, file, None);
        };
        let remote = memory.content_sha256.as_str();
        let changed_there = Some(remote) != base;
        let edited_here = file.is_some_and(|f| Some(f) != base && f != remote);
        if file.is_none() && base.is_some() {
            // Deleted here, changed there (or a read-only sync): the
            // service's version comes back.
            if changed_there {
                self.events.push(SyncEvent::Restored(shown(rel)));
                self.pulls.push((rel.to_owned(), memory.clone(), None));
            } else if read_only {
                self.events.push(SyncEvent::NotPushed(shown(rel)));
            }
            return base.map(str::to_owned);
        }
        if base.is_none() && edited_here {
            // Two contents and no base to say which is newer: neither
            // side is touched (the SDKs take the service's; this loses
            // nothing).
            self.events.push(SyncEvent::Differs(shown(rel)));
            return None;
        }
        if changed_there {
            if file == Some(remote) {
                return Some(remote.to_owned());
            }
            if edited_here {
                self.events.push(SyncEvent::ServiceWon(shown(rel)));
            }
            self.pulls
                .push((rel.to_owned(), memory.clone(), file.map(str::to_owned)));
            return base.map(str::to_owned);
        }
        if edited_here && read_only {
            self.events.push(SyncEvent::NotPushed(shown(rel)));
        }
        if edited_here && !read_only {
            let file = file.unwrap_or_default();
            if self.state.refused.get(rel).map(String::as_str) == Some(file) {
                return Some(remote.to_owned());
            }
            return self
                .upload(rel, file, Some(memory))
                .or_else(|| Some(remote.to_owned()));
        }
        Some(remote.to_owned())
    }

    /// Sends the file at `rel` (sha `scanned` when the scan read it): an
    /// update of `existing` with its sha as the precondition, or a create.
    /// The new baseline sha, or `None` to keep the old one and try again.
    fn upload(&mut self, rel: &str, scanned: &str, existing: Option<&Memory>) -> Option<String> {
        let path = local::path_of(rel)?;
        if path.components().len() > MAX_SEGMENTS {
            return self.refused(rel, scanned, "over 20 path segments");
        }
        let text = match self.local.read(&path, MAX_BYTES as u64) {
            Ok(f) => String::from_utf8(f.data),
            Err(StoreError::TooLarge { .. }) => {
                return self.refused(rel, scanned, "over 102,400 bytes");
            }
            Err(StoreError::NotFound { .. }) => return None,
            Err(e) => return self.failed(rel, &e.to_string()),
        };
        let Ok(text) = text else {
            return self.refused(rel, scanned, "not UTF-8 text");
        };
        let sha = local::sha256_hex(text.as_bytes());
        self.state.sent.insert(rel.to_owned(), sha.clone());
        let key = format!("/{rel}");
        let sent = match existing {
            Some(m) => self
                .store
                .api
                .update(&m.id, &m.content_sha256, Some(&text), None),
            None => self.store.api.create(&key, &text),
        };
        match sent {
            // Stored as something else (line endings normalised, say):
            // sent again, it would be changed again, every pass.
            Ok(m) if m.content_sha256 != sha => {
                self.state.sent.remove(rel);
                self.refused(
                    rel,
                    scanned,
                    "the service stored other content than was sent",
                );
                Some(m.content_sha256)
            }
            Ok(m) => {
                self.state.refused.remove(rel);
                self.state.sent.remove(rel);
                self.events.push(SyncEvent::Pushed(shown(rel)));
                Some(m.content_sha256)
            }
            // Deleted there since the listing: the file is the only copy.
            Err(Fail::NotFound) if existing.is_some() => self.upload(rel, scanned, None),
            Err(Fail::NotFound) => self.failed(rel, "the memory store is gone"),
            // The memory moved under the precondition (or the path was
            // taken): the next pass sees the winner and applies the rules.
            Err(Fail::Conflict) => {
                self.state.sent.remove(rel);
                self.events.push(SyncEvent::Raced(shown(rel)));
                None
            }
            Err(Fail::Refused) => self.refused(
                rel,
                scanned,
                "the service refused it (the store may be full)",
            ),
            Err(Fail::Unknown(cause)) => {
                self.failed(rel, &format!("no answer to the upload ({cause})"))
            }
            Err(Fail::Unreachable(cause)) => {
                self.state.sent.remove(rel);
                self.failed(rel, &format!("could not reach the service ({cause})"))
            }
        }
    }

    fn refused(&mut self, rel: &str, sha: &str, why: &'static str) -> Option<String> {
        self.state.sent.remove(rel);
        if self
            .state
            .refused
            .insert(rel.to_owned(), sha.to_owned())
            .as_deref()
            != Some(sha)
        {
            self.events.push(SyncEvent::Refused(shown(rel), why));
        }
        None
    }

    fn failed(&mut self, rel: &str, why: &str) -> Option<String> {
        self.events
            .push(SyncEvent::Failed(shown(rel), why.to_owned()));
        None
    }

    /// The deletion of a memory whose file is gone: sent only once the
    /// absence has lasted, is seen again now with the marker intact, and
    /// fits this pass's cap, with the baseline sha as its precondition.
    fn delete(&mut self, rel: &str, memory: &Memory, base: &str) -> Option<String> {
        let keep = Some(base.to_owned());
        // Something else is in the file's place (a directory, or what the
        // store will not show, such as a symbolic link): not a deletion;
        // say what is there.
        match local::path_of(rel).map(|path| self.local.stat(&path)) {
            Some(Err(e)) => {
                self.state.missing_since.remove(rel);
                return self.failed(rel, &e.to_string()).or(keep);
            }
            Some(Ok(Some(m))) if m.kind == crate::store::EntryKind::Directory => {
                self.state.missing_since.remove(rel);
                return self.failed(rel, DIRECTORY_HERE).or(keep);
            }
            _ => {}
        }
        if self.options.deletes == DeleteMode::Disabled {
            self.deletes_suppressed += 1;
            return keep;
        }
        let now = now_ms();
        let since = *self
            .state
            .missing_since
            .entry(rel.to_owned())
            .or_insert(now);
        if u128::from(now.saturating_sub(since)) < self.options.corroborate.as_millis() {
            self.events.push(SyncEvent::DeletePending(shown(rel)));
            return keep;
        }
        let still_gone = local::path_of(rel).is_some_and(|path| {
            local::marker_is_ours(self.local, &self.store.id).unwrap_or(false)
                && matches!(self.local.stat(&path), Ok(None))
        });
        if !still_gone {
            self.state.missing_since.remove(rel);
            return keep;
        }
        if self.deletes_sent >= self.deletes_cap {
            self.deletes_held += 1;
            return keep;
        }
        self.deletes_sent += 1;
        if self.options.deletes == DeleteMode::LogOnly {
            self.events.push(SyncEvent::WouldDelete(shown(rel)));
            return keep;
        }
        match self.store.api.delete(&memory.id, base) {
            Ok(()) | Err(Fail::NotFound) => {
                self.state.missing_since.remove(rel);
                self.events.push(SyncEvent::DeletedRemotely(shown(rel)));
                None
            }
            // Changed there since the listing: the next pass restores it.
            Err(Fail::Conflict) => {
                self.events.push(SyncEvent::Raced(shown(rel)));
                keep
            }
            Err(Fail::Refused) => self.failed(rel, "the service refused the delete").or(keep),
            Err(Fail::Unreachable(cause) | Fail::Unknown(cause)) => self
                .failed(rel, &format!("could not delete on the service ({cause})"))
                .or(keep),
        }
    }

    /// Removes a file whose memory was deleted, if it still holds `base`.
    fn remove_local(&mut self, rel: &str, base: &str) -> Removed {
        let Some(path) = local::path_of(rel) else {
            return Removed::Kept;
        };
        match local::remove_if(self.local, &path, base) {
            Ok(Checked::Done) => {
                self.events.push(SyncEvent::RemovedLocally(shown(rel)));
                Removed::Gone
            }
            Ok(Checked::Moved) => match local::hash(self.local, &path) {
                Ok(Some(sha)) if sha != base => Removed::Changed(sha),
                Ok(None) => Removed::Gone,
                _ => Removed::Kept,
            },
            Err(e) => {
                self.failed(rel, &e.to_string());
                Removed::Kept
            }
        }
    }

    /// Fetches each memory and writes it, if the file still has the sha
    /// the rules saw; its baseline then becomes the memory's sha.
    fn pull(&mut self, pulls: Vec<(String, Memory, Option<String>)>) {
        for (rel, listed, expected) in pulls {
            let Some(path) = local::path_of(&rel) else {
                continue;
            };
            if listed.content_size_bytes > MAX_BYTES as u64 {
                self.failed(&rel, "larger than a memory can be: not pulled");
                continue;
            }
            let memory = match self.store.api.retrieve(&listed.id) {
                Ok(m) => m,
                // Deleted since the listing: the next pass reconciles it.
                Err(Fail::NotFound) => {
                    self.events.push(SyncEvent::Raced(shown(&rel)));
                    continue;
                }
                Err(Fail::Unreachable(cause) | Fail::Unknown(cause)) => {
                    self.failed(&rel, &format!("could not fetch it ({cause})"));
                    continue;
                }
                Err(Fail::Conflict | Fail::Refused) => {
                    self.failed(&rel, "the service refused to send it");
                    continue;
                }
            };
            // What is written must be what the listing named, sha and
            // size: a missing, different or grown body would empty, change
            // or bloat both sides, and the rules were decided on the
            // listing.
            let Some(content) = memory.content.filter(|c| {
                c.len() as u64 == listed.content_size_bytes
                    && local::sha256_hex(c.as_bytes()) == listed.content_sha256
            }) else {
                self.failed(
                    &rel,
                    "the service sent content that does not match the sha256 and size it listed",
                );
                continue;
            };
            match local::write_if(self.local, &path, expected.as_deref(), content.as_bytes()) {
                Ok(Checked::Done) => {
                    self.events.push(SyncEvent::Pulled(shown(&rel)));
                    self.state.baseline.insert(rel, listed.content_sha256);
                }
                // A directory in its place can hold no memory; a file
                // changed here meanwhile is the next pass's.
                Ok(Checked::Moved) => match self.local.stat(&path) {
                    Ok(Some(m)) if m.kind == crate::store::EntryKind::Directory => {
                        self.failed(&rel, DIRECTORY_HERE);
                    }
                    _ => self.events.push(SyncEvent::Raced(shown(&rel))),
                },
                Err(e) => {
                    self.failed(&rel, &e.to_string());
                }
            }
        }
    }
}

/// What removing a file whose memory was deleted did.
enum Removed {
    /// It is gone.
    Gone,
    /// It could not be removed: the baseline keeps it for the next pass.
    Kept,
    /// It changed since the scan: its new sha.
    Changed(String),
}
