//! Where versions are kept: the [`HistoryLog`] trait and its in-memory and
//! journal-file implementations (the SQL ones are in `sql.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::{ChangeOp, HistoryError, Revision};

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

    /// Makes dropped versions' content unrecoverable from the log's
    /// storage (a journal file rewrites itself); called after pruning.
    fn compact(&self) -> Result<(), HistoryError> {
        Ok(())
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
    fn compact(&self) -> Result<(), HistoryError> {
        (**self).compact()
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
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.1.retain(|v| !ids.contains(&v.id));
        Ok(())
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(state.1.iter_mut().find(|v| v.id == id).map(erase).is_some())
    }
}

pub(super) fn erase(v: &mut Revision) {
    v.content = None;
    v.redacted = true;
}

/// The reserved directory a [`FileLog`] uses inside a filesystem store's
/// root: the store never lists it, and no memory path can name it.
pub const HISTORY_DIR: &str = ".claude-memory-history";

const JOURNAL: &str = "journal.jsonl";

/// A journal file: one JSON line per version (and one per dropped batch),
/// appended under an exclusive `flock`, so several processes share it.
///
/// [`FileLog::for_store`] puts it in the reserved directory
/// `.claude-memory-history/` of a filesystem store's root (mode 0700, the
/// journal 0600). A torn last line (a writer killed mid-append) is cut off
/// when the log is opened. Redaction and pruning rewrite the file (a new
/// file, synced, renamed over the old one), so erased content is gone from
/// it.
///
/// By default an append is not synced: after a process crash (`SIGKILL`)
/// nothing is lost, since the page cache survives; after a power cut the
/// last versions may be missing, and the next open records the files they
/// changed as `repair` versions (content kept, the actor lost).
/// [`sync`](Self::sync) adds one `fdatasync` per change so attribution
/// survives a power cut too.
#[derive(Debug)]
pub struct FileLog {
    path: PathBuf,
    sync: bool,
    state: Mutex<FileState>,
}

#[derive(Debug)]
struct FileState {
    file: File,
    /// Bytes of the journal this handle has seen.
    seen: u64,
    last_id: u64,
}

/// One journal line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Version(Box<Record>),
    Drop {
        drop: Vec<u64>,
    },
    /// The last id given out, first in a rewritten journal, so no id is
    /// reused after the versions holding the highest ones are gone.
    Mark {
        last_id: u64,
    },
}

/// A version as stored: content as text when it is UTF-8, else base64.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    id: u64,
    file: u64,
    op: ChangeOp,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    time_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<String>,
    sha256: String,
    size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    redacted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl Record {
    fn from_version(v: &Revision) -> Record {
        let (text, base64) = match &v.content {
            None => (None, None),
            Some(data) => match std::str::from_utf8(data) {
                Ok(t) => (Some(t.to_owned()), None),
                Err(_) => (None, Some(crate::base64::encode(data))),
            },
        };
        Record {
            id: v.id,
            file: v.file,
            op: v.op,
            path: v.path.clone(),
            from: v.from.clone(),
            time_ns: super::to_nanos(v.time),
            actor: v.actor.clone(),
            call: v.call.clone(),
            sha256: v.sha256.clone(),
            size: v.size,
            text,
            base64,
            redacted: v.redacted,
            note: v.note.clone(),
        }
    }

    fn into_version(self) -> Revision {
        let content = match (self.text, self.base64) {
            (Some(t), _) => Some(t.into_bytes()),
            (None, Some(b)) => crate::base64::decode(&b),
            (None, None) => None,
        };
        Revision {
            id: self.id,
            file: self.file,
            op: self.op,
            path: self.path,
            from: self.from,
            time: super::from_nanos(self.time_ns),
            actor: self.actor,
            call: self.call,
            sha256: self.sha256,
            size: self.size,
            content: if self.redacted { None } else { content },
            redacted: self.redacted,
            note: self.note,
        }
    }
}

fn log_error(e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Log(e.to_string())
}

impl FileLog {
    /// The log of the filesystem store rooted at `root`: its reserved
    /// directory `.claude-memory-history/`, created if missing.
    pub fn for_store(root: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        FileLog::open(root.as_ref().join(HISTORY_DIR))
    }

    /// The log in directory `dir`, created (mode 0700) if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileLog, HistoryError> {
        let dir = dir.as_ref();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(log_error)?;
        let path = dir.join(JOURNAL);
        let file = open_journal(&path)?;
        let log = FileLog {
            path,
            sync: false,
            state: Mutex::new(FileState {
                file,
                seen: 0,
                last_id: 0,
            }),
        };
        {
            let mut state = log.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.file.lock().map_err(log_error)?;
            let result = log
                .cut_torn_tail(&mut state)
                .and_then(|()| log.catch_up(&mut state));
            let _ = state.file.unlock();
            result?;
        }
        Ok(log)
    }

    /// Syncs every append (`fdatasync`), so a power cut loses no
    /// attribution (default: off; see the type's documentation).
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Cuts a last line without its newline (a writer killed mid-append).
    fn cut_torn_tail(&self, state: &mut FileState) -> Result<(), HistoryError> {
        let len = state.file.metadata().map_err(log_error)?.len();
        if len == 0 {
            return Ok(());
        }
        let mut data = Vec::new();
        (&state.file).seek(SeekFrom::Start(0)).map_err(log_error)?;
        (&state.file).read_to_end(&mut data).map_err(log_error)?;
        if data.last() != Some(&b'\n') {
            let keep = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            state.file.set_len(keep as u64).map_err(log_error)?;
        }
        Ok(())
    }

    /// Reopens the journal if another process replaced it (redaction,
    /// pruning), then reads what others appended since, for the last id.
    fn catch_up(&self, state: &mut FileState) -> Result<(), HistoryError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let on_disk = std::fs::metadata(&self.path).map_err(log_error)?;
            let ours = state.file.metadata().map_err(log_error)?;
            if on_disk.ino() != ours.ino() || on_disk.dev() != ours.dev() {
                let _ = state.file.unlock();
                state.file = open_journal(&self.path)?;
                state.file.lock().map_err(log_error)?;
                state.seen = 0;
            }
        }
        let len = state.file.metadata().map_err(log_error)?.len();
        if len <= state.seen {
            return Ok(());
        }
        let mut data = Vec::new();
        (&state.file)
            .seek(SeekFrom::Start(state.seen))
            .map_err(log_error)?;
        (&state.file).read_to_end(&mut data).map_err(log_error)?;
        for line in data.split(|&b| b == b'\n') {
            match serde_json::from_slice::<Line>(line) {
                Ok(Line::Version(r)) => state.last_id = state.last_id.max(r.id),
                Ok(Line::Mark { last_id }) => state.last_id = state.last_id.max(last_id),
                _ => {}
            }
        }
        state.seen = len;
        Ok(())
    }

    fn locked<T>(
        &self,
        f: impl FnOnce(&mut FileState) -> Result<T, HistoryError>,
    ) -> Result<T, HistoryError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.file.lock().map_err(log_error)?;
        let result = self.catch_up(&mut state).and_then(|()| f(&mut state));
        let _ = state.file.unlock();
        result
    }

    fn append_lines(&self, state: &mut FileState, lines: &[u8]) -> Result<(), HistoryError> {
        // O_APPEND: one write of the whole batch, at the end.
        (&state.file).write_all(lines).map_err(log_error)?;
        if self.sync {
            state.file.sync_data().map_err(log_error)?;
        }
        state.seen += lines.len() as u64;
        Ok(())
    }

    fn read_all(state: &FileState) -> Result<Vec<Revision>, HistoryError> {
        let mut data = Vec::new();
        (&state.file).seek(SeekFrom::Start(0)).map_err(log_error)?;
        (&state.file).read_to_end(&mut data).map_err(log_error)?;
        let mut versions = std::collections::BTreeMap::new();
        for line in data.split(|&b| b == b'\n') {
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
        }
        Ok(versions.into_values().collect())
    }

    /// Writes `versions` as the whole journal: a new file, synced, renamed
    /// over the old one, the directory synced.
    fn rewrite(&self, state: &mut FileState, versions: &[Revision]) -> Result<(), HistoryError> {
        let mut text = serde_json::to_vec(&Line::Mark {
            last_id: state.last_id,
        })
        .map_err(log_error)?;
        text.push(b'\n');
        for v in versions {
            serde_json::to_writer(&mut text, &Line::Version(Box::new(Record::from_version(v))))
                .map_err(log_error)?;
            text.push(b'\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(log_error)?;
        file.write_all(&text).map_err(log_error)?;
        file.sync_all().map_err(log_error)?;
        drop(file);
        std::fs::rename(&tmp, &self.path).map_err(log_error)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(log_error)?;
        }
        let _ = state.file.unlock();
        state.file = open_journal(&self.path)?;
        state.file.lock().map_err(log_error)?;
        state.seen = text.len() as u64;
        Ok(())
    }
}

fn open_journal(path: &Path) -> Result<File, HistoryError> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(log_error)
}

impl HistoryLog for FileLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        self.locked(|state| {
            let mut lines = Vec::new();
            let mut id = state.last_id;
            for v in versions.iter_mut() {
                id += 1;
                v.id = id;
                serde_json::to_writer(
                    &mut lines,
                    &Line::Version(Box::new(Record::from_version(v))),
                )
                .map_err(log_error)?;
                lines.push(b'\n');
            }
            self.append_lines(state, &lines)?;
            state.last_id = id;
            Ok(())
        })
    }

    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        self.locked(|state| Self::read_all(state))
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.locked(|state| {
            let mut line = serde_json::to_vec(&Line::Drop { drop: ids.to_vec() })
                .map_err(|e| io::Error::other(e.to_string()))
                .map_err(log_error)?;
            line.push(b'\n');
            self.append_lines(state, &line)
        })
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.locked(|state| {
            let mut versions = Self::read_all(state)?;
            let Some(v) = versions.iter_mut().find(|v| v.id == id) else {
                return Ok(false);
            };
            erase(v);
            self.rewrite(state, &versions)?;
            Ok(true)
        })
    }

    /// Rewrites the journal without dropped versions and tombstones, so
    /// pruned content leaves the file.
    fn compact(&self) -> Result<(), HistoryError> {
        self.locked(|state| {
            let versions = Self::read_all(state)?;
            self.rewrite(state, &versions)
        })
    }
}
