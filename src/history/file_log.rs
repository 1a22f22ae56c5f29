//! The journal file: [`FileLog`], one JSON line per version in the
//! store's reserved directory (opened through `journal_dir.rs`), and its
//! [`HistoryLog`]: each operation under the journal's lock, caught up
//! with what other handles appended first. A version is found by a
//! binary search on its id (ids grow along the journal); a page is read
//! forward from an id, or backward from the end.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::journal_dir::Dir;
use super::journal_line::{
    BackLines, FORMAT, Head, Line, MAX_LINE, Record, each_line, each_line_until,
    leading_version_id, lower_bound, time_bound, time_of,
};
use super::log::{Filter, HistoryLog, Order, erase, file_of};
use super::store::TOO_LONG;
use super::version::NONE_KEPT;
use super::{HistoryError, Revision};

/// The reserved directory a [`FileLog`] uses inside a filesystem store's
/// root: the store never lists it, and no memory path can name it.
pub const HISTORY_DIR: &str = ".claude-memory-history";

pub(super) const JOURNAL: &str = "journal.jsonl";

/// The checkpoint of the history's index, beside the journal.
pub(super) const CHECKPOINT: &str = "checkpoint.json";

/// The lock file beside the journal: see [`FileLog`].
pub(super) const LOCK: &str = "journal.lock";

/// A journal file: one JSON line per version (and one per dropped batch),
/// appended under an exclusive `flock` on the lock file beside it
/// (`journal.lock`, mode 0600, never replaced: the journal is, by every
/// redaction and prune, so a lock on it would not be one lock for every
/// process), so several processes share it.
///
/// [`FileLog::for_store`] puts it in the reserved directory
/// `.claude-memory-history/` of a filesystem store's root (mode 0700, the
/// journal 0600). On Unix both are opened relative to a handle on the
/// root, following no link: a journal or directory replaced by a symbolic
/// link, a journal with a second hard link, or one that is not a regular
/// file (a FIFO, a device) is refused, never read or written. A torn last
/// line (a writer killed mid-append) is cut off when the log is opened
/// for writing ([`open_read_only`](Self::open_read_only) never writes).
/// Redaction and pruning rewrite the file (a new file, synced, renamed
/// over the old one), so erased content is gone from it.
///
/// An append that fails half-way (a full disk) is cut back off, so the
/// journal is as it was; the versions of a change the store refused are
/// cut off the same way (nothing of them stays in the file).
///
/// By default an append is not synced: after a process crash (`SIGKILL`)
/// nothing is lost, since the page cache survives; after a power cut the
/// last versions may be missing, and the next open records the files they
/// changed as `repair` versions (content kept, the actor lost).
/// [`sync`](Self::sync) adds one `fdatasync` per change so attribution
/// survives a power cut too.
#[derive(Debug)]
pub struct FileLog {
    dir: Dir,
    /// The lock file (`None`: read-only, and there is none; see
    /// [`Dir::lock`]).
    lock: Option<File>,
    sync: bool,
    read_only: bool,
    state: Mutex<FileState>,
}

#[derive(Debug)]
struct FileState {
    file: File,
    /// Bytes of the journal this handle has seen.
    seen: u64,
    last_id: u64,
    /// The last version's time (ns since the epoch): a version appended
    /// after it is given no earlier time, so times grow along the
    /// journal and a search by time is a binary search.
    last_time: u64,
    /// Where the last line this handle saw starts, and its first bytes: a
    /// journal cut back and grown again to the length this handle saw (a
    /// dead writer's versions cut off, another's appended) no longer
    /// holds them there, and is read again.
    last_line: Option<(u64, Vec<u8>)>,
    /// Whether [`HistoryLog::exclusive`] holds the `flock` now.
    held: bool,
    /// The last batch appended: its ids, and where it starts and ends, so
    /// dropping it (a refused change) cuts it off instead of adding a line.
    last_batch: Option<(Vec<u64>, u64, u64)>,
    /// Redactions and content changes made while [`HistoryLog::exclusive`]
    /// holds the lock, written in one rewrite when it ends (or sooner, if
    /// anything else writes): an operator's redaction of N versions costs
    /// one rewrite of the journal, not N.
    staged: Option<Vec<Revision>>,
    /// The versions a 0.4 journal's drop lines removed, when it is read
    /// without being migrated (a read-only open); `None` for a journal of
    /// this release's format, which has no drop lines.
    legacy_drops: Option<std::collections::HashSet<u64>>,
}

pub(super) fn log_error(e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Log(e.to_string())
}

impl FileLog {
    /// The log of the filesystem store rooted at `root`: its reserved
    /// directory `.claude-memory-history/`, created if missing, opened
    /// relative to a handle on `root` (no link followed).
    pub fn for_store(root: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        Self::open_in(root.as_ref(), Some(HISTORY_DIR), false)
    }

    /// [`for_store`](Self::for_store) for reading only: nothing is
    /// created, cut or written (the history commands that only read).
    pub fn for_store_read_only(root: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        Self::open_in(root.as_ref(), Some(HISTORY_DIR), true)
    }

    /// The log in directory `dir`, created (mode 0700) if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        Self::open_in(dir.as_ref(), None, false)
    }

    /// The log in directory `dir`, for reading only.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        Self::open_in(dir.as_ref(), None, true)
    }

    fn open_in(base: &Path, sub: Option<&str>, read_only: bool) -> Result<FileLog, HistoryError> {
        let dir = Dir::open(base, sub, !read_only)?;
        let file = dir.journal(read_only)?;
        let lock = dir.lock(read_only)?;
        let log = FileLog {
            dir,
            lock,
            sync: false,
            read_only,
            state: Mutex::new(FileState {
                file,
                seen: 0,
                last_id: 0,
                last_time: 0,
                last_line: None,
                held: false,
                last_batch: None,
                staged: None,
                legacy_drops: None,
            }),
        };
        {
            let mut state = log.state.lock().unwrap_or_else(PoisonError::into_inner);
            log.acquire()?;
            // (A journal renamed over before the lock was ours was cut to
            // nothing by its rewriter, so cutting its tail is harmless;
            // `catch_up` then opens the one there is now, and an append
            // heals that one's tail first.)
            let result = if read_only {
                log.catch_up(&mut state)
            } else {
                log.cut_torn_tail(&mut state)
                    .and_then(|()| log.catch_up(&mut state))
            };
            let result = result.and_then(|()| log.upgrade(&mut state));
            log.release();
            result?;
        }
        Ok(log)
    }

    /// Brings a journal to this release's format, once: a new journal
    /// gets its mark line; a 0.4 journal (no format, maybe drop lines) is
    /// rewritten without its dropped versions, or, opened read-only,
    /// has its drop lines read once so no dropped version is shown.
    fn upgrade(&self, state: &mut FileState) -> Result<(), HistoryError> {
        let len = state.file.metadata().map_err(log_error)?.len();
        if len == 0 {
            if self.read_only {
                return Ok(());
            }
            let mark = mark_line(state.last_id)?;
            return self.append_lines(state, &mark);
        }
        let mut first = None;
        super::journal_line::each_line_until(&state.file, 0, &mut |line| {
            first = serde_json::from_slice::<Line>(line).ok();
            false
        })?;
        if let Some(Line::Mark { format, .. }) = first
            && format >= FORMAT
        {
            return Ok(());
        }
        if self.read_only {
            let mut dropped = std::collections::HashSet::new();
            each_line(&state.file, 0, &mut |line| {
                if line.starts_with(b"{\"drop\"")
                    && let Ok(Line::Drop { drop }) = serde_json::from_slice::<Line>(line)
                {
                    dropped.extend(drop);
                }
            })?;
            state.legacy_drops = Some(dropped);
            return Ok(());
        }
        let mut versions = Self::read_all(state)?;
        // This format's two promises, kept for what 0.4 wrote: times grow
        // along the journal, and each version names its file's previous.
        let mut time = std::time::UNIX_EPOCH;
        let mut latest = std::collections::HashMap::new();
        for v in &mut versions {
            time = time.max(v.time);
            v.time = time;
            v.prev = latest.insert(file_of(v), v.id);
        }
        self.rewrite(state, versions)
    }

    /// Syncs every append (`fdatasync`), so a power cut loses no
    /// attribution (default: off; see the type's documentation).
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Cuts a last line without its newline (a writer killed mid-append),
    /// reading only the file's tail.
    fn cut_torn_tail(&self, state: &mut FileState) -> Result<(), HistoryError> {
        let len = state.file.metadata().map_err(log_error)?.len();
        if len == 0 {
            return Ok(());
        }
        let mut end = len;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let start = end.saturating_sub(buf.len() as u64);
            let n = usize::try_from(end - start).unwrap_or(0);
            (&state.file)
                .seek(SeekFrom::Start(start))
                .map_err(log_error)?;
            (&state.file).read_exact(&mut buf[..n]).map_err(log_error)?;
            if end == len && buf[n - 1] == b'\n' {
                return Ok(());
            }
            if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
                return state.file.set_len(start + i as u64 + 1).map_err(log_error);
            }
            if start == 0 {
                return state.file.set_len(0).map_err(log_error);
            }
            end = start;
        }
    }

    /// Reopens the journal if another process replaced it (redaction,
    /// pruning), then reads what others appended since, for the last id.
    fn catch_up(&self, state: &mut FileState) -> Result<(), HistoryError> {
        // No other process changes the journal while the lock is held, so
        // one look suffices: it was replaced before the lock was ours.
        if self.dir.replaced(&state.file)? {
            state.file = self.dir.journal(self.read_only)?;
            state.seen = 0;
            state.last_batch = None;
        }
        let len = state.file.metadata().map_err(log_error)?.len();
        // Rewritten in place (a full disk: the same file, shorter, maybe
        // grown again since) or cut back and grown again: what this handle
        // saw up to `seen` is not there any more, so it reads the
        // journal's ends again (its last id only grows).
        let moved = match &state.last_line {
            Some((at, head)) if len >= state.seen => {
                head_at(&state.file, *at, head.len())? != *head
            }
            _ => false,
        };
        if moved
            || len < state.seen
            || (len > state.seen && !line_ends_at(&state.file, state.seen)?)
        {
            state.seen = 0;
            state.last_batch = None;
        }
        if len <= state.seen {
            return Ok(());
        }
        state.last_batch = None;
        let (id, time) = Self::last_in(&state.file, len)?;
        state.last_id = state.last_id.max(id);
        state.last_time = state.last_time.max(time);
        state.seen = len;
        state.last_line = last_line(&state.file, len)?;
        Ok(())
    }

    /// The highest id the journal names (its last version line's, or a
    /// mark's: the first line, or one after the last versions) and the
    /// last version's time, read from the file's two ends only.
    fn last_in(file: &File, len: u64) -> Result<(u64, u64), HistoryError> {
        let mut last = 0;
        super::journal_line::each_line_until(file, 0, &mut |line| {
            if let Ok(Line::Mark { last_id, .. }) = serde_json::from_slice::<Line>(line) {
                last = last_id;
            }
            false
        })?;
        let mut back = BackLines::new(file, len);
        // A last line without its newline is torn (a writer killed
        // mid-append): its leading digits may be a cut id.
        if !line_ends_at(file, len)? {
            back.prev()?;
        }
        while let Some((_, line)) = back.prev()? {
            if let Some(id) = leading_version_id(&line) {
                return Ok((last.max(id), time_of(&line).unwrap_or(0)));
            }
            // A mark after the versions: the ids a cut took off stay used.
            if let Ok(Line::Mark { last_id, .. }) = serde_json::from_slice::<Line>(&line) {
                last = last.max(last_id);
            }
        }
        Ok((last, 0))
    }

    fn locked<T>(
        &self,
        f: impl FnOnce(&mut FileState) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.held {
            return self.catch_up(&mut state).and_then(|()| f(&mut state));
        }
        self.acquire()?;
        let result = self.catch_up(&mut state).and_then(|()| f(&mut state));
        self.release();
        result
    }

    /// Takes the lock file's `flock`: shared to read only, else
    /// exclusive (none if a read-only log found no lock file). Blocks
    /// until it is ours; an error (the lock file's descriptor refused,
    /// `EINTR` is retried by std) is the caller's, since nothing may be
    /// read or written unlocked.
    fn acquire(&self) -> Result<(), HistoryError> {
        match &self.lock {
            Some(lock) if self.read_only => lock.lock_shared().map_err(log_error),
            Some(lock) => lock.lock().map_err(log_error),
            None => Ok(()),
        }
    }

    /// Lets the lock file's `flock` go. An unlock error is ignored: it
    /// can only be a bad descriptor, and the lock also ends when the log
    /// is dropped (the descriptor closed).
    fn release(&self) {
        if let Some(lock) = &self.lock {
            let _ = lock.unlock();
        }
    }

    fn writable(&self) -> Result<(), HistoryError> {
        if self.read_only {
            return Err(HistoryError::Log(
                "the history is open for reading only".into(),
            ));
        }
        Ok(())
    }

    /// Appends `lines` in one write at the end; if it fails half-way (a
    /// full disk), cuts the file back to where it was.
    fn append_lines(&self, state: &mut FileState, lines: &[u8]) -> Result<(), HistoryError> {
        self.writable()?;
        let start = state.file.metadata().map_err(log_error)?.len();
        let written = (&state.file).write_all(lines).and_then(|()| {
            if self.sync {
                state.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            let _ = state.file.set_len(start);
            return Err(log_error(e));
        }
        state.seen = start + lines.len() as u64;
        let body = lines.strip_suffix(b"\n").unwrap_or(lines);
        let at = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let head = &lines[at..lines.len().min(at + HEAD)];
        state.last_line = Some((start + at as u64, head.to_vec()));
        Ok(())
    }

    /// Writes the staged changes, if any, as the journal.
    fn flush(&self, state: &mut FileState) -> Result<(), HistoryError> {
        match state.staged.take() {
            Some(versions) => self.rewrite(state, versions),
            None => Ok(()),
        }
    }

    /// Changes `versions`, then rewrites the journal, or stages the change
    /// while [`HistoryLog::exclusive`] holds the lock.
    fn change_all(
        &self,
        state: &mut FileState,
        edit: impl FnOnce(&mut Vec<Revision>) -> bool,
    ) -> Result<bool, HistoryError> {
        self.writable()?;
        let mut versions = match state.staged.take() {
            Some(staged) => staged,
            None => Self::read_all(state)?,
        };
        let found = edit(&mut versions);
        if state.held {
            state.staged = Some(versions);
            Ok(found)
        } else {
            self.rewrite(state, versions).map(|()| found)
        }
    }

    fn read_all(state: &FileState) -> Result<Vec<Revision>, HistoryError> {
        let mut versions = std::collections::BTreeMap::new();
        each_line(&state.file, 0, &mut |line| {
            match serde_json::from_slice::<Line>(line) {
                Ok(Line::Version(r)) => {
                    versions.insert(r.id, (*r).into_version());
                }
                Ok(Line::Drop { drop }) => {
                    for id in drop {
                        versions.remove(&id);
                    }
                }
                Ok(Line::Mark { .. }) | Err(_) => {} // a mark, a blank or torn line
            }
        })?;
        Ok(versions.into_values().collect())
    }

    /// Writes `versions` (in id order) as the whole journal: a new file,
    /// synced, renamed over the old one, the directory synced. If the disk
    /// has no room for the new file, the journal is rewritten in place
    /// instead (it only shrinks), synced, then cut to its new length.
    ///
    /// A version whose previous one was dropped (a prune) is linked to
    /// its file's latest version kept before it, or to [`NONE_KEPT`], so
    /// one file's history stays a walk from version to version.
    fn rewrite(
        &self,
        state: &mut FileState,
        mut versions: Vec<Revision>,
    ) -> Result<(), HistoryError> {
        self.writable()?;
        let kept: std::collections::HashSet<u64> = versions.iter().map(|v| v.id).collect();
        let mut latest = std::collections::HashMap::new();
        for v in &mut versions {
            let before = latest.insert(file_of(v), v.id);
            if v.prev.is_some_and(|p| p != NONE_KEPT && !kept.contains(&p)) {
                v.prev = Some(before.unwrap_or(NONE_KEPT));
            }
        }
        let mut text = mark_line(state.last_id)?;
        for v in &versions {
            // A redaction's `[redacted]` can grow a line past the limit.
            let line = match version_line(v)? {
                Some(line) => line,
                None => {
                    let mut record = v.clone_record();
                    record.note = Some(TOO_LONG.to_owned());
                    version_line(&record)?.unwrap_or_default()
                }
            };
            text.extend_from_slice(&line);
        }
        match self.dir.replace_file(JOURNAL, &text) {
            Ok(()) => {
                // The old journal's inode is cut to nothing before it is
                // let go: a hard link planted to it after it was opened, or
                // another process still holding it open, keeps none of
                // the erased content.
                let _ = state.file.set_len(0);
                let _ = state.file.sync_all();
                state.file = self.dir.journal(false)?;
            }
            Err(e) if is_full(&e) => {
                // No room for a copy: the new journal is no longer than the
                // old one, so write it over it and cut the rest.
                // (A crash meanwhile can leave old lines after the new
                // ones: see the README's safety model.)
                let mut over = self.dir.overwrite()?;
                over.write_all(&text).map_err(log_error)?;
                over.sync_all().map_err(log_error)?;
                over.set_len(text.len() as u64).map_err(log_error)?;
                over.sync_all().map_err(log_error)?;
            }
            Err(e) => return Err(log_error(e)),
        }
        state.seen = text.len() as u64;
        state.last_line = last_line(&state.file, state.seen)?;
        state.last_batch = None;
        state.legacy_drops = None;
        Ok(())
    }
}

/// The first line of a journal: the last id given out, and the format.
fn mark_line(last_id: u64) -> Result<Vec<u8>, HistoryError> {
    let mut line = serde_json::to_vec(&Line::Mark {
        last_id,
        format: FORMAT,
    })
    .map_err(log_error)?;
    line.push(b'\n');
    Ok(line)
}

/// Version `v`'s journal line, newline included, or `None` if it would
/// pass [`MAX_LINE`] (no reader would read it back: the version is then
/// kept without its content).
fn version_line(v: &Revision) -> Result<Option<Vec<u8>>, HistoryError> {
    let mut line =
        serde_json::to_vec(&Line::Version(Box::new(Record::from_version(v)))).map_err(log_error)?;
    line.push(b'\n');
    Ok((line.len() <= MAX_LINE).then_some(line))
}

/// Bytes of a line's start kept to know it again (its `{"id":N,`).
const HEAD: usize = 48;

/// The first `n` bytes at `at` (fewer at the end).
fn head_at(file: &File, at: u64, n: usize) -> Result<Vec<u8>, HistoryError> {
    let mut head = vec![0u8; n];
    let mut reader = file;
    reader.seek(SeekFrom::Start(at)).map_err(log_error)?;
    let mut got = 0;
    while got < n {
        match reader.read(&mut head[got..]).map_err(log_error)? {
            0 => break,
            k => got += k,
        }
    }
    head.truncate(got);
    Ok(head)
}

/// Where the last whole line before `len` starts, and its first bytes.
fn last_line(file: &File, len: u64) -> Result<Option<(u64, Vec<u8>)>, HistoryError> {
    if len == 0 {
        return Ok(None);
    }
    const CHUNK: u64 = 64 * 1024;
    // The line ends at len - 1 (its newline); its start follows the
    // newline before that.
    let mut end = len - 1;
    let start = loop {
        let from = end.saturating_sub(CHUNK);
        let chunk = head_at(file, from, usize::try_from(end - from).unwrap_or(0))?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            break from + i as u64 + 1;
        }
        if from == 0 {
            break 0;
        }
        end = from;
    };
    Ok(Some((start, head_at(file, start, HEAD)?)))
}

/// Whether the byte before `at` is a newline (a line ends there), or
/// `at` is the start.
fn line_ends_at(file: &File, at: u64) -> Result<bool, HistoryError> {
    if at == 0 {
        return Ok(true);
    }
    let mut byte = [0u8; 1];
    let mut reader = file;
    reader.seek(SeekFrom::Start(at - 1)).map_err(log_error)?;
    reader.read_exact(&mut byte).map_err(log_error)?;
    Ok(byte[0] == b'\n')
}

impl FileLog {
    /// Cuts a torn last line (a writer killed mid-append since this
    /// handle opened the journal) before anything is appended after it:
    /// else the next line would continue the torn one, and neither could
    /// be read.
    fn heal_tail(&self, state: &mut FileState) -> Result<(), HistoryError> {
        let len = state.file.metadata().map_err(log_error)?.len();
        if line_ends_at(&state.file, len)? {
            return Ok(());
        }
        self.cut_torn_tail(state)?;
        let len = state.file.metadata().map_err(log_error)?.len();
        state.seen = state.seen.min(len);
        state.last_batch = None;
        Ok(())
    }
}

fn is_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(28)
}

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
                if at.prev == Some(NONE_KEPT) {
                    return Ok(()); // the file's first version kept
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
                let last = super::from_nanos(state.last_time);
                v.time = v.time.max(last);
                state.last_time = super::to_nanos(v.time);
                let line = match version_line(v)? {
                    Some(line) => line,
                    None => {
                        // Never read back: the version is kept, its content not.
                        v.content = None;
                        v.note = Some(TOO_LONG.to_owned());
                        version_line(v)?.unwrap_or_default()
                    }
                };
                lines.extend_from_slice(&line);
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
            let since = filter.since.filter(|_| ordered).map(super::to_nanos);
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
            // a refused change leaves nothing in the file. No other handle
            // saw it (the writer lock is held from the append to here), so
            // its ids are given out again.
            if state.staged.is_none()
                && let Some((batch, start, end)) = &state.last_batch
                && batch.as_slice() == ids
                && state.file.metadata().map_err(log_error)?.len() == *end
            {
                let start = *start;
                state.last_id = batch.first().map_or(state.last_id, |f| f - 1);
                state.file.set_len(start).map_err(log_error)?;
                state.seen = start;
                state.last_line = last_line(&state.file, start)?;
                state.last_batch = None;
                return Ok(());
            }
            let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
            // The journal's last lines and nothing before them (a dead
            // writer's versions, found by the next change, its torn line
            // cut first): cut off too, reading only those lines. Others may
            // have seen them, so a mark line keeps their ids used.
            self.heal_tail(state)?;
            if state.staged.is_none()
                && let Some(start) = tail_of(&state.file, &ids)?
            {
                state.file.set_len(start).map_err(log_error)?;
                state.seen = start;
                state.last_batch = None;
                let mark = mark_line(state.last_id)?;
                return self.append_lines(state, &mark);
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
            self.rewrite(state, versions)
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
        self.dir.read_file(CHECKPOINT, super::index::MAX_CHECKPOINT)
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
