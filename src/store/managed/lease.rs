//! The lease: one memory, [`LEASE`], that a writer creates to hold the
//! store (a create fails with 409 while another holds it) and deletes when
//! done. Directory moves and size-limited writes take it, so two never
//! interleave. Its content says until when it holds and, for a move, what
//! moves where: a process killed half-way leaves it, and the next open or
//! the next writer to find it expired finishes the move, then frees it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::ManagedStore;
use super::api::{Api, Fail, Item};
use super::ops::{Found, fail, key, prefix};
use crate::path::MemoryPath;
use crate::store::{StoreError, StoreResult};

/// The lease memory, at the store's root (hidden: a reserved name).
const LEASE: &str = "/.claude-memory-lease";
/// How long a lease holds before another writer may break it, plus a
/// second for each memory a move carries.
const HOLD: Duration = Duration::from_secs(60);
/// Tries to take a busy lease, 0.1 s to 1 s apart (about a minute).
const TRIES: u32 = 70;

/// What a lease records.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// Milliseconds since the epoch after which the lease is stale.
    until_ms: u64,
    /// A directory move under way: its source and destination prefixes.
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
}

/// A lease held; dropped, it is freed.
pub(super) struct Held {
    api: Api,
    id: String,
    sha: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Best effort: a lease not freed expires.
        let _ = self.api.delete(&self.id, &self.sha);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl ManagedStore {
    /// Takes the lease for a change at `path`, recording `moving`.
    pub(super) fn lease(
        &self,
        path: &MemoryPath,
        moving: Option<(&str, &str, usize)>,
    ) -> StoreResult<Held> {
        let hold = HOLD + Duration::from_secs(moving.map_or(0, |(_, _, n)| n as u64));
        let record = Record {
            until_ms: now_ms() + hold.as_millis() as u64,
            from: moving.map(|(f, _, _)| f.to_owned()),
            to: moving.map(|(_, t, _)| t.to_owned()),
        };
        let text = serde_json::to_string(&record).unwrap_or_default();
        for attempt in 0..TRIES {
            match self.api.create(LEASE, &text) {
                Ok(m) => {
                    return Ok(Held {
                        api: self.api.clone(),
                        id: m.id,
                        sha: m.content_sha256,
                    });
                }
                Err(Fail::Conflict) => {
                    if !self.break_stale(path)? {
                        let wait = 100 * u64::from(attempt.min(9) + 1);
                        std::thread::sleep(Duration::from_millis(wait));
                    }
                }
                Err(e) => return Err(fail(e, path)),
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    /// Finishes and frees a stale lease: whether there was one (or none
    /// at all any more).
    fn break_stale(&self, path: &MemoryPath) -> StoreResult<bool> {
        let items = self.children(&MemoryPath::root())?;
        let Some(id) = items.into_iter().find_map(|i| match i {
            Item::Memory(m) if m.path == LEASE => Some(m.id),
            _ => None,
        }) else {
            return Ok(true);
        };
        let lease = match self.api.retrieve(&id) {
            Ok(m) => m,
            Err(Fail::NotFound) => return Ok(true),
            Err(e) => return Err(fail(e, path)),
        };
        // An unreadable record is treated as stale: nothing can renew it.
        let record: Option<Record> = lease
            .content
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok());
        if record.as_ref().is_some_and(|r| r.until_ms > now_ms()) {
            return Ok(false);
        }
        if let Some(Record {
            from: Some(from),
            to: Some(to),
            ..
        }) = &record
        {
            self.finish_move(from, to, path)?;
        }
        match self.api.delete(&lease.id, &lease.content_sha256) {
            Ok(()) | Err(Fail::NotFound | Fail::Conflict) => Ok(true),
            Err(e) => Err(fail(e, path)),
        }
    }

    /// Finishes what a killed process left: called by `open`.
    pub(super) fn recover(&self) -> StoreResult<()> {
        self.break_stale(&MemoryPath::root()).map(|_| ())
    }

    /// Moves every memory still below prefix `from` to the same place
    /// below `to`; memories keep their ids and versions.
    fn finish_move(&self, from: &str, to: &str, path: &MemoryPath) -> StoreResult<()> {
        for _ in 0..3 {
            let items = self.api.list(from, 0).map_err(|e| fail(e, path))?;
            if items.is_empty() {
                return Ok(());
            }
            for item in items {
                let Item::Memory(m) = item else { continue };
                let Some(rest) = m.path.strip_prefix(from) else {
                    continue;
                };
                let new = format!("{to}{rest}");
                match self.api.update(&m.id, &m.content_sha256, None, Some(&new)) {
                    // Edited meanwhile: the next pass moves it.
                    Ok(_) | Err(Fail::Conflict | Fail::NotFound) => {}
                    Err(e) => return Err(fail(e, path)),
                }
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    /// A directory move, under the lease: the checks, then each memory.
    pub(super) fn rename_dir(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        let below = self.below(from)?;
        let lease = self.lease(from, Some((&prefix(from), &prefix(to), below.len())))?;
        // Checked again under the lease: another move may have run.
        let below = self.below(from)?;
        if below.is_empty() {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        let (there, siblings) = self.find(to)?;
        if !matches!(there, Found::Missing) {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        self.check_parents(to, &siblings)?;
        let from_key = key(from);
        let longest = below
            .iter()
            .map(|m| m.path.len().saturating_sub(from_key.len()))
            .max()
            .unwrap_or(0);
        StoreError::check_depth(from, to, longest)?;
        let deepest = below
            .iter()
            .map(|m| m.path.matches('/').count() - from.components().len())
            .max()
            .unwrap_or(0);
        if to.components().len() + deepest > 20 {
            return Err(StoreError::Invalid {
                path: from.clone(),
                reason: "a managed memory path has at most 20 segments",
            });
        }
        self.finish_move(&prefix(from), &prefix(to), from)?;
        drop(lease);
        self.drop_marker(&siblings);
        self.keep_parent(from)
    }
}
