//! [`MemoryLog`]: the versions in a map by id, for an
//! [`InMemoryStore`](crate::InMemoryStore) and tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use super::log::{Filter, HistoryLog, Order, erase, file_of};
use super::{HistoryError, Revision};

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
    versions: BTreeMap<u64, Revision>,
    /// Bytes of content held.
    held: usize,
    evicted: u64,
    checkpoint: Option<Vec<u8>>,
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
        self.lock().evicted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
        let mut latest: HashMap<u64, u64> = HashMap::new();
        for v in self.versions.values() {
            latest.insert(file_of(v), v.id);
        }
        let ids: Vec<u64> = self.versions.keys().copied().collect();
        for id in ids {
            if self.held <= target {
                break;
            }
            let Some(v) = self.versions.get(&id) else {
                continue;
            };
            let file = file_of(v);
            if latest.get(&file) == Some(&id) {
                continue;
            }
            let Some(gone) = self.versions.remove(&id) else {
                continue;
            };
            self.held = self.held.saturating_sub(held(&gone));
            self.evicted += 1;
            // Hand the content on to the next version of the same file
            // that refers to it (no content, not redacted, same hash).
            if let Some(content) = gone.content
                && let Some(next) = self
                    .versions
                    .range_mut(id + 1..)
                    .map(|(_, n)| n)
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

    fn change(&mut self, id: u64, edit: impl FnOnce(&mut Revision)) -> bool {
        let Some(v) = self.versions.get_mut(&id) else {
            return false;
        };
        let before = held(v);
        edit(v);
        let after = held(v);
        self.held = self.held.saturating_sub(before) + after;
        true
    }
}

impl HistoryLog for MemoryLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        let mut state = self.lock();
        for v in versions.iter_mut() {
            state.last_id += 1;
            v.id = state.last_id;
            if v.file == 0 {
                v.file = v.id;
            }
            state.held += held(v);
            state.versions.insert(v.id, v.clone());
        }
        state.evict(self.cap);
        Ok(())
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        let mut state = self.lock();
        for id in ids {
            if let Some(v) = state.versions.remove(id) {
                state.held = state.held.saturating_sub(held(&v));
            }
        }
        Ok(())
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        Ok(self.lock().versions.get(&id).cloned())
    }

    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        let state = self.lock();
        let low = filter.after.map_or(0, |a| a.saturating_add(1));
        let high = filter.before.unwrap_or(u64::MAX);
        if low >= high {
            return Ok(Vec::new());
        }
        let range = state.versions.range(low..high).map(|(_, v)| v);
        let pick = |v: &&Revision| filter.matches(v);
        Ok(match order {
            Order::Oldest => range
                .filter(pick)
                .take(limit)
                .map(Revision::clone_record)
                .collect(),
            Order::Newest => range
                .rev()
                .filter(pick)
                .take(limit)
                .map(Revision::clone_record)
                .collect(),
        })
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        Ok(self.lock().change(id, erase))
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        let mut state = self.lock();
        let found = state.change(id, |v| {
            v.content = Some(content);
            v.redacted = redacted;
        });
        state.evict(self.cap);
        Ok(found)
    }

    /// In-process only: the caller's lock is enough.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = self.lock().last_id;
        change(last);
        Ok(())
    }

    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        Ok(self.lock().checkpoint.clone())
    }

    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.lock().checkpoint = Some(data.to_vec());
        Ok(())
    }
}
