//! [`HistoryStore`]: the [`MemoryStore`] wrapper that records a version
//! before each change (write-ahead) and drops it if the change fails:
//! every primitive forwarded to the wrapped store, the changing ones
//! recorded as versions first.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::index::{Entry, Index, passes_checkpoint};
use super::{ChangeOp, HistoryError, HistoryLog, RepairReport, Revision, sha256_hex};
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    Abort, Change, Context, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader,
    Lock, MemoryStore, MemoryStoreExt, Metadata, RenameOptions, StoreError, StoreResult,
    UpdateOptions, Updated, Version, WriteMode, WriteOptions,
};

/// A store that keeps every change: see the [module](crate::history).
///
/// Wrap the store and give it a log, once, where the store is opened:
/// [`MemoryLog`](crate::history::MemoryLog) for an [`InMemoryStore`](crate::InMemoryStore),
/// [`FileLog::for_store`](crate::history::FileLog::for_store) for a filesystem store, `SqliteLog` /
/// `PostgresLog` for the database stores; for tenants wrap each
/// tenant's store, with a log of its own. Changes made through the
/// wrapper are serialized in-process, and across processes under the
/// log's writer lock ([`HistoryLog::exclusive`]), so several processes
/// may write one store with history.
pub struct HistoryStore<S> {
    pub(super) inner: S,
    pub(super) log: Arc<dyn HistoryLog>,
    pub(super) label: Option<String>,
    /// The file index; the mutex also serializes this handle's changes.
    pub(super) files: Arc<Mutex<Index>>,
    pub(super) repair: Arc<RepairReport>,
    /// The most any one file is read for the history.
    pub(super) limit: u64,
}

impl<S: Clone> Clone for HistoryStore<S> {
    fn clone(&self) -> Self {
        HistoryStore {
            inner: self.inner.clone(),
            log: Arc::clone(&self.log),
            label: self.label.clone(),
            files: Arc::clone(&self.files),
            repair: Arc::clone(&self.repair),
            limit: self.limit,
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
    /// Repair reads no file over [`DEFAULT_FILE_LIMIT`] (see
    /// [`open_with_limit`](Self::open_with_limit)).
    pub fn open(inner: S, log: impl HistoryLog + 'static) -> Result<Self, HistoryError> {
        Self::open_with_limit(inner, log, DEFAULT_FILE_LIMIT)
    }

    /// [`open`](Self::open), reading at most `limit` bytes of any one file
    /// (the store's file limit: give the handler's
    /// [`max_file_size`](crate::Config::max_file_size)). A file over it,
    /// or one the store refuses to read (a planted hard link, a FIFO), is
    /// skipped by repair and listed in [`RepairReport::skipped`], never
    /// read whole and never a reason to refuse the open.
    pub fn open_with_limit(
        inner: S,
        log: impl HistoryLog + 'static,
        limit: u64,
    ) -> Result<Self, HistoryError> {
        let mut store = Self::new(inner, log, limit);
        let report = store.repair()?;
        store.repair = Arc::new(report);
        Ok(store)
    }

    fn new(inner: S, log: impl HistoryLog + 'static, limit: u64) -> Self {
        HistoryStore {
            inner,
            log: Arc::new(log),
            label: None,
            files: Arc::new(Mutex::new(Index::default())),
            repair: Arc::new(RepairReport::default()),
            limit,
        }
    }

    /// The history of `inner` for reading only (listing, showing,
    /// diffing): no repair is run, so nothing is written on open. Changes
    /// through this handle are still recorded, but open with
    /// [`open`](Self::open) to make them.
    pub fn inspect(inner: S, log: impl HistoryLog + 'static) -> Result<Self, HistoryError> {
        let store = Self::new(inner, log, DEFAULT_FILE_LIMIT);
        let mut out = None;
        store.log.exclusive(&mut |last| {
            out = Some(store.load_index(last, false));
        })?;
        let (index, _, _) =
            out.unwrap_or_else(|| Err(HistoryError::Log("the index was not read".into())))?;
        *store.lock() = index;
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

    pub(super) fn lock(&self) -> MutexGuard<'_, Index> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` holding this handle's lock and the log's writer lock
    /// (shared by every process writing the log), after catching the file
    /// index up with what other processes recorded meanwhile: a change, and
    /// the look at the store it is recorded from, is never interleaved with
    /// another process's change or an opener's repair.
    ///
    /// If the log's lock fails after `f` ran (a lost connection, whose
    /// transaction may or may not have committed), the file index is
    /// rebuilt from the log at the next change.
    pub(super) fn serialized<T>(
        &self,
        path: &MemoryPath,
        mut f: impl FnMut(&mut Index) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut index = self.lock();
        let mut out = None;
        let locked = self.log.exclusive(&mut |last| {
            if let Err(e) = self.catch_up(&mut index, last) {
                out = Some(Err(log_failure(path, e)));
                return;
            }
            out = Some(f(&mut index));
        });
        if let Err(e) = locked {
            if out.is_some() {
                *index = Index::default();
            }
            return Err(log_failure(path, e));
        }
        out.unwrap_or_else(|| Err(log_failure(path, HistoryError::Log("not run".into()))))
    }

    /// Saves the index as a checkpoint when `appended` (this handle's
    /// versions, just made) passed a multiple of the checkpoint interval,
    /// under the writer lock, so the index is the history's as of its
    /// last id. Only a log that locks out other writers gets one: without
    /// that lock, another writer's versions below that id may not be in
    /// this index yet. A failure (a full disk) leaves the last
    /// checkpoint; an open then replays a little more.
    fn checkpoint_if_due(&self, index: &Index, appended: &[Revision]) {
        if self.log.locks_writers() && passes_checkpoint(appended) {
            let _ = self.log.save_checkpoint(&index.to_checkpoint());
        }
    }

    /// The index as of `last` (the log's last id, read under its writer
    /// lock), from the log's checkpoint and the versions after it (or, if
    /// there is none it can use, the whole history, read page by page),
    /// and, if `repair`, the after-checkpoint versions whose change never
    /// happened (dropped from the log, and left out of the index; a
    /// read-only look takes the versions as they are), and how many
    /// versions were read. Reads about two checkpoint
    /// intervals of records when a checkpoint is there, whatever the
    /// history's length.
    pub(super) fn load_index(
        &self,
        last: u64,
        repair: bool,
    ) -> Result<(Index, Vec<u64>, usize), HistoryError> {
        self.load_index_from(last, repair, true)
    }

    /// [`load_index`](Self::load_index), from the checkpoint only if
    /// `checkpoint` (else from the history's start).
    pub(super) fn load_index_from(
        &self,
        last: u64,
        repair: bool,
        checkpoint: bool,
    ) -> Result<(Index, Vec<u64>, usize), HistoryError> {
        let saved = match checkpoint {
            true => self
                .log
                .checkpoint()?
                .and_then(|data| Index::from_checkpoint(&data, last)),
            false => None,
        };
        let mut index = saved.unwrap_or_default();
        let (dropped, read) = self.advance(&mut index, repair, repair)?;
        index.seen = index.seen.max(last);
        Ok((index, dropped, read))
    }

    pub(super) fn revision(
        &self,
        context: Context<'_>,
        op: ChangeOp,
        path: String,
        from: Option<String>,
        was: Option<&Entry>,
        data: &[u8],
    ) -> Revision {
        Revision {
            id: 0,
            file: was.map_or(0, |e| e.file),
            prev: was.map(|e| e.latest),
            op,
            path,
            from,
            time: SystemTime::now(),
            actor: self.label.clone(),
            call: context.call.map(bounded_call),
            sha256: sha256_hex(data),
            size: data.len() as u64,
            content: Some(data.to_vec()),
            redacted: false,
            note: context.note.map(str::to_owned),
        }
    }

    /// A version of a file leaving `key` (`Deleted`, or `Renamed` to
    /// `to`): when the file is what the history last recorded of it, the
    /// version refers to that content instead of holding a copy (no new
    /// space, and a redaction of it sticks); else it holds the content
    /// as it is. A file the store will not let us read within the limit
    /// is recorded by size and hash of nothing, noted so.
    fn leaving(
        &self,
        context: Context<'_>,
        index: &Index,
        p: &MemoryPath,
        to: Option<String>,
    ) -> StoreResult<Revision> {
        let key = p.normalized();
        let known = index.files.get(&key);
        let (op, path, from) = match to {
            Some(to) => (ChangeOp::Renamed, to, Some(key)),
            None => (ChangeOp::Deleted, key, None),
        };
        match self.inner.read(p, self.limit) {
            Ok(content) => {
                let mut v = self.revision(context, op, path, from, known, &[]);
                let sha = sha256_hex(&content.data);
                v.size = content.data.len() as u64;
                if known.is_some_and(|k| k.sha256 == sha) {
                    v.content = None; // the file's previous version holds it
                } else {
                    v.content = Some(content.data);
                }
                v.sha256 = sha;
                Ok(v)
            }
            Err(e @ StoreError::NotFound { .. }) => Err(e),
            Err(_) => {
                let mut v = self.revision(context, op, path, from, known, &[]);
                v.content = None;
                v.note = Some(UNREADABLE.to_owned());
                Ok(v)
            }
        }
    }

    /// The versions of every file at or below `path` leaving it: deleted,
    /// or renamed to the same place below `to`. One file's content at a
    /// time is read (and kept only if the history does not have it).
    pub(super) fn leaving_all(
        &self,
        context: Context<'_>,
        index: &Index,
        path: &MemoryPath,
        to: Option<&MemoryPath>,
    ) -> StoreResult<Vec<Revision>> {
        let old = path.normalized();
        let new = to.map(MemoryPath::normalized);
        let mut versions = Vec::new();
        for p in self.paths_below(path)? {
            let target = new
                .as_ref()
                .map(|n| format!("{n}{}", &p.normalized()[old.len()..]));
            match self.leaving(context, index, &p, target) {
                Ok(v) => versions.push(v),
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(versions)
    }

    /// A write (`write_opts`, run by `apply`) with its
    /// version: `created` or `modified`, recorded before and dropped if
    /// the store refuses the write.
    pub(super) fn write_recorded(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
        mut apply: impl FnMut() -> StoreResult<Version>,
    ) -> StoreResult<Version> {
        self.serialized(path, |index| {
            // A create needs no look first: if something is there, the
            // store refuses it and the version is dropped (leaving nothing
            // in the log); the same for an update of a file that is gone.
            let op = match options.mode {
                WriteMode::Create => Some(ChangeOp::Created),
                WriteMode::Update(_) => Some(ChangeOp::Modified),
                WriteMode::Overwrite => match self.inner.stat(path)? {
                    Some(m) if m.kind == EntryKind::Directory => None,
                    Some(_) => Some(ChangeOp::Modified),
                    None => Some(ChangeOp::Created),
                },
            };
            let key = path.normalized();
            let versions = match op {
                // The store refuses it; nothing to record.
                None => Vec::new(),
                // No version for a write that changes nothing.
                Some(ChangeOp::Modified)
                    if index
                        .files
                        .get(&key)
                        .is_some_and(|k| k.sha256 == sha256_hex(data))
                        && self
                            .inner
                            .read(path, self.limit)
                            .is_ok_and(|now| now.data == data) =>
                {
                    Vec::new()
                }
                Some(op) => {
                    let was = match op {
                        ChangeOp::Created => None,
                        _ => index.files.get(&key),
                    };
                    vec![self.revision(options.context, op, key, None, was, data)]
                }
            };
            self.change(index, path, versions, &mut apply)
        })
    }

    /// The inner store's update (`update_opts`, run by
    /// `apply`), with the new content's version appended inside it, after
    /// `change` and before the write (under the store's write lock where
    /// it has one, so versions are in the order of the writes). A retry (a
    /// compare-and-swap conflict) drops the version of the attempt that was
    /// not written.
    pub(super) fn update_recorded(
        &self,
        context: Context<'_>,
        path: &MemoryPath,
        change: &mut Change<'_>,
        mut apply: impl FnMut(&mut Change<'_>) -> StoreResult<Updated>,
    ) -> StoreResult<Updated> {
        self.serialized(path, |index| {
            let key = path.normalized();
            let was = index.files.get(&key).cloned();
            let mut appended: Option<Revision> = None;
            let mut failure: Option<HistoryError> = None;
            let result = apply(&mut |data: &[u8]| {
                if let Some(v) = appended.take() {
                    let _ = self.log.drop_versions(&[v.id]);
                }
                let new = change(data)?;
                if new == data {
                    return Ok(new); // no version for a change that changes nothing
                }
                let mut v = [self.revision(
                    context,
                    ChangeOp::Modified,
                    key.clone(),
                    None,
                    was.as_ref(),
                    &new,
                )];
                match self.log.append(&mut v) {
                    Ok(()) => {
                        let [v] = v;
                        appended = Some(v);
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
                    if let Some(mut v) = appended {
                        if v.file == 0 {
                            v.file = v.id;
                        }
                        index.apply(&v);
                        self.checkpoint_if_due(index, std::slice::from_ref(&v));
                    }
                    Ok(Updated::Written(data))
                }
                Ok(Updated::Aborted) => match failure {
                    Some(e) => Err(log_failure(path, e)),
                    None => Ok(Updated::Aborted),
                },
                Err(e) => {
                    if let Some(v) = appended {
                        let _ = self.log.drop_versions(&[v.id]);
                    }
                    Err(e)
                }
            }
        })
    }

    /// Appends `versions` (write-ahead), runs `apply`, and drops the
    /// versions again if it fails; on success updates the file index.
    pub(super) fn change<T>(
        &self,
        index: &mut Index,
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
                for v in &mut versions {
                    if v.file == 0 {
                        v.file = v.id;
                    }
                    index.apply(v);
                }
                self.checkpoint_if_due(index, &versions);
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

    /// The files at or below `path` (none if missing). A symbolic link
    /// (filesystem store) is no file of the memory (listings leave it out,
    /// no command reads it), so it has no version: the store's own delete
    /// or rename acts on a final link itself, or refuses a path that meets
    /// one on the way.
    pub(super) fn paths_below(&self, path: &MemoryPath) -> StoreResult<Vec<MemoryPath>> {
        match self.inner.stat(path) {
            Ok(None) | Err(StoreError::Symlink { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
            Ok(Some(m)) if m.kind == EntryKind::File => Ok(vec![path.clone()]),
            Ok(Some(_)) => {
                let mut out = Vec::new();
                walk(&self.inner, path, Order::ByName, &mut |step| {
                    if let Step::File { dir, entry, .. } = step
                        && let Some(p) = dir.join(&entry.name)
                    {
                        out.push(p);
                    }
                    Ok(Flow::Continue)
                })?;
                Ok(out)
            }
        }
    }

    /// Every live file at or below `start` the store lets us read within
    /// the limit: path → content, one at a time into `visit`; the others
    /// go to `skipped` with the reason.
    pub(super) fn each_live(
        &self,
        start: &MemoryPath,
        skipped: &mut Vec<(String, String)>,
        visit: &mut dyn FnMut(String, Vec<u8>),
    ) -> StoreResult<()> {
        for p in self.paths_below(start)? {
            match self.inner.read(&p, self.limit) {
                Ok(f) => visit(p.normalized(), f.data),
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => skipped.push((p.normalized(), e.to_string())),
            }
        }
        Ok(())
    }
}

/// The most of a per-call actor (a `tool_use` id, which the model's
/// client sends) a version keeps: real ids are about 30 characters; a
/// megabyte-long one must not add a megabyte to every version (a rename
/// of 1,000 files would add a gigabyte).
pub const MAX_CALL_LEN: usize = 256;

/// `call` cut to [`MAX_CALL_LEN`] bytes at a character boundary.
fn bounded_call(call: &str) -> String {
    if call.len() <= MAX_CALL_LEN {
        return call.to_owned();
    }
    let mut end = MAX_CALL_LEN;
    while !call.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &call[..end])
}

/// How many records one read of the log returns while an index is
/// rebuilt or a history is walked: memory per step, whatever the length.
pub(super) const PAGE: usize = 1_000;

/// The note of a version whose file could not be read within the limit.
pub(super) const UNREADABLE: &str =
    "content not recorded: the store would not let it be read within the file limit";

/// The note of a version whose content would make a journal line over
/// the longest one the journal reads back.
pub(super) const TOO_LONG: &str = "content not recorded: over the journal's 64 MiB line limit";

/// Whether a version's note says its content was never recorded (so it
/// is not a version whose content lies in the one before it).
pub(super) fn not_recorded(note: Option<&str>) -> bool {
    note.is_some_and(|n| n == UNREADABLE || n == TOO_LONG)
}

/// The default read limit of repair and of deleted or renamed files' versions: 1 MiB,
/// the handler's default [`max_file_size`](crate::Config::max_file_size).
pub const DEFAULT_FILE_LIMIT: u64 = 1024 * 1024;

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

    /// The wrapped store checks a quota.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.write_recorded(path, data, options, || {
            self.inner.write_opts(path, data, options)
        })
    }

    /// The wrapped store's update (which checks a quota), with the new
    /// content's version appended inside it (see `update_recorded`).
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.update_recorded(options.context, path, change, |c| {
            self.inner.update_opts(path, options, c)
        })
    }

    /// A `deleted` version of each file that goes, kept only if the
    /// wrapped store did delete it. An empty directory holds no file: it
    /// goes with no version.
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let DeleteOptions {
            mut condition,
            context,
        } = options;
        if path.is_root() || matches!(condition, DeleteIf::EmptyDir) {
            return self
                .inner
                .delete_opts(path, DeleteOptions { condition, context });
        }
        self.serialized(path, |index| {
            let versions = self.leaving_all(context, index, path, None)?;
            let DeleteIf::FileWhere(still) = &mut condition else {
                let deleted = || self.inner.delete(path);
                return self.change(index, path, versions, deleted).map(|()| true);
            };
            // "Not deleted" goes through `change` as an error, so the
            // version is dropped, then comes back as `false`.
            let outcome = self.change(index, path, versions, || {
                match self.inner.delete_file_if(path, &mut **still) {
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
        })
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }

    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<crate::store::Tree>> {
        self.inner.list_tree(dir)
    }

    fn max_files(&self) -> Option<u64> {
        self.inner.max_files()
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: RenameOptions<'_>,
    ) -> StoreResult<()> {
        if from.is_root() || to.is_root() || to.is_strictly_inside(from) {
            return self.inner.rename(from, to);
        }
        self.serialized(from, |index| {
            match self.inner.stat(to) {
                Ok(None) => {}
                // Something is there (a symbolic link too): the store refuses.
                Ok(Some(_)) | Err(StoreError::Symlink { .. }) => {
                    return self.inner.rename(from, to);
                }
                Err(e) => return Err(e),
            }
            let versions = self.leaving_all(options.context, index, from, Some(to))?;
            self.change(index, from, versions, || self.inner.rename(from, to))
        })
    }

    /// Runs `f` with no lock of its own: each change through a history
    /// store is serialized under its log's lock (and then the wrapped
    /// store's), and holding the wrapped store's lock around `f` would
    /// take the two in the other order.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f(Lock::Absent)
    }
}
