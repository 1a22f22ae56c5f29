//! The operator API: [`versions`](HistoryStore::versions), diff, revert,
//! restore, redact and prune.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use super::SkipReason;
use super::repair::{replay, touched};
use super::{
    ChangeOp, HistoryError, HistoryStore, Query, RestoreReport, Retention, Revision, format_time,
    sha256_hex, under,
};
use crate::path::MemoryPath;
use crate::store::{
    Context, DeleteIf, DeleteOptions, MemoryStore, MemoryStoreExt as _, StoreError, WriteMode,
    WriteOptions,
};

impl<S: MemoryStore> HistoryStore<S> {
    /// Versions matching `query`, ids ascending, with their content
    /// (the whole history is read: for a listing, use
    /// [`records`](Self::records)).
    pub fn versions(&self, query: &Query) -> Result<Vec<Revision>, HistoryError> {
        Ok(matching(self.load()?, query))
    }

    /// The records of the versions matching `query`, ids ascending,
    /// without their content (`content` is `None`; `redacted` says
    /// whether it was erased): what `claude-memory history` lists. No
    /// content is read, so memory is a few hundred bytes a version,
    /// whatever the files' sizes.
    pub fn records(&self, query: &Query) -> Result<Vec<Revision>, HistoryError> {
        let mut records = self.log.records()?;
        records.sort_by_key(|v| v.id);
        // As `resolve` does for content: a version that refers to its
        // file's previous one (a rename, a delete) is redacted with it.
        let mut last: std::collections::HashMap<u64, (String, bool)> =
            std::collections::HashMap::new();
        for v in &mut records {
            if v.file == 0 {
                v.file = v.id;
            }
            if let Some((sha, redacted)) = last.get(&v.file)
                && *redacted
                && !v.redacted
                && *sha == v.sha256
                && v.note.as_deref() != Some(super::store::UNREADABLE)
                && matches!(v.op, ChangeOp::Renamed | ChangeOp::Deleted)
            {
                v.redacted = true;
            }
            last.insert(v.file, (v.sha256.clone(), v.redacted));
        }
        Ok(matching(records, query))
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
        Ok(super::unified_diff(
            &old,
            &new,
            &format!("{}@v{}", a.path, a.id),
            &label,
        ))
    }

    /// Where the file of `v` is now (its path at `v` if it is gone).
    fn current_path(&self, v: &Revision) -> String {
        let index = self.lock();
        index
            .files
            .iter()
            .find(|(_, f)| f.0 == v.file)
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
        let note = format!("revert to v{id}");
        self.write_opts(&target, &content, noted(WriteMode::Overwrite, &note))?;
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
    /// A file the history cannot date (see [`SkipReason::Undated`]) is
    /// never deleted.
    pub fn restore(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
    ) -> Result<RestoreReport, HistoryError> {
        self.restore_or_plan(at, prefix, false)
    }

    /// What [`restore`](Self::restore) would do, doing nothing.
    pub fn restore_plan(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
    ) -> Result<RestoreReport, HistoryError> {
        self.restore_or_plan(at, prefix, true)
    }

    fn restore_or_plan(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
        dry_run: bool,
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
        // A live file the history does not have at `at` is deleted only
        // if the history knows its path was empty then: the path's first
        // event in the history is at or before `at` (the replay above is
        // then complete for it), or it is an arrival dated after `at` (a
        // `created` version that is not a baseline or a repair, or a
        // rename onto the path). A path whose history starts later with a
        // baseline, a repair, or an edit (its earlier versions pruned) is
        // left alone: nothing says it was empty then. (Dating the path,
        // not the file, is what makes a file renamed after `at` go back
        // to its old path instead of living at both.)
        let mut first_at: BTreeMap<&str, &Revision> = BTreeMap::new();
        for v in &versions {
            for p in touched(v) {
                first_at.entry(p.as_str()).or_insert(v);
            }
        }
        let created_after = |path: &str| {
            first_at.get(path).is_some_and(|v| {
                if v.time <= at {
                    return true;
                }
                match v.op {
                    ChangeOp::Created => !v
                        .note
                        .as_deref()
                        .is_some_and(|n| n.starts_with("baseline") || n.starts_with("repair")),
                    ChangeOp::Renamed => v.path == path,
                    ChangeOp::Modified | ChangeOp::Deleted => false,
                }
            })
        };
        let mut unreadable = Vec::new();
        let live = self.live(prefix, &mut unreadable)?;
        let note = format!("restore to {}", format_time(at));
        let mut report = RestoreReport::default();
        report.failed.extend(unreadable);
        for path in live.keys().filter(|p| !then.contains_key(*p)) {
            if !created_after(path) {
                report.skipped.push((path.clone(), SkipReason::Undated));
                continue;
            }
            let Some(p) = MemoryPath::from_stored(path) else {
                continue;
            };
            if dry_run {
                report.deleted.push(path.clone());
                continue;
            }
            let delete = DeleteOptions {
                condition: DeleteIf::Exists,
                context: Context {
                    call: None,
                    note: Some(&note),
                },
            };
            match self.delete_opts(&p, delete) {
                Ok(_) | Err(StoreError::NotFound { .. }) => report.deleted.push(path.clone()),
                Err(e) => report.failed.push((path.clone(), e.to_string())),
            }
        }
        for (path, v) in &then {
            if live.get(path).is_some_and(|d| sha256_hex(d) == v.sha256) {
                continue;
            }
            let Some(content) = &v.content else {
                report.skipped.push((path.clone(), SkipReason::Redacted));
                continue;
            };
            let Some(p) = MemoryPath::from_stored(path) else {
                continue;
            };
            if dry_run {
                report.written.push(path.clone());
                continue;
            }
            let write = noted(WriteMode::Overwrite, &note);
            let mut result = self.write_opts(&p, content, write);
            if matches!(result, Err(StoreError::IsADirectory { .. })) {
                // An empty directory left where the file was.
                let _ = self.remove_empty_dir(&p);
                result = self.write_opts(&p, content, write);
            }
            match result {
                Ok(_) => report.written.push(path.clone()),
                Err(e) => report.failed.push((path.clone(), e.to_string())),
            }
        }
        Ok(report)
    }

    /// Erases version `id`'s content, and that of every other version
    /// holding the same content (same sha256: a leaked secret is kept by
    /// the delete that removed it and by reverts too); their records (path,
    /// operation, time, actor, sha256, size) stay. Returns the ids erased,
    /// `id` first.
    pub fn redact(&self, id: u64) -> Result<Vec<u64>, HistoryError> {
        self.operator(|| {
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
            drop(versions);
            for &v in &ids {
                self.log.redact(v)?;
            }
            // Each log's `redact` erases the content from its files (the
            // journal is rewritten, SQLite checkpoints its WAL); the
            // compaction after is PostgreSQL's `VACUUM`, which waits at
            // most 2 s for the shared table's lock (see `PostgresLog`).
            Ok((ids, true))
        })
    }

    /// Runs an operator's change of the log (redact, prune) holding this
    /// handle's lock and the log's cross-process writer lock, so no other
    /// process's change lands between its look at the log and its changes
    /// (a version appended meanwhile is neither lost, nor left unredacted,
    /// nor left referring to content a prune removed). `f` says whether
    /// the log must be compacted after: that runs once the writer lock is
    /// let go, since PostgreSQL's writer lock is a transaction, and a
    /// `VACUUM FULL` would wait behind the locks that transaction holds.
    fn operator<T>(
        &self,
        f: impl FnOnce() -> Result<(T, bool), HistoryError>,
    ) -> Result<T, HistoryError> {
        let _guard = self.lock();
        let mut f = Some(f);
        let mut out = None;
        self.log.exclusive(&mut |_| {
            if let Some(f) = f.take() {
                out = Some(f());
            }
        })?;
        let (value, compact) =
            out.unwrap_or_else(|| Err(HistoryError::Log("the change did not run".into())))?;
        if compact {
            self.log.compact()?;
        }
        Ok(value)
    }

    /// Erases `text` from every version's content that holds it,
    /// whatever edits came before or after (each occurrence is replaced
    /// by `[redacted]`; the version is marked redacted, its record kept),
    /// then compacts the log so the text is in no file it manages. Returns
    /// the ids changed, and the live files that still hold the text (the
    /// operator must edit those: the history does not change the store).
    pub fn redact_text(&self, text: &[u8]) -> Result<(Vec<u64>, Vec<String>), HistoryError> {
        if text.is_empty() {
            return Err(HistoryError::Log(
                "nothing to redact: the text is empty".into(),
            ));
        }
        let changed = self.operator(|| {
            let mut changed = Vec::new();
            for v in self.log.load()? {
                let Some(content) = &v.content else { continue };
                if let Some(cut) = cut_out(content, text) {
                    self.log.replace_content(v.id, cut, true)?;
                    changed.push(v.id);
                }
            }
            let compact = !changed.is_empty();
            Ok((changed, compact))
        })?;
        let mut still = Vec::new();
        let mut skipped = Vec::new();
        self.each_live(&MemoryPath::root(), &mut skipped, &mut |p, d| {
            if find(&d, text).is_some() {
                still.push(p);
            }
        })?;
        Ok((changed, still))
    }

    /// What [`prune`](Self::prune) would remove, removing nothing.
    pub fn prune_plan(&self, retention: &Retention) -> Result<Vec<u64>, HistoryError> {
        let versions = self.load()?;
        Ok(Self::beyond(&versions, retention))
    }

    fn beyond(versions: &[Revision], retention: &Retention) -> Vec<u64> {
        let live: BTreeSet<u64> = replay(versions)
            .into_values()
            .map(|(_, file)| file)
            .collect();
        let cutoff = retention
            .max_age
            .and_then(|age| SystemTime::now().checked_sub(age));
        let mut by_file: BTreeMap<u64, Vec<&Revision>> = BTreeMap::new();
        for v in versions {
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
        removed
    }

    /// Removes versions beyond `retention` (never the latest version of a
    /// live file); returns the ids removed. A version that another one
    /// refers to for its content (a rename, a delete) hands its content
    /// on to it first, so no kept version loses its content.
    pub fn prune(&self, retention: &Retention) -> Result<Vec<u64>, HistoryError> {
        self.operator(|| self.prune_locked(retention))
    }

    fn prune_locked(&self, retention: &Retention) -> Result<(Vec<u64>, bool), HistoryError> {
        let versions = self.load()?;
        let removed = Self::beyond(&versions, retention);
        if !removed.is_empty() {
            let gone: BTreeSet<u64> = removed.iter().copied().collect();
            // Kept versions that refer to a removed one's content: store it.
            let raw: BTreeMap<u64, bool> = self
                .log
                .load()?
                .into_iter()
                .map(|v| (v.id, v.content.is_none() && !v.redacted))
                .collect();
            for v in &versions {
                if !gone.contains(&v.id)
                    && raw.get(&v.id) == Some(&true)
                    && let Some(c) = &v.content
                {
                    self.log.replace_content(v.id, c.clone(), v.redacted)?;
                }
            }
            self.log.drop_versions(&removed)?;
        }
        let compact = !removed.is_empty();
        Ok((removed, compact))
    }
}

/// The versions of `versions` matching `query`.
fn matching(versions: Vec<Revision>, query: &Query) -> Vec<Revision> {
    let files: Option<BTreeSet<u64>> = query.path.as_ref().map(|p| {
        let p = p.normalized();
        versions
            .iter()
            .filter(|v| touched(v).any(|t| *t == p))
            .map(|v| v.file)
            .collect()
    });
    let prefix = query.prefix.as_ref().map(MemoryPath::normalized);
    versions
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
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `content` with every occurrence of `text` replaced by `[redacted]`, or
/// `None` if it has none.
fn cut_out(content: &[u8], text: &[u8]) -> Option<Vec<u8>> {
    let mut at = find(content, text)?;
    let mut out = Vec::with_capacity(content.len());
    let mut rest = content;
    loop {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(b"[redacted]");
        rest = &rest[at + text.len()..];
        match find(rest, text) {
            Some(i) => at = i,
            None => break,
        }
    }
    out.extend_from_slice(rest);
    Some(out)
}

/// A write noted `note` in the versions it makes.
fn noted(mode: WriteMode, note: &str) -> WriteOptions<'_> {
    WriteOptions {
        mode,
        quota: None,
        context: Context {
            call: None,
            note: Some(note),
        },
    }
}
