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

/// Path → (file id, sha256) as the history last recorded it, the highest
/// id this handle has seen, and the id its index was last saved at.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) files: HashMap<String, (u64, String)>,
    pub(super) seen: u64,
}

/// The checkpoint as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Checkpoint {
    format: String,
    /// The index is the history's as of this id.
    at: u64,
    /// `[path, file id, sha256]`, one per live file.
    files: Vec<(String, u64, String)>,
}

impl Index {
    /// The index after `v` (file id filled in).
    pub(super) fn apply(&mut self, v: &Revision) {
        match v.op {
            ChangeOp::Created | ChangeOp::Modified => {
                self.files
                    .insert(v.path.clone(), (v.file, v.sha256.clone()));
            }
            ChangeOp::Deleted => {
                self.files.remove(&v.path);
            }
            ChangeOp::Renamed => {
                if let Some(from) = &v.from {
                    self.files.remove(from);
                }
                self.files
                    .insert(v.path.clone(), (v.file, v.sha256.clone()));
            }
        }
        self.seen = self.seen.max(v.id);
    }

    /// The checkpoint of this index (as of [`seen`](Self::seen)).
    pub(super) fn to_checkpoint(&self) -> Vec<u8> {
        let mut files: Vec<(String, u64, String)> = self
            .files
            .iter()
            .map(|(p, (f, s))| (p.clone(), *f, s.clone()))
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
        for (path, file, sha) in cp.files {
            let plausible = file > 0
                && file <= cp.at
                && sha.len() == 64
                && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                && crate::path::MemoryPath::from_stored(&path)
                    .is_some_and(|p| !p.is_root() && p.normalized() == path);
            if !plausible || files.insert(path, (file, sha)).is_some() {
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
