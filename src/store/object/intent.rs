//! Renames over many objects, and the leases that serialize them.
//!
//! A `rename` (of a file or a directory) is a copy of every object, then
//! the deletes; neither step is atomic across objects on an object store.
//! So a rename first writes an intent record
//! (`PREFIX/.claude-memory-intent`, a conditional create: one rename per
//! store at a time) saying what it is about to do, copies each object
//! with a conditional copy (never over an existing object), and then
//! deletes the sources and the record in one batch. Every step rolls
//! forward: a copy whose source is gone was done, a source is deleted only
//! after every copy exists. After an interruption at any point, the next
//! opening of the store (or the next rename, once the record is older than
//! the lease) finds the record, takes it over with a write conditional on
//! its ETag (so of two recovering processes one does it), and finishes the
//! rename, so every entry ends at its new path, never at both and never at
//! neither.
//!
//! A directory `delete` needs no record: it is one delete per object (one
//! request per 1,000 on S3), each atomic, and an interruption leaves every
//! entry either where it was or deleted, as if some had been deleted one
//! by one; the next delete finishes it.
//!
//! The same kind of lease guards the store size limit: a write checked
//! against it holds `PREFIX/.claude-memory-quota-lock` while it totals the
//! store and writes, so writers on several machines cannot pass the check
//! together. A lease older than its limit belonged to a process that died;
//! it is taken over by a write conditional on its ETag, so two processes
//! that both find it stale cannot both take it.

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::{StreamExt, stream};
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use serde::{Deserialize, Serialize};

use super::listing::all_below;
use crate::path::MemoryPath;

/// The largest intent record read back: a record this crate writes holds
/// two paths (about 2 KiB at most); anything larger was planted and is
/// discarded unread, so a huge object there cannot exhaust memory.
pub(super) const MAX_RECORD: u64 = 64 * 1024;

/// Objects up to this size are copied through the client (a GET and a
/// conditional PUT) where the service has no conditional copy.
pub(super) const INLINE_COPY: u64 = 8 * 1024 * 1024;

/// How many copies run at once: server-side copies move no bytes through
/// the client, so many (a directory of 100 is four round trips of
/// copies, not thirteen); copies through the client hold their object,
/// so 8 (memory at most 8 x [`INLINE_COPY`]).
const COPIES_AT_ONCE: usize = 32;
const INLINE_COPIES_AT_ONCE: usize = 8;

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
    /// Deleting the directory `path` and all below it (written by earlier
    /// releases; still finished when found).
    Delete {
        /// The directory.
        path: String,
    },
}

impl Intent {
    /// The record's paths, if it is one this crate could have written: a
    /// rename of anything but the root to a path outside it, a delete of
    /// anything but the root. A planted or corrupt record (`/memories` to
    /// `/memories/x`, which would move the store's own objects) is `None`
    /// and is discarded.
    pub(super) fn checked(self) -> Option<Checked> {
        let parse = |s: &str| MemoryPath::parse(s).ok().filter(|p| !p.is_root());
        match self {
            Intent::Rename { from, to } => {
                let (from, to) = (parse(&from)?, parse(&to)?);
                if to.is_strictly_inside(&from) || from.is_strictly_inside(&to) || from == to {
                    return None;
                }
                Some(Checked::Rename { from, to })
            }
            Intent::Delete { path } => Some(Checked::Delete {
                path: parse(&path)?,
            }),
        }
    }
}

/// A record's operation, its paths validated.
pub(super) enum Checked {
    Rename { from: MemoryPath, to: MemoryPath },
    Delete { path: MemoryPath },
}

/// A record as stored: the operation and who wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Record {
    #[serde(flatten)]
    pub(super) intent: Intent,
    /// A value unique to this write ([`nonce`]).
    #[serde(default)]
    pub(super) owner: String,
}

/// A value no other write of a lease object has: S3's ETag is the MD5 of
/// the content, so a takeover that wrote the same bytes would keep the
/// same ETag, and a second process's takeover, conditional on the old
/// ETag, would succeed too. Every lease write carries a fresh nonce.
pub(super) fn nonce() -> String {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let time = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let random = RandomState::new().hash_one((n, time, std::process::id()));
    format!("{}-{n}-{time}-{random:016x}", std::process::id())
}

/// Whether a lease object last written at `modified` has outlived `lease`.
pub(super) fn stale(modified: SystemTime, lease: std::time::Duration) -> bool {
    SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= lease)
}

/// Writes `body` at `key` only if nothing is there.
pub(crate) async fn create(
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

/// Takes over the stale lease object `meta` describes: rewrites it
/// conditional on its ETag, so its age starts again and, of several
/// processes that found it stale, exactly one succeeds (`Ok(false)` for
/// the others, and if it changed meanwhile).
pub(super) async fn take_over(
    store: &Arc<dyn ObjectStore>,
    meta: &ObjectMeta,
    body: Vec<u8>,
) -> object_store::Result<bool> {
    let opts = PutOptions::from(PutMode::Update(super::cond::condition(meta)));
    match store
        .put_opts(&meta.location, PutPayload::from(body), opts)
        .await
    {
        Ok(_) => Ok(true),
        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Deletes `keys`, in batches where the service has them (S3 deletes up
/// to 1,000 in one request, Azure 256); a key already gone is no error.
pub(crate) async fn delete_all(
    store: &Arc<dyn ObjectStore>,
    keys: Vec<Path>,
) -> object_store::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let input = stream::iter(keys.into_iter().map(Ok)).boxed();
    let mut results = store.delete_stream(input);
    let mut first_error = None;
    while let Some(r) = results.next().await {
        match r {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// How the store copies an object without overwriting one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CopyHow {
    /// The service's own conditional copy (S3 `If-None-Match` on
    /// CopyObject, Azure, GCS): one request, no bytes through the client.
    Conditional,
    /// A GET and a conditional PUT, for services without one (objects
    /// over [`INLINE_COPY`] fall back to a HEAD and a plain copy).
    Inline,
}

/// Copies `src` to `dst` unless `dst` exists (`AlreadyExists` then).
async fn copy_new(
    store: &Arc<dyn ObjectStore>,
    src: &Path,
    dst: &Path,
    size: u64,
    how: CopyHow,
) -> object_store::Result<()> {
    if how == CopyHow::Conditional {
        let opts = CopyOptions::new().with_mode(CopyMode::Create);
        return store.copy_opts(src, dst, opts).await;
    }
    if size <= INLINE_COPY {
        let got = store.get(src).await?;
        if got.meta.size <= INLINE_COPY {
            let body = got.bytes().await?;
            return create(store, dst, body.to_vec()).await;
        }
    }
    // Too large to hold: a checked copy (a writer racing between the HEAD
    // and the copy could be overwritten; see the README's threat model).
    match store.head(dst).await {
        Ok(_) => Err(object_store::Error::AlreadyExists {
            path: dst.to_string(),
            source: "destination exists".into(),
        }),
        Err(object_store::Error::NotFound { .. }) => store.copy(src, dst).await,
        Err(e) => Err(e),
    }
}

/// What a rename's copies did.
pub(super) enum Copied {
    /// Every source is at its destination.
    All,
    /// A destination existed (a writer raced into it): the copies made
    /// were deleted again, nothing moved.
    Refused,
    /// No source was left to copy (another writer moved or deleted it
    /// after the lookups): nothing moved.
    Gone,
}

/// Copies every `(source, size)` below `from` to its place below `to`.
/// `live`: this process checked the destination was free, so an existing
/// destination object is a racing writer's (undo, and refuse); in a
/// recovery it is taken for a copy made before the interruption.
pub(super) async fn copy_all(
    store: &Arc<dyn ObjectStore>,
    layout: &super::keys::Layout,
    (from, to): (&MemoryPath, &MemoryPath),
    sources: &[(Path, u64)],
    how: CopyHow,
    live: bool,
) -> object_store::Result<Copied> {
    let pairs: Vec<(Path, Path, u64)> = sources
        .iter()
        .filter_map(|(k, size)| Some((k.clone(), layout.moved(k, from, to)?, *size)))
        .collect();
    let results: Vec<(Path, object_store::Result<()>)> = stream::iter(pairs)
        .map(|(src, dst, size)| {
            let store = Arc::clone(store);
            async move {
                let r = copy_new(&store, &src, &dst, size, how).await;
                (dst, r)
            }
        })
        .buffer_unordered(match how {
            CopyHow::Conditional => COPIES_AT_ONCE,
            CopyHow::Inline => INLINE_COPIES_AT_ONCE,
        })
        .collect()
        .await;
    let mut made = Vec::new();
    let (mut refused, mut gone) = (false, 0usize);
    let mut error = None;
    for (dst, r) in results {
        match r {
            Ok(()) => made.push(dst),
            // Copied and deleted before an interruption (in a recovery),
            // or deleted by another writer meanwhile.
            Err(object_store::Error::NotFound { .. }) => gone += 1,
            Err(object_store::Error::AlreadyExists { .. }) if !live => {}
            Err(object_store::Error::AlreadyExists { .. }) => refused = true,
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    if refused {
        delete_all(store, made).await?;
        return Ok(Copied::Refused);
    }
    if live && gone > 0 && made.is_empty() {
        return Ok(Copied::Gone);
    }
    Ok(Copied::All)
}

/// Every object a rename of `from` moves: below it, and the file itself.
pub(super) async fn sources_of(
    store: &Arc<dyn ObjectStore>,
    layout: &super::keys::Layout,
    from: &MemoryPath,
) -> object_store::Result<Vec<(Path, u64)>> {
    let file = layout.key(from);
    let (below, head) = futures_util::join!(
        all_below(Arc::clone(store), file.clone()),
        store.head(&file)
    );
    let mut sources: Vec<(Path, u64)> = below?.into_iter().map(|m| (m.location, m.size)).collect();
    match head {
        Ok(m) => sources.push((m.location, m.size)),
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(sources)
}

/// Finishes the operation of a record found after an interruption.
pub(super) async fn roll_forward(
    store: &Arc<dyn ObjectStore>,
    layout: &super::keys::Layout,
    record: Checked,
    how: CopyHow,
) -> object_store::Result<()> {
    match record {
        Checked::Rename { from, to } => {
            let sources = sources_of(store, layout, &from).await?;
            copy_all(store, layout, (&from, &to), &sources, how, false).await?;
            keep_parent(store, layout, &from).await?;
            delete_all(store, sources.into_iter().map(|(k, _)| k).collect()).await
        }
        Checked::Delete { path } => {
            keep_parent(store, layout, &path).await?;
            let mut keys: Vec<Path> = all_below(Arc::clone(store), layout.key(&path))
                .await?
                .into_iter()
                .map(|m| m.location)
                .collect();
            keys.push(layout.key(&path));
            delete_all(store, keys).await
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
