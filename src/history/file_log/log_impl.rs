//! [`HistoryLog`] for [`FileLog`]: each operation under the journal's
//! lock, caught up with what other handles appended first.

use super::*;

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

    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        self.locked(|state| Self::current(state))
    }

    /// Two passes over the journal, one line at a time: the dropped ids,
    /// then the records (their content skipped, never decoded).
    fn records(&self) -> Result<Vec<Revision>, HistoryError> {
        self.locked(|state| {
            if let Some(staged) = &state.staged {
                return Ok(staged.iter().map(crate::history::log::record_of).collect());
            }
            let mut dropped = std::collections::HashSet::new();
            each_line(&state.file, 0, &mut |line| {
                if line.starts_with(b"{\"drop\"")
                    && let Ok(Line::Drop { drop }) = serde_json::from_slice::<Line>(line)
                {
                    dropped.extend(drop);
                }
            })?;
            let mut out = std::collections::BTreeMap::new();
            each_line(&state.file, 0, &mut |line| {
                if line.starts_with(b"{\"id\"")
                    && let Ok(head) = serde_json::from_slice::<Head>(line)
                    && !dropped.contains(&head.id)
                {
                    out.insert(head.id, head.into_record());
                }
            })?;
            Ok(out.into_values().collect())
        })
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.locked(|state| {
            self.writable()?;
            // An operator's change in progress (a prune): dropped from
            // what it staged, written in its one rewrite.
            if state.staged.is_some() {
                let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
                return self
                    .change_all(state, |versions| {
                        versions.retain(|v| !ids.contains(&v.id));
                        true
                    })
                    .map(|_| ());
            }
            // The batch just appended and nothing after it: cut it off, so
            // a refused change leaves nothing in the file.
            if let Some((batch, start, end)) = &state.last_batch
                && batch.as_slice() == ids
                && state.file.metadata().map_err(log_error)?.len() == *end
            {
                let start = *start;
                state.file.set_len(start).map_err(log_error)?;
                state.seen = start;
                state.last_batch = None;
                return Ok(());
            }
            self.heal_tail(state)?;
            let mut line = serde_json::to_vec(&Line::Drop { drop: ids.to_vec() })
                .map_err(|e| io::Error::other(e.to_string()))
                .map_err(log_error)?;
            line.push(b'\n');
            self.append_lines(state, &line)?;
            state.last_batch = None;
            Ok(())
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

    /// Rewrites the journal without dropped versions and tombstones, so
    /// pruned content leaves the file.
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

    fn load_after(&self, after: u64) -> Result<Vec<Revision>, HistoryError> {
        self.locked(|state| {
            if state.staged.is_some() {
                let mut all = Self::current(state)?;
                all.retain(|v| v.id > after);
                return Ok(all);
            }
            Self::read_after(state, after)
        })
    }
}
