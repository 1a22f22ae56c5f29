//! The lease: one memory, [`LEASE`], that a writer creates to hold the
//! store (a create fails with 409 while another holds it) and deletes when
//! done. Directory moves and deletes and size-limited writes take it, so
//! no two of them interleave.
//!
//! A move records in the lease what it moves: the two prefixes and the
//! ids of the memories below the source when it began. A process killed
//! half-way, or a move that failed half-way, leaves that record; once the
//! lease is stale, the next open or the next writer that needs the lease
//! moves those memories (only those: a memory created at the old path
//! since stays) and frees it. A record this crate could not have written
//! (a prefix inside the other, a reserved name) is discarded unread.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::ManagedStore;
use super::api::{Api, Fail, Item, Memory};
use super::ops::{Refused, fail};
use super::tree::{Found, key, prefix};
use crate::path::{MemoryPath, is_reserved};
use crate::store::{RemoteCause, StoreError, StoreResult, UPDATE_ATTEMPTS};

/// The lease memory, at the store's root (hidden: a reserved name).
const LEASE: &str = "/.claude-memory-lease";
/// How long a lease holds before another writer may break it, plus a
/// second for each memory a move carries.
const HOLD: Duration = Duration::from_secs(60);
/// A lease said to hold longer than any this crate writes (2,000
/// memories) is stale at once: a skewed clock or a planted record must
/// not lock the store.
const LONGEST_MS: u64 = (60 + 2_000 + 60) * 1000;
/// Tries to take a busy lease, 0.1 s to 1 s apart (about 65 s, longer
/// than a lease holds, so a dead holder's lease is broken in time).
const TRIES: u32 = 70;
/// The longest record kept: past it the ids are left out (the move then
/// carries everything below its source, as its listing at recovery).
const MAX_RECORD: usize = 100_000;

/// What a lease records.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Milliseconds since the epoch after which the lease is stale.
    until_ms: u64,
    /// A directory move under way: its source and destination prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to: Option<String>,
    /// The memories the move carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ids: Vec<String>,
}

impl Record {
    fn stale(&self, now: u64) -> bool {
        self.until_ms <= now || self.planted(now)
    }

    /// Said to hold longer than any lease this crate writes: not ours
    /// (or a clock far off), so its move is not followed.
    fn planted(&self, now: u64) -> bool {
        self.until_ms > now.saturating_add(LONGEST_MS)
    }

    /// The move it records, if this crate could have written it.
    fn moving(&self) -> Option<(&str, &str)> {
        let (from, to) = (self.from.as_deref()?, self.to.as_deref()?);
        let nested = from.starts_with(to) || to.starts_with(from);
        (is_dir_prefix(from) && is_dir_prefix(to) && !nested).then_some((from, to))
    }
}

/// `/a/b/`: a directory below the root, spelled as the store spells it.
fn is_dir_prefix(p: &str) -> bool {
    let Some(inner) = p.strip_prefix('/').and_then(|p| p.strip_suffix('/')) else {
        return false;
    };
    !inner.is_empty()
        && inner
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !is_reserved(c))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A lease held. Dropped, it is freed, unless [`keep`](Self::keep) left
/// its record for the next writer to finish.
pub(super) struct Held {
    api: Api,
    id: String,
    sha: String,
    keep: bool,
}

impl Held {
    /// Replaces the record (the holder's own: its precondition holds).
    fn record(&mut self, record: &Record) -> Result<(), Fail> {
        let text = serde_json::to_string(record).unwrap_or_default();
        let m = self.api.update(&self.id, &self.sha, Some(&text), None)?;
        self.sha = m.content_sha256;
        Ok(())
    }

    /// Leaves the lease and its record: a move that did not finish.
    fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        // Best effort: a lease not freed expires; one whose delete failed
        // is emptied of its move, so nothing moves again when it does.
        match self.api.delete(&self.id, &self.sha) {
            Ok(()) | Err(Fail::NotFound) => {}
            Err(_) => {
                let _ = self.record(&Record::default());
            }
        }
    }
}

impl ManagedStore {
    /// Takes the lease for a change at `path`.
    pub(super) fn lease(&self, path: &MemoryPath) -> StoreResult<Held> {
        let record = Record {
            until_ms: now_ms() + HOLD.as_millis() as u64,
            ..Record::default()
        };
        let text = serde_json::to_string(&record).unwrap_or_default();
        for attempt in 0..TRIES {
            match self.api.create(LEASE, &text) {
                Ok(m) => {
                    return Ok(Held {
                        api: self.api.clone(),
                        id: m.id,
                        sha: m.content_sha256,
                        keep: false,
                    });
                }
                Err(Fail::Conflict) => {
                    if !self.break_stale(path)? {
                        let wait = 100 * u64::from(attempt.min(9) + 1);
                        std::thread::sleep(Duration::from_millis(wait));
                    }
                }
                Err(Fail::Refused) => return Err(self.refused(path, Refused::Lease)),
                Err(e) => return Err(fail(e, path)),
            }
        }
        Err(StoreError::Unreachable {
            path: path.clone(),
            cause: RemoteCause::TimedOut {
                after: Duration::from_secs(65),
            },
            source: None,
        })
    }

    /// Finishes and frees a stale lease: whether the way is clear now.
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
        // An unreadable record is stale: nothing can renew it.
        let record: Record = lease
            .content
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        let now = now_ms();
        if !record.stale(now) {
            return Ok(false);
        }
        if let Some((from, to)) = record.moving().filter(|_| !record.planted(now)) {
            self.finish_move(from, to, &record.ids, path)?;
            if let Some(source) = MemoryPath::from_stored(&format!("/memories{from}")) {
                self.keep_parent(&source);
            }
        }
        match self.api.delete(&lease.id, &lease.content_sha256) {
            Ok(()) | Err(Fail::NotFound | Fail::Conflict) => Ok(true),
            Err(e) => Err(fail(e, path)),
        }
    }

    /// Finishes what a killed process left, if its lease is stale. `open`
    /// calls it; a failure leaves the lease for the next writer.
    pub(super) fn recover(&self) {
        let _ = self.break_stale(&MemoryPath::root());
    }

    /// Moves each memory of `ids` (all, if empty) still below prefix
    /// `from` to the same place below `to`; memories keep their ids and
    /// versions. One whose destination is taken stays where it is.
    fn finish_move(
        &self,
        from: &str,
        to: &str,
        ids: &[String],
        path: &MemoryPath,
    ) -> StoreResult<()> {
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let items = self.api.list(from, 0).map_err(|e| fail(e, path))?;
        for item in items {
            let Item::Memory(m) = item else { continue };
            if !wanted.is_empty() && !wanted.contains(m.id.as_str()) {
                continue;
            }
            self.move_one(m, from, to, path)?;
        }
        Ok(())
    }

    /// Moves one memory from below `from` to below `to`.
    fn move_one(&self, mut m: Memory, from: &str, to: &str, path: &MemoryPath) -> StoreResult<()> {
        for _ in 0..UPDATE_ATTEMPTS {
            let Some(rest) = m.path.strip_prefix(from) else {
                return Ok(()); // moved elsewhere meanwhile
            };
            let new = format!("{to}{rest}");
            match self.api.update(&m.id, &m.content_sha256, None, Some(&new)) {
                Ok(_) | Err(Fail::NotFound) => return Ok(()),
                Err(Fail::Conflict) => {
                    let fresh = match self.api.retrieve(&m.id) {
                        Ok(fresh) => fresh,
                        Err(Fail::NotFound) => return Ok(()),
                        Err(e) => return Err(fail(e, path)),
                    };
                    if fresh.content_sha256 == m.content_sha256 && fresh.path == m.path {
                        return Ok(()); // the destination is taken: it stays
                    }
                    m = fresh; // edited meanwhile: move what is there now
                }
                Err(e) => return Err(fail(e, path)),
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    /// A directory move: under the lease, the checks, the record, then
    /// each memory.
    pub(super) fn rename_dir(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        self.writable(from)?;
        let mut lease = self.lease(from)?;
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
            .map(|m| {
                m.path
                    .matches('/')
                    .count()
                    .saturating_sub(from.components().len())
            })
            .max()
            .unwrap_or(0);
        if to.components().len() + deepest > super::ops::MAX_SEGMENTS {
            return Err(StoreError::Invalid {
                path: from.clone(),
                reason: "a managed memory path has at most 20 segments",
            });
        }
        let (from_prefix, to_prefix) = (prefix(from), prefix(to));
        let mut record = Record {
            until_ms: now_ms()
                + (HOLD + Duration::from_secs(below.len() as u64)).as_millis() as u64,
            from: Some(from_prefix.clone()),
            to: Some(to_prefix.clone()),
            ids: below.iter().map(|m| m.id.clone()).collect(),
        };
        if serde_json::to_string(&record).map_or(0, |t| t.len()) > MAX_RECORD {
            record.ids.clear();
        }
        lease.record(&record).map_err(|e| fail(e, from))?;
        for m in below {
            if let Err(e) = self.move_one(m, &from_prefix, &to_prefix, from) {
                // Half moved: the record stays for the next writer, and
                // the model is told to look before trying again.
                lease.keep();
                return Err(half_done(e, from));
            }
        }
        drop(lease);
        self.drop_marker(&siblings);
        self.keep_parent(from);
        Ok(())
    }
}

/// The error of a change that stopped after some of its steps.
pub(super) fn half_done(e: StoreError, path: &MemoryPath) -> StoreError {
    let cause = match e {
        StoreError::Unreachable { cause, .. } | StoreError::OutcomeUnknown { cause, .. } => cause,
        _ => RemoteCause::Unavailable,
    };
    StoreError::OutcomeUnknown {
        path: path.clone(),
        cause,
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_records_this_crate_could_write_are_followed() {
        let r = |from: &str, to: &str| Record {
            until_ms: 0,
            from: Some(from.into()),
            to: Some(to.into()),
            ids: Vec::new(),
        };
        assert_eq!(r("/a/", "/b/c/").moving(), Some(("/a/", "/b/c/")));
        for (from, to) in [
            ("", "b"),
            ("/", "/z/"),
            ("/a/", "/a/a/"),
            ("/a/b/", "/a/"),
            ("/a/", "/.claude-memory-x/"),
            ("/a/", "/b"),
            ("/a//", "/b/"),
            ("/../", "/b/"),
        ] {
            assert_eq!(r(from, to).moving(), None, "{from} -> {to}");
        }
    }

    #[test]
    fn far_future_leases_are_stale() {
        let now = 1_000_000_000;
        let at = |until_ms| Record {
            until_ms,
            ..Record::default()
        };
        assert!(at(now - 1).stale(now));
        assert!(!at(now + 60_000).stale(now));
        assert!(at(now + LONGEST_MS + 1).stale(now));
        assert!(at(u64::MAX).stale(now));
    }
}
