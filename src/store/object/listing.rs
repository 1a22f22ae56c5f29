//! Listings: a directory's children in one delimited LIST (pages of
//! 1,000), never a HEAD per entry; existence of a directory from the first
//! key below it; a subtree's keys and sizes from one flat LIST.

use futures_util::StreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use std::sync::Arc;

use super::keys::{MARKER, decode, name_of};
use crate::path::is_reserved;
use crate::store::{DirEntry, EntryKind};

/// `None` for the bucket's top (object_store lists it without a prefix).
pub(super) fn prefix(key: &Path) -> Option<&Path> {
    (!key.as_ref().is_empty()).then_some(key)
}

/// Whether any object has a key below `key/`: the directory `key` exists.
pub(super) async fn any_below(
    store: Arc<dyn ObjectStore>,
    key: Path,
) -> object_store::Result<bool> {
    let mut stream = store.list(prefix(&key));
    match stream.next().await {
        Some(Ok(_)) => Ok(true),
        Some(Err(e)) => Err(e),
        None => Ok(false),
    }
}

/// Every object below `key/`, in pages.
pub(crate) async fn all_below(
    store: Arc<dyn ObjectStore>,
    key: Path,
) -> object_store::Result<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    let mut stream = store.list(prefix(&key));
    while let Some(meta) = stream.next().await {
        out.push(meta?);
    }
    Ok(out)
}

/// What a delimited listing of a directory found.
pub(super) struct Children {
    /// The entries, the store's own objects left out.
    pub(super) entries: Vec<DirEntry>,
    /// Whether anything at all is below (the marker included): the
    /// directory exists.
    pub(super) exists: bool,
}

/// The children of the directory whose key is `key`.
pub(super) async fn children(
    store: Arc<dyn ObjectStore>,
    key: Path,
) -> object_store::Result<Children> {
    let listed = store.list_with_delimiter(prefix(&key)).await?;
    let exists = !listed.objects.is_empty() || !listed.common_prefixes.is_empty();
    let mut entries = Vec::with_capacity(listed.objects.len() + listed.common_prefixes.len());
    let mut dirs = std::collections::HashSet::new();
    for p in &listed.common_prefixes {
        let Some(name) = name_of(p) else { continue };
        if is_reserved(&name) {
            continue;
        }
        dirs.insert(name.clone());
        entries.push(DirEntry {
            name,
            kind: EntryKind::Directory,
            len: 0,
            modified: None,
        });
    }
    for meta in listed.objects {
        let Some(part) = meta.location.parts().next_back() else {
            continue;
        };
        let name = decode(&part);
        // A key that is also a directory (another program wrote `a` and
        // `a/x`): the directory is the entry; the file is not shown twice.
        if name == MARKER || is_reserved(&name) || dirs.contains(&name) {
            continue;
        }
        entries.push(DirEntry {
            name,
            kind: EntryKind::File,
            len: meta.size,
            modified: Some(meta.last_modified.into()),
        });
    }
    Ok(Children { entries, exists })
}

/// Bytes of the memory files below `key/` (the crate's own objects left
/// out), from one flat listing.
pub(super) async fn bytes_below(
    store: Arc<dyn ObjectStore>,
    key: Path,
) -> object_store::Result<u64> {
    let mut total = 0u64;
    let mut stream = store.list(prefix(&key));
    while let Some(meta) = stream.next().await {
        let meta = meta?;
        // The crate's own objects (markers, records, the history's
        // versions) are no memory: any reserved level leaves a key out.
        if meta.location.parts().any(|p| is_reserved(&decode(&p))) {
            continue;
        }
        total = total.saturating_add(meta.size);
    }
    Ok(total)
}
