//! The local side of a sync: any [`MemoryStore`], read through its
//! primitives. Each change it makes checks first that the file still holds
//! what the scan saw, so an edit the model makes during a pass is never
//! overwritten or removed by it.

use std::collections::BTreeMap;
use std::io::Read;

use sha2::{Digest, Sha256};

use super::MARKER_FILE;
use crate::path::MemoryPath;
use crate::store::walk::{self, Flow, Order, Step};
use crate::store::{
    Abort, DeleteIf, MemoryStore, MemoryStoreExt, StoreError, StoreResult, Updated, WriteMode,
};

/// The largest local file a pull may replace: what the service holds is at
/// most 102,400 bytes, but the file it replaces can be anything a local
/// writer left, and is read whole to check it is still what the scan saw.
const REPLACE_LIMIT: u64 = 8 << 20;

/// The stand-in sha of a file the store would not read.
pub(super) const UNREADABLE: &str = "unreadable";

/// The most bytes a memory holds: a larger file is not hashed.
const MAX_MEMORY: u64 = 102_400;

/// What the marker file at the store's root says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    /// It names this memory store.
    Ours,
    /// There is none.
    Missing,
    /// It names another store, or is not a marker.
    Other,
}

/// One scan of the local store: every file's sha256 (the marker apart)
/// and the marker, read in the same walk.
pub(super) struct Scan {
    pub files: BTreeMap<String, String>,
    pub marker: Marker,
    /// Files the store would not read, and why: present, never synced.
    pub unreadable: Vec<(String, String)>,
    /// Files no memory path can spell (made outside the crate), skipped.
    pub unspellable: Vec<String>,
}

/// The marker's content, as the SDK writes it.
pub(super) fn marker_text(store_id: &str) -> String {
    format!("version 1\n{store_id}")
}

fn marker_path() -> Option<MemoryPath> {
    MemoryPath::root().join(MARKER_FILE)
}

/// The sync's name for a file: its components below `/memories`, joined.
pub(super) fn rel(path: &MemoryPath) -> String {
    path.components().join("/")
}

/// The memory path of a sync name, if one spells it.
pub(super) fn path_of(rel: &str) -> Option<MemoryPath> {
    MemoryPath::from_stored(&format!("{}/{rel}", crate::path::ROOT))
}

pub(super) use crate::store::sha256_hex;

/// Reads the whole store. A directory that cannot be listed fails the
/// scan: read as absent, its files would look deleted. A file over a
/// memory's size, or one the store will not read (a hard link, say), is
/// present with a stand-in sha no content has (its size and time, or its
/// error), so it is never read whole every pass, never taken for deleted,
/// and never written over.
pub(super) fn scan(store: &dyn MemoryStore, store_id: &str) -> StoreResult<Scan> {
    let mut files = BTreeMap::new();
    let mut unreadable = Vec::new();
    let mut unspellable = Vec::new();
    let mut marker = Marker::Missing;
    let marker_at = marker_path();
    walk::walk(store, &MemoryPath::root(), Order::AsListed, &mut |step| {
        let Step::File { dir, entry, .. } = step else {
            return Ok(Flow::Continue);
        };
        let Some(path) = dir.join(&entry.name) else {
            unspellable.push(format!("{}/{}", dir.as_str(), entry.name));
            return Ok(Flow::Continue);
        };
        if Some(&path) == marker_at.as_ref() {
            marker = read_marker(store, &path, store_id)?;
            return Ok(Flow::Continue);
        }
        if entry.len > MAX_MEMORY {
            let when = entry
                .modified
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            files.insert(rel(&path), format!("oversize:{}:{when}", entry.len));
            return Ok(Flow::Continue);
        }
        match hash(store, &path) {
            Ok(Some(sha)) => {
                files.insert(rel(&path), sha);
            }
            // Removed since its directory was listed: it is absent.
            Ok(None) => {}
            Err(e) => {
                files.insert(rel(&path), UNREADABLE.into());
                unreadable.push((rel(&path), e.to_string()));
            }
        }
        Ok(Flow::Continue)
    })?;
    Ok(Scan {
        files,
        marker,
        unreadable,
        unspellable,
    })
}

fn read_marker(store: &dyn MemoryStore, path: &MemoryPath, store_id: &str) -> StoreResult<Marker> {
    match store.read(path, 4096) {
        Ok(f) if f.data == marker_text(store_id).as_bytes() => Ok(Marker::Ours),
        Ok(_) | Err(StoreError::TooLarge { .. }) => Ok(Marker::Other),
        Err(StoreError::NotFound { .. }) => Ok(Marker::Missing),
        Err(e) => Err(e),
    }
}

/// Whether the marker names this store now (a re-check before a delete).
pub(super) fn marker_is_ours(store: &dyn MemoryStore, store_id: &str) -> StoreResult<bool> {
    match marker_path() {
        Some(path) => Ok(read_marker(store, &path, store_id)? == Marker::Ours),
        None => Ok(false),
    }
}

/// Writes the marker (a sync's first pass, or a re-download).
pub(super) fn stamp(store: &dyn MemoryStore, store_id: &str) -> StoreResult<()> {
    let path = marker_path().ok_or_else(|| StoreError::Invalid {
        path: MemoryPath::root(),
        reason: "the marker file's name is not a memory path",
    })?;
    store
        .write(
            &path,
            marker_text(store_id).as_bytes(),
            WriteMode::Overwrite,
        )
        .map(|_| ())
}

/// A file's sha256, streamed (a huge file is never held whole); `None` if
/// it is gone.
pub(super) fn hash(store: &dyn MemoryStore, path: &MemoryPath) -> StoreResult<Option<String>> {
    let mut reader = match store.open(path) {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.reader.read(&mut buf).map_err(|e| StoreError::Io {
            op: crate::store::Op::Read,
            path: path.clone(),
            source: e,
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(Some(crate::store::hex(&hasher.finalize())))
}

/// What a conditional change found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Checked {
    /// Done.
    Done,
    /// The file no longer held what the scan saw (or, for a create,
    /// something is there now): nothing changed; the next pass decides.
    Moved,
}

/// Writes `data` at `path` only if the file still has sha `expected`
/// (`None`: only if nothing is there).
pub(super) fn write_if(
    store: &dyn MemoryStore,
    path: &MemoryPath,
    expected: Option<&str>,
    data: &[u8],
) -> StoreResult<Checked> {
    let Some(expected) = expected else {
        return match store.write(path, data, WriteMode::Create) {
            Ok(_) => Ok(Checked::Done),
            Err(StoreError::AlreadyExists { .. }) => Ok(Checked::Moved),
            Err(e) => Err(e),
        };
    };
    let mut change = |current: &[u8]| {
        if sha256_hex(current) == expected {
            Ok(data.to_vec())
        } else {
            Err(Abort)
        }
    };
    match store.update(path, REPLACE_LIMIT, &mut change) {
        Ok(Updated::Written(_)) => Ok(Checked::Done),
        Ok(Updated::Aborted) | Err(StoreError::NotFound { .. }) => Ok(Checked::Moved),
        Err(e) => Err(e),
    }
}

/// Removes the file at `path` only if it still has sha `expected`: read,
/// then removed only if its size and time are still those of the read.
pub(super) fn remove_if(
    store: &dyn MemoryStore,
    path: &MemoryPath,
    expected: &str,
) -> StoreResult<Checked> {
    let Some(before) = store.stat(path)? else {
        return Ok(Checked::Done);
    };
    if hash(store, path)?.as_deref() != Some(expected) {
        return Ok(Checked::Moved);
    }
    let mut same = |now: &crate::store::Metadata| *now == before;
    match store.delete_opts(path, DeleteIf::FileWhere(&mut same).into()) {
        Ok(true) | Err(StoreError::NotFound { .. }) => Ok(Checked::Done),
        Ok(false) => Ok(Checked::Moved),
        Err(e) => Err(e),
    }
}
