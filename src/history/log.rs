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
/// [`drop_versions`](Self::drop_versions) them if the change fails; the next
/// open repairs what a crash left between the two.
pub trait HistoryLog: Send + Sync {
    /// Appends `versions` in one step, giving each the next monotonic id
    /// (ids are never reused, across processes too).
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError>;

    /// Every version, by ascending id.
    fn load(&self) -> Result<Vec<Revision>, HistoryError>;

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
}
    )*};
}

use std::sync::Arc;
forward_log!(Arc, Box);

/// A log in memory, for [`InMemoryStore`](crate::InMemoryStore) and tests.
#[derive(Debug, Default)]
pub struct MemoryLog {
    state: Mutex<(u64, Vec<Revision>)>,
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }
}

impl HistoryLog for MemoryLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for v in versions.iter_mut() {
            state.0 += 1;
            v.id = state.0;
            state.1.push(v.clone());
        }
        Ok(())
    }

    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state.1.clone())
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.1.retain(|v| !ids.contains(&v.id));
        Ok(())
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state.1.iter_mut().find(|v| v.id == id).map(erase).is_some())
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match state.1.iter_mut().find(|v| v.id == id) {
            Some(v) => {
                v.content = Some(content);
                v.redacted = redacted;
                true
            }
            None => false,
        })
    }

    /// In-process only: the caller's lock is enough.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = self.state.lock().unwrap_or_else(PoisonError::into_inner).0;
        change(last);
        Ok(())
    }
}

pub(super) fn erase(v: &mut Revision) {
    v.content = None;
    v.redacted = true;
}
