//! [`HistoryStore`]: the [`MemoryStore`] wrapper that records a version
//! before each change (write-ahead) and drops it if the change fails.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::repair::replay;
use super::{CALL, ChangeOp, HistoryError, HistoryLog, NOTE, RepairReport, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    Abort, Change, DirEntry, EntryKind, FileContent, FileReader, MemoryStore, Metadata, Quota,
    StoreError, StoreResult, Updated, Version, WriteMode,
};

/// A store that keeps every change: see the [module](crate::history).
///
/// Wrap the store and give it a log, once, where the store is opened:
/// [`MemoryLog`](crate::history::MemoryLog) for an [`InMemoryStore`](crate::InMemoryStore),
/// [`FileLog::for_store`](crate::history::FileLog::for_store) for a filesystem store, `SqliteLog` /
/// `PostgresLog` for the database stores; for tenants wrap each
/// tenant's store, with a log of its own. Changes made through the
/// wrapper are serialized in-process. Ids stay monotonic across
/// processes, but the repair on open cannot tell another process's change
/// in flight from a crash's leftover: keep one writing process per
/// filesystem or SQLite store (PostgreSQL showed no such loss).
pub struct HistoryStore<S> {
    pub(super) inner: S,
    pub(super) log: Arc<dyn HistoryLog>,
    pub(super) label: Option<String>,
    /// Path → file id; the mutex also serializes this handle's changes.
    pub(super) files: Arc<Mutex<HashMap<String, u64>>>,
    pub(super) repair: Arc<RepairReport>,
}

impl<S: Clone> Clone for HistoryStore<S> {
    fn clone(&self) -> Self {
        HistoryStore {
            inner: self.inner.clone(),
            log: Arc::clone(&self.log),
            label: self.label.clone(),
            files: Arc::clone(&self.files),
            repair: Arc::clone(&self.repair),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for HistoryStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryStore")
            .field("inner", &self.inner)
            .field("label", &self.label)
            .field("repair", &self.repair)
            .finish_non_exhaustive()
    }
}

fn log_failure(path: &MemoryPath, e: HistoryError) -> StoreError {
    StoreError::Backend {
        path: path.clone(),
        source: Box::new(e),
    }
}

impl<S: MemoryStore> HistoryStore<S> {
    /// Turns history on for `inner`, kept in `log`, and repairs what a
    /// crash left (see [`repair_report`](Self::repair_report)). On the first
    /// open, every file already in the store gets a baseline version.
    pub fn open(inner: S, log: impl HistoryLog + 'static) -> Result<Self, HistoryError> {
        let mut store = HistoryStore {
            inner,
            log: Arc::new(log),
            label: None,
            files: Arc::new(Mutex::new(HashMap::new())),
            repair: Arc::new(RepairReport::default()),
        };
        let report = store.repair()?;
        store.repair = Arc::new(report);
        Ok(store)
    }

    /// The history of `inner` for reading only (listing, showing,
    /// diffing): no repair is run, so nothing is written on open. Changes
    /// through this handle are still recorded, but open with
    /// [`open`](Self::open) to make them.
    pub fn inspect(inner: S, log: impl HistoryLog + 'static) -> Result<Self, HistoryError> {
        let store = HistoryStore {
            inner,
            log: Arc::new(log),
            label: None,
            files: Arc::new(Mutex::new(HashMap::new())),
            repair: Arc::new(RepairReport::default()),
        };
        let versions = store.load()?;
        *store.lock() = replay(&versions)
            .into_iter()
            .map(|(p, (_, file))| (p, file))
            .collect();
        Ok(store)
    }

    /// Labels every version this handle records with `label` (the
    /// handler's name, an agent id).
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// What the open repaired.
    pub fn repair_report(&self) -> &RepairReport {
        &self.repair
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The log.
    pub fn log(&self) -> &dyn HistoryLog {
        &*self.log
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every version, ids ascending, file ids filled in.
    pub(super) fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        let mut versions = self.log.load()?;
        versions.sort_by_key(|v| v.id);
        for v in &mut versions {
            if v.file == 0 {
                v.file = v.id;
            }
        }
        Ok(versions)
    }

    pub(super) fn revision(
        &self,
        op: ChangeOp,
        path: String,
        from: Option<String>,
        file: u64,
        data: &[u8],
    ) -> Revision {
        Revision {
            id: 0,
            file,
            op,
            path,
            from,
            time: SystemTime::now(),
            actor: self.label.clone(),
            call: CALL.with(|c| c.borrow().clone()),
            sha256: sha256_hex(data),
            size: data.len() as u64,
            content: Some(data.to_vec()),
            redacted: false,
            note: NOTE.with(|c| c.borrow().clone()),
        }
    }

    /// Appends `versions` (write-ahead), runs `apply`, and drops the
    /// versions again if it fails; on success updates the file index.
    /// A write (`write` or `write_within`, run by `apply`) with its
    /// version: `created` or `modified`, recorded before and dropped if
    /// the store refuses the write.
    pub(super) fn write_recorded(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        apply: impl FnOnce() -> StoreResult<Version>,
    ) -> StoreResult<Version> {
        let mut files = self.lock();
        // A create needs no look first: if something is there, the store
        // refuses it and the version is dropped; the same for an update of
        // a file that is gone.
        let op = match mode {
            WriteMode::Create => Some(ChangeOp::Created),
            WriteMode::Update(_) => Some(ChangeOp::Modified),
            WriteMode::Overwrite => match self.inner.stat(path)? {
                Some(m) if m.kind == EntryKind::Directory => None,
                Some(_) => Some(ChangeOp::Modified),
                None => Some(ChangeOp::Created),
            },
        };
        let versions = match op {
            // The store refuses it; nothing to record.
            None => Vec::new(),
            Some(op) => {
                let key = path.normalized();
                let file = files.get(&key).copied().unwrap_or(0);
                let file = if op == ChangeOp::Created { 0 } else { file };
                vec![self.revision(op, key, None, file, data)]
            }
        };
        self.change(&mut files, path, versions, apply)
    }

    /// The inner store's update (`update` or `update_within`, run by
    /// `apply`), with the new content's version appended inside it, after
    /// `change` and before the write (under the store's write lock where
    /// it has one, so versions are in the order of the writes). A retry (a
    /// compare-and-swap conflict) drops the version of the attempt that was
    /// not written.
    pub(super) fn update_recorded(
        &self,
        path: &MemoryPath,
        change: &mut Change<'_>,
        apply: impl FnOnce(&mut Change<'_>) -> StoreResult<Updated>,
    ) -> StoreResult<Updated> {
        let mut files = self.lock();
        let key = path.normalized();
        let file = files.get(&key).copied().unwrap_or(0);
        let mut appended: Option<u64> = None;
        let mut failure: Option<HistoryError> = None;
        let result = apply(&mut |data: &[u8]| {
            if let Some(id) = appended.take() {
                let _ = self.log.drop_versions(&[id]);
            }
            let new = change(data)?;
            let mut v = [self.revision(ChangeOp::Modified, key.clone(), None, file, &new)];
            match self.log.append(&mut v) {
                Ok(()) => {
                    appended = Some(v[0].id);
                    Ok(new)
                }
                Err(e) => {
                    failure = Some(e);
                    Err(Abort)
                }
            }
        });
        match result {
            Ok(Updated::Written(data)) => {
                if let Some(id) = appended {
                    files.insert(key, if file == 0 { id } else { file });
                }
                Ok(Updated::Written(data))
            }
            Ok(Updated::Aborted) => match failure {
                Some(e) => Err(log_failure(path, e)),
                None => Ok(Updated::Aborted),
            },
            Err(e) => {
                if let Some(id) = appended {
                    let _ = self.log.drop_versions(&[id]);
                }
                Err(e)
            }
        }
    }

    pub(super) fn change<T>(
        &self,
        files: &mut HashMap<String, u64>,
        path: &MemoryPath,
        mut versions: Vec<Revision>,
        apply: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        if versions.is_empty() {
            return apply();
        }
        self.log
            .append(&mut versions)
            .map_err(|e| log_failure(path, e))?;
        match apply() {
            Ok(value) => {
                for v in &versions {
                    let file = if v.file == 0 { v.id } else { v.file };
                    match v.op {
                        ChangeOp::Created | ChangeOp::Modified => {
                            files.insert(v.path.clone(), file);
                        }
                        ChangeOp::Deleted => {
                            files.remove(&v.path);
                        }
                        ChangeOp::Renamed => {
                            if let Some(from) = &v.from {
                                files.remove(from);
                            }
                            files.insert(v.path.clone(), file);
                        }
                    }
                }
                Ok(value)
            }
            Err(e) => {
                let ids: Vec<u64> = versions.iter().map(|v| v.id).collect();
                // If this fails too, the next open drops them (the store
                // does not match them).
                let _ = self.log.drop_versions(&ids);
                Err(e)
            }
        }
    }

    /// The files at or below `path` with their content (none if missing).
    pub(super) fn files_below(&self, path: &MemoryPath) -> StoreResult<Vec<(MemoryPath, Vec<u8>)>> {
        match self.inner.stat(path)? {
            None => Ok(Vec::new()),
            Some(m) if m.kind == EntryKind::File => {
                Ok(vec![(path.clone(), self.inner.read(path, u64::MAX)?.data)])
            }
            Some(_) => {
                let mut out = Vec::new();
                walk(&self.inner, path, Order::ByName, &mut |step| {
                    if let Step::File { dir, entry, .. } = step
                        && let Some(p) = dir.join(&entry.name)
                    {
                        let data = self.inner.read(&p, u64::MAX)?.data;
                        out.push((p, data));
                    }
                    Ok(Flow::Continue)
                })?;
                Ok(out)
            }
        }
    }

    /// Every live file: path → content.
    pub(super) fn live(&self, start: &MemoryPath) -> StoreResult<BTreeMap<String, Vec<u8>>> {
        Ok(self
            .files_below(start)?
            .into_iter()
            .map(|(p, d)| (p.normalized(), d))
            .collect())
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for HistoryStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.inner.open(path)
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        self.write_recorded(path, data, mode, || self.inner.write(path, data, mode))
    }

    /// As [`write`](Self::write); the inner store checks the cap.
    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        self.write_recorded(path, data, mode, || {
            self.inner.write_within(path, data, mode, quota)
        })
    }

    /// As [`update`](Self::update); the inner store checks the cap.
    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(path, change, |c| {
            self.inner.update_within(path, limit, quota, c)
        })
    }

    /// A `deleted` version of the file, kept only if the inner store did
    /// delete it.
    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        let mut files = self.lock();
        if path.is_root() {
            return self.inner.delete_file_if(path, still);
        }
        let versions = self
            .files_below(path)?
            .into_iter()
            .map(|(p, data)| {
                let key = p.normalized();
                let file = files.get(&key).copied().unwrap_or(0);
                self.revision(ChangeOp::Deleted, key, None, file, &data)
            })
            .collect();
        // "Not deleted" goes through `change` as an error, so the version
        // is dropped, then comes back as `false`.
        let outcome = self.change(&mut files, path, versions, || {
            match self.inner.delete_file_if(path, still) {
                Ok(true) => Ok(()),
                Ok(false) => Err(StoreError::NotFound { path: path.clone() }),
                Err(e) => Err(e),
            }
        });
        match outcome {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        let mut files = self.lock();
        if path.is_root() {
            return self.inner.delete(path);
        }
        let versions = self
            .files_below(path)?
            .into_iter()
            .map(|(p, data)| {
                let key = p.normalized();
                let file = files.get(&key).copied().unwrap_or(0);
                self.revision(ChangeOp::Deleted, key, None, file, &data)
            })
            .collect();
        self.change(&mut files, path, versions, || self.inner.delete(path))
    }
    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        let mut files = self.lock();
        if from.is_root() || to.is_root() || to.is_strictly_inside(from) {
            return self.inner.rename(from, to);
        }
        if self.inner.stat(to)?.is_some() {
            return self.inner.rename(from, to); // refused: it exists
        }
        let (old, new) = (from.normalized(), to.normalized());
        let versions = self
            .files_below(from)?
            .into_iter()
            .map(|(p, data)| {
                let key = p.normalized();
                let target = format!("{new}{}", &key[old.len()..]);
                let file = files.get(&key).copied().unwrap_or(0);
                self.revision(ChangeOp::Renamed, target, Some(key), file, &data)
            })
            .collect();
        self.change(&mut files, from, versions, || self.inner.rename(from, to))
    }

    /// The inner store's update, with the new content's version appended
    /// inside it (see `update_recorded`).
    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(path, change, |c| self.inner.update(path, limit, c))
    }

    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        self.inner.remove_empty_dir(path)
    }

    /// The live files only: versions are outside the store's namespace.
    fn total_size(&self) -> StoreResult<u64> {
        self.inner.total_size()
    }
}
