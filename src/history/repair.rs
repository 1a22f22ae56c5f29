//! Repair on open: the versions a crash left without their change are
//! dropped, and the changes without a version are recorded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{ChangeOp, HistoryError, HistoryStore, RepairReport, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::MemoryStore;

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

impl<S: MemoryStore> HistoryStore<S> {
    pub(super) fn repair(&self) -> Result<RepairReport, HistoryError> {
        let mut files = self.lock();
        let mut versions = self.load()?;
        let baseline = versions.is_empty();
        let live = self.live(&MemoryPath::root())?;
        let live_sha: BTreeMap<&String, String> =
            live.iter().map(|(p, d)| (p, sha256_hex(d))).collect();
        let matches = |state: &BTreeMap<String, (String, u64)>, path: &String| {
            state.get(path).map(|s| &s.0) == live_sha.get(path)
        };
        let mut report = RepairReport::default();
        // Trailing versions whose change never happened: a version that is
        // the newest for each path it touches, some of them not matching
        // the store, and all of them matching once it is dropped.
        let expected = replay(&versions);
        let mut newest: HashMap<&String, u64> = HashMap::new();
        for v in &versions {
            for p in touched(v) {
                newest.insert(p, v.id);
            }
        }
        let candidates: Vec<u64> = versions
            .iter()
            .rev()
            .filter(|v| touched(v).all(|p| newest.get(p) == Some(&v.id)))
            .filter(|v| touched(v).any(|p| !matches(&expected, p)))
            .map(|v| v.id)
            .collect();
        drop(newest);
        for id in candidates {
            let Some(pos) = versions.iter().position(|v| v.id == id) else {
                continue;
            };
            let candidate = versions.remove(pos);
            let after = replay(&versions);
            if touched(&candidate).all(|p| matches(&after, p)) {
                report.dropped.push(id);
            } else {
                versions.insert(pos, candidate);
            }
        }
        self.log.drop_versions(&report.dropped)?;
        // Changes without a version: record the store as it is.
        let expected = replay(&versions);
        let note = if baseline {
            "baseline: present when history was turned on"
        } else {
            "repair: changed without a version (outside the history, or its version was lost)"
        };
        let mut missing = Vec::new();
        let paths: BTreeSet<&String> = expected.keys().chain(live.keys()).collect();
        for path in paths {
            if matches(&expected, path) {
                continue;
            }
            let file = expected.get(path).map_or(0, |e| e.1);
            let mut v = match live.get(path) {
                Some(data) => {
                    let op = if expected.contains_key(path) {
                        ChangeOp::Modified
                    } else {
                        ChangeOp::Created
                    };
                    self.revision(op, path.clone(), None, file, data)
                }
                None => {
                    let last = versions.iter().rev().find(|v| &v.path == path);
                    let mut v = self.revision(ChangeOp::Deleted, path.clone(), None, file, &[]);
                    if let Some(last) = last {
                        v.sha256.clone_from(&last.sha256);
                        v.size = last.size;
                        v.content.clone_from(&last.content);
                        v.redacted = last.redacted;
                    }
                    v
                }
            };
            v.call = None;
            v.note = Some(note.to_owned());
            missing.push(v);
        }
        if !missing.is_empty() {
            self.log.append(&mut missing)?;
            for v in &mut missing {
                if v.file == 0 {
                    v.file = v.id;
                }
            }
            report.recorded = missing.iter().map(|v| v.id).collect();
            versions.extend(missing);
        }
        *files = replay(&versions)
            .into_iter()
            .map(|(p, (_, file))| (p, file))
            .collect();
        Ok(report)
    }
}
