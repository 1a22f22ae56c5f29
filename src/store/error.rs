//! Errors of the storage layer, for programmers.
//!
//! Each variant carries the *virtual* path, never a host path; the text the
//! model sees is rendered separately in [`render`](crate::render), so even a
//! backend's own error message cannot leak into a tool result.

use std::io;

pub use super::cause::RemoteCause;
pub use super::op::Op;
use super::{Version, WriteMode};
use crate::path::MemoryPath;

/// Result of a [`MemoryStore`](super::MemoryStore) primitive.
pub type StoreResult<T> = Result<T, StoreError>;

/// Why a storage primitive failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Nothing at the path (or an ancestor is a file).
    #[error("{path} does not exist")]
    NotFound {
        /// The path asked for.
        path: MemoryPath,
    },
    /// Something is already at the path.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The path asked for.
        path: MemoryPath,
    },
    /// A file operation met a directory.
    #[error("{path} is a directory")]
    IsADirectory {
        /// The path asked for.
        path: MemoryPath,
    },
    /// A directory operation met a file.
    #[error("{path} is not a directory")]
    NotADirectory {
        /// The path asked for.
        path: MemoryPath,
    },
    /// An ancestor of the path is a file, so the path cannot be created.
    #[error("{parent} is a file, so {path} cannot be created")]
    ParentNotDirectory {
        /// The path asked for.
        path: MemoryPath,
        /// The ancestor that is a file.
        parent: MemoryPath,
    },
    /// A compare-and-swap write found a newer version.
    #[error("{path} was changed concurrently")]
    Conflict {
        /// The path asked for.
        path: MemoryPath,
    },
    /// The path meets a symbolic link (filesystem backend), which is refused.
    #[error("{path} meets a symbolic link")]
    Symlink {
        /// The path asked for.
        path: MemoryPath,
    },
    /// A file is larger than the caller's limit, so it was not read.
    #[error("{path} is {len} bytes, over the limit")]
    TooLarge {
        /// The path asked for.
        path: MemoryPath,
        /// The file's length.
        len: u64,
    },
    /// A regular file with more than one hard link (filesystem backend):
    /// its content may belong to a file outside the root, so it is refused.
    #[error("{path} has more than one hard link")]
    HardLink {
        /// The path asked for.
        path: MemoryPath,
    },
    /// An operation the store does not allow at this path, such as deleting
    /// the root or moving a directory into itself. `dispatch` checks these
    /// first, so a model never reaches them.
    #[error("{path}: {reason}")]
    Invalid {
        /// The path asked for.
        path: MemoryPath,
        /// What is not allowed.
        reason: &'static str,
    },
    /// A name the host filesystem cannot store (the filesystem store on
    /// Windows: `CON`, `NUL`, `COM1`, … with or without an extension, a
    /// trailing dot or space, or one of `< > : " | ? *`). Nothing was
    /// created; the reason says which rule the name broke.
    #[error("{path}: {reason}")]
    UnsupportedName {
        /// The path asked for.
        path: MemoryPath,
        /// Why the host cannot store it.
        reason: &'static str,
    },
    /// A move that would put an entry below `path` (the source) at a path
    /// longer than `limit` bytes at the destination (SPEC §2: every entry in
    /// a store has a valid path). Nothing moved.
    #[error("moving {path} would make a path longer than {limit} bytes")]
    PathTooLong {
        /// The source of the move.
        path: MemoryPath,
        /// The limit in force, in bytes, for paths as the caller spells
        /// them ([`MemoryPath::limit`] of the destination).
        limit: usize,
    },
    /// A write that would take the store (or the part of it a size limit
    /// covers) over `limit` bytes. Nothing was written.
    #[error("{path}: the store would hold {total} bytes, over the limit of {limit}")]
    StoreFull {
        /// The path asked for.
        path: MemoryPath,
        /// What the store would hold after the write.
        total: u64,
        /// The limit.
        limit: u64,
    },
    /// A create refused because the store already holds the most files it
    /// can ([`MemoryStore::max_files`](crate::MemoryStore::max_files)).
    /// Nothing was written.
    #[error("{path}: the store already holds its limit of {limit} files")]
    TooManyFiles {
        /// The path asked for.
        path: MemoryPath,
        /// The store's limit.
        limit: u64,
    },
    /// An I/O failure.
    #[error("{op} failed for {path}: {source}")]
    Io {
        /// What was being done. A closed set: its words reach the model's
        /// `Could not {op}` text, so no free string can.
        op: Op,
        /// The path asked for.
        path: MemoryPath,
        /// The underlying error (its text is never shown to the model).
        source: io::Error,
    },
    /// The store could not be reached (a database or object storage that
    /// refused the connection, timed out or answered with a server error),
    /// so nothing was done. SPEC §4: `Could not reach the memory store
    /// ({cause}) for {path}`.
    #[error("could not reach the memory store ({cause}) for {path}")]
    Unreachable {
        /// The path asked for.
        path: MemoryPath,
        /// Why, in words safe to show the model.
        cause: RemoteCause,
        /// The driver's error, for programmers and logs (never shown to the
        /// model; it may name hosts).
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A write was sent and its outcome is unknown (the connection dropped
    /// before the answer): it may or may not have happened. SPEC §4: `Could
    /// not confirm the write ({cause}) for {path}; view it before trying
    /// again`.
    #[error("could not confirm the write ({cause}) for {path}")]
    OutcomeUnknown {
        /// The path asked for.
        path: MemoryPath,
        /// Why, in words safe to show the model.
        cause: RemoteCause,
        /// The driver's error, for programmers and logs (never shown to the
        /// model).
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The stored bytes failed an integrity check (an encrypted store's
    /// authentication tag, a checksum): tampered with, truncated, sealed
    /// under another key or moved from another path. Nothing of them is
    /// returned. SPEC §4: `Could not read {path}: its stored content failed
    /// the integrity check`.
    #[error("{path}: its stored content failed the integrity check")]
    Integrity {
        /// The path asked for.
        path: MemoryPath,
    },
    /// A failure in a custom backend (database, network, …).
    #[error("backend failed for {path}: {source}")]
    Backend {
        /// The path asked for.
        path: MemoryPath,
        /// The backend's error (its text is never shown to the model).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// The same error with every path it names passed through `f`: a
    /// wrapping store (a tenant's prefix, encrypted names) shows its
    /// caller the paths the caller gave, never the wrapped store's.
    #[must_use]
    pub fn map_paths(self, mut f: impl FnMut(MemoryPath) -> MemoryPath) -> StoreError {
        match self {
            StoreError::NotFound { path } => StoreError::NotFound { path: f(path) },
            StoreError::AlreadyExists { path } => StoreError::AlreadyExists { path: f(path) },
            StoreError::IsADirectory { path } => StoreError::IsADirectory { path: f(path) },
            StoreError::NotADirectory { path } => StoreError::NotADirectory { path: f(path) },
            StoreError::ParentNotDirectory { path, parent } => StoreError::ParentNotDirectory {
                path: f(path),
                parent: f(parent),
            },
            StoreError::Conflict { path } => StoreError::Conflict { path: f(path) },
            StoreError::Symlink { path } => StoreError::Symlink { path: f(path) },
            StoreError::TooLarge { path, len } => StoreError::TooLarge { path: f(path), len },
            StoreError::HardLink { path } => StoreError::HardLink { path: f(path) },
            StoreError::Invalid { path, reason } => StoreError::Invalid {
                path: f(path),
                reason,
            },
            StoreError::UnsupportedName { path, reason } => StoreError::UnsupportedName {
                path: f(path),
                reason,
            },
            StoreError::PathTooLong { path, limit } => StoreError::PathTooLong {
                path: f(path),
                limit,
            },
            StoreError::StoreFull { path, total, limit } => StoreError::StoreFull {
                path: f(path),
                total,
                limit,
            },
            StoreError::TooManyFiles { path, limit } => StoreError::TooManyFiles {
                path: f(path),
                limit,
            },
            StoreError::Io { op, path, source } => StoreError::Io {
                op,
                path: f(path),
                source,
            },
            StoreError::Backend { path, source } => StoreError::Backend {
                path: f(path),
                source,
            },
            StoreError::Unreachable {
                path,
                cause,
                source,
            } => StoreError::Unreachable {
                path: f(path),
                cause,
                source,
            },
            StoreError::OutcomeUnknown {
                path,
                cause,
                source,
            } => StoreError::OutcomeUnknown {
                path: f(path),
                cause,
                source,
            },
            StoreError::Integrity { path } => StoreError::Integrity { path: f(path) },
        }
    }

    /// [`StoreError::ParentNotDirectory`] for `path`, whose ancestor with
    /// `depth` components is a file.
    pub fn parent_not_directory(path: &MemoryPath, depth: usize) -> Self {
        let parent = path.ancestors().nth(depth).unwrap_or_else(MemoryPath::root);
        StoreError::ParentNotDirectory {
            path: path.clone(),
            parent,
        }
    }

    /// The error for a write to the root: it exists, as a directory.
    pub(crate) fn write_to_root(path: &MemoryPath, mode: WriteMode) -> Self {
        match mode {
            WriteMode::Create => StoreError::AlreadyExists { path: path.clone() },
            _ => StoreError::IsADirectory { path: path.clone() },
        }
    }

    /// The error for deleting the root (`dispatch` refuses it first).
    pub(crate) fn delete_root(path: &MemoryPath) -> Self {
        StoreError::Invalid {
            path: path.clone(),
            reason: "the root cannot be deleted",
        }
    }

    /// Refuses moving the root, or a directory into itself (`dispatch`
    /// refuses both first).
    pub(crate) fn check_rename(from: &MemoryPath, to: &MemoryPath) -> Result<(), Self> {
        if from.is_root() || to.is_strictly_inside(from) {
            return Err(StoreError::Invalid {
                path: from.clone(),
                reason: "cannot move the root, or a directory into itself",
            });
        }
        Ok(())
    }

    /// Whether `mode` may write over what is at `path`: nothing (`None`),
    /// a directory, or a file at `version`. Shared by the stores that look
    /// the entry up and decide in one step.
    pub(crate) fn check_write(
        path: &MemoryPath,
        existing: Option<Option<Version>>,
        mode: WriteMode,
    ) -> Result<(), Self> {
        let path = path.clone();
        match (existing, mode) {
            (Some(_), WriteMode::Create) => Err(StoreError::AlreadyExists { path }),
            (Some(None), _) => Err(StoreError::IsADirectory { path }),
            (Some(Some(v)), WriteMode::Update(expected)) if v != expected => {
                Err(StoreError::Conflict { path })
            }
            (None, WriteMode::Update(_)) => Err(StoreError::NotFound { path }),
            _ => Ok(()),
        }
    }

    /// Refuses moving a tree whose longest path below its top, `below`
    /// bytes after the top's own path, would not fit under `to`'s limit
    /// ([`MemoryPath::limit`]), with [`StoreError::PathTooLong`].
    ///
    /// Public so a store of one's own makes in its `rename` the check the
    /// built-in stores make, under its own lock: the handler checks before
    /// it calls `rename`, but only the store can check atomically with the
    /// move (another writer may deepen the tree in between).
    pub fn check_depth(from: &MemoryPath, to: &MemoryPath, below: usize) -> Result<(), Self> {
        if to.normalized_len().saturating_add(below) > to.limit() {
            return Err(StoreError::PathTooLong {
                path: from.clone(),
                limit: to.limit(),
            });
        }
        Ok(())
    }

    /// Wraps an I/O error with the operation and virtual path.
    pub fn io(op: Op, path: &MemoryPath, source: io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.clone(),
            source,
        }
    }
}
