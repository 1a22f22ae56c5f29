//! `CloudLog`: a store's history in its own bucket, beside its files.
//!
//! Why here and not in SQLite or PostgreSQL: a cloud store is chosen
//! where there is no lasting disk and no database, so the history goes
//! where the memories go, with the same credentials, durability and
//! access control, and nothing else to run. Each version is one object,
//! `PREFIX/.claude-memory-history/v{id:020}`, written with a conditional
//! create: two writers that pick the same next id cannot both succeed,
//! so ids stay unique and monotonic across machines (the loser takes the
//! next id). Loading lists the log (one request per 1,000 versions) and
//! reads each version: fine for the history commands and for the check a
//! `HistoryStore` makes when it opens; prune old versions to keep it
//! short.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use super::log::{Filter, Order};
use super::{ChangeOp, HistoryError, HistoryLog, Revision};
use crate::store::CloudStore;
use crate::store::object::intent::{create, delete_all};
use crate::store::object::listing::all_below;

/// The folder of the log below the store's prefix.
const LOG_DIR: &str = ".claude-memory-history";

/// A history log in the bucket of a [`CloudStore`]: pass it to
/// `HistoryStore::open(store, CloudLog::for_store(&store))`.
#[derive(Debug)]
pub struct CloudLog {
    store: CloudStore,
    dir: Path,
    /// The highest id seen, so appends start past it.
    last: AtomicU64,
}

/// One version as stored (the fields of [`Revision`]).
#[derive(Serialize, Deserialize)]
struct Record {
    id: u64,
    file: u64,
    op: ChangeOp,
    path: String,
    from: Option<String>,
    time_ms: u64,
    actor: Option<String>,
    call: Option<String>,
    sha256: String,
    size: u64,
    content: Option<Vec<u8>>,
    redacted: bool,
    note: Option<String>,
    #[serde(default)]
    prev: Option<u64>,
}

impl Record {
    fn of(v: &Revision) -> Record {
        let time_ms = v
            .time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Record {
            id: v.id,
            file: v.file,
            op: v.op,
            path: v.path.clone(),
            from: v.from.clone(),
            time_ms,
            actor: v.actor.clone(),
            call: v.call.clone(),
            sha256: v.sha256.clone(),
            size: v.size,
            content: v.content.clone(),
            redacted: v.redacted,
            note: v.note.clone(),
            prev: v.prev,
        }
    }

    fn into_revision(self) -> Revision {
        Revision {
            id: self.id,
            file: self.file,
            op: self.op,
            path: self.path,
            from: self.from,
            time: UNIX_EPOCH + Duration::from_millis(self.time_ms),
            actor: self.actor,
            call: self.call,
            sha256: self.sha256,
            size: self.size,
            content: self.content,
            redacted: self.redacted,
            note: self.note,
            prev: self.prev,
        }
    }
}

fn log_error(e: impl std::fmt::Display) -> HistoryError {
    HistoryError::Log(format!("cloud history: {e}"))
}

impl CloudLog {
    /// The log of `store`, in its prefix.
    pub fn for_store(store: &CloudStore) -> CloudLog {
        CloudLog {
            dir: store.layout.own(LOG_DIR),
            store: store.clone(),
            last: AtomicU64::new(0),
        }
    }

    /// The log of `tenant`'s memories in `store` (the `TenantStore` of
    /// that tenant over `store`): below the tenant's own prefix, so each
    /// tenant's versions are kept, listed and restored apart from every
    /// other tenant's, and deleting the tenant's prefix takes its history
    /// with it.
    pub fn for_tenant(store: &CloudStore, tenant: &crate::TenantId) -> CloudLog {
        CloudLog::for_store(&store.for_prefix(tenant.as_str()))
    }

    fn key(&self, id: u64) -> Path {
        self.dir.clone().join(format!("v{id:020}").as_str())
    }

    fn id_of(key: &Path) -> Option<u64> {
        key.filename()?.strip_prefix('v')?.parse().ok()
    }

    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Result<T, HistoryError> {
        match self.store.io.run(fut) {
            Some(r) => r.map_err(log_error),
            None => Err(log_error("the I/O thread stopped")),
        }
    }

    /// The ids in the log, ascending.
    fn ids(&self) -> Result<Vec<u64>, HistoryError> {
        let (bucket, dir) = (Arc::clone(&self.store.store), self.dir.clone());
        let metas = self.run(all_below(bucket, dir))?;
        let mut ids: Vec<u64> = metas
            .iter()
            .filter_map(|m| Self::id_of(&m.location))
            .collect();
        ids.sort_unstable();
        if let Some(max) = ids.last() {
            self.last.fetch_max(*max, Ordering::Relaxed);
        }
        Ok(ids)
    }
}

impl CloudLog {
    /// Reads version `id`'s object, changes its record with `change` and
    /// writes it back; `false` if there is no such version.
    fn rewrite(&self, id: u64, change: impl FnOnce(&mut Record)) -> Result<bool, HistoryError> {
        let (bucket, key) = (Arc::clone(&self.store.store), self.key(id));
        let body = self.run(async move {
            match bucket.get(&key).await {
                Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let Some(body) = body else { return Ok(false) };
        let mut record: Record = serde_json::from_slice(&body).map_err(log_error)?;
        change(&mut record);
        let body = serde_json::to_vec(&record).map_err(log_error)?;
        let (bucket, key) = (Arc::clone(&self.store.store), self.key(id));
        self.run(async move { bucket.put(&key, PutPayload::from(body)).await.map(|_| ()) })?;
        Ok(true)
    }
}

impl HistoryLog for CloudLog {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        if self.last.load(Ordering::Relaxed) == 0 {
            self.ids()?;
        }
        for v in versions.iter_mut() {
            loop {
                let id = self.last.fetch_add(1, Ordering::Relaxed) + 1;
                v.id = id;
                if v.file == 0 {
                    v.file = id;
                }
                v.time = v.time.max(SystemTime::UNIX_EPOCH);
                let body = serde_json::to_vec(&Record::of(v)).map_err(log_error)?;
                let (bucket, key) = (Arc::clone(&self.store.store), self.key(id));
                let made = self.run(async move {
                    match create(&bucket, &key, body).await {
                        Ok(()) => Ok(true),
                        Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                        Err(e) => Err(e),
                    }
                })?;
                if made {
                    break;
                }
                // Another writer took this id: move past everything seen.
                self.ids()?;
            }
        }
        Ok(())
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        let (bucket, key) = (Arc::clone(&self.store.store), self.key(id));
        let body = self.run(async move {
            match bucket.get(&key).await {
                Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        body.map(|b| {
            serde_json::from_slice::<Record>(&b)
                .map(Record::into_revision)
                .map_err(log_error)
        })
        .transpose()
    }

    /// The ids come from one listing of the log (a request per 1,000
    /// versions); the records of those in range are read 16 at a time
    /// until `limit` match.
    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        let mut ids: Vec<u64> = self
            .ids()?
            .into_iter()
            .filter(|id| filter.after.is_none_or(|a| *id > a))
            .filter(|id| filter.before.is_none_or(|b| *id < b))
            .collect();
        if order == Order::Newest {
            ids.reverse();
        }
        let mut out = Vec::new();
        for chunk in ids.chunks(16) {
            let keys: Vec<Path> = chunk.iter().map(|id| self.key(*id)).collect();
            let bucket = Arc::clone(&self.store.store);
            let bodies = self.run(async move {
                stream::iter(keys)
                    .map(|k| {
                        let bucket = Arc::clone(&bucket);
                        async move {
                            match bucket.get(&k).await {
                                Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                                Err(object_store::Error::NotFound { .. }) => Ok(None),
                                Err(e) => Err(e),
                            }
                        }
                    })
                    .buffered(16)
                    .try_collect::<Vec<_>>()
                    .await
            })?;
            for body in bodies.into_iter().flatten() {
                let mut v = serde_json::from_slice::<Record>(&body)
                    .map(Record::into_revision)
                    .map_err(log_error)?;
                v.content = None;
                if filter.matches(&v) {
                    out.push(v);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        let keys: Vec<Path> = ids.iter().map(|id| self.key(*id)).collect();
        let bucket = Arc::clone(&self.store.store);
        self.run(async move { delete_all(&bucket, keys).await })
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.rewrite(id, |record| {
            record.content = None;
            record.redacted = true;
        })
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.rewrite(id, move |record| {
            record.content = Some(content);
            record.redacted = redacted;
        })
    }
}
