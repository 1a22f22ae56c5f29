//! The one versions API: [`Versions`], which a [`HistoryStore`] (its log)
//! and a managed memory store (the service's own versions) both serve, so
//! listing, showing, diffing, reverting, redacting, restoring, pruning and
//! copying a history never ask which store is below. What a store's
//! history cannot do is its [`HistoryError::Unsupported`] answer.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use super::{
    ChangeOp, HistoryError, HistoryStore, Query, RestoreReport, Retention, Revision, escape,
};
use crate::path::MemoryPath;
use crate::store::{
    Context, DeleteIf, DeleteOptions, MemoryStore, RenameOptions, StoreError, WriteMode,
    WriteOptions,
};

/// A version's id in one store's history.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VersionId {
    /// A [`HistoryStore`]'s: `v12`.
    Local(u64),
    /// A managed memory store's: `memver_…`.
    Service(String),
}

impl fmt::Display for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionId::Local(n) => write!(f, "v{n}"),
            VersionId::Service(id) => f.write_str(&escape(id)),
        }
    }
}

impl FromStr for VersionId {
    type Err = String;

    /// `12` or `v12`; `memver_…` (letters, digits and `_`).
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.starts_with("memver_")
            && text.len() > 7
            && text.len() <= 256
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Ok(VersionId::Service(text.to_owned()));
        }
        text.strip_prefix('v')
            .unwrap_or(text)
            .parse()
            .map(VersionId::Local)
            .map_err(|_| {
                format!(
                    "`{}` is not a version id (such as 12, v12, or memver_… on a managed store)",
                    escape(text)
                )
            })
    }
}

impl VersionId {
    /// The number of a [`HistoryStore`]'s version; a managed store's is
    /// refused, saying which kind this store's are.
    pub fn local(&self) -> Result<u64, HistoryError> {
        match self {
            VersionId::Local(n) => Ok(*n),
            VersionId::Service(_) => Err(HistoryError::Unsupported(
                "that is a managed memory store's version id (memver_…); this history numbers its versions (v12)",
            )),
        }
    }

    /// The id of a managed store's version; a number is refused.
    pub fn service(&self) -> Result<&str, HistoryError> {
        match self {
            VersionId::Service(id) => Ok(id),
            VersionId::Local(_) => Err(HistoryError::Unsupported(
                "a managed memory store's versions are memver_… (see `history`), not numbers (v12)",
            )),
        }
    }
}

/// One version of one file, as any store's history keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Version {
    /// Its id.
    pub id: VersionId,
    /// The file it belongs to, the same across renames: its first
    /// version's id (`v3`), or the memory's id (`mem_…`).
    pub file: String,
    /// What it records.
    pub op: ChangeOp,
    /// The file's path after it (`/memories/…`; for a delete, the path
    /// removed); `None` once a managed store redacted it.
    pub path: Option<String>,
    /// For a rename, the path before.
    pub from: Option<String>,
    /// When.
    pub time: SystemTime,
    /// Who: a [`HistoryStore`]'s label, or the service's actor
    /// (`api_actor:apikey_…`, `session_actor:sesn_…`).
    pub actor: Option<String>,
    /// The per-call actor (a `tool_use` id), where the history keeps one.
    pub call: Option<String>,
    /// sha256 of the content (`None` once a managed store redacted it).
    pub sha256: Option<String>,
    /// The content's size in bytes (as `sha256`).
    pub size: Option<u64>,
    /// Whether its content was erased.
    pub redacted: bool,
    /// Why the history made it (`revert to v7`, `repair: …`).
    pub note: Option<String>,
    /// The content after the change (for a delete, the content removed):
    /// on [`Versions::show`] only, `None` once redacted.
    pub content: Option<Vec<u8>>,
}

impl Version {
    /// The content as text, lossily.
    pub fn text(&self) -> Option<String> {
        self.content
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned())
    }

    fn from_revision(v: Revision) -> Version {
        Version {
            id: VersionId::Local(v.id),
            file: format!("v{}", super::file_of(&v)),
            op: v.op,
            path: Some(v.path),
            from: v.from,
            time: v.time,
            actor: v.actor,
            call: v.call,
            sha256: Some(v.sha256),
            size: Some(v.size),
            redacted: v.redacted,
            note: v.note,
            content: v.content,
        }
    }

    /// A version of a managed store (for its implementation of
    /// [`Versions`]).
    #[cfg(feature = "managed")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn of_service(
        id: String,
        memory_id: String,
        op: ChangeOp,
        path: Option<String>,
        from: Option<String>,
        time: SystemTime,
        actor: Option<String>,
        sha256: Option<String>,
        size: Option<u64>,
        redacted: bool,
        content: Option<Vec<u8>>,
    ) -> Version {
        Version {
            id: VersionId::Service(id),
            file: memory_id,
            op,
            path,
            from,
            time,
            actor,
            call: None,
            sha256,
            size,
            redacted,
            note: None,
            content,
        }
    }
}

/// What [`Versions::revert_changes`] did, by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RevertReport {
    /// Files put back as they were before the reverted changes: the path
    /// and what was done (`deleted`, `restored`, `moved back`,
    /// `rewritten`).
    pub reverted: Vec<(String, &'static str)>,
    /// Files left as they are, and why (changed since by another actor,
    /// their earlier content redacted, their old path taken).
    pub skipped: Vec<(String, String)>,
}

/// The history of a store: its versions, whoever wrote them, and the
/// operations on them. A [`HistoryStore`] and a `ManagedStore` (feature
/// `managed`) serve it; a
/// store's history that cannot do something answers
/// [`HistoryError::Unsupported`] with what to do instead.
pub trait Versions {
    /// One page of the versions matching `query`: the newest
    /// [`Query::limit`] older than [`Query::before`], ids ascending,
    /// without content.
    fn history(&self, query: &Query) -> Result<Vec<Version>, HistoryError>;

    /// Every version matching `query` older than [`Query::before`] (its
    /// limit aside), oldest first, one page in memory at a time.
    fn each(
        &self,
        query: &Query,
        f: &mut dyn FnMut(Version) -> Result<(), HistoryError>,
    ) -> Result<(), HistoryError>;

    /// One version, with its content (`None` once redacted).
    fn show(&self, id: &VersionId) -> Result<Version, HistoryError>;

    /// Where file `file` ([`Version::file`]) is now and what it holds;
    /// `None` if it is gone.
    fn current(&self, file: &str) -> Result<Option<(String, Vec<u8>)>, HistoryError>;

    /// Puts a file back as version `id` has it (for a delete, the content
    /// it removed), as a change of its own: the path written, or `None`
    /// if the file already holds that.
    fn revert_to(&self, id: &VersionId) -> Result<Option<String>, HistoryError>;

    /// Erases version `id`'s content (and, where the history keeps them,
    /// every version holding the same content); the ids erased.
    fn redact_version(&self, id: &VersionId) -> Result<Vec<VersionId>, HistoryError>;

    /// Erases `text` from every version that holds it: the versions
    /// changed, and the live files that still hold it.
    fn erase_text(&self, text: &[u8]) -> Result<(Vec<VersionId>, Vec<String>), HistoryError> {
        let _ = text;
        Err(HistoryError::Unsupported(
            "this history erases whole versions only (`redact ID`)",
        ))
    }

    /// Puts the store (or `prefix`) back as it was at `at`; with
    /// `dry_run`, only says what it would do.
    fn restore_at(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
        dry_run: bool,
    ) -> Result<RestoreReport, HistoryError> {
        let _ = (at, prefix, dry_run);
        Err(HistoryError::Unsupported(
            "this history cannot restore a time: revert one file at a time (`history PATH`, then `revert ID`)",
        ))
    }

    /// Removes versions beyond `retention` (never the latest of a live
    /// file); with `dry_run`, only says which.
    fn prune_history(
        &self,
        retention: &Retention,
        dry_run: bool,
    ) -> Result<Vec<VersionId>, HistoryError> {
        let _ = (retention, dry_run);
        Err(HistoryError::Unsupported(
            "this history keeps every version for its own retention period",
        ))
    }

    /// The live store: changes made through it are recorded as versions.
    fn live(&self) -> &dyn MemoryStore;

    /// A unified diff from version `from` to version `to`, or to its file
    /// as it is now; each side is the file's content after the version
    /// (nothing after a delete).
    fn diff_versions(
        &self,
        from: &VersionId,
        to: Option<&VersionId>,
    ) -> Result<String, HistoryError> {
        let after = |v: &Version| -> Result<String, HistoryError> {
            if v.op == ChangeOp::Deleted {
                return Ok(String::new());
            }
            match (&v.content, v.redacted) {
                (Some(c), false) => Ok(String::from_utf8_lossy(c).into_owned()),
                _ => Err(HistoryError::Redacted(v.id.clone())),
            }
        };
        let a = self.show(from)?;
        let label = |v: &Version| {
            format!(
                "{}@{}",
                v.path
                    .as_deref()
                    .map_or_else(|| "[redacted]".into(), escape),
                v.id
            )
        };
        let old = after(&a)?;
        let (new, new_label) = match to {
            Some(id) => {
                let b = self.show(id)?;
                (after(&b)?, label(&b))
            }
            None => match self.current(&a.file)? {
                Some((path, data)) => (
                    String::from_utf8_lossy(&data).into_owned(),
                    format!("{} (now)", escape(&path)),
                ),
                None => (String::new(), "(deleted now)".to_owned()),
            },
        };
        Ok(super::unified_diff(&old, &new, &label(&a), &new_label))
    }

    /// Undoes every change `by` selects (an actor's, a call's: a model's
    /// session, a consolidation run), file by file, as changes of their
    /// own noted `note`: each file is put back as it was before the first
    /// of them (removed if they created it, moved back if they renamed
    /// it, brought back if they deleted it). A file changed since, or in
    /// between, by a change `by` does not select is left as it is, and
    /// said. `by` must name an actor or a call
    /// ([`HistoryError::Unsupported`] otherwise: an empty query would
    /// select every change ever made).
    fn revert_changes(&self, by: &Query, note: &str) -> Result<RevertReport, HistoryError> {
        // Per file, the first and the last of the changes to undo.
        if by.actor.is_none() && by.call.is_none() {
            return Err(HistoryError::Unsupported(
                "a revert of changes needs an actor or a call to select them",
            ));
        }
        // Per file, the first and the last of the changes to undo, and
        // how many there are.
        let mut files: BTreeMap<String, (Version, Version, usize)> = BTreeMap::new();
        self.each(by, &mut |v| {
            files
                .entry(v.file.clone())
                .and_modify(|e| {
                    e.1 = v.clone();
                    e.2 += 1;
                })
                .or_insert_with(|| (v.clone(), v, 1));
            Ok(())
        })?;
        let mut report = RevertReport::default();
        for (file, (first, last, count)) in files {
            let shown = |v: &Version| v.path.clone().unwrap_or_else(|| file.clone());
            let of_file = |before: Option<VersionId>| Query {
                file: Some(file.clone()),
                before,
                limit: Some(1),
                ..Query::default()
            };
            let latest = self.history(&of_file(None))?.pop();
            match latest {
                Some(l) if l.id == last.id => {}
                Some(l) => {
                    report.skipped.push((
                        shown(&l),
                        format!("changed since by {} (another change): left as it is", l.id),
                    ));
                    continue;
                }
                None => {
                    report
                        .skipped
                        .push((shown(&last), "its history is gone: left as it is".into()));
                    continue;
                }
            }
            // Another change between the first and the last of these
            // would be undone with them.
            if count > 1 {
                let between = self.history(&Query {
                    limit: Some(count - 1),
                    ..of_file(Some(last.id.clone()))
                })?;
                if between.first().map(|v| &v.id) != Some(&first.id) {
                    report.skipped.push((
                        shown(&last),
                        "changed between these changes by another change: left as it is".into(),
                    ));
                    continue;
                }
            }
            let before = self.history(&of_file(Some(first.id.clone())))?.pop();
            let target = match before.filter(|b| b.op != ChangeOp::Deleted) {
                None => None,
                Some(b) => {
                    let full = self.show(&b.id)?;
                    match (full.path, full.content) {
                        (Some(p), Some(c)) if !full.redacted => Some((p, c)),
                        _ => {
                            report.skipped.push((
                                shown(&last),
                                "its content before was redacted: left as it is".into(),
                            ));
                            continue;
                        }
                    }
                }
            };
            let now = (last.op != ChangeOp::Deleted)
                .then(|| last.path.clone())
                .flatten();
            match put_back(self.live(), now.as_deref(), target, note) {
                Ok(Some((path, what))) => report.reverted.push((path, what)),
                Ok(None) => {}
                Err(why) => report.skipped.push((shown(&last), why)),
            }
        }
        Ok(report)
    }
}

/// Puts one file back: from `now` (its path now, if it is there) to
/// `target` (its path and content before, or nothing). What was done, or
/// why not.
fn put_back(
    store: &dyn MemoryStore,
    now: Option<&str>,
    target: Option<(String, Vec<u8>)>,
    note: &str,
) -> Result<Option<(String, &'static str)>, String> {
    let context = Context {
        call: None,
        note: Some(note),
    };
    let path = |p: &str| MemoryPath::from_stored(p).ok_or_else(|| format!("cannot name {p}"));
    let fail = |e: StoreError| e.to_string();
    match (now, target) {
        (None, None) => Ok(None),
        (Some(now), None) => {
            let p = path(now)?;
            let delete = DeleteOptions {
                condition: DeleteIf::Exists,
                context,
            };
            match store.delete_opts(&p, delete) {
                Ok(_) | Err(StoreError::NotFound { .. }) => Ok(Some((now.to_owned(), "deleted"))),
                Err(e) => Err(fail(e)),
            }
        }
        (None, Some((to, content))) => {
            let p = path(&to)?;
            let write = WriteOptions {
                mode: WriteMode::Create,
                quota: None,
                context,
            };
            match store.write_opts(&p, &content, write) {
                Ok(_) => Ok(Some((to, "restored"))),
                Err(StoreError::AlreadyExists { .. }) => Err(format!(
                    "{}: its old path is taken: left as it is",
                    escape(&to)
                )),
                Err(e) => Err(fail(e)),
            }
        }
        (Some(now), Some((to, content))) => {
            let mut what = "rewritten";
            if now != to {
                let (from, dest) = (path(now)?, path(&to)?);
                let rename = RenameOptions { context };
                match store.rename_opts(&from, &dest, rename) {
                    Ok(()) => what = "moved back",
                    Err(StoreError::AlreadyExists { .. }) => {
                        return Err(format!(
                            "its old path {} is taken: left as it is",
                            escape(&to)
                        ));
                    }
                    Err(e) => return Err(fail(e)),
                }
            }
            let p = path(&to)?;
            let same = store
                .read(&p, content.len() as u64)
                .is_ok_and(|f| f.data == content);
            if !same {
                let write = WriteOptions {
                    mode: WriteMode::Overwrite,
                    quota: None,
                    context,
                };
                store.write_opts(&p, &content, write).map_err(fail)?;
            } else if what == "rewritten" {
                return Ok(None);
            }
            Ok(Some((to, what)))
        }
    }
}

/// The number of a local file id (`v3`).
pub(super) fn local_file(file: &str) -> Result<u64, HistoryError> {
    file.strip_prefix('v')
        .and_then(|n| n.parse().ok())
        .ok_or(HistoryError::Unsupported(
            "that is not a file of this history (v3)",
        ))
}

impl<S: MemoryStore> Versions for HistoryStore<S> {
    fn history(&self, query: &Query) -> Result<Vec<Version>, HistoryError> {
        Ok(self
            .versions(query)?
            .into_iter()
            .map(Version::from_revision)
            .collect())
    }

    fn each(
        &self,
        query: &Query,
        f: &mut dyn FnMut(Version) -> Result<(), HistoryError>,
    ) -> Result<(), HistoryError> {
        let Some(mut filter) = self.filter_of(query)? else {
            return Ok(());
        };
        filter.before = query.before.as_ref().map(VersionId::local).transpose()?;
        self.walk(&filter, &mut |v| f(Version::from_revision(v)))
    }

    fn show(&self, id: &VersionId) -> Result<Version, HistoryError> {
        self.version(id.local()?).map(Version::from_revision)
    }

    fn current(&self, file: &str) -> Result<Option<(String, Vec<u8>)>, HistoryError> {
        let file = local_file(file)?;
        let path = {
            let index = self.lock();
            index
                .files
                .iter()
                .find(|(_, f)| f.file == file)
                .map(|(p, _)| p.clone())
        };
        let Some(path) = path else { return Ok(None) };
        let Some(p) = MemoryPath::from_stored(&path) else {
            return Ok(None);
        };
        match self.inner.read(&p, self.limit) {
            Ok(f) => Ok(Some((path, f.data))),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn revert_to(&self, id: &VersionId) -> Result<Option<String>, HistoryError> {
        let n = id.local()?;
        let v = self.version(n)?;
        Ok(self.revert(n)?.map(|_| self.current_path(&v)))
    }

    fn redact_version(&self, id: &VersionId) -> Result<Vec<VersionId>, HistoryError> {
        Ok(self
            .redact(id.local()?)?
            .into_iter()
            .map(VersionId::Local)
            .collect())
    }

    fn erase_text(&self, text: &[u8]) -> Result<(Vec<VersionId>, Vec<String>), HistoryError> {
        let (ids, still) = self.redact_text(text)?;
        Ok((ids.into_iter().map(VersionId::Local).collect(), still))
    }

    fn restore_at(
        &self,
        at: SystemTime,
        prefix: Option<&MemoryPath>,
        dry_run: bool,
    ) -> Result<RestoreReport, HistoryError> {
        if dry_run {
            self.restore_plan(at, prefix)
        } else {
            self.restore(at, prefix)
        }
    }

    fn prune_history(
        &self,
        retention: &Retention,
        dry_run: bool,
    ) -> Result<Vec<VersionId>, HistoryError> {
        let ids = if dry_run {
            self.prune_plan(retention)?
        } else {
            self.prune(retention)?
        };
        Ok(ids.into_iter().map(VersionId::Local).collect())
    }

    fn live(&self) -> &dyn MemoryStore {
        self
    }
}
