//! [`Versions`] of a managed memory store: the service's own versions
//! (which the store reads, `store/managed/versions.rs`). A memory's id is
//! its file; a `modified` version whose path differs from the memory's
//! before is shown as a rename. What the service cannot do (prune,
//! restore a time, erase a text everywhere) is said in its
//! [`HistoryError::Unsupported`] answers.

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use super::{
    ChangeOp, DEFAULT_LIMIT, HistoryError, Query, RestoreReport, Retention, Version, VersionId,
    Versions, under,
};
use crate::ManagedStore;
use crate::path::MemoryPath;
use crate::store::{MemoryStore, MemoryStoreExt as _, StoreError, WriteMode};
use crate::store::{ServiceVersion, TOO_MANY};

/// A version as the service has it; `before` is the memory's path in its
/// version before (a change of path is a rename).
fn version_of(v: ServiceVersion, before: Option<&String>) -> Version {
    let path = v.path.as_ref().map(MemoryPath::normalized);
    let op = match v.operation.as_str() {
        "created" => ChangeOp::Created,
        "deleted" => ChangeOp::Deleted,
        _ if before.is_some() && path.is_some() && before != path.as_ref() => ChangeOp::Renamed,
        _ => ChangeOp::Modified,
    };
    let from = (op == ChangeOp::Renamed).then(|| before.cloned()).flatten();
    Version::of_service(
        v.id,
        v.memory_id,
        op,
        path,
        from,
        v.time,
        v.actor,
        v.sha256,
        v.size,
        v.redacted,
        v.content.map(String::into_bytes),
    )
}

/// The store's error as history's: a missing version by its id, a listing
/// too long as what to do.
fn error(e: StoreError, id: &str) -> HistoryError {
    match e {
        StoreError::NotFound { .. } => HistoryError::NoSuchVersion(VersionId::Service(id.into())),
        StoreError::Invalid { reason, .. } if reason == TOO_MANY => {
            HistoryError::Unsupported(TOO_MANY)
        }
        e => HistoryError::Store(e),
    }
}

/// The versions `query` selects, oldest first (without content): the
/// service filters by memory and time, the rest is checked here. With
/// `newest`, only that many of the newest are read (a page of a query
/// the service answers whole: a memory, a time range).
fn select(
    store: &ManagedStore,
    query: &Query,
    newest: Option<usize>,
) -> Result<Vec<Version>, HistoryError> {
    let mut memory = query.file.clone();
    // A live file's versions are its memory's, across renames; a deleted
    // one's are found by the path they had.
    if let Some(p) = &query.path {
        let now = store.memory_id(p)?;
        match (&memory, now) {
            (Some(m), Some(n)) if *m != n => return Ok(Vec::new()),
            (_, Some(n)) => memory = Some(n),
            _ => {}
        }
    }
    // A page needs no more than its own count only when the service
    // filters everything the query asks.
    let whole = query.before.is_none()
        && query.prefix.is_none()
        && query.actor.is_none()
        && query.call.is_none()
        && (query.path.is_none() || memory.is_some());
    let newest = newest.filter(|_| whole);
    let listed = store
        .service_versions(memory.as_deref(), query.since, query.until, newest)
        .map_err(|e| error(e, ""))?;
    let mut last: HashMap<String, String> = HashMap::new();
    let mut out = Vec::with_capacity(listed.len());
    for v in listed {
        let before = last.get(&v.memory_id).cloned();
        let v = version_of(v, before.as_ref());
        if let Some(p) = &v.path {
            last.insert(v.file.clone(), p.clone());
        }
        out.push(v);
    }
    if let (Some(p), None) = (&query.path, &memory) {
        let p = p.normalized();
        let files: HashSet<String> = out
            .iter()
            .filter(|v| v.path.as_ref() == Some(&p))
            .map(|v| v.file.clone())
            .collect();
        out.retain(|v| files.contains(&v.file));
    }
    if let Some(pre) = query.prefix.as_ref().map(MemoryPath::normalized) {
        out.retain(|v| v.path.iter().chain(v.from.iter()).any(|x| under(x, &pre)));
    }
    if let Some(a) = &query.actor {
        out.retain(|v| {
            v.actor
                .as_deref()
                .is_some_and(|x| x == a || x.ends_with(&format!(":{a}")))
        });
    }
    if query.call.is_some() {
        // The service keeps no per-call actor.
        out.clear();
    }
    Ok(out)
}

/// `all` (oldest first) up to [`Query::before`], if it names one.
fn before(mut all: Vec<Version>, query: &Query) -> Result<Vec<Version>, HistoryError> {
    if let Some(before) = &query.before {
        let before = VersionId::Service(before.service()?.to_owned());
        let at = all.iter().position(|v| v.id == before).unwrap_or(0);
        all.truncate(at);
    }
    Ok(all)
}

impl Versions for ManagedStore {
    fn history(&self, query: &Query) -> Result<Vec<Version>, HistoryError> {
        let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
        let mut all = before(select(self, query, Some(limit))?, query)?;
        let skip = all.len().saturating_sub(limit);
        Ok(all.split_off(skip))
    }

    fn each(
        &self,
        query: &Query,
        f: &mut dyn FnMut(Version) -> Result<(), HistoryError>,
    ) -> Result<(), HistoryError> {
        for v in before(select(self, query, None)?, query)? {
            f(v)?;
        }
        Ok(())
    }

    fn show(&self, id: &VersionId) -> Result<Version, HistoryError> {
        let id = id.service()?;
        let v = self.service_version(id).map_err(|e| error(e, id))?;
        Ok(version_of(v, None))
    }

    fn current(&self, file: &str) -> Result<Option<(String, Vec<u8>)>, HistoryError> {
        Ok(self
            .memory_now(file)?
            .map(|(p, c)| (p.normalized(), c.into_bytes())))
    }

    /// Where the memory is now (ids follow renames), or at the version's
    /// path if it was deleted; for a delete, the content it removed (the
    /// memory's version before it).
    fn revert_to(&self, id: &VersionId) -> Result<Option<String>, HistoryError> {
        let v = self.show(id)?;
        let source = if v.op == ChangeOp::Deleted {
            let lineage = select(
                self,
                &Query {
                    file: Some(v.file.clone()),
                    ..Query::default()
                },
                None,
            )?;
            let at = lineage.iter().position(|x| x.id == v.id).unwrap_or(0);
            let before = lineage[..at]
                .iter()
                .rfind(|x| x.op != ChangeOp::Deleted)
                .ok_or(HistoryError::Unsupported(
                    "no earlier version of that memory is kept",
                ))?;
            self.show(&before.id)?
        } else {
            v.clone()
        };
        let (Some(content), Some(at)) = (source.content, v.path.or(source.path)) else {
            return Err(HistoryError::Redacted(v.id));
        };
        let write = |path: &str, mode| {
            let p = MemoryPath::from_stored(path).ok_or(HistoryError::Unsupported(
                "that version's path is not a memory path",
            ))?;
            self.write(&p, &content, mode).map_err(HistoryError::Store)
        };
        match self.current(&v.file)? {
            Some((_, now)) if now == content => Ok(None),
            Some((path, _)) => {
                write(&path, WriteMode::Overwrite)?;
                Ok(Some(path))
            }
            None => {
                write(&at, WriteMode::Create)?;
                Ok(Some(at))
            }
        }
    }

    /// The service refuses the current version of a live memory (a
    /// refusal of that version, not of redaction).
    fn redact_version(&self, id: &VersionId) -> Result<Vec<VersionId>, HistoryError> {
        let raw = id.service()?;
        match self.redact_service_version(raw) {
            Ok(()) => Ok(vec![id.clone()]),
            Err(StoreError::Invalid { reason, .. }) => Err(HistoryError::Log(format!(
                "the service refused to redact {id}: {reason}"
            ))),
            Err(e) => Err(error(e, raw)),
        }
    }

    fn erase_text(&self, _: &[u8]) -> Result<(Vec<VersionId>, Vec<String>), HistoryError> {
        Err(HistoryError::Unsupported(
            "a managed memory store's service redacts whole versions only (`redact memver_…`)",
        ))
    }

    fn restore_at(
        &self,
        _: SystemTime,
        _: Option<&MemoryPath>,
        _: bool,
    ) -> Result<RestoreReport, HistoryError> {
        Err(HistoryError::Unsupported(
            "a managed memory store's history cannot restore a time: revert one memory at a time (`history PATH`, then `revert memver_…`)",
        ))
    }

    fn prune_history(&self, _: &Retention, _: bool) -> Result<Vec<VersionId>, HistoryError> {
        Err(HistoryError::Unsupported(
            "a managed memory store's service keeps every version for its own retention period",
        ))
    }

    fn live(&self) -> &dyn MemoryStore {
        self
    }
}
