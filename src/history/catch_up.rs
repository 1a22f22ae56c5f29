//! Catching a handle up with what other writers recorded, and dropping
//! the versions a killed writer left of a change that never happened.

use std::collections::{HashMap, HashSet};

use super::index::{CHECKPOINT_EVERY, Index};
use super::log::{Filter, Order};
use super::repair::{left_at, touched};
use super::store::PAGE;
use super::{HistoryError, HistoryStore, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::{MemoryStore, StoreError};

impl<S: MemoryStore> HistoryStore<S> {
    /// Applies the versions other writers appended since this handle
    /// last looked (the log's last id is `last`) to the file index, after
    /// dropping those whose change never happened (see `unapplied`).
    /// Nothing to do, and nothing read, when no other writer appended.
    pub(super) fn catch_up(&self, index: &mut Index, last: u64) -> Result<(), HistoryError> {
        if last <= index.seen {
            return Ok(());
        }
        // Far behind: start from a checkpoint another writer saved since.
        if last - index.seen > CHECKPOINT_EVERY * 2
            && let Some(saved) = self
                .log
                .checkpoint()?
                .and_then(|data| Index::from_checkpoint(&data, last))
            && saved.seen > index.seen
        {
            *index = saved;
        }
        let check = self.log.locks_writers();
        self.advance(index, check, check)?;
        index.seen = index.seen.max(last);
        Ok(())
    }

    /// Applies the versions after `index.seen` to `index`, read page by
    /// page, once those whose change never happened are found (`check`;
    /// they are dropped from the log if `drop`, and left out of the index
    /// either way). The versions after a checkpoint are the ones a crash
    /// may have left half done: memory holds them (the checkpoint
    /// interval and the last change), not the history. What was left
    /// out, and how many were read.
    pub(super) fn advance(
        &self,
        index: &mut Index,
        check: bool,
        drop: bool,
    ) -> Result<(Vec<u64>, usize), HistoryError> {
        let mut newer: Vec<Revision> = Vec::new();
        let mut after = index.seen;
        loop {
            let filter = Filter {
                after: Some(after),
                ..Filter::default()
            };
            let page = self.log.find(&filter, Order::Oldest, PAGE)?;
            let Some(end) = page.last().map(|v| v.id) else {
                break;
            };
            after = end;
            for mut v in page {
                if v.file == 0 {
                    v.file = v.id;
                }
                newer.push(v);
            }
        }
        let read = newer.len();
        let dropped = if check {
            self.unapplied(index, &newer)?
        } else {
            Vec::new()
        };
        if drop && !dropped.is_empty() {
            self.log.drop_versions(&dropped)?;
        }
        let gone: HashSet<u64> = dropped.iter().copied().collect();
        for v in newer.iter().filter(|v| !gone.contains(&v.id)) {
            index.apply(v);
        }
        Ok((dropped, read))
    }

    /// The ids of the versions in `newer` (other writers' versions, ids
    /// ascending, appended after what `index` holds) whose change the
    /// store contradicts: each the newest on every path it touches, the
    /// store not as it says, and as the version before it says.
    ///
    /// Why: versions are appended before their change (write-ahead), and
    /// a writer killed between the two leaves versions of a change that
    /// never happened. The writer lock is held from the append until the
    /// change is made, so versions another writer appended are, when this
    /// handle holds the lock, either done or left by a writer that died
    /// (or failed to drop them); taken as done, the next change would be
    /// recorded on top of a phantom (an edit of a file the history thinks
    /// renamed away) and open's repair would later record the difference
    /// as anonymous `repair` versions. This is open's repair rule, run on
    /// other writers' new versions only, so a lone writer reads nothing;
    /// only on a log whose lock holds every writer off
    /// ([`HistoryLog::locks_writers`]), since without it a version may be
    /// a change another handle is still making.
    ///
    /// The look runs under the wrapped store's own lock
    /// ([`MemoryStore::exclusive`]), which first finishes what a killed
    /// writer left of a change the store makes in several steps (an
    /// encrypted rename's move journal): the versions of a move it then
    /// finishes are kept, not dropped. A file the store will not let us
    /// read within the limit cannot be told, and its versions are kept.
    fn unapplied(&self, index: &Index, newer: &[Revision]) -> Result<Vec<u64>, HistoryError> {
        if newer.is_empty() {
            return Ok(Vec::new());
        }
        let mut by_path: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, v) in newer.iter().enumerate() {
            for p in touched(v) {
                let list = by_path.entry(p.as_str()).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        let mut dropped = Vec::new();
        let root = MemoryPath::root();
        let looked = self.inner.exclusive(&root, &mut |_| {
            // Path → the store's content hash there (`None`: no file),
            // or `Err(())`: cannot tell.
            let mut live: HashMap<String, Result<Option<String>, ()>> = HashMap::new();
            for i in (0..newer.len()).rev() {
                let v = &newer[i];
                let mut paths: Vec<&str> = touched(v).map(String::as_str).collect();
                paths.dedup();
                let newest = paths
                    .iter()
                    .all(|p| by_path.get(p).and_then(|l| l.last()) == Some(&i));
                if !newest {
                    continue;
                }
                let mut now = Vec::with_capacity(paths.len());
                for p in &paths {
                    let state = live
                        .entry((*p).to_owned())
                        .or_insert_with(|| self.hash_at(p))
                        .clone();
                    match state {
                        Ok(sha) => now.push(sha),
                        Err(()) => break,
                    }
                }
                if now.len() != paths.len() {
                    continue; // cannot tell: kept
                }
                let says = |p: &str| left_at(v, p);
                let before = |p: &str| match by_path.get(p).map(Vec::as_slice) {
                    Some([.., j, _]) => left_at(&newer[*j], p),
                    _ => index.files.get(p).map(|k| k.sha256.as_str()),
                };
                let done = paths.iter().zip(&now).all(|(p, n)| says(p) == n.as_deref());
                let never = paths
                    .iter()
                    .zip(&now)
                    .all(|(p, n)| before(p) == n.as_deref());
                if done || !never {
                    continue;
                }
                dropped.push(v.id);
                // The version before it on each path is now the newest,
                // and is looked at in turn.
                for p in &paths {
                    if let Some(list) = by_path.get_mut(p) {
                        list.pop();
                    }
                }
            }
            Ok(())
        });
        looked.map_err(|e| {
            HistoryError::Log(format!(
                "cannot check other writers' versions against the store: {e}"
            ))
        })?;
        Ok(dropped)
    }

    /// The sha256 of the file at stored path `p` (`None`: no file there),
    /// or `Err(())` if the store will not let us read it within the limit.
    fn hash_at(&self, p: &str) -> Result<Option<String>, ()> {
        let path = MemoryPath::from_stored(p).ok_or(())?;
        match self.inner.read(&path, self.limit) {
            Ok(f) => Ok(Some(sha256_hex(&f.data))),
            Err(StoreError::NotFound { .. }) => match self.inner.stat(&path) {
                Ok(None) => Ok(None),
                _ => Err(()),
            },
            Err(_) => Err(()),
        }
    }
}
