//! Repair on open: the versions a crash left without their change are
//! dropped (they lie after the last checkpoint), and the changes made
//! without a version (outside the history, or a version lost to a power
//! cut) are recorded, by comparing the index with the live files.

use std::collections::{BTreeSet, HashMap};

use super::index::Index;
use super::log::{Filter, Order};
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
            if skipped.contains(&path) || expected.as_ref().map(|e| &e.1) == live.get(&path) {
                continue;
            }
            let file = expected.as_ref().map_or(0, |e| e.0);
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
                    Ok(f) => {
                        self.revision(Context::default(), op, path.clone(), None, file, &f.data)
                    }
                    Err(_) => continue, // changed or gone since: next open
                }
            } else {
                // Gone: refers to the file's last version's content.
                let mut v = self.revision(
                    Context::default(),
                    ChangeOp::Deleted,
                    path.clone(),
                    None,
                    file,
                    &[],
                );
                if let Some(e) = &expected {
                    v.sha256.clone_from(&e.1);
                }
                v.content = None;
                v.size = self.size_of(file)?;
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
    /// something the log does not (the latest version touching the path
    /// left another state): then the index came from a checkpoint that
    /// lies. Asks the log only about the paths that differ.
    fn checkpoint_lies(
        &self,
        index: &Index,
        live: &HashMap<String, String>,
        skipped: &BTreeSet<String>,
    ) -> Result<bool, HistoryError> {
        let paths: BTreeSet<&String> = index.files.keys().chain(live.keys()).collect();
        for path in paths {
            let says = index.files.get(path).map(|e| e.1.as_str());
            if skipped.contains(path) || says == live.get(path).map(String::as_str) {
                continue;
            }
            let filter = Filter {
                path: Some(path.clone()),
                ..Filter::default()
            };
            let latest = self.log.find(&filter, Order::Newest, 1)?;
            let logged = latest.first().and_then(|v| left_at(v, path));
            if logged != says {
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

    /// The size of file `file`'s latest version (0 if it has none).
    fn size_of(&self, file: u64) -> Result<u64, HistoryError> {
        if file == 0 {
            return Ok(0);
        }
        let filter = Filter {
            files: Some(vec![file]),
            ..Filter::default()
        };
        Ok(self
            .log
            .find(&filter, Order::Newest, 1)?
            .first()
            .map_or(0, |v| v.size))
    }
}
