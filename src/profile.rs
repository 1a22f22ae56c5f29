//! The managed Memory Stores profile: the limits of Anthropic's managed
//! Memory Stores, and a report of what in a store would not fit there.
//!
//! [`Config::managed_memory_stores`](crate::Config::managed_memory_stores)
//! makes the handler refuse writes past these limits; [`check`] looks at
//! what a store already holds (files written before, or by other programs)
//! and lists every entry that could not move to that service unchanged.

use crate::path::MemoryPath;
use crate::store::{Flow, MemoryStore, Order, Step, StoreError, StoreResult, walk};

/// Path segments below `/memories`: `/memories/a/b.md` has 2.
pub const MAX_PATH_SEGMENTS: usize = 20;
/// Bytes of a whole path (SPEC §2's limit, the same number).
pub const MAX_PATH_BYTES: usize = 1024;
/// Bytes of one memory: the service's 100 kB, which it counts as
/// 102,400 bytes.
pub const MAX_FILE_SIZE: u64 = 102_400;
/// Memories (files) in one store.
pub const MAX_FILES: u64 = 2_000;

/// One thing that would not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misfit {
    /// A file deeper than [`MAX_PATH_SEGMENTS`].
    TooDeep {
        /// The file's path.
        path: String,
        /// Its segments below `/memories`.
        segments: usize,
    },
    /// A path longer than [`MAX_PATH_BYTES`].
    PathTooLong {
        /// The path.
        path: String,
        /// Its length in bytes.
        bytes: usize,
    },
    /// A file larger than [`MAX_FILE_SIZE`].
    TooLarge {
        /// The file's path.
        path: String,
        /// Its size in bytes.
        size: u64,
    },
    /// A file that is not UTF-8 text (an image, or other bytes).
    NotText {
        /// The file's path.
        path: String,
    },
    /// A name no memory path can spell (made outside the tool).
    Unspellable {
        /// The directory holding it, and the name as listed.
        path: String,
    },
    /// More files than [`MAX_FILES`].
    TooManyFiles {
        /// Files in the store.
        files: u64,
    },
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::TooDeep { path, segments } => write!(
                f,
                "{path}: {segments} path segments (limit {MAX_PATH_SEGMENTS})"
            ),
            Misfit::PathTooLong { path, bytes } => {
                write!(f, "{path}: path of {bytes} bytes (limit {MAX_PATH_BYTES})")
            }
            Misfit::TooLarge { path, size } => {
                write!(f, "{path}: {size} bytes (limit {MAX_FILE_SIZE})")
            }
            Misfit::NotText { path } => write!(f, "{path}: not UTF-8 text"),
            Misfit::Unspellable { path } => write!(f, "{path}: a name no memory path can spell"),
            Misfit::TooManyFiles { files } => {
                write!(f, "the store holds {files} files (limit {MAX_FILES})")
            }
        }
    }
}

/// Every entry of `store` that would not fit a managed Memory Store, in
/// walk order (the file count last). Reads each file of at most
/// [`MAX_FILE_SIZE`] bytes once, to check it is UTF-8 (larger files are
/// reported as too large without being read), so memory stays bounded by
/// one such file whatever the store holds.
pub fn check<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Vec<Misfit>> {
    let mut misfits = Vec::new();
    let mut files = 0u64;
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        let Step::File { dir, entry, .. } = step else {
            return Ok(Flow::Continue);
        };
        files += 1;
        let Some(path) = dir.join(&entry.name) else {
            misfits.push(Misfit::Unspellable {
                path: format!("{}/{}", dir.normalized(), entry.name),
            });
            return Ok(Flow::Continue);
        };
        let shown = path.normalized();
        let segments = path.components().len();
        if segments > MAX_PATH_SEGMENTS {
            misfits.push(Misfit::TooDeep {
                path: shown.clone(),
                segments,
            });
        }
        if shown.len() > MAX_PATH_BYTES {
            misfits.push(Misfit::PathTooLong {
                bytes: shown.len(),
                path: shown.clone(),
            });
        }
        if entry.len > MAX_FILE_SIZE {
            misfits.push(Misfit::TooLarge {
                path: shown,
                size: entry.len,
            });
            return Ok(Flow::Continue);
        }
        match store.read(&path, MAX_FILE_SIZE) {
            Ok(file) if std::str::from_utf8(&file.data).is_ok() => {}
            Ok(_) => misfits.push(Misfit::NotText { path: shown }),
            // Grown since it was listed.
            Err(StoreError::TooLarge { .. }) => misfits.push(Misfit::TooLarge {
                path: shown,
                size: MAX_FILE_SIZE + 1,
            }),
            // Gone since it was listed: nothing left to move.
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(Flow::Continue)
    })?;
    if files > MAX_FILES {
        misfits.push(Misfit::TooManyFiles { files });
    }
    Ok(misfits)
}
