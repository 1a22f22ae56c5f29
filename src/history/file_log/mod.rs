//! The journal file: [`FileLog`], one JSON line per version in the
//! store's reserved directory (opened through `journal_dir.rs`).

mod log_impl;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::journal_dir::Dir;
use super::journal_line::{
    BackLines, FORMAT, Line, Record, each_line, leading_version_id, time_of,
};
use super::log::{HistoryLog, erase};
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
            let file = super::log::file_of(v);
            v.prev = latest.insert(file, v.id);
        }
        self.rewrite(state, &versions)
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
        // grown again since): what this handle saw up to `seen` is not
        // there any more, so it reads the journal again from its start
        // (its last id only grows).
        if len < state.seen || (len > state.seen && !line_ends_at(&state.file, state.seen)?) {
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
        Ok(())
    }

    /// The highest id the journal names (its last version line's, or its
    /// mark's, the first line) and the last version's time, read from the
    /// file's two ends only.
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
        Ok(())
    }

    /// Writes the staged changes, if any, as the journal.
    fn flush(&self, state: &mut FileState) -> Result<(), HistoryError> {
        match state.staged.take() {
            Some(versions) => self.rewrite(state, &versions),
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
            self.rewrite(state, &versions).map(|()| found)
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

    /// Writes `versions` as the whole journal: a new file, synced, renamed
    /// over the old one, the directory synced. If the disk has no room
    /// for the new file, the journal is rewritten in place instead (it
    /// only shrinks), synced, then cut to its new length.
    fn rewrite(&self, state: &mut FileState, versions: &[Revision]) -> Result<(), HistoryError> {
        self.writable()?;
        let mut text = mark_line(state.last_id)?;
        for v in versions {
            serde_json::to_writer(&mut text, &Line::Version(Box::new(Record::from_version(v))))
                .map_err(log_error)?;
            text.push(b'\n');
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
