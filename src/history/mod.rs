//! Memory history: every change kept, attributable and reversible.
//!
//! [`HistoryStore`] wraps any [`MemoryStore`] (filesystem, in-memory,
//! SQLite, PostgreSQL, a tenant's store) and records a [`Revision`] for
//! every successful change — create, `str_replace`, `insert`, delete,
//! rename — into a [`HistoryLog`] kept outside the live namespace (the
//! reserved directory `.claude-memory-history/` of a filesystem store, the
//! reserved table `claude_memory_history` of a database), so no view,
//! listing or model path ever reaches it and the store size limit counts
//! live files only.
//!
//! Each version holds a monotonic id, the path (both paths for a rename),
//! the operation, the time, the actor (the store's label and the per-call
//! actor, such as the `tool_use` id, set by [`MemoryTool`](crate::MemoryTool)
//! for the duration of a call, or by [`with_call`]), the content's sha256
//! and size, and the content (for a delete, the content removed). A file
//! keeps its [`file`](Revision::file) id across renames.
//!
//! **Atomic with the change.** A change's versions are appended *before*
//! the change (write-ahead) and dropped again if the change fails. Opening
//! a `HistoryStore` compares every live file with its latest version:
//! a trailing version whose change never happened (a crash between the
//! two steps) is dropped, and a change without a version (a file edited
//! outside the history, or a version lost to a power cut) is recorded as a
//! `repair` version; [`HistoryStore::repair_report`] says what was done.
//!
//! ```
//! use claude_memory::history::{HistoryStore, MemoryLog, Query};
//! use claude_memory::{InMemoryStore, MemoryTool};
//! use serde_json::json;
//!
//! let store = HistoryStore::open(InMemoryStore::new(), MemoryLog::new())?.with_label("agent");
//! let tool = MemoryTool::new(store);
//! tool.dispatch(&json!({"type": "tool_use", "id": "toolu_1", "name": "memory",
//!     "input": {"command": "create", "path": "/memories/a.md", "file_text": "v1\n"}}));
//! tool.dispatch(&json!({"type": "tool_use", "id": "toolu_2", "name": "memory",
//!     "input": {"command": "str_replace", "path": "/memories/a.md",
//!               "old_str": "v1", "new_str": "v2"}}));
//! let history = tool.store();
//! let versions = history.versions(&Query::default())?;
//! assert_eq!(versions.len(), 2);
//! assert_eq!(versions[1].call.as_deref(), Some("toolu_2"));
//! history.revert(versions[0].id)?; // a new version, with v1's content
//! assert_eq!(history.versions(&Query::default())?.len(), 3);
//! # Ok::<(), claude_memory::history::HistoryError>(())
//! ```

mod log;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use self::log::{FileLog, HISTORY_DIR, HistoryLog, MemoryLog};
#[cfg(feature = "postgres")]
pub use self::sql::PostgresLog;
#[cfg(feature = "sqlite")]
pub use self::sql::SqliteLog;
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    Abort, Change, DirEntry, EntryKind, FileContent, FileReader, MemoryStore, Metadata, Quota,
    StoreError, StoreResult, Updated, Version, WriteMode,
};

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
    /// The handler's label ([`HistoryStore::with_label`]).
    pub actor: Option<String>,
    /// The per-call actor, such as the `tool_use` id ([`with_call`]).
    pub call: Option<String>,
    /// Lowercase hex sha256 of the content.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// The content after the change (for a delete, the content removed);
    /// `None` once redacted.
    pub content: Option<Vec<u8>>,
    /// Whether the content was erased by [`HistoryStore::redact`].
    pub redacted: bool,
    /// Why the history made it: `revert to v7`, `restore to …`, `repair: …`.
    pub note: Option<String>,
}

impl Revision {
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
    NoSuchVersion(u64),
    /// The version's content was redacted.
    #[error("version {0} was redacted: its content is gone")]
    Redacted(u64),
}

thread_local! {
    static CALL: RefCell<Option<String>> = const { RefCell::new(None) };
    static NOTE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` with `call` as the per-call actor of every version recorded on
/// this thread meanwhile (the previous one is restored after, even on a
/// panic). [`MemoryTool::dispatch`](crate::MemoryTool::dispatch) does this
/// with each `tool_use` block's id.
pub fn with_call<T>(call: Option<&str>, f: impl FnOnce() -> T) -> T {
    scoped(&CALL, call.map(str::to_owned), f)
}

fn scoped<T>(
    key: &'static std::thread::LocalKey<RefCell<Option<String>>>,
    value: Option<String>,
    f: impl FnOnce() -> T,
) -> T {
    struct Restore(
        &'static std::thread::LocalKey<RefCell<Option<String>>>,
        Option<String>,
    );
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.1.take();
            self.0.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = key.with(|c| c.replace(value));
    let _restore = Restore(key, previous);
    f()
}

pub(crate) fn to_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub(crate) fn from_nanos(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
}

/// A time as RFC 3339 with milliseconds, for notes and listings; a time
/// humantime cannot print (before 1970, after 9999) as seconds from the
/// epoch, never a panic.
pub fn format_time(t: SystemTime) -> String {
    const YEAR_10000: u64 = 253_402_300_800;
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) if d.as_secs() < YEAR_10000 => humantime::format_rfc3339_millis(t).to_string(),
        Ok(d) => format!("{}s after the epoch", d.as_secs()),
        Err(e) => format!("{}s before the epoch", e.duration().as_secs()),
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let digest = Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Which versions [`HistoryStore::versions`] lists; every filter set must
/// match.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Versions of every file that was ever at this path, across renames.
    pub path: Option<MemoryPath>,
    /// Versions whose path (or rename source) is this path or below it.
    pub prefix: Option<MemoryPath>,
    /// Made at or after.
    pub since: Option<SystemTime>,
    /// Made at or before.
    pub until: Option<SystemTime>,
    /// Made by this actor: the label or the per-call actor.
    pub actor: Option<String>,
}

/// What the open of a [`HistoryStore`] repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Versions dropped: their change never reached the store (a crash
    /// between the version and the change).
    pub dropped: Vec<u64>,
    /// Versions recorded for changes that had none (files changed outside
    /// the history, lost versions, or, on a first open, the files present
    /// when history was turned on: the baseline).
    pub recorded: Vec<u64>,
}

impl RepairReport {
    /// Whether nothing needed repair.
    pub fn is_clean(&self) -> bool {
        self.dropped.is_empty() && self.recorded.is_empty()
    }
}

impl std::fmt::Display for RepairReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_clean() {
            return f.write_str("history: nothing to repair");
        }
        write!(
            f,
            "history repaired: dropped {} version(s) of changes that never happened {:?}; recorded {} change(s) that had no version {:?}",
            self.dropped.len(),
            self.dropped,
            self.recorded.len(),
            self.recorded
        )
    }
}

/// What [`HistoryStore::restore`] did.
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
    pub skipped: Vec<String>,
    /// Files that could not be restored, and why.
    pub failed: Vec<(String, String)>,
}

/// How long versions are kept ([`HistoryStore::prune`]). The latest
/// version of a live file is always kept, so the history still matches
/// the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Versions older than this go.
    pub max_age: Option<Duration>,
    /// At most this many versions per file are kept (the newest).
    pub keep_per_file: Option<usize>,
}

/// A store that keeps every change: see the [module](self).
///
/// Wrap the store and give it a log, once, where the store is opened:
/// [`MemoryLog`] for an [`InMemoryStore`](crate::InMemoryStore),
/// [`FileLog::for_store`] for a filesystem store, `SqliteLog` /
/// `PostgresLog` for the database stores; for tenants wrap each
/// tenant's store, with a log of its own. Changes made through the
/// wrapper are serialized in-process. Ids stay monotonic across
/// processes, but the repair on open cannot tell another process's change
/// in flight from a crash's leftover: keep one writing process per
/// filesystem or SQLite store (PostgreSQL showed no such loss).
pub struct HistoryStore<S> {
    inner: S,
    log: Arc<dyn HistoryLog>,
    label: Option<String>,
    /// Path → file id; the mutex also serializes this handle's changes.
    files: Arc<Mutex<HashMap<String, u64>>>,
    repair: Arc<RepairReport>,
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

/// A path string below `prefix` (or equal to it).
fn under(path: &str, prefix: &str) -> bool {
    prefix == crate::path::ROOT
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The live state the versions describe: path → (sha256, file id).
fn replay(versions: &[Revision]) -> BTreeMap<String, (String, u64)> {
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

fn touched(v: &Revision) -> impl Iterator<Item = &String> {
    std::iter::once(&v.path).chain(v.from.iter())
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

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every version, ids ascending, file ids filled in.
    fn load(&self) -> Result<Vec<Revision>, HistoryError> {
        let mut versions = self.log.load()?;
        versions.sort_by_key(|v| v.id);
        for v in &mut versions {
            if v.file == 0 {
                v.file = v.id;
            }
        }
        Ok(versions)
    }

    fn revision(
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
    fn write_recorded(
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
    fn update_recorded(
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

    fn change<T>(
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
    fn files_below(&self, path: &MemoryPath) -> StoreResult<Vec<(MemoryPath, Vec<u8>)>> {
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
    fn live(&self, start: &MemoryPath) -> StoreResult<BTreeMap<String, Vec<u8>>> {
        Ok(self
            .files_below(start)?
            .into_iter()
            .map(|(p, d)| (p.normalized(), d))
            .collect())
    }

    fn repair(&self) -> Result<RepairReport, HistoryError> {
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

    /// Versions matching `query`, ids ascending.
    pub fn versions(&self, query: &Query) -> Result<Vec<Revision>, HistoryError> {
        let versions = self.load()?;
        let files: Option<BTreeSet<u64>> = query.path.as_ref().map(|p| {
            let p = p.normalized();
            versions
                .iter()
                .filter(|v| touched(v).any(|t| *t == p))
                .map(|v| v.file)
                .collect()
        });
        let prefix = query.prefix.as_ref().map(MemoryPath::normalized);
        Ok(versions
            .into_iter()
            .filter(|v| files.as_ref().is_none_or(|f| f.contains(&v.file)))
            .filter(|v| {
                prefix
                    .as_ref()
                    .is_none_or(|pre| touched(v).any(|t| under(t, pre)))
            })
            .filter(|v| query.since.is_none_or(|t| v.time >= t))
            .filter(|v| query.until.is_none_or(|t| v.time <= t))
            .filter(|v| {
                query.actor.as_ref().is_none_or(|a| {
                    v.actor.as_deref() == Some(a.as_str()) || v.call.as_deref() == Some(a.as_str())
                })
            })
            .collect())
    }

    /// One version.
    pub fn version(&self, id: u64) -> Result<Revision, HistoryError> {
        self.load()?
            .into_iter()
            .find(|v| v.id == id)
            .ok_or(HistoryError::NoSuchVersion(id))
    }

    /// The file's content after a version (empty after a delete).
    fn state_after(v: &Revision) -> Result<String, HistoryError> {
        if v.op == ChangeOp::Deleted {
            return Ok(String::new());
        }
        v.text().ok_or(HistoryError::Redacted(v.id))
    }

    /// A unified diff from version `from` to version `to`, or to the file
    /// as it is now (`None`; empty if it is gone). Each side is the file's
    /// content after that version (nothing after a delete).
    pub fn diff(&self, from: u64, to: Option<u64>) -> Result<String, HistoryError> {
        let a = self.version(from)?;
        let old = Self::state_after(&a)?;
        let (new, label) = match to {
            Some(id) => {
                let b = self.version(id)?;
                (Self::state_after(&b)?, format!("{}@v{}", b.path, b.id))
            }
            None => {
                let path = self.current_path(&a);
                let text = match MemoryPath::from_stored(&path) {
                    Some(p) => match self.inner.read(&p, u64::MAX) {
                        Ok(f) => String::from_utf8_lossy(&f.data).into_owned(),
                        Err(StoreError::NotFound { .. } | StoreError::IsADirectory { .. }) => {
                            String::new()
                        }
                        Err(e) => return Err(e.into()),
                    },
                    None => String::new(),
                };
                (text, format!("{path} (now)"))
            }
        };
        Ok(similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(3)
            .header(&format!("{}@v{}", a.path, a.id), &label)
            .to_string())
    }

    /// Where the file of `v` is now (its path at `v` if it is gone).
    fn current_path(&self, v: &Revision) -> String {
        let files = self.lock();
        files
            .iter()
            .find(|(_, f)| **f == v.file)
            .map_or_else(|| v.path.clone(), |(p, _)| p.clone())
    }

    /// Puts a file back as it was in version `id` — for a delete, the
    /// content it removed — at the file's current path (or the version's,
    /// if the file is gone). The revert is itself a new version, noted
    /// `revert to v{id}`; `Ok(None)` if the file already has that content.
    pub fn revert(&self, id: u64) -> Result<Option<u64>, HistoryError> {
        let v = self.version(id)?;
        let content = v.content.clone().ok_or(HistoryError::Redacted(id))?;
        let path = self.current_path(&v);
        let target = MemoryPath::from_stored(&path)
            .ok_or_else(|| HistoryError::Log(format!("cannot name {path}")))?;
        if let Ok(now) = self.inner.read(&target, u64::MAX)
            && now.data == content
        {
            return Ok(None);
        }
        scoped(&NOTE, Some(format!("revert to v{id}")), || {
            self.write(&target, &content, WriteMode::Overwrite)
        })?;
        Ok(self
            .versions(&Query {
                path: Some(target),
                ..Query::default()
            })?
            .last()
            .map(|v| v.id))
    }

    /// Puts the whole store, or everything at or below `prefix`, back as it
    /// was at time `at`: files written since are deleted, changed ones
    /// rewritten, deleted ones brought back. Every change is a new version,
    /// noted `restore to {at}`.
    pub fn restore(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
    ) -> Result<RestoreReport, HistoryError> {
        let root = MemoryPath::root();
        let prefix = prefix.unwrap_or(&root);
        let pre = prefix.normalized();
        let versions = self.load()?;
        let mut then: BTreeMap<String, &Revision> = BTreeMap::new();
        for v in versions.iter().filter(|v| v.time <= at) {
            match v.op {
                ChangeOp::Created | ChangeOp::Modified => {
                    then.insert(v.path.clone(), v);
                }
                ChangeOp::Deleted => {
                    then.remove(&v.path);
                }
                ChangeOp::Renamed => {
                    if let Some(from) = &v.from {
                        then.remove(from);
                    }
                    then.insert(v.path.clone(), v);
                }
            }
        }
        then.retain(|p, _| under(p, &pre));
        // Each file's first version (a file keeps its id across renames):
        // if it is a baseline or repair recorded after `at`, the history
        // does not say the file was missing at `at`.
        let lineage = |v: &Revision| if v.file == 0 { v.id } else { v.file };
        let mut first: BTreeMap<u64, &Revision> = BTreeMap::new();
        let mut file_at: BTreeMap<&str, u64> = BTreeMap::new();
        for v in &versions {
            first.entry(lineage(v)).or_insert(v);
            if let Some(from) = &v.from {
                file_at.remove(from.as_str());
            }
            match v.op {
                ChangeOp::Deleted => file_at.remove(v.path.as_str()),
                _ => file_at.insert(v.path.as_str(), lineage(v)),
            };
        }
        let unknown_then = |path: &str| {
            file_at
                .get(path)
                .and_then(|id| first.get(id))
                .is_some_and(|v| {
                    v.time > at
                        && v.note
                            .as_deref()
                            .is_some_and(|n| n.starts_with("baseline") || n.starts_with("repair"))
                })
        };
        let live = self.live(prefix)?;
        let note = format!("restore to {}", format_time(at));
        let mut report = RestoreReport::default();
        scoped(&NOTE, Some(note), || {
            for path in live.keys().filter(|p| !then.contains_key(*p)) {
                if unknown_then(path) {
                    report.skipped.push(path.clone());
                    continue;
                }
                let Some(p) = MemoryPath::from_stored(path) else {
                    continue;
                };
                match self.delete(&p) {
                    Ok(()) | Err(StoreError::NotFound { .. }) => report.deleted.push(path.clone()),
                    Err(e) => report.failed.push((path.clone(), e.to_string())),
                }
            }
            for (path, v) in &then {
                if live.get(path).is_some_and(|d| sha256_hex(d) == v.sha256) {
                    continue;
                }
                let Some(content) = &v.content else {
                    report.skipped.push(path.clone());
                    continue;
                };
                let Some(p) = MemoryPath::from_stored(path) else {
                    continue;
                };
                let mut result = self.write(&p, content, WriteMode::Overwrite);
                if matches!(result, Err(StoreError::IsADirectory { .. })) {
                    // An empty directory left where the file was.
                    let _ = self.remove_empty_dir(&p);
                    result = self.write(&p, content, WriteMode::Overwrite);
                }
                match result {
                    Ok(_) => report.written.push(path.clone()),
                    Err(e) => report.failed.push((path.clone(), e.to_string())),
                }
            }
        });
        Ok(report)
    }

    /// Erases version `id`'s content, and that of every other version
    /// holding the same content (same sha256: a leaked secret is kept by
    /// the delete that removed it and by reverts too); their records (path,
    /// operation, time, actor, sha256, size) stay. Returns the ids erased,
    /// `id` first.
    pub fn redact(&self, id: u64) -> Result<Vec<u64>, HistoryError> {
        let _guard = self.lock();
        let versions = self.load()?;
        let target = versions
            .iter()
            .find(|v| v.id == id)
            .ok_or(HistoryError::NoSuchVersion(id))?;
        let mut ids = vec![id];
        ids.extend(
            versions
                .iter()
                .filter(|v| v.id != id && v.sha256 == target.sha256 && v.content.is_some())
                .map(|v| v.id),
        );
        for &v in &ids {
            self.log.redact(v)?;
        }
        Ok(ids)
    }

    /// Removes versions beyond `retention` (never the latest version of a
    /// live file); returns the ids removed.
    pub fn prune(&self, retention: &Retention) -> Result<Vec<u64>, HistoryError> {
        let _guard = self.lock();
        let versions = self.load()?;
        let live: BTreeSet<u64> = replay(&versions)
            .into_values()
            .map(|(_, file)| file)
            .collect();
        let cutoff = retention
            .max_age
            .and_then(|age| SystemTime::now().checked_sub(age));
        let mut by_file: BTreeMap<u64, Vec<&Revision>> = BTreeMap::new();
        for v in &versions {
            by_file.entry(v.file).or_default().push(v);
        }
        let mut removed = Vec::new();
        for (file, mut list) in by_file {
            list.sort_by_key(|v| std::cmp::Reverse(v.id));
            for (i, v) in list.iter().enumerate() {
                if i == 0 && live.contains(&file) {
                    continue;
                }
                let too_many = retention.keep_per_file.is_some_and(|k| i >= k);
                let too_old = cutoff.is_some_and(|c| v.time < c);
                if too_many || too_old {
                    removed.push(v.id);
                }
            }
        }
        removed.sort_unstable();
        if !removed.is_empty() {
            self.log.drop_versions(&removed)?;
            self.log.compact()?;
        }
        Ok(removed)
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
