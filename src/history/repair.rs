//! Repair on open: the versions a crash left without their change are
//! dropped (they lie after the last checkpoint), and the changes made
//! without a version (outside the history, or a version lost to a power
//! cut) are recorded, by comparing the index with the live files.

use std::collections::{BTreeSet, HashMap};

use super::index::{Entry, Index};
use super::log::{Filter, Order, file_of};
use super::{ChangeOp, HistoryError, HistoryStore, RepairReport, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::{Context, MemoryStore};

/// The paths a version touches: its path, and a rename's source.
pub(super) fn touched(v: &Revision) -> impl Iterator<Item = &String> {
    std::iter::once(&v.path).chain(v.from.iter())
}

/// What version `v` left at `path` (one it touches): the content's
/// sha256, or `None` (deleted, or renamed away).
pub(super) fn left_at<'a>(v: &'a Revision, path: &str) -> Option<&'a str> {
    if v.path == path && v.op != ChangeOp::Deleted {
        Some(&v.sha256)
    } else {
        None
    }
}

/// The most content repair holds before it appends what it has.
const BATCH_BYTES: usize = 4 * 1024 * 1024;

impl<S: MemoryStore> HistoryStore<S> {
    /// Repair on open, under the log's writer lock (no other process's
    /// change is half made meanwhile). Reads the checkpoint and the
    /// versions after it, and each live file once (one at a time, within
    /// the file limit): its cost follows the store's size and the
    /// checkpoint interval, not the history's length.
    pub(super) fn repair(&self) -> Result<RepairReport, HistoryError> {
        let mut index = self.lock();
        let mut out = None;
        self.log.exclusive(&mut |last| {
            out = Some(self.repair_locked(&mut index, last));
        })?;
        out.unwrap_or_else(|| Err(HistoryError::Log("repair did not run".into())))
    }

    fn repair_locked(&self, index: &mut Index, last: u64) -> Result<RepairReport, HistoryError> {
        // The first open of this history (a log may hold others' too).
        let empty = Filter::default();
        let baseline = self.log.find(&empty, Order::Newest, 1)?.is_empty();
        let (loaded, mut dropped, mut replayed) = self.load_index(last, true)?;
        *index = loaded;
        let mut report = RepairReport {
            baseline,
            ..RepairReport::default()
        };
        dropped.sort_unstable();
        report.dropped = dropped;
        // The live files' hashes (one file's content in memory at a time).
        let mut live: HashMap<String, String> = HashMap::new();
        self.each_live(&MemoryPath::root(), &mut report.skipped, &mut |p, d| {
            live.insert(p, sha256_hex(&d));
        })?;
        let skipped: BTreeSet<String> = report.skipped.iter().map(|(p, _)| p.clone()).collect();
        // A live file the index does not agree with is a change made
        // without a version, unless the index is wrong: a checkpoint that
        // disagrees with the log on it (planted, or of another history) is
        // dropped, and the index read from the history's start instead.
        if self.checkpoint_lies(index, &live, &skipped)? {
            let (whole, more, read) = self.load_index_from(last, true, false)?;
            *index = whole;
            report.dropped.extend(more);
            report.dropped.sort_unstable();
            replayed += read;
        }
        // Changes without a version: record the store as it is.
        let note = if report.baseline {
            "baseline: present when history was turned on"
        } else {
            "repair: changed without a version (outside the history, or its version was lost)"
        };
        let mut missing = Vec::new();
        let mut held = 0usize;
        let paths: BTreeSet<String> = index.files.keys().chain(live.keys()).cloned().collect();
        for path in paths {
            let expected = index.files.get(&path).cloned();
            if skipped.contains(&path) || expected.as_ref().map(|e| &e.sha256) == live.get(&path) {
                continue;
            }
            let mut v = if live.contains_key(&path) {
                let op = if expected.is_some() {
                    ChangeOp::Modified
                } else {
                    ChangeOp::Created
                };
                let Some(p) = MemoryPath::from_stored(&path) else {
                    continue;
                };
                match self.inner.read(&p, self.limit) {
                    Ok(f) => self.revision(
                        Context::default(),
                        op,
                        path.clone(),
                        None,
                        expected.as_ref(),
                        &f.data,
                    ),
                    Err(_) => continue, // changed or gone since: next open
                }
            } else {
                // Gone: refers to the file's last version's content.
                let mut v = self.revision(
                    Context::default(),
                    ChangeOp::Deleted,
                    path.clone(),
                    None,
                    expected.as_ref(),
                    &[],
                );
                if let Some(e) = &expected {
                    v.sha256.clone_from(&e.sha256);
                    v.size = self.size_of(e)?;
                }
                v.content = None;
                v
            };
            v.call = None;
            v.note = Some(note.to_owned());
            held += v.content.as_ref().map_or(0, Vec::len);
            missing.push(v);
            // Appended in batches of bounded size (a baseline of a large
            // store holds one batch's content in memory, not the store's).
            if held >= BATCH_BYTES {
                self.record(&mut missing, index, &mut report)?;
                held = 0;
            }
        }
        self.record(&mut missing, index, &mut report)?;
        // An open that read versions past the checkpoint saves where it
        // got to, so the next one reads little.
        if self.log.locks_writers() && (replayed > 0 || !report.recorded.is_empty()) {
            let _ = self.log.save_checkpoint(&index.to_checkpoint());
        }
        Ok(report)
    }

    /// Whether `index` says of a path where it and the live store differ
    /// something the log does not: the entry's latest version is not a
    /// version of that file leaving that content there. Then the index
    /// came from a checkpoint that lies (planted, or of another history).
    /// One version read by id per such path. A live file the index
    /// leaves out is taken as made outside the history (a checkpoint
    /// that lies by leaving files out can only be planted by someone who
    /// can write the journal too).
    fn checkpoint_lies(
        &self,
        index: &Index,
        live: &HashMap<String, String>,
        skipped: &BTreeSet<String>,
    ) -> Result<bool, HistoryError> {
        for (path, entry) in &index.files {
            if skipped.contains(path) || live.get(path) == Some(&entry.sha256) {
                continue;
            }
            let agrees = self.log.get(entry.latest)?.is_some_and(|v| {
                file_of(&v) == entry.file && left_at(&v, path) == Some(entry.sha256.as_str())
            });
            if !agrees {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Appends repair's `missing` versions (if any) and applies them.
    fn record(
        &self,
        missing: &mut Vec<Revision>,
        index: &mut Index,
        report: &mut RepairReport,
    ) -> Result<(), HistoryError> {
        if missing.is_empty() {
            return Ok(());
        }
        self.log.append(missing)?;
        for mut v in missing.drain(..) {
            if v.file == 0 {
                v.file = v.id;
            }
            report.recorded.push(v.id);
            index.apply(&v);
        }
        Ok(())
    }

    /// The size of the live file `e`'s latest version (0 if the log has
    /// it no more).
    fn size_of(&self, e: &Entry) -> Result<u64, HistoryError> {
        Ok(self.log.get(e.latest)?.map_or(0, |v| v.size))
    }
}
