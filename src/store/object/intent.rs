//! Operations over many objects, and the leases that serialize them.
//!
//! A directory `rename` is a copy of every object, then the deletes; a
//! directory `delete` is many deletes; even a file `rename` is a copy and
//! a delete. None is atomic on an object store, so each first writes an
//! intent record (`PREFIX/.claude-memory-intent`, a conditional create:
//! one multi-object operation per store at a time) saying what it is
//! about to do, does it, and deletes the record. Every step of the work
//! is idempotent and rolls forward: a copy whose source is gone was done,
//! a source is deleted only after its copy exists. After an interruption
//! at any point, the next opening of the store (or the next multi-object
//! operation, once the record is older than the lease) finds the record
//! and finishes the operation, so every entry ends at its new path (a
//! delete: gone), never at both and never at neither.
//!
//! The same lease guards the store size limit: a write checked against it
//! holds `PREFIX/.claude-memory-quota-lock` while it totals the store and
//! writes, so writers on several machines cannot pass the check together.
//! A lease older than its limit belonged to a process that died; it is
//! taken over.

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use super::listing::all_below;
use crate::path::MemoryPath;

/// What a multi-object operation is doing, as its record says.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(super) enum Intent {
    /// Moving the file or directory `from` to `to`.
    Rename {
        /// The source, as `/memories/…`.
        from: String,
        /// The destination.
        to: String,
    },
    /// Deleting the directory `path` and all below it.
    Delete {
        /// The directory.
        path: String,
    },
}

/// Whether a lease object last written at `modified` has outlived `lease`.
pub(super) fn stale(modified: SystemTime, lease: std::time::Duration) -> bool {
    SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= lease)
}

/// Writes `body` at `key` only if nothing is there.
pub(super) async fn create(
    store: &Arc<dyn ObjectStore>,
    key: &Path,
    body: Vec<u8>,
) -> object_store::Result<()> {
    let opts = PutOptions::from(PutMode::Create);
    store
        .put_opts(key, PutPayload::from(body), opts)
        .await
        .map(|_| ())
}

/// Deletes `keys`, in batches where the service has them (S3 deletes up
/// to 1,000 in one request); a key already gone is no error.
pub(super) async fn delete_all(
    store: &Arc<dyn ObjectStore>,
    keys: Vec<Path>,
) -> object_store::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let input = stream::iter(keys.into_iter().map(Ok)).boxed();
    let mut results = store.delete_stream(input);
    while let Some(r) = results.next().await {
        match r {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The work of a multi-object operation, from its record: idempotent,
/// so it is both the operation and its recovery.
pub(super) async fn roll_forward(
    store: Arc<dyn ObjectStore>,
    layout: super::keys::Layout,
    intent: Intent,
) -> object_store::Result<()> {
    let parse = |s: &str| MemoryPath::parse(s).ok();
    match intent {
        Intent::Rename { from, to } => {
            let (Some(from), Some(to)) = (parse(&from), parse(&to)) else {
                return Ok(()); // a record no release of this crate wrote
            };
            let mut sources: Vec<Path> = all_below(Arc::clone(&store), layout.key(&from))
                .await?
                .into_iter()
                .map(|m| m.location)
                .collect();
            let file = layout.key(&from);
            match store.head(&file).await {
                Ok(_) => sources.push(file),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            let pairs: Vec<(Path, Path)> = sources
                .iter()
                .filter_map(|k| Some((k.clone(), layout.moved(k, &from, &to)?)))
                .collect();
            stream::iter(pairs)
                .map(|(src, dst)| {
                    let store = Arc::clone(&store);
                    async move {
                        match store.copy(&src, &dst).await {
                            // Copied and deleted before the interruption.
                            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                })
                .buffer_unordered(16)
                .try_collect::<Vec<()>>()
                .await?;
            keep_parent(&store, &layout, &from).await?;
            delete_all(&store, sources).await
        }
        Intent::Delete { path } => {
            let Some(path) = parse(&path) else {
                return Ok(());
            };
            keep_parent(&store, &layout, &path).await?;
            let mut keys: Vec<Path> = all_below(Arc::clone(&store), layout.key(&path))
                .await?
                .into_iter()
                .map(|m| m.location)
                .collect();
            keys.push(layout.key(&path));
            delete_all(&store, keys).await
        }
    }
}

/// Writes the marker of `path`'s parent, so that directory survives when
/// `path` leaves it (a no-op for the root, which always exists).
pub(super) async fn keep_parent(
    store: &Arc<dyn ObjectStore>,
    layout: &super::keys::Layout,
    path: &MemoryPath,
) -> object_store::Result<()> {
    match path.parent() {
        Some(parent) if !parent.is_root() => store
            .put(&layout.marker(&parent), PutPayload::new())
            .await
            .map(|_| ()),
        _ => Ok(()),
    }
}
