//! [`HistoryLog`] for [`FileLog`]: each operation under the journal's
//! lock, caught up with what other handles appended first. A version is
//! found by a binary search on its id (ids grow along the journal); a
//! page is read forward from an id, or backward from the end.

use super::super::journal_line::{
    BackLines, Head, MAX_LINE, each_line_until, lower_bound, time_bound,
};
use super::super::log::{Filter, Order, file_of};
use super::super::store::TOO_LONG;
use super::*;

impl FileLog {
    /// Whether a 0.4 journal's drop line removed version `id`.
    fn dropped(state: &FileState, id: u64) -> bool {
        state.legacy_drops.as_ref().is_some_and(|d| d.contains(&id))
    }

    /// A version line's id, and its record (no content; `None` if it
    /// was dropped or cannot be read); `None` for any other line.
    fn record_of(state: &FileState, line: &[u8]) -> Option<(u64, Option<Revision>)> {
        let id = leading_version_id(line)?;
        if Self::dropped(state, id) {
            return Some((id, None));
        }
        let head = serde_json::from_slice::<Head>(line).ok();
        Some((id, head.map(Head::into_record)))
    }

    /// The record of version `id` (no content), read by its id.
    fn record_by_id(state: &FileState, id: u64) -> Result<Option<Revision>, HistoryError> {
        let len = state.file.metadata().map_err(log_error)?.len();
        let at = lower_bound(&state.file, len, id)?;
        let mut found = None;
        each_line_until(
            &state.file,
            at,
            &mut |line| match Self::record_of(state, line) {
                Some((i, v)) => {
                    found = v.filter(|_| i == id);
                    false
                }
                None => true,
            },
        )?;
        Ok(found)
    }

    /// The newest `limit` versions `filter` matches before offset `end`,
    /// read backwards. Versions of one file are walked by their `prev`
    /// ids once the newest is found (what lies between is not read); a
    /// search by time stops at the first version older than it.
    fn newest(
        state: &FileState,
        filter: &Filter,
        limit: usize,
        mut end: u64,
        out: &mut Vec<Revision>,
    ) -> Result<(), HistoryError> {
        let ordered = state.legacy_drops.is_none();
        let single = match filter.files.as_deref() {
            Some([file]) if ordered => Some(*file),
            _ => None,
        };
        let too_old = |v: &Revision| {
            filter.after.is_some_and(|a| v.id <= a)
                || (ordered && filter.since.is_some_and(|s| v.time < s))
        };
        while out.len() < limit {
            // Backwards to the next version of the one file (or to the
            // start, for any other filter).
            let mut back = BackLines::new(&state.file, end);
            let mut found = None;
            while out.len() < limit
                && let Some((_, line)) = back.prev()?
            {
                let Some((_, Some(v))) = Self::record_of(state, &line) else {
                    continue;
                };
                if too_old(&v) {
                    return Ok(());
                }
                if filter.matches(&v) {
                    out.push(v.clone());
                }
                if single == Some(file_of(&v)) {
                    found = Some(v);
                    break;
                }
            }
            let Some(mut at) = found else { return Ok(()) };
            // Then from version to version by `prev`.
            loop {
                if out.len() >= limit || at.id == file_of(&at) {
                    return Ok(()); // the file's first version
                }
                let prev = match at.prev.filter(|p| *p < at.id) {
                    Some(p) => Self::record_by_id(state, p)?,
                    None => None,
                };
                match prev.filter(|v| Some(file_of(v)) == single) {
                    Some(v) => {
                        if too_old(&v) {
                            return Ok(());
                        }
                        if filter.matches(&v) {
                            out.push(v.clone());
                        }
                        at = v;
                    }
                    // No link kept (or a wrong one): read backwards from here.
                    None => {
                        let len = state.file.metadata().map_err(log_error)?.len();
                        end = lower_bound(&state.file, len, at.id)?;
                        break;
                    }
                }
            }
        }
        Ok(())
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
                // Times grow along the journal (a writer that waited for
                // the lock, a clock set back: the last time, not earlier).
                let last = super::super::from_nanos(state.last_time);
                v.time = v.time.max(last);
                state.last_time = super::super::to_nanos(v.time);
                let mut line = serde_json::to_vec(&Line::Version(Box::new(Record::from_version(v))))
                    .map_err(log_error)?;
                if line.len() > MAX_LINE {
                    // Never read back: the version is kept, its content not.
                    v.content = None;
                    v.note = Some(TOO_LONG.to_owned());
                    line = serde_json::to_vec(&Line::Version(Box::new(Record::from_version(v))))
                        .map_err(log_error)?;
                }
                lines.extend_from_slice(&line);
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
            // A 0.4 journal read as it is: times may not grow along it.
            let ordered = state.legacy_drops.is_none();
            let since = filter.since.filter(|_| ordered).map(super::super::to_nanos);
            match order {
                Order::Oldest => {
                    let mut from = match filter.after {
                        Some(a) => lower_bound(&state.file, len, a.saturating_add(1))?,
                        None => 0,
                    };
                    if let Some(since) = since {
                        from = from.max(time_bound(&state.file, len, since)?);
                    }
                    each_line_until(&state.file, from, &mut |line| {
                        let Some((id, v)) = Self::record_of(state, line) else {
                            return true;
                        };
                        if let Some(v) = v.filter(|v| filter.matches(v)) {
                            out.push(v);
                        }
                        out.len() < limit && filter.before.is_none_or(|b| id < b)
                    })?;
                }
                Order::Newest => {
                    let end = match filter.before {
                        Some(b) => lower_bound(&state.file, len, b)?,
                        None => len,
                    };
                    Self::newest(state, filter, limit, end, &mut out)?;
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
            let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
            // The journal's last lines and nothing before them (a dead
            // writer's versions, found by the next change): cut off too,
            // reading only those lines.
            if state.staged.is_none()
                && let Some(start) = tail_of(&state.file, &ids)?
            {
                state.file.set_len(start).map_err(log_error)?;
                state.seen = start;
                state.last_batch = None;
                return Ok(());
            }
            // Anything else (a prune, a version in the middle) leaves the
            // journal by a rewrite, so no later line ever has to be read to
            // know whether a version was dropped.
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

/// Where the journal's last lines start if they are exactly the versions
/// `ids` (read backwards, stopping at the first other line), else `None`.
fn tail_of(
    file: &std::fs::File,
    ids: &std::collections::HashSet<u64>,
) -> Result<Option<u64>, HistoryError> {
    let len = file.metadata().map_err(log_error)?.len();
    let mut back = BackLines::new(file, len);
    let mut found = 0;
    let mut start = len;
    while found < ids.len() {
        match back.prev()? {
            Some((at, line)) => match leading_version_id(&line) {
                Some(id) if ids.contains(&id) => {
                    found += 1;
                    start = at;
                }
                _ => return Ok(None),
            },
            None => return Ok(None),
        }
    }
    Ok(Some(start))
}
