//! Repair on open: the versions a crash left without their change are
//! dropped, and the changes without a version are recorded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{ChangeOp, HistoryError, HistoryStore, RepairReport, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::{Context, MemoryStore};

/// The live state the versions describe: path → (sha256, file id).
pub(super) fn replay(versions: &[Revision]) -> BTreeMap<String, (String, u64)> {
    let mut state = BTreeMap::new();
    for v in versions {
        match v.op {
            ChangeOp::Created | ChangeOp::Modified => {
                state.insert(v.path.clone(), (v.sha256.clone(), v.file));
            }
            ChangeOp::Deleted => {
                state.remove(&v.path);
            }
            ChangeOp::Renamed => {
                if let Some(from) = &v.from {
                    state.remove(from);
                }
                state.insert(v.path.clone(), (v.sha256.clone(), v.file));
            }
        }
    }
    state
}

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
    /// Appends repair's `missing` versions (if any), keeping their records
    /// without content in `versions` for the replay.
    fn record(
        &self,
        missing: &mut Vec<Revision>,
        versions: &mut Vec<Revision>,
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
            v.content = None;
            report.recorded.push(v.id);
            versions.push(v);
        }
        Ok(())
    }

    /// Repair on open, under the log's writer lock (no other process's
    /// change is half made meanwhile). Linear in the versions and the live
    /// files: each path's versions are indexed once, and dropping a
    /// trailing version looks only at the version before it on each path
    /// it touches. Reads one file at a time, within the file limit.
    pub(super) fn repair(&self) -> Result<RepairReport, HistoryError> {
        let mut index = self.lock();
        let mut out = None;
        self.log.exclusive(&mut |last| {
            out = Some(self.repair_locked(&mut index, last));
        })?;
        out.unwrap_or_else(|| Err(HistoryError::Log("repair did not run".into())))
    }

    fn repair_locked(
        &self,
        index: &mut super::store::Index,
        last: u64,
    ) -> Result<RepairReport, HistoryError> {
        // Records only: repair compares hashes, it reads no content.
        let mut versions = self.load_records()?;
        let baseline = versions.is_empty();
        let mut report = RepairReport {
            baseline,
            ..RepairReport::default()
        };
        // The live files' hashes (one file's content in memory at a time).
        let mut live: HashMap<String, String> = HashMap::new();
        self.each_live(&MemoryPath::root(), &mut report.skipped, &mut |p, d| {
            live.insert(p, sha256_hex(&d));
        })?;
        let skipped: BTreeSet<String> = report.skipped.iter().map(|(p, _)| p.clone()).collect();
        // Each path's versions, in id order.
        let mut by_path: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, v) in versions.iter().enumerate() {
            for p in touched(v) {
                by_path.entry(p.as_str()).or_default().push(i);
            }
        }
        let state = |list: &[usize], p: &str| list.last().and_then(|&i| left_at(&versions[i], p));
        let matches = |list: &[usize], p: &str| state(list, p) == live.get(p).map(String::as_str);
        // Trailing versions whose change never happened: the newest for
        // each path it touches, some of them not matching the store, and
        // all of them matching once it is dropped.
        let mut dropped = Vec::new();
        for (i, v) in versions.iter().enumerate().rev() {
            let paths: Vec<&str> = touched(v).map(String::as_str).collect();
            if paths.iter().any(|p| skipped.contains(*p)) {
                continue; // cannot tell
            }
            let newest = paths
                .iter()
                .all(|p| by_path.get(p).and_then(|l| l.last()) == Some(&i));
            if !newest || paths.iter().all(|p| matches(&by_path[p], p)) {
                continue;
            }
            let after_drop = paths.iter().all(|p| {
                let list = &by_path[p];
                matches(&list[..list.len() - 1], p)
            });
            if after_drop {
                dropped.push(i);
            }
        }
        drop(by_path);
        let dropped_ids: Vec<u64> = dropped.iter().map(|&i| versions[i].id).collect();
        self.log.drop_versions(&dropped_ids)?;
        report.dropped = dropped_ids;
        report.dropped.sort_unstable();
        let gone: BTreeSet<usize> = dropped.into_iter().collect();
        let mut i = 0;
        versions.retain(|_| {
            i += 1;
            !gone.contains(&(i - 1))
        });
        // Changes without a version: record the store as it is.
        let expected = replay(&versions);
        let note = if baseline {
            "baseline: present when history was turned on"
        } else {
            "repair: changed without a version (outside the history, or its version was lost)"
        };
        let mut missing = Vec::new();
        let mut held = 0usize;
        let paths: BTreeSet<&String> = expected.keys().chain(live.keys()).collect();
        for path in paths {
            if skipped.contains(path.as_str()) || expected.get(path).map(|e| &e.0) == live.get(path)
            {
                continue;
            }
            let file = expected.get(path).map_or(0, |e| e.1);
            let mut v = if live.contains_key(path) {
                let op = if expected.contains_key(path) {
                    ChangeOp::Modified
                } else {
                    ChangeOp::Created
                };
                let Some(p) = MemoryPath::from_stored(path) else {
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
                if let Some(e) = expected.get(path) {
                    v.sha256.clone_from(&e.0);
                }
                v.content = None;
                v.size = versions
                    .iter()
                    .rev()
                    .find(|x| x.file == file)
                    .map_or(0, |x| x.size);
                v
            };
            v.call = None;
            v.note = Some(note.to_owned());
            held += v.content.as_ref().map_or(0, Vec::len);
            missing.push(v);
            // Appended in batches of bounded size (a baseline of a large
            // store holds one batch's content in memory, not the store's).
            if held >= BATCH_BYTES {
                self.record(&mut missing, &mut versions, &mut report)?;
                held = 0;
            }
        }
        self.record(&mut missing, &mut versions, &mut report)?;
        index.seen = versions.last().map_or(0, |v| v.id).max(last);
        index.files = replay(&versions)
            .into_iter()
            .map(|(p, (sha, file))| (p, (file, sha)))
            .collect();
        Ok(report)
    }
}
