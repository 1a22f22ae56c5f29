//! The version model: what one version records ([`Revision`], [`ChangeOp`]),
//! how history fails, and the queries and reports of its operator API.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::path::MemoryPath;
use crate::store::StoreError;

/// What a version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeOp {
    /// A new file.
    Created,
    /// A file's content replaced or edited.
    Modified,
    /// A file removed (alone or with its directory); the version holds the
    /// content removed.
    Deleted,
    /// A file moved (alone or with its directory) from
    /// [`from`](Revision::from) to [`path`](Revision::path).
    Renamed,
}

impl ChangeOp {
    /// `created`, `modified`, `deleted` or `renamed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Created => "created",
            ChangeOp::Modified => "modified",
            ChangeOp::Deleted => "deleted",
            ChangeOp::Renamed => "renamed",
        }
    }
}

/// One version of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// Monotonic, never reused.
    pub id: u64,
    /// The file's identity: the id of the version that created it (or
    /// first recorded it), kept across renames.
    pub file: u64,
    /// What happened.
    pub op: ChangeOp,
    /// The file's path after the change (for a delete, the path removed).
    pub path: String,
    /// For a rename, the path before.
    pub from: Option<String>,
    /// When.
    pub time: SystemTime,
    /// The handler's label ([`HistoryStore::with_label`](crate::history::HistoryStore::with_label)).
    pub actor: Option<String>,
    /// The per-call actor, such as the `tool_use` id (the change's
    /// [`Context::call`](crate::store::Context::call)).
    pub call: Option<String>,
    /// Lowercase hex sha256 of the content.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// The content after the change (for a delete, the content removed);
    /// `None` once redacted.
    pub content: Option<Vec<u8>>,
    /// Whether the content was erased by [`HistoryStore::redact`](crate::history::HistoryStore::redact).
    pub redacted: bool,
    /// Why the history made it: `revert to v7`, `restore to …`, `repair: …`.
    pub note: Option<String>,
    /// The id of this file's version before this one, where the history
    /// knew it when it recorded this one (`None` for a file's first
    /// version, `Some(0)` where a prune dropped every earlier one): a log
    /// without an index on files walks one file's versions by id instead
    /// of reading every version between them.
    pub prev: Option<u64>,
}

impl Revision {
    /// A copy of everything but the content (which may be large).
    pub fn clone_record(&self) -> Revision {
        Revision {
            id: self.id,
            file: self.file,
            op: self.op,
            path: self.path.clone(),
            from: self.from.clone(),
            time: self.time,
            actor: self.actor.clone(),
            call: self.call.clone(),
            sha256: self.sha256.clone(),
            size: self.size,
            content: None,
            redacted: self.redacted,
            note: self.note.clone(),
            prev: self.prev,
        }
    }

    /// The content as text, lossily.
    pub fn text(&self) -> Option<String> {
        self.content
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned())
    }
}

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The log could not be read or written.
    #[error("history log: {0}")]
    Log(String),
    /// The live store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No version has this id.
    #[error("no version {0}")]
    NoSuchVersion(super::VersionId),
    /// The version's content was redacted.
    #[error("{0} was redacted: its content is gone")]
    Redacted(super::VersionId),
    /// What this store's history cannot do, and what to do instead.
    #[error("{0}")]
    Unsupported(&'static str),
}

/// Which versions [`HistoryStore::versions`](crate::history::HistoryStore::versions)
/// lists: every filter set must match, and the answer is one page, the
/// newest [`limit`](Self::limit) (ids ascending), so a listing costs the
/// same whatever the history's length.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// The versions of the file at this path (now, or the last one that
    /// was there), across its renames.
    pub path: Option<MemoryPath>,
    /// Versions whose path (or rename source) is this path or below it.
    pub prefix: Option<MemoryPath>,
    /// Made at or after.
    pub since: Option<SystemTime>,
    /// Made at or before.
    pub until: Option<SystemTime>,
    /// Made by this actor: the label or the per-call actor.
    pub actor: Option<String>,
    /// Made in this call (the per-call actor, such as a `tool_use` id).
    pub call: Option<String>,
    /// The versions of this file, as [`Version::file`](super::Version::file)
    /// names it (`v3`, `mem_…`).
    pub file: Option<String>,
    /// Only versions older than this one: the next page back is the one
    /// before the oldest of the last.
    pub before: Option<super::VersionId>,
    /// At most this many, the newest ([`DEFAULT_LIMIT`] if unset).
    pub limit: Option<usize>,
}

/// How many versions a [`Query`] returns when it sets no limit.
pub const DEFAULT_LIMIT: usize = 1_000;

/// What the open of a [`HistoryStore`](crate::history::HistoryStore) repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Whether this was the first open of the store with history: the
    /// versions recorded are its baseline, not a repair.
    pub baseline: bool,
    /// Versions dropped: their change never reached the store (a crash
    /// between the version and the change).
    pub dropped: Vec<u64>,
    /// Versions recorded for changes that had none (files changed outside
    /// the history, lost versions, or, on a first open, the files present
    /// when history was turned on: the baseline).
    pub recorded: Vec<u64>,
    /// Files repair left alone, and why: the store would not let them be
    /// read within the file limit (a planted hard link, a file over the
    /// limit, a FIFO). Their history is not checked until they can be.
    pub skipped: Vec<(String, String)>,
}

impl RepairReport {
    /// Whether nothing needed repair (and nothing was skipped).
    pub fn is_clean(&self) -> bool {
        self.dropped.is_empty() && self.recorded.is_empty() && self.skipped.is_empty()
    }
}

impl std::fmt::Display for RepairReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.baseline {
            write!(
                f,
                "history started: recorded a baseline of {} already in the store",
                counted(self.recorded.len(), "file", "files")
            )?;
        } else if self.dropped.is_empty() && self.recorded.is_empty() {
            f.write_str("history: nothing to repair")?;
        } else {
            write!(
                f,
                "history repaired: dropped {} of changes that never happened {:?}; recorded {} that had no version {:?}",
                counted(self.dropped.len(), "version", "versions"),
                self.dropped,
                counted(self.recorded.len(), "change", "changes"),
                self.recorded
            )?;
        }
        if !self.skipped.is_empty() {
            write!(
                f,
                "; skipped {} it could not read safely:",
                counted(self.skipped.len(), "file", "files")
            )?;
            for (path, why) in &self.skipped {
                write!(f, " {} ({})", super::escape(path), super::escape(why))?;
            }
        }
        Ok(())
    }
}

/// `1 file`, `2 files`: the report is read by operators.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Why [`HistoryStore::restore`](super::HistoryStore::restore) left a file as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Its content at that time was redacted.
    Redacted,
    /// The history of the file starts after that time (a baseline or
    /// repair version, or its earlier versions were pruned): it cannot
    /// say whether the file existed then, so it is neither deleted nor
    /// rewritten.
    Undated,
}

impl SkipReason {
    /// The reason, for an operator.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Redacted => "its content then was redacted",
            SkipReason::Undated => {
                "its history starts after that time (a baseline, a repair, or pruned), so it cannot say what was there then"
            }
        }
    }
}

/// What [`HistoryStore::restore`](crate::history::HistoryStore::restore) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files written back.
    pub written: Vec<String>,
    /// Files deleted (they did not exist at that time).
    pub deleted: Vec<String>,
    /// Files left as they are: their content then was redacted, or the
    /// history cannot say whether they existed then (their first version
    /// is a baseline or a repair recorded after that time: they were
    /// there, since some unknown time, when it was recorded).
    pub skipped: Vec<(String, SkipReason)>,
    /// Files that could not be restored, and why.
    pub failed: Vec<(String, String)>,
}

/// How long versions are kept ([`HistoryStore::prune`](crate::history::HistoryStore::prune)). The latest
/// version of a live file is always kept, so the history still matches
/// the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Versions older than this go.
    pub max_age: Option<Duration>,
    /// At most this many versions per file are kept (the newest).
    pub keep_per_file: Option<usize>,
}

/// [`Revision::prev`] of a version whose earlier versions were all pruned
/// (ids start at 1).
pub(crate) const NONE_KEPT: u64 = 0;
