//! The service's own history: every change to a memory is a version
//! (`created`, `modified`, `deleted`) with its time and who made it, kept
//! by the service whoever wrote (this crate, the SDK's sync, a managed
//! agent). Read, diffed, reverted and redacted here; the CLI's history
//! commands use these on a managed store.

use std::time::SystemTime;

use serde_json::Value;

use super::ManagedStore;
use super::api::{Fail, Version};
use super::ops::fail;
use crate::path::MemoryPath;
use crate::store::{MemoryStoreExt as _, StoreError, StoreResult, WriteMode};

/// What a version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VersionOp {
    /// The memory was created.
    Created,
    /// Its content or path changed (a rename keeps the memory's id).
    Modified,
    /// It was deleted.
    Deleted,
}

impl VersionOp {
    /// The service's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionOp::Created => "created",
            VersionOp::Modified => "modified",
            VersionOp::Deleted => "deleted",
        }
    }
}

/// One of the service's versions of a memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManagedVersion {
    /// `memver_…`.
    pub id: String,
    /// The memory it belongs to (`mem_…`), the same across renames.
    pub memory_id: String,
    /// What it records.
    pub op: VersionOp,
    /// The memory's path then (`/memories/…`); `None` once redacted, or
    /// if no memory path can spell it.
    pub path: Option<MemoryPath>,
    /// When (RFC 3339, as the service wrote it).
    pub created_at: String,
    /// Who: `api_actor:apikey_…`, `session_actor:sesn_…`, … (`None` if
    /// the service did not record it).
    pub actor: Option<String>,
    /// sha256 of the content (`None` for a delete, or once redacted).
    pub sha256: Option<String>,
    /// Its size in bytes (as `sha256`).
    pub size: Option<u64>,
    /// Whether it was redacted (content and path erased).
    pub redacted: bool,
    /// The content, on [`ManagedStore::version`] only.
    pub content: Option<String>,
}

/// Which versions [`ManagedStore::versions`] lists (the service filters).
#[derive(Debug, Clone, Default)]
pub struct VersionQuery {
    /// Only this memory's (`mem_…`): its versions across renames, and its
    /// delete.
    pub memory_id: Option<String>,
    /// Made at or after.
    pub since: Option<SystemTime>,
    /// Made at or before.
    pub until: Option<SystemTime>,
}

fn actor(by: Option<&Value>) -> Option<String> {
    let by = by?.as_object()?;
    let kind = by.get("type")?.as_str()?;
    let id = by
        .iter()
        .find(|(k, _)| k.ends_with("_id"))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or("");
    Some(format!("{kind}:{id}"))
}

impl ManagedVersion {
    fn from_api(v: Version) -> ManagedVersion {
        let op = match v.operation.as_str() {
            "created" => VersionOp::Created,
            "deleted" => VersionOp::Deleted,
            _ => VersionOp::Modified,
        };
        ManagedVersion {
            path: v.path.as_deref().and_then(super::ops::memory_path),
            actor: actor(v.created_by.as_ref()),
            redacted: v.redacted_at.is_some(),
            id: v.id,
            memory_id: v.memory_id,
            op,
            created_at: v.created_at,
            sha256: v.content_sha256,
            size: v.content_size_bytes,
            content: v.content,
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

impl ManagedStore {
    /// The service's versions, oldest first (without content). At most
    /// 20,000: past that, narrow the query.
    pub fn versions(&self, query: &VersionQuery) -> StoreResult<Vec<ManagedVersion>> {
        let mut filters = Vec::new();
        if let Some(id) = &query.memory_id {
            filters.push(("memory_id", id.clone()));
        }
        if let Some(t) = query.since {
            filters.push(("created_at[gte]", rfc3339(t)));
        }
        if let Some(t) = query.until {
            filters.push(("created_at[lte]", rfc3339(t)));
        }
        let root = MemoryPath::root();
        let mut versions = self.api.versions(&filters).map_err(|e| match e {
            Fail::Refused => StoreError::Invalid {
                path: root.clone(),
                reason: "more than 20,000 versions: narrow the query (a path, --since)",
            },
            other => fail(other, &root),
        })?;
        versions.reverse();
        Ok(versions.into_iter().map(ManagedVersion::from_api).collect())
    }

    /// One version with its content (`None` once redacted or for a
    /// delete); [`StoreError::NotFound`] if there is no such version.
    pub fn version(&self, id: &str) -> StoreResult<ManagedVersion> {
        let root = MemoryPath::root();
        let v = self.api.version(id).map_err(|e| fail(e, &root))?;
        // Content that does not match the sha the service gives for it is
        // corrupt: shown or reverted, it would pass for the real version.
        if let Some(content) = &v.content
            && v.content_sha256.as_deref() != Some(&crate::store::sha256_hex(content.as_bytes()))
        {
            return Err(StoreError::Integrity { path: root });
        }
        Ok(ManagedVersion::from_api(v))
    }

    /// Erases a version's content and path on the service, keeping its
    /// record. The service refuses the current version of a live memory
    /// ([`StoreError::Invalid`]): change or delete the memory first.
    pub fn redact_version(&self, id: &str) -> StoreResult<ManagedVersion> {
        self.api
            .redact(id)
            .map(ManagedVersion::from_api)
            .map_err(|e| fail(e, &MemoryPath::root()))
    }

    /// The id of the memory at `path` now, if a file is there.
    pub fn memory_id(&self, path: &MemoryPath) -> StoreResult<Option<String>> {
        Ok(match self.find(path)?.0 {
            super::ops::Found::File(m) => Some(m.id),
            _ => None,
        })
    }

    /// The content of memory `memory_id` now, and its path; `None` if it
    /// was deleted.
    pub fn memory_now(&self, memory_id: &str) -> StoreResult<Option<(MemoryPath, String)>> {
        match self.api.retrieve(memory_id) {
            Ok(m) => {
                let content = m.content.unwrap_or_default();
                if crate::store::sha256_hex(content.as_bytes()) != m.content_sha256 {
                    return Err(StoreError::Integrity {
                        path: MemoryPath::root(),
                    });
                }
                Ok(super::ops::memory_path(&m.path).map(|p| (p, content)))
            }
            Err(Fail::NotFound) => Ok(None),
            Err(e) => Err(fail(e, &MemoryPath::root())),
        }
    }

    /// Puts a memory back as version `id` has it (for a delete, the
    /// content it deleted), as a change of its own, which the service
    /// keeps as a new version: where the memory is now (ids follow
    /// renames), or at the version's path if it was deleted. Its path, or
    /// `None` if it already holds that content.
    pub fn revert_to(&self, id: &str) -> StoreResult<Option<MemoryPath>> {
        let root = MemoryPath::root();
        let invalid = |reason| StoreError::Invalid {
            path: root.clone(),
            reason,
        };
        let v = self.version(id)?;
        let source = if v.op == VersionOp::Deleted {
            // The content the delete removed: the memory's version before it.
            let query = VersionQuery {
                memory_id: Some(v.memory_id.clone()),
                ..VersionQuery::default()
            };
            let lineage = self.versions(&query)?;
            let at = lineage.iter().position(|x| x.id == v.id).unwrap_or(0);
            let before = lineage[..at]
                .iter()
                .rfind(|x| x.op != VersionOp::Deleted)
                .ok_or_else(|| invalid("no earlier version of that memory is kept"))?;
            self.version(&before.id)?
        } else {
            v.clone()
        };
        let (Some(content), Some(at)) = (source.content, v.path.or(source.path)) else {
            return Err(invalid("that version was redacted: nothing to put back"));
        };
        match self.memory_now(&v.memory_id)? {
            Some((_, now)) if now == content => Ok(None),
            Some((path, _)) => {
                self.write(&path, content.as_bytes(), WriteMode::Overwrite)?;
                Ok(Some(path))
            }
            None => {
                self.write(&at, content.as_bytes(), WriteMode::Create)?;
                Ok(Some(at))
            }
        }
    }
}
