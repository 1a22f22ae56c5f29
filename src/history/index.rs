//! The history's index of the live files (path → file id and sha256, as
//! the versions left them) and its checkpoint: the index as of one
//! version, kept by the log, so an open reads the checkpoint and the
//! versions after it instead of the whole history.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{ChangeOp, Revision};

/// A checkpoint is saved when a change's versions pass a multiple of
/// this many ids: an open then replays at most about twice as many.
pub(super) const CHECKPOINT_EVERY: u64 = 1_000;

/// The largest checkpoint read back: a store of 500,000 live files (about
/// 130 bytes each). A larger one is ignored: the open reads the history.
pub(super) const MAX_CHECKPOINT: usize = 64 << 20;

const FORMAT: &str = "claude-memory-history-index";

/// Path → the live file there as the history last recorded it, and the
/// highest id this handle has seen.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) files: HashMap<String, Entry>,
    pub(super) seen: u64,
}

/// A live file in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Its file id.
    pub(super) file: u64,
    /// Its content's sha256.
    pub(super) sha256: String,
    /// The id of its latest version: the next version's `prev`, and the
    /// one version to read to check the entry against the log.
    pub(super) latest: u64,
}

/// The checkpoint as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Checkpoint {
    format: String,
    /// The index is the history's as of this id.
    at: u64,
    /// `[path, file id, sha256, latest version id]`, one per live file.
    files: Vec<(String, u64, String, u64)>,
}

impl Index {
    /// The index after `v` (file id filled in).
    pub(super) fn apply(&mut self, v: &Revision) {
        match v.op {
            ChangeOp::Created | ChangeOp::Modified => {
                self.files.insert(v.path.clone(), Entry::of(v));
            }
            ChangeOp::Deleted => {
                self.files.remove(&v.path);
            }
            ChangeOp::Renamed => {
                if let Some(from) = &v.from {
                    self.files.remove(from);
                }
                self.files.insert(v.path.clone(), Entry::of(v));
            }
        }
        self.seen = self.seen.max(v.id);
    }

    /// The checkpoint of this index (as of [`seen`](Self::seen)).
    pub(super) fn to_checkpoint(&self) -> Vec<u8> {
        let mut files: Vec<(String, u64, String, u64)> = self
            .files
            .iter()
            .map(|(p, e)| (p.clone(), e.file, e.sha256.clone(), e.latest))
            .collect();
        files.sort();
        serde_json::to_vec(&Checkpoint {
            format: FORMAT.to_owned(),
            at: self.seen,
            files,
        })
        .unwrap_or_default()
    }

    /// The index a checkpoint holds, if it is one this crate could have
    /// written for a log whose last id is `last`: anything else (planted,
    /// torn, too large, of another log, ahead of it) is `None`, and the
    /// open reads the history instead.
    pub(super) fn from_checkpoint(data: &[u8], last: u64) -> Option<Index> {
        if data.len() > MAX_CHECKPOINT {
            return None;
        }
        let cp: Checkpoint = serde_json::from_slice(data).ok()?;
        if cp.format != FORMAT || cp.at > last {
            return None;
        }
        let mut files = HashMap::with_capacity(cp.files.len());
        for (path, file, sha256, latest) in cp.files {
            let plausible = file > 0
                && file <= latest
                && latest <= cp.at
                && sha256.len() == 64
                && sha256
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                && crate::path::MemoryPath::from_stored(&path)
                    .is_some_and(|p| !p.is_root() && p.normalized() == path);
            let entry = Entry {
                file,
                sha256,
                latest,
            };
            if !plausible || files.insert(path, entry).is_some() {
                return None;
            }
        }
        Some(Index { files, seen: cp.at })
    }
}

/// Whether appending `versions` (ids ascending) passes a multiple of
/// [`CHECKPOINT_EVERY`]: its writer then saves a checkpoint.
pub(super) fn passes_checkpoint(versions: &[Revision]) -> bool {
    match (versions.first(), versions.last()) {
        (Some(first), Some(last)) => {
            first.id.saturating_sub(1) / CHECKPOINT_EVERY != last.id / CHECKPOINT_EVERY
        }
        _ => false,
    }
}

impl Entry {
    /// The entry version `v` (file id filled in) leaves at its path.
    fn of(v: &Revision) -> Entry {
        Entry {
            file: v.file,
            sha256: v.sha256.clone(),
            latest: v.id,
        }
    }
}
