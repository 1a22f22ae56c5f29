//! The service's own history of each memory, as the store reads it:
//! every change to a memory is a version (`created`, `modified`,
//! `deleted`) with its time and who made it, kept by the service whoever
//! wrote. `history::Versions` is served from these (`history/managed.rs`).

use std::time::SystemTime;

use serde_json::Value;

use super::ManagedStore;
use super::api::Fail;
use super::ops::fail;
use super::tree::memory_path;
use crate::path::MemoryPath;
use crate::store::{StoreError, sha256_hex};

/// One of the service's versions, as its API describes it.
#[derive(Debug, Clone)]
pub(crate) struct ServiceVersion {
    /// `memver_…`.
    pub(crate) id: String,
    /// The memory's id (`mem_…`), the same across renames.
    pub(crate) memory_id: String,
    /// `created`, `modified` or `deleted`.
    pub(crate) operation: String,
    /// The memory's path then, as a memory path (`None` once redacted,
    /// or if none spells it).
    pub(crate) path: Option<MemoryPath>,
    pub(crate) time: SystemTime,
    /// `api_actor:apikey_…`, `session_actor:sesn_…`, …
    pub(crate) actor: Option<String>,
    pub(crate) sha256: Option<String>,
    pub(crate) size: Option<u64>,
    pub(crate) redacted: bool,
    /// The content, on [`ManagedStore::service_version`] only.
    pub(crate) content: Option<String>,
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

impl ServiceVersion {
    fn of(v: super::api::Version) -> ServiceVersion {
        ServiceVersion {
            path: v.path.as_deref().and_then(memory_path),
            time: humantime::parse_rfc3339_weak(&v.created_at).unwrap_or(SystemTime::UNIX_EPOCH),
            actor: actor(v.created_by.as_ref()),
            redacted: v.redacted_at.is_some(),
            id: v.id,
            memory_id: v.memory_id,
            operation: v.operation,
            sha256: v.content_sha256,
            size: v.content_size_bytes,
            content: v.content,
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Why the service refused to redact a version.
pub(crate) const REDACT_REFUSED: &str =
    "the current version of a live memory cannot be redacted; edit or delete the memory first";

/// Why a listing of versions stopped.
pub(crate) const TOO_MANY: &str = "more than 20,000 versions: narrow the query (a path, --since)";

impl ManagedStore {
    /// The service's versions, oldest first (without content), of one
    /// memory or all, made in a time range: every one (at most 20,000,
    /// [`TOO_MANY`]), or the `newest` count (a request per 100).
    pub(crate) fn service_versions(
        &self,
        memory_id: Option<&str>,
        since: Option<SystemTime>,
        until: Option<SystemTime>,
        newest: Option<usize>,
    ) -> Result<Vec<ServiceVersion>, StoreError> {
        let mut filters = Vec::new();
        if let Some(id) = memory_id {
            filters.push(("memory_id", id.to_owned()));
        }
        if let Some(t) = since {
            filters.push(("created_at[gte]", rfc3339(t)));
        }
        if let Some(t) = until {
            filters.push(("created_at[lte]", rfc3339(t)));
        }
        let root = MemoryPath::root();
        let mut listed = self.api.versions(&filters, newest).map_err(|e| match e {
            Fail::Refused => StoreError::Invalid {
                path: root.clone(),
                reason: TOO_MANY,
            },
            other => fail(other, &root),
        })?;
        listed.reverse();
        Ok(listed.into_iter().map(ServiceVersion::of).collect())
    }

    /// One version with its content ([`StoreError::NotFound`] if there is
    /// none). Content that does not match the sha the service gives for
    /// it is corrupt: shown or reverted, it would pass for the real
    /// version ([`StoreError::Integrity`]).
    pub(crate) fn service_version(&self, id: &str) -> Result<ServiceVersion, StoreError> {
        let root = MemoryPath::root();
        let v = self.api.version(id).map_err(|e| fail(e, &root))?;
        if let Some(content) = &v.content
            && v.content_sha256.as_deref() != Some(&sha256_hex(content.as_bytes()))
        {
            return Err(StoreError::Integrity { path: root });
        }
        Ok(ServiceVersion::of(v))
    }

    /// Erases a version's content and path on the service. The service
    /// refuses the current version of a live memory
    /// ([`StoreError::Invalid`] with [`REDACT_REFUSED`]).
    pub(crate) fn redact_service_version(&self, id: &str) -> Result<(), StoreError> {
        let root = MemoryPath::root();
        match self.api.redact(id) {
            Ok(_) => Ok(()),
            Err(Fail::Refused) => Err(StoreError::Invalid {
                path: root,
                reason: REDACT_REFUSED,
            }),
            Err(e) => Err(fail(e, &root)),
        }
    }

    /// The id of the memory at `path` now, if a file is there.
    pub(crate) fn memory_id(&self, path: &MemoryPath) -> Result<Option<String>, StoreError> {
        Ok(match self.find(path)?.0 {
            super::tree::Found::File(m) => Some(m.id),
            _ => None,
        })
    }

    /// The content of memory `memory_id` now, and its path; `None` if it
    /// was deleted. A body that does not match its sha is an integrity
    /// error.
    pub(crate) fn memory_now(
        &self,
        memory_id: &str,
    ) -> Result<Option<(MemoryPath, String)>, StoreError> {
        match self.api.retrieve(memory_id) {
            Ok(m) => {
                let content = m.content.unwrap_or_default();
                if sha256_hex(content.as_bytes()) != m.content_sha256 {
                    return Err(StoreError::Integrity {
                        path: MemoryPath::root(),
                    });
                }
                Ok(memory_path(&m.path).map(|p| (p, content)))
            }
            Err(Fail::NotFound) => Ok(None),
            Err(e) => Err(fail(e, &MemoryPath::root())),
        }
    }
}
