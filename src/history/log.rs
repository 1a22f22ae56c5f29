//! Where versions are kept: the [`HistoryLog`] trait and the in-memory
//! log (the journal file is `file_log.rs`, the SQL logs `sql.rs`).

use std::sync::{Mutex, PoisonError};

use super::{HistoryError, Revision};

/// A history log: where a [`HistoryStore`](super::HistoryStore) keeps its
/// versions, outside the live store's namespace (a reserved directory, a
/// reserved table), so no model path can reach it.
///
/// Appends are write-ahead: a [`HistoryStore`](super::HistoryStore)
/// appends a change's versions *before* it makes the change and
/// [`drop_versions`](Self::drop_versions) them if the change fails; what a
/// crash left between the two is repaired by the next open, and versions a
/// killed writer appended are checked against the store by the next writer
/// to take the [`exclusive`](Self::exclusive) lock, before it builds on them.
pub trait HistoryLog: Send + Sync {
    /// Appends `versions` in one step, giving each the next monotonic id
    /// (ids are never reused, across processes too).
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError>;

    /// Every version, by ascending id.
    fn load(&self) -> Result<Vec<Revision>, HistoryError>;

    /// Every version's record without its content (`content` is `None`,
    /// `redacted` as stored), by ascending id: what a listing needs, in a
    /// few hundred bytes a version instead of the whole history's
    /// content. The default loads everything and drops the content; the
    /// crate's logs read no content at all.
    fn records(&self) -> Result<Vec<Revision>, HistoryError> {
        let mut all = self.load()?;
        for v in &mut all {
            v.content = None;
        }
        Ok(all)
    }

    /// Removes versions (a failed change's, or pruned ones).
    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError>;

    /// Erases a version's content, keeping its record (sha256 and size
    /// included). `false` if there is no such version.
    fn redact(&self, id: u64) -> Result<bool, HistoryError>;

    /// Replaces a version's content with `content` and sets its redacted
    /// flag: the same text with a secret cut out
    /// ([`HistoryStore::redact_text`](super::HistoryStore::redact_text),
    /// `redacted`), or the content a pruned version held for a later one
    /// that referred to it. Its sha256 and size stay those of what was
    /// written. `false` if there is no such version.
    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError>;

    /// Makes dropped versions' content unrecoverable from the log's
    /// storage (a journal file rewrites itself, a database vacuums);
    /// called after pruning and redacting.
    fn compact(&self) -> Result<(), HistoryError> {
        Ok(())
    }

    /// Runs `change` holding the log's writer lock, which every process
    /// writing this log takes for each change (the look at the store, the
    /// version, the change) and an opener takes for its repair: so no
    /// repair ever sees another process's change half made. `change` gets
    /// the highest id given out so far, so a writer can tell whether
    /// others appended since it last looked. The appends, drops and loads
    /// `change` makes run under the same lock (it is re-entrant for this
    /// log). The default holds no lock beyond the caller's own: right for
    /// a log only one process can reach ([`MemoryLog`]).
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = self.load()?.last().map_or(0, |v| v.id);
        change(last);
        Ok(())
    }

    /// The versions with an id above `after`, by ascending id (what other
    /// processes appended since).
    fn load_after(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        let mut all = self.load()?;
        all.retain(|v| v.id > after);
        Ok(all)
    }

    /// Whether [`exclusive`](Self::exclusive) holds every other writer of
    /// this log off, in every process and through every handle, from a
    /// change's append until its change is made (the journal's and
    /// SQLite's lock files, PostgreSQL's advisory lock). Only then is a
    /// version another writer appended, seen under the lock, either done
    /// or left by a writer that died, so a writer checks such versions
    /// against the store and drops those it contradicts; without the lock
    /// (the default, [`MemoryLog`]) it may be a change still under way,
    /// and is taken as done.
    fn locks_writers(&self) -> bool {
        false
    }
}

macro_rules! forward_log {
    ($($ty:ident),*) => {$(
impl<T: HistoryLog + ?Sized> HistoryLog for $ty<T> {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        (**self).append(versions)
    }
    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        (**self).load()
    }
    fn records(&self) -> Result<Vec<Revision>, HistoryError> {
        (**self).records()
    }
    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        (**self).drop_versions(ids)
    }
    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        (**self).redact(id)
    }
    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        (**self).replace_content(id, content, redacted)
    }
    fn compact(&self) -> Result<(), HistoryError> {
        (**self).compact()
    }
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        (**self).exclusive(change)
    }
    fn load_after(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        (**self).load_after(after)
    }
    fn locks_writers(&self) -> bool {
        (**self).locks_writers()
    }
}
    )*};
}

use std::sync::Arc;
forward_log!(Arc, Box);

/// A log in memory, for [`InMemoryStore`](crate::InMemoryStore) and tests.
///
/// **Bounded.** It holds at most [`capacity`](Self::with_capacity) bytes
/// of content ([`DEFAULT_MEMORY_LOG_CAP`], 64 MiB, unless set): past it,
/// the oldest versions go first, as [`HistoryStore::prune`](super::HistoryStore::prune)
/// would remove them (never the latest version of a file, whose content
/// a later rename or delete may hand on), and [`evicted`](Self::evicted)
/// counts them. So a model editing a 1 MB file 300 times keeps the
/// process at the cap, not at 300 MB. An in-memory log is gone when the
/// process ends anyway; for evidence that must survive a flood, use a
/// durable log ([`FileLog`](super::FileLog), the SQL logs) and explicit
/// retention.
#[derive(Debug)]
pub struct MemoryLog {
    state: Mutex<MemoryState>,
    cap: usize,
}

#[derive(Debug, Default)]
struct MemoryState {
    last_id: u64,
    versions: std::collections::VecDeque<Revision>,
    /// Bytes of content held.
    held: usize,
    evicted: u64,
}

/// The default cap of a [`MemoryLog`]'s content: 64 MiB.
pub const DEFAULT_MEMORY_LOG_CAP: usize = 64 * 1024 * 1024;

impl Default for MemoryLog {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_MEMORY_LOG_CAP)
    }
}

impl MemoryLog {
    /// An empty log, holding at most [`DEFAULT_MEMORY_LOG_CAP`] bytes of
    /// content.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log holding at most `bytes` of content (the latest
    /// version of every file is kept even past it).
    pub fn with_capacity(bytes: usize) -> Self {
        MemoryLog {
            state: Mutex::new(MemoryState::default()),
            cap: bytes,
        }
    }

    /// How many versions the cap has removed so far.
    pub fn evicted(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .evicted
    }
}

/// What a version costs the log: its content and its record.
fn held(v: &Revision) -> usize {
    let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
    128 + v.content.as_ref().map_or(0, Vec::len)
        + v.path.len()
        + text(&v.from)
        + text(&v.actor)
        + text(&v.call)
        + text(&v.note)
}

impl MemoryState {
    /// Removes the oldest versions until the content fits `cap`, never
    /// the latest version of a file; a kept version of the same file
    /// that refers to a removed one's content (a rename, a delete) gets
    /// it first.
    fn evict(&mut self, cap: usize) {
        if self.held <= cap {
            return;
        }
        // Down to three quarters of the cap, so eviction (a pass over the
        // log) runs once per quarter of the cap appended, not per append.
        let target = cap - cap / 4;
        // The latest version of each file (the ones never removed).
        let mut latest: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        for v in &self.versions {
            latest.insert(file_of(v), v.id);
        }
        let mut i = 0;
        while self.held > target && i < self.versions.len() {
            let v = &self.versions[i];
            let file = file_of(v);
            if latest.get(&file) == Some(&v.id) {
                i += 1;
                continue;
            }
            let Some(gone) = self.versions.remove(i) else {
                break;
            };
            self.held = self.held.saturating_sub(held(&gone));
            self.evicted += 1;
            // Hand the content on to the next version of the same file
            // that refers to it (no content, not redacted, same hash).
            if let Some(content) = gone.content
                && let Some(next) = self
                    .versions
                    .iter_mut()
                    .skip(i)
                    .find(|n| file_of(n) == file)
                && next.content.is_none()
                && !next.redacted
                && next.sha256 == gone.sha256
            {
                self.held += content.len();
                next.content = Some(content);
            }
        }
    }
}

fn file_of(v: &Revision) -> u64 {
    if v.file == 0 { v.id } else { v.file }
}

impl HistoryLog for MemoryLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for v in versions.iter_mut() {
            state.last_id += 1;
            v.id = state.last_id;
            state.held += held(v);
            state.versions.push_back(v.clone());
        }
        state.evict(self.cap);
        Ok(())
    }

    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state.versions.iter().cloned().collect())
    }

    fn records(&self) -> Result<Vec<Revision>, HistoryError> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state.versions.iter().map(record_of).collect())
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut freed = 0;
        state.versions.retain(|v| {
            let gone = ids.contains(&v.id);
            if gone {
                freed += held(v);
            }
            !gone
        });
        state.held = state.held.saturating_sub(freed);
        Ok(())
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(v) = state.versions.iter_mut().find(|v| v.id == id) else {
            return Ok(false);
        };
        let before = held(v);
        erase(v);
        let after = held(v);
        state.held = state.held.saturating_sub(before) + after;
        Ok(true)
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(v) = state.versions.iter_mut().find(|v| v.id == id) else {
            return Ok(false);
        };
        let before = held(v);
        v.content = Some(content);
        v.redacted = redacted;
        let after = held(v);
        state.held = state.held.saturating_sub(before) + after;
        state.evict(self.cap);
        Ok(true)
    }

    /// In-process only: the caller's lock is enough.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_id;
        change(last);
        Ok(())
    }

    /// The versions above `after` only (a clone of them, not of the log).
    fn load_after(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state
            .versions
            .iter()
            .filter(|v| v.id > after)
            .cloned()
            .collect())
    }
}

/// A version's record: a copy without its content.
pub(super) fn record_of(v: &Revision) -> Revision {
    Revision {
        id: v.id,
        file: v.file,
        op: v.op,
        path: v.path.clone(),
        from: v.from.clone(),
        time: v.time,
        actor: v.actor.clone(),
        call: v.call.clone(),
        sha256: v.sha256.clone(),
        size: v.size,
        content: None,
        redacted: v.redacted,
        note: v.note.clone(),
    }
}

pub(super) fn erase(v: &mut Revision) {
    v.content = None;
    v.redacted = true;
}
