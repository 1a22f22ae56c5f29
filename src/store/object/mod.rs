//! `CloudStore`: memories in cloud object storage (S3 and S3-compatible
//! services, Azure Blob Storage, Google Cloud Storage, or any
//! `Arc<dyn ObjectStore>`), feature `cloud` (and `s3`, `azure`, `gcs`).
//!
//! - `keys`: where files, empty directories and the crate's own objects
//!   live in the bucket.
//! - `cond`: conditional writes and the update loop.
//! - `intent`: the intent record of renames, its recovery, conditional
//!   copies, and the leases that serialize renames and size-limited writes.
//! - `stash`: the one listing a directory view's lookup hands to its walk.
//! - `listing`: directory listings and subtree totals.
//! - `errors`: object_store's errors as SPEC §4's, without hosts or keys.
//! - `config`: the builder, timeouts, retries, `s3://`/`az://`/`gs://`.
//! - `ops`: the [`MemoryStore`](crate::MemoryStore) primitives.

mod cond;
mod config;
mod errors;
pub(crate) mod intent;
mod keys;
pub(crate) mod listing;
mod moves;
mod ops;

mod stash;

use std::future::Future;
use std::sync::Arc;

use object_store::{
    CopyMode, CopyOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use crate::store::runtime::Io;
pub use config::{CloudBuilder, CloudError, CloudScheme, parse_url as parse_cloud_url};
use errors::Sent;
use keys::Layout;

use crate::path::MemoryPath;
use crate::store::{StoreError, StoreResult};

/// A store in cloud object storage, shared by any number of processes on
/// any number of machines.
///
/// Files are objects under a prefix, byte for byte; creates are
/// conditional (`If-None-Match`), edits conditional on the ETag they read
/// and retried on conflict, so no concurrent update is lost; a rename is
/// recorded first and finished by the next open after an interruption. Open refuses a backend that cannot write conditionally
/// (object_store's `LocalFileSystem`, an S3 service without conditional
/// writes): it would lose updates. See the README's "Cloud object storage".
///
/// Cheap to clone (clones share the connection pool and I/O thread);
/// `for_prefix` gives a store below another prefix of the same bucket.
///
/// ```
/// use std::sync::Arc;
/// use claude_memory::{CloudStore, MemoryTool};
/// use object_store::memory::InMemory;
/// use serde_json::json;
///
/// let bucket = Arc::new(InMemory::new());
/// let tool = MemoryTool::new(CloudStore::open(bucket, "agents/alice")?);
/// tool.dispatch(&json!({"command": "create", "path": "/memories/n.md", "file_text": "hi\n"}));
/// let view = tool.dispatch(&json!({"command": "view", "path": "/memories/n.md"}));
/// assert_eq!(view.text(), Some("Here's the content of /memories/n.md with line numbers:\n     1\thi"));
/// # Ok::<(), claude_memory::CloudError>(())
/// ```
#[derive(Clone)]
pub struct CloudStore {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) layout: Layout,
    pub(crate) io: Io,
    settings: config::Settings,
    /// The listing a directory view's `open` made for its `list`.
    stash: Arc<stash::Stash>,
}

impl std::fmt::Debug for CloudStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The store's Display names its bucket; keep it out of logs.
        f.debug_struct("CloudStore").finish_non_exhaustive()
    }
}

impl CloudStore {
    /// Opens the store under `prefix` (`""` for the whole bucket) of any
    /// object store, with the default settings; see [`builder`](Self::builder).
    pub fn open(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<CloudStore, CloudError> {
        CloudStore::builder(store).prefix(prefix).open()
    }

    /// Settings for a store over `store`.
    pub fn builder(store: Arc<dyn ObjectStore>) -> CloudBuilder {
        CloudBuilder::new(store)
    }

    /// The same bucket below `prefix` relative to this store's prefix: a
    /// store of its own (one per tenant, say), sharing this one's client.
    pub fn for_prefix(&self, prefix: &str) -> CloudStore {
        let mut store = self.clone();
        store.layout = self.layout.below(prefix);
        store
    }

    /// Runs one request (or a few) on the I/O thread, mapping its error
    /// for `path`.
    fn call<T, F>(&self, path: &MemoryPath, sent: Sent, fut: F) -> StoreResult<T>
    where
        F: Future<Output = object_store::Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let timeout = self.settings.timeout;
        let guarded = async move {
            match tokio::time::timeout(timeout, fut).await {
                Ok(r) => Ok(r),
                Err(_) => Err(()),
            }
        };
        match self.io.run(guarded) {
            Some(Ok(Ok(v))) => Ok(v),
            Some(Ok(Err(e))) => Err(errors::map(e, path, sent, timeout)),
            Some(Err(())) => {
                let cause = crate::store::RemoteCause::TimedOut { after: timeout };
                Err(match sent {
                    Sent::Read => StoreError::Unreachable {
                        path: path.clone(),
                        cause,
                        source: None,
                    },
                    Sent::Write => StoreError::OutcomeUnknown {
                        path: path.clone(),
                        cause,
                        source: None,
                    },
                })
            }
            None => Err(StoreError::Backend {
                path: path.clone(),
                source: "the cloud store's I/O thread stopped".into(),
            }),
        }
    }

    /// Checks that the backend honours conditional writes: a create over
    /// an existing object and an update on a wrong ETag must both fail.
    /// Also learns whether it copies conditionally (a copy over an
    /// existing object refused), else copies go through the client.
    fn probe(&mut self) -> Result<(), CloudError> {
        let timeout = self.settings.timeout;
        let store = Arc::clone(&self.store);
        let key = self.layout.own(keys::PROBE);
        let target = self.layout.own(keys::PROBE_COPY);
        let outcome = self.io.run(async move {
            let (a, b) = futures_util::join!(
                store.put(&key, PutPayload::from_static(b"probe")),
                store.put(&target, PutPayload::from_static(b"probe")),
            );
            a?;
            b?;
            let create = store.put_opts(
                &key,
                PutPayload::from_static(b"probe"),
                PutOptions::from(PutMode::Create),
            );
            let wrong = UpdateVersion {
                e_tag: Some("\"claude-memory-no-such-etag\"".into()),
                version: None,
            };
            let update = store.put_opts(
                &key,
                PutPayload::from_static(b"probe"),
                PutOptions::from(PutMode::Update(wrong)),
            );
            let copy = store.copy_opts(
                &key,
                &target,
                CopyOptions::new().with_mode(CopyMode::Create),
            );
            let (create, update, copy) = futures_util::join!(create, update, copy);
            Ok::<_, object_store::Error>((create, update, copy))
        });
        let (create, update, copy) = match outcome {
            Some(Ok(all)) => all,
            Some(Err(e)) => {
                return Err(CloudError::Connect(Box::new(errors::ForOperator::of(
                    &e, timeout,
                ))));
            }
            None => {
                return Err(CloudError::Runtime(std::io::Error::other(
                    "I/O thread stopped",
                )));
            }
        };
        match create {
            Err(object_store::Error::AlreadyExists { .. }) => {}
            Ok(_) => {
                return Err(CloudError::NoConditionalWrites(
                    "a create over an existing object succeeded",
                ));
            }
            Err(
                object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. },
            ) => {
                return Err(CloudError::NoConditionalWrites(
                    "conditional creates are not supported",
                ));
            }
            Err(e) => {
                return Err(CloudError::Connect(Box::new(errors::ForOperator::of(
                    &e, timeout,
                ))));
            }
        }
        match update {
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => {}
            Ok(_) => {
                return Err(CloudError::NoConditionalWrites(
                    "an update on a stale ETag succeeded",
                ));
            }
            Err(
                object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. },
            ) => {
                return Err(CloudError::NoConditionalWrites(
                    "conditional updates are not supported",
                ));
            }
            Err(e) => {
                return Err(CloudError::Connect(Box::new(errors::ForOperator::of(
                    &e, timeout,
                ))));
            }
        }
        // A copy that overwrote (a service ignoring the condition) or is
        // not offered: copy through the client instead.
        self.settings.copy = match copy {
            Err(object_store::Error::AlreadyExists { .. }) => intent::CopyHow::Conditional,
            _ => intent::CopyHow::Inline,
        };
        Ok(())
    }

    /// Finishes a rename an interrupted process left, if its record is
    /// older than the lease: takes the record over (a write conditional
    /// on its ETag, so one recovering process wins), rolls it forward and
    /// deletes it. `Ok(true)` while a live operation holds the record.
    /// Before a change or a listing: a rename another process left
    /// pending (its record is there) is finished first, once its lease
    /// is over, and waited for while it is not. So an edit never lands on
    /// a source that the rename's recovery would then delete, and no
    /// listing shows both trees once the lease is over. One HEAD when no
    /// rename is pending. A record too large to be ours was planted: it
    /// is no rename, and only a rename reports it.
    pub(super) fn settle(&self, path: &MemoryPath) -> StoreResult<()> {
        let deadline = std::time::Instant::now() + self.settings.lease + self.settings.timeout;
        for attempt in 0.. {
            let pending = self
                .intent_size(path)?
                .is_some_and(|size| size <= intent::MAX_RECORD);
            if !pending || !self.recover(path)? {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(StoreError::Conflict { path: path.clone() });
            }
            cond::backoff(attempt.min(6));
        }
        Ok(())
    }

    /// The size of the object at the intent record's key, if any (one
    /// HEAD; never read).
    pub(super) fn intent_size(&self, path: &MemoryPath) -> StoreResult<Option<u64>> {
        let (store, key) = (self.bucket(), self.layout.own(keys::INTENT));
        self.call(path, Sent::Read, async move {
            match store.head(&key).await {
                Ok(m) => Ok(Some(m.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn recover(&self, path: &MemoryPath) -> StoreResult<bool> {
        let store = Arc::clone(&self.store);
        let layout = self.layout.clone();
        let key = layout.own(keys::INTENT);
        let (lease, how) = (self.settings.lease, self.settings.copy);
        self.call(path, Sent::Write, async move {
            let meta = match store.head(&key).await {
                Ok(m) => m,
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            if !intent::stale(meta.last_modified.into(), lease) {
                return Ok(true);
            }
            // A planted huge object is not read: it is no record of ours.
            let body = if meta.size <= intent::MAX_RECORD {
                match store.get(&key).await {
                    Ok(r) => r.bytes().await?.to_vec(),
                    Err(object_store::Error::NotFound { .. }) => return Ok(false),
                    Err(e) => return Err(e),
                }
            } else {
                Vec::new()
            };
            let record = serde_json::from_slice::<intent::Record>(&body).ok();
            // Rewritten with a nonce of ours, so the ETag changes and a
            // second recovering process's takeover fails.
            let ours = record.clone().map_or_else(
                || intent::nonce().into_bytes(),
                |mut r| {
                    r.owner = intent::nonce();
                    serde_json::to_vec(&r).unwrap_or_else(|_| intent::nonce().into_bytes())
                },
            );
            if !intent::take_over(&store, &meta, ours).await? {
                return Ok(true); // another process is recovering it
            }
            let record = record.and_then(|r| r.intent.checked());
            if let Some(record) = record {
                intent::roll_forward(&store, &layout, record, how).await?;
            }
            match store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }
}
