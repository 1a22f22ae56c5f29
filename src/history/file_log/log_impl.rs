//! [`HistoryLog`] for [`FileLog`]: each operation under the journal's
//! lock, caught up with what other handles appended first. A version is
//! found by a binary search on its id (ids grow along the journal); a
//! page is read forward from an id, or backward from the end.

use super::super::journal_line::{BackLines, Head, each_line_until, lower_bound};
use super::super::log::{Filter, Order};
use super::*;

impl FileLog {
    /// Whether a 0.4 journal's drop line removed version `id`.
    fn dropped(state: &FileState, id: u64) -> bool {
        state.legacy_drops.as_ref().is_some_and(|d| d.contains(&id))
    }
}

impl HistoryLog for FileLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        self.locked(|state| {
            self.flush(state)?;
            self.heal_tail(state)?;
            let mut lines = Vec::new();
            let mut id = state.last_id;
            for v in versions.iter_mut() {
                // A planted line can claim the last id there is.
                id = id.checked_add(1).ok_or_else(|| {
                    HistoryError::Log(
                        "the journal's version ids are used up (a line claims the highest id): refused"
                            .into(),
                    )
                })?;
                v.id = id;
                if v.file == 0 {
                    v.file = id;
                }
                serde_json::to_writer(
                    &mut lines,
                    &Line::Version(Box::new(Record::from_version(v))),
                )
                .map_err(log_error)?;
                lines.push(b'\n');
            }
            let start = state.file.metadata().map_err(log_error)?.len();
            self.append_lines(state, &lines)?;
            state.last_id = id;
            state.last_batch = Some((versions.iter().map(|v| v.id).collect(), start, state.seen));
            Ok(())
        })
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        self.locked(|state| {
            if let Some(staged) = &state.staged {
                return Ok(staged.iter().find(|v| v.id == id).cloned());
            }
            if Self::dropped(state, id) {
                return Ok(None);
            }
            let len = state.file.metadata().map_err(log_error)?.len();
            let at = lower_bound(&state.file, len, id)?;
            let mut found = None;
            each_line_until(&state.file, at, &mut |line| {
                match serde_json::from_slice::<Line>(line) {
                    Ok(Line::Version(r)) => {
                        if r.id == id {
                            found = Some((*r).into_version());
                        }
                        false
                    }
                    // A mark, a 0.4 drop line, a torn line: the next.
                    _ => true,
                }
            })?;
            Ok(found)
        })
    }

    /// Oldest first: from the first line with an id above `after`, found
    /// by its id; newest first: backwards from the line of `before`, or
    /// from the end. Each line's record is read without its content.
    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        self.locked(|state| {
            if let Some(staged) = &state.staged {
                let matching = staged.iter().filter(|v| filter.matches(v));
                let records = matching.map(Revision::clone_record);
                return Ok(match order {
                    Order::Oldest => records.take(limit).collect(),
                    Order::Newest => {
                        let mut all: Vec<Revision> = records.collect();
                        all.reverse();
                        all.truncate(limit);
                        all
                    }
                });
            }
            let mut out = Vec::new();
            if limit == 0 {
                return Ok(out);
            }
            let len = state.file.metadata().map_err(log_error)?.len();
            let take = |line: &[u8], out: &mut Vec<Revision>| -> Option<u64> {
                let id = leading_version_id(line)?;
                if Self::dropped(state, id) {
                    return Some(id);
                }
                if let Ok(head) = serde_json::from_slice::<Head>(line) {
                    let v = head.into_record();
                    if filter.matches(&v) {
                        out.push(v);
                    }
                }
                Some(id)
            };
            match order {
                Order::Oldest => {
                    let from = match filter.after {
                        Some(a) => lower_bound(&state.file, len, a.saturating_add(1))?,
                        None => 0,
                    };
                    each_line_until(&state.file, from, &mut |line| {
                        let id = take(line, &mut out);
                        out.len() < limit && filter.before.is_none_or(|b| id.is_none_or(|i| i < b))
                    })?;
                }
                Order::Newest => {
                    let end = match filter.before {
                        Some(b) => lower_bound(&state.file, len, b)?,
                        None => len,
                    };
                    let mut back = BackLines::new(&state.file, end);
                    while out.len() < limit
                        && let Some((_, line)) = back.prev()?
                    {
                        let id = take(&line, &mut out);
                        if filter.after.is_some_and(|a| id.is_some_and(|i| i <= a)) {
                            break;
                        }
                    }
                }
            }
            Ok(out)
        })
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.locked(|state| {
            self.writable()?;
            // The batch just appended and nothing after it: cut it off, so
            // a refused change leaves nothing in the file.
            if state.staged.is_none()
                && let Some((batch, start, end)) = &state.last_batch
                && batch.as_slice() == ids
                && state.file.metadata().map_err(log_error)?.len() == *end
            {
                let start = *start;
                state.file.set_len(start).map_err(log_error)?;
                state.seen = start;
                state.last_batch = None;
                return Ok(());
            }
            // Anything else (a dead writer's versions, a prune) leaves
            // the journal by a rewrite, so no later line ever has to be
            // read to know whether a version was dropped.
            let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
            self.change_all(state, |versions| {
                versions.retain(|v| !ids.contains(&v.id));
                true
            })
            .map(|_| ())
        })
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.locked(|state| {
            self.change_all(state, |versions| {
                versions
                    .iter_mut()
                    .find(|v| v.id == id)
                    .map(erase)
                    .is_some()
            })
        })
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.locked(|state| {
            self.change_all(state, |versions| {
                match versions.iter_mut().find(|v| v.id == id) {
                    Some(v) => {
                        v.content = Some(content);
                        v.redacted = redacted;
                        true
                    }
                    None => false,
                }
            })
        })
    }

    /// Rewrites the journal without dropped versions, so pruned content
    /// leaves the file.
    fn compact(&self) -> Result<(), HistoryError> {
        self.locked(|state| {
            let versions = match state.staged.take() {
                Some(staged) => staged,
                None => Self::read_all(state)?,
            };
            self.rewrite(state, &versions)
        })
    }

    /// Holds the lock file's exclusive `flock` for the whole change.
    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        struct Release<'a>(&'a FileLog);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
                state.held = false;
                self.0.release();
            }
        }
        let last = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.held {
                let last = state.last_id;
                drop(state);
                change(last);
                return Ok(());
            }
            self.acquire()?;
            if let Err(e) = self.catch_up(&mut state) {
                self.release();
                return Err(e);
            }
            state.held = true;
            state.last_id
        };
        let _release = Release(self);
        change(last);
        // What the change staged is written while the lock is still held.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.flush(&mut state)
    }

    /// Yes, when writable: the lock file's `flock` (a read-only log takes
    /// it shared, and writes nothing).
    fn locks_writers(&self) -> bool {
        !self.read_only && self.lock.is_some()
    }

    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        self.dir
            .read_file(CHECKPOINT, super::super::index::MAX_CHECKPOINT)
    }

    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.writable()?;
        self.dir.replace_file(CHECKPOINT, data).map_err(log_error)
    }
}
