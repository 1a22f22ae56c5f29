//! The [`HistoryLog`] contract: where a [`HistoryStore`](super::HistoryStore)
//! keeps its versions, and the questions it asks of them, each answered
//! from the log's own indexes (no call reads the whole history).

use std::time::SystemTime;

use super::{HistoryError, Revision};

/// Which versions [`HistoryLog::find`] returns: every field that is set
/// must match. Logs answer the fields they index from their indexes and
/// may check the others version by version ([`matches`](Self::matches)
/// is the reference).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Ids above this one.
    pub after: Option<u64>,
    /// Ids below this one.
    pub before: Option<u64>,
    /// Versions of these files (file ids, kept across renames; see
    /// [`file_of`]).
    pub files: Option<Vec<u64>>,
    /// Versions that touch this stored path (`/memories/…`), as their
    /// path or as a rename's source.
    pub path: Option<String>,
    /// Versions that touch this stored path or one below it.
    pub prefix: Option<String>,
    /// Made at or after.
    pub since: Option<SystemTime>,
    /// Made at or before.
    pub until: Option<SystemTime>,
    /// Made by this label, or with this per-call actor.
    pub actor: Option<String>,
    /// Made with this per-call actor (a `tool_use` id) only.
    pub call: Option<String>,
}

impl Filter {
    /// Whether `v` matches (what a log without an index for a field
    /// checks).
    pub fn matches(&self, v: &Revision) -> bool {
        let touched = || std::iter::once(&v.path).chain(v.from.iter());
        self.after.is_none_or(|a| v.id > a)
            && self.before.is_none_or(|b| v.id < b)
            && self.files.as_ref().is_none_or(|f| f.contains(&file_of(v)))
            && self.path.as_ref().is_none_or(|p| touched().any(|t| t == p))
            && self
                .prefix
                .as_ref()
                .is_none_or(|p| touched().any(|t| super::under(t, p)))
            && self.since.is_none_or(|t| v.time >= t)
            && self.until.is_none_or(|t| v.time <= t)
            && self.actor.as_ref().is_none_or(|a| {
                v.actor.as_deref() == Some(a.as_str()) || v.call.as_deref() == Some(a.as_str())
            })
            && self
                .call
                .as_ref()
                .is_none_or(|c| v.call.as_deref() == Some(c.as_str()))
    }
}

/// The order of [`HistoryLog::find`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Oldest first: ids ascending (a replay, a copy).
    Oldest,
    /// Newest first: ids descending (a page of a listing).
    Newest,
}

/// A history log: where a [`HistoryStore`](super::HistoryStore) keeps its
/// versions, outside the live store's namespace (a reserved directory, a
/// reserved table), so no model path can reach it.
///
/// The log answers questions, never "everything": one version by id, and
/// the records matching a [`Filter`] in id order, up to a limit. A
/// [`HistoryStore`](super::HistoryStore) keeps its own index of the live
/// files in a checkpoint the log stores ([`save_checkpoint`](Self::save_checkpoint)),
/// so an open reads the checkpoint and the versions after it, whatever
/// the history's length.
///
/// Appends are write-ahead: a [`HistoryStore`](super::HistoryStore)
/// appends a change's versions *before* it makes the change and
/// [`drop_versions`](Self::drop_versions) them if the change fails; what a
/// crash left between the two is checked by the next writer to take the
/// [`exclusive`](Self::exclusive) lock, before it builds on them.
pub trait HistoryLog: Send + Sync {
    /// Appends `versions` in one step, giving each the next monotonic id
    /// (ids are never reused, across processes too).
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError>;

    /// Removes versions (a failed change's, or pruned ones).
    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError>;

    /// Version `id` with its content as stored (`None` for a version that
    /// refers to its file's previous one), or `None` if there is none.
    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError>;

    /// The records (no content: `content` is `None`) of the versions
    /// matching `filter`, in `order`, at most `limit` of them.
    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError>;

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

    /// Marks version `id` redacted without touching its content (a
    /// version that refers to a redacted one's content, and so has none
    /// of its own). `false` if there is no such version.
    fn mark_redacted(&self, id: u64) -> Result<bool, HistoryError> {
        self.redact(id)
    }

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
    /// others appended since it last looked. The log calls `change` made
    /// under the same lock (it is re-entrant for this log). The default
    /// holds no lock beyond the caller's own: right for a log only one
    /// process can reach ([`MemoryLog`](super::MemoryLog)).
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        let last = self
            .find(&Filter::default(), Order::Newest, 1)?
            .first()
            .map_or(0, |v| v.id);
        change(last);
        Ok(())
    }

    /// Whether [`exclusive`](Self::exclusive) holds every other writer of
    /// this log off, in every process and through every handle, from a
    /// change's append until its change is made (the journal's and
    /// SQLite's lock files, PostgreSQL's advisory lock). Only then is a
    /// version another writer appended, seen under the lock, either done
    /// or left by a writer that died, so a writer checks such versions
    /// against the store and drops those it contradicts; without the lock
    /// (the default, [`MemoryLog`](super::MemoryLog)) it may be a change
    /// still under way, and is taken as done.
    fn locks_writers(&self) -> bool {
        false
    }

    /// The last checkpoint [`save_checkpoint`](Self::save_checkpoint)
    /// stored, as it was given (`None`: none, and an open then reads the
    /// whole history once, and saves one).
    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        Ok(None)
    }

    /// Stores `data`, the history's index of the live files at some
    /// version, replacing the last one (all or nothing: a failure leaves
    /// the last one). Private as the versions are; the default keeps
    /// none.
    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        let _ = data;
        Ok(())
    }
}

macro_rules! forward_log {
    ($($ty:ident),*) => {$(
impl<T: HistoryLog + ?Sized> HistoryLog for $ty<T> {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        (**self).append(versions)
    }
    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        (**self).drop_versions(ids)
    }
    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        (**self).get(id)
    }
    fn find(&self, filter: &Filter, order: Order, limit: usize) -> Result<Vec<Revision>, HistoryError> {
        (**self).find(filter, order, limit)
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
    fn mark_redacted(&self, id: u64) -> Result<bool, HistoryError> {
        (**self).mark_redacted(id)
    }
    fn compact(&self) -> Result<(), HistoryError> {
        (**self).compact()
    }
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        (**self).exclusive(change)
    }
    fn locks_writers(&self) -> bool {
        (**self).locks_writers()
    }
    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        (**self).checkpoint()
    }
    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        (**self).save_checkpoint(data)
    }
}
    )*};
}

use std::sync::Arc;
forward_log!(Arc, Box);

/// The file id of `v`: a file's first version is stored with file `0`
/// (its id was not known before the append) and is its own file.
pub fn file_of(v: &Revision) -> u64 {
    if v.file == 0 { v.id } else { v.file }
}

pub(super) fn erase(v: &mut Revision) {
    v.content = None;
    v.redacted = true;
}
