//! The operator API: [`versions`](HistoryStore::versions), one version,
//! diff, revert, restore, redact and prune, each over the log's queries:
//! a listing or a version costs the same whatever the history's length;
//! what must look at every version (restore, redact, prune) walks the
//! history page by page, in bounded memory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

use super::index::Index;
use super::log::{Filter, Order, file_of};
use super::repair::touched;
use super::store::{PAGE, not_recorded};
use super::version::{DEFAULT_LIMIT, NONE_KEPT};
use super::versions::VersionId;
use super::{
    ChangeOp, HistoryError, HistoryStore, Query, RestoreReport, Retention, Revision, SkipReason,
    format_time, sha256_hex, under,
};
use crate::path::MemoryPath;
use crate::store::{
    Context, DeleteIf, DeleteOptions, MemoryStore, MemoryStoreExt as _, StoreError, WriteMode,
    WriteOptions,
};

impl<S: MemoryStore> HistoryStore<S> {
    /// The records (no content: `content` is `None`; `redacted` says
    /// whether it was erased) of the versions matching `query`: its page,
    /// the newest [`Query::limit`] older than [`Query::before`], ids
    /// ascending. For the content, [`version`](Self::version).
    pub fn versions(&self, query: &Query) -> Result<Vec<Revision>, HistoryError> {
        let Some(mut filter) = self.filter_of(query)? else {
            return Ok(Vec::new());
        };
        filter.before = query.before.as_ref().map(VersionId::local).transpose()?;
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
        let mut page = self.log.find(&filter, Order::Newest, limit)?;
        page.reverse();
        for v in &mut page {
            v.file = file_of(v);
        }
        Ok(page)
    }

    /// The log's filter for `query` (its limit and `before` aside), or
    /// `None` if it names a file there is none of.
    pub(super) fn filter_of(&self, query: &Query) -> Result<Option<Filter>, HistoryError> {
        let mut filter = Filter {
            prefix: query.prefix.as_ref().map(MemoryPath::normalized),
            since: query.since,
            until: query.until,
            actor: query.actor.clone(),
            call: query.call.clone(),
            ..Filter::default()
        };
        let mut files = Vec::new();
        if let Some(p) = &query.path {
            match self.file_at(&p.normalized())? {
                Some(file) => files.push(file),
                None => return Ok(None),
            }
        }
        if let Some(f) = &query.file {
            let f = super::versions::local_file(f)?;
            if !files.is_empty() && files != [f] {
                return Ok(None);
            }
            files = vec![f];
        }
        if !files.is_empty() {
            filter.files = Some(files);
        }
        Ok(Some(filter))
    }

    /// The file at stored path `p` now, or the last one that was there.
    pub(super) fn file_at(&self, p: &str) -> Result<Option<u64>, HistoryError> {
        if let Some(e) = self.lock().files.get(p) {
            return Ok(Some(e.file));
        }
        let filter = Filter {
            path: Some(p.to_owned()),
            ..Filter::default()
        };
        Ok(self
            .log
            .find(&filter, Order::Newest, 1)?
            .first()
            .map(file_of))
    }

    /// Version `id`, with its content (`None` once redacted): a version
    /// that refers to its file's previous one (a rename, or a delete of
    /// content the history has) takes that one's.
    pub fn version(&self, id: u64) -> Result<Revision, HistoryError> {
        let mut v = self
            .log
            .get(id)?
            .ok_or(HistoryError::NoSuchVersion(VersionId::Local(id)))?;
        v.file = file_of(&v);
        let mut at = v.clone_record();
        while v.content.is_none() && !v.redacted && !not_recorded(at.note.as_deref()) {
            let Some(raw) = self.previous(&at)? else {
                break;
            };
            if raw.sha256 != v.sha256 {
                break;
            }
            v.redacted = raw.redacted;
            v.content = raw.content.clone();
            at = raw;
        }
        Ok(v)
    }

    /// The version of `v`'s file before `v`, with its content: by its
    /// `prev` id where the log kept one, else by a search.
    fn previous(&self, v: &Revision) -> Result<Option<Revision>, HistoryError> {
        let file = file_of(v);
        if v.prev == Some(NONE_KEPT) {
            return Ok(None);
        }
        if let Some(prev) = v.prev.filter(|p| *p < v.id)
            && let Some(found) = self.log.get(prev)?
            && file_of(&found) == file
        {
            return Ok(Some(found));
        }
        let filter = Filter {
            files: Some(vec![file]),
            before: Some(v.id),
            ..Filter::default()
        };
        match self.log.find(&filter, Order::Newest, 1)?.pop() {
            Some(found) => self.log.get(found.id),
            None => Ok(None),
        }
    }

    /// The file's content after a version (empty after a delete).
    fn state_after(v: &Revision) -> Result<String, HistoryError> {
        if v.op == ChangeOp::Deleted {
            return Ok(String::new());
        }
        v.text()
            .ok_or(HistoryError::Redacted(VersionId::Local(v.id)))
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
                    Some(p) => match self.inner.read(&p, self.limit) {
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
    pub(super) fn current_path(&self, v: &Revision) -> String {
        let index = self.lock();
        index
            .files
            .iter()
            .find(|(_, f)| f.file == v.file)
            .map_or_else(|| v.path.clone(), |(p, _)| p.clone())
    }

    /// Puts a file back as it was in version `id` — for a delete, the
    /// content it removed — at the file's current path (or the version's,
    /// if the file is gone). The revert is itself a new version, noted
    /// `revert to v{id}`; `Ok(None)` if the file already has that content.
    pub fn revert(&self, id: u64) -> Result<Option<u64>, HistoryError> {
        let v = self.version(id)?;
        let content = v
            .content
            .clone()
            .ok_or(HistoryError::Redacted(VersionId::Local(id)))?;
        let path = self.current_path(&v);
        let target = MemoryPath::from_stored(&path)
            .ok_or_else(|| HistoryError::Log(format!("cannot name {path}")))?;
        if let Ok(now) = self.inner.read(&target, self.limit)
            && now.data == content
        {
            return Ok(None);
        }
        let note = format!("revert to v{id}");
        self.write_opts(&target, &content, noted(WriteMode::Overwrite, &note))?;
        let index = self.lock();
        Ok(index.files.contains_key(&path).then_some(index.seen))
    }

    /// Calls `each` with every record matching `filter`, oldest first,
    /// one page in memory at a time.
    pub(super) fn walk(
        &self,
        filter: &Filter,
        each: &mut dyn FnMut(Revision) -> Result<(), HistoryError>,
    ) -> Result<(), HistoryError> {
        let mut filter = filter.clone();
        loop {
            let page = self.log.find(&filter, Order::Oldest, PAGE)?;
            let Some(last) = page.last().map(|v| v.id) else {
                return Ok(());
            };
            for mut v in page {
                v.file = file_of(&v);
                each(v)?;
            }
            filter.after = Some(last);
        }
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
        // The state at `at` (path → the version that left it), and each
        // path's first event in the history: one walk, memory for each
        // path below the prefix, not each version.
        let mut then: BTreeMap<String, Revision> = BTreeMap::new();
        let mut first_at: BTreeMap<String, Revision> = BTreeMap::new();
        let filter = Filter {
            prefix: Some(pre.clone()),
            ..Filter::default()
        };
        self.walk(&filter, &mut |v| {
            for p in touched(&v) {
                if !first_at.contains_key(p) {
                    first_at.insert(p.clone(), v.clone());
                }
            }
            if v.time <= at {
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
            Ok(())
        })?;
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
        let mut live: BTreeMap<String, String> = BTreeMap::new();
        self.each_live(prefix, &mut unreadable, &mut |p, d| {
            live.insert(p, sha256_hex(&d));
        })?;
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
            if live.get(path) == Some(&v.sha256) {
                continue;
            }
            let Some(content) = self.version(v.id)?.content else {
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
            let mut result = self.write_opts(&p, &content, write);
            if matches!(result, Err(StoreError::IsADirectory { .. })) {
                // An empty directory left where the file was.
                let _ = self.remove_empty_dir(&p);
                result = self.write_opts(&p, &content, write);
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
    /// the delete that removed it, by renames that refer to it, and by
    /// reverts too); their records (path, operation, time, actor, sha256,
    /// size) stay, marked redacted. Returns the ids erased, `id` first.
    pub fn redact(&self, id: u64) -> Result<Vec<u64>, HistoryError> {
        self.operator(|_| {
            let target = self
                .log
                .get(id)?
                .ok_or(HistoryError::NoSuchVersion(VersionId::Local(id)))?;
            let mut ids = vec![id];
            self.walk(&Filter::default(), &mut |v| {
                if v.id != id && v.sha256 == target.sha256 && !v.redacted {
                    ids.push(v.id);
                }
                Ok(())
            })?;
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
        f: impl FnOnce(&Index) -> Result<(T, bool), HistoryError>,
    ) -> Result<T, HistoryError> {
        let mut index = self.lock();
        let mut f = Some(f);
        let mut out = None;
        self.log.exclusive(&mut |last| {
            if let Some(f) = f.take() {
                out = Some(self.catch_up(&mut index, last).and_then(|()| f(&index)));
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
        let changed = self.operator(|_| {
            let mut changed = Vec::new();
            self.walk(&Filter::default(), &mut |record| {
                let Some(v) = self.log.get(record.id)? else {
                    return Ok(());
                };
                if let Some(content) = &v.content
                    && let Some(cut) = cut_out(content, text)
                {
                    self.log.replace_content(v.id, cut, true)?;
                    changed.push(v.id);
                }
                Ok(())
            })?;
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
        let (live, seen) = {
            let index = self.lock();
            let live: BTreeSet<u64> = index.files.values().map(|e| e.file).collect();
            (live, index.seen)
        };
        // As the prune would: with a checkpoint saved first.
        self.beyond(&live, retention, Some(seen))
    }

    /// The versions beyond `retention`: per file, those past the newest
    /// `keep_per_file` or older than `max_age`, never the latest version
    /// of a live file. Walks the history once, holding an id and a time
    /// per version of the files (16 bytes each), no record.
    /// Versions after `covered` (the id the log's checkpoint covers, if
    /// any) are kept: an open replays every version after the checkpoint,
    /// and a pruned rename there would leave its source live in the
    /// replay; they go once a later checkpoint covers them.
    fn beyond(
        &self,
        live: &BTreeSet<u64>,
        retention: &Retention,
        covered: Option<u64>,
    ) -> Result<Vec<u64>, HistoryError> {
        let cutoff = retention
            .max_age
            .and_then(|age| SystemTime::now().checked_sub(age));
        let mut by_file: HashMap<u64, Vec<(u64, SystemTime)>> = HashMap::new();
        let filter = Filter {
            before: covered.map(|at| at.saturating_add(1)),
            ..Filter::default()
        };
        self.walk(&filter, &mut |v| {
            by_file.entry(v.file).or_default().push((v.id, v.time));
            Ok(())
        })?;
        let mut removed = Vec::new();
        for (file, list) in by_file {
            for (i, (id, time)) in list.iter().rev().enumerate() {
                if i == 0 && live.contains(&file) {
                    continue;
                }
                let too_many = retention.keep_per_file.is_some_and(|k| i >= k);
                let too_old = cutoff.is_some_and(|c| *time < c);
                if too_many || too_old {
                    removed.push(*id);
                }
            }
        }
        removed.sort_unstable();
        Ok(removed)
    }

    /// Removes versions beyond `retention` (never the latest version of a
    /// live file, nor one after the history's last checkpoint, which an
    /// open replays: those go once a later checkpoint covers them);
    /// returns the ids removed. A version that another one
    /// refers to for its content (a rename, a delete) hands its content
    /// on to it first, so no kept version loses its content.
    pub fn prune(&self, retention: &Retention) -> Result<Vec<u64>, HistoryError> {
        self.operator(|index| {
            let live: BTreeSet<u64> = index.files.values().map(|e| e.file).collect();
            // A checkpoint of the index as it is covers every version; if
            // it cannot be saved (a full disk), the one there covers less.
            let covered = match self.log.save_checkpoint(&index.to_checkpoint()) {
                Ok(()) => Some(index.seen),
                Err(_) => self
                    .log
                    .checkpoint()?
                    .and_then(|data| Index::from_checkpoint(&data, u64::MAX))
                    .map(|saved| saved.seen),
            };
            let removed = self.beyond(&live, retention, covered)?;
            if removed.is_empty() {
                return Ok((removed, false));
            }
            let gone: BTreeSet<u64> = removed.iter().copied().collect();
            // Kept versions right after a removed one of their file that
            // refer to its content: they get it first.
            let mut heirs = Vec::new();
            let mut last_of: HashMap<u64, u64> = HashMap::new();
            self.walk(&Filter::default(), &mut |v| {
                if let Some(prev) = last_of.insert(v.file, v.id)
                    && gone.contains(&prev)
                    && !gone.contains(&v.id)
                    && !v.redacted
                {
                    heirs.push(v.id);
                }
                Ok(())
            })?;
            for id in heirs {
                let Some(raw) = self.log.get(id)? else {
                    continue;
                };
                if raw.content.is_none() && !not_recorded(raw.note.as_deref()) {
                    let v = self.version(id)?;
                    if let Some(c) = v.content {
                        self.log.replace_content(id, c, v.redacted)?;
                    }
                }
            }
            self.log.drop_versions(&removed)?;
            Ok((removed, true))
        })
    }
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
pub(super) fn noted(mode: WriteMode, note: &str) -> WriteOptions<'_> {
    WriteOptions {
        mode,
        quota: None,
        context: Context {
            call: None,
            note: Some(note),
        },
    }
}
