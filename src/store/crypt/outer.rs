//! Errors of the wrapped store turned back into the plaintext view: the
//! paths a wrapped store names in an error are stored (encrypted) paths,
//! never shown; each is mapped to the plaintext path it stands for.

use super::seal::OVERHEAD;
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::{MemoryStore, StoreError};

impl<S: MemoryStore> EncryptedStore<S> {
    /// Rewrites the wrapped store's (encrypted) paths in `error` to the
    /// plaintext ones: each is `pairs`' plaintext path or its ancestor.
    pub(crate) fn outer(
        &self,
        error: StoreError,
        pairs: &[(&MemoryPath, &MemoryPath)],
    ) -> StoreError {
        let map = |p: MemoryPath| -> MemoryPath {
            let n = p.components().len();
            for (stored, plain) in pairs {
                if stored.components().len() >= n && stored.components()[..n] == p.components()[..]
                {
                    return plain
                        .ancestors()
                        .find(|a| a.components().len() == n)
                        .unwrap_or_else(|| (*plain).clone());
                }
            }
            pairs
                .first()
                .map(|(_, plain)| (*plain).clone())
                .unwrap_or_else(MemoryPath::root)
        };
        match error {
            StoreError::NotFound { path } => StoreError::NotFound { path: map(path) },
            StoreError::AlreadyExists { path } => StoreError::AlreadyExists { path: map(path) },
            StoreError::IsADirectory { path } => StoreError::IsADirectory { path: map(path) },
            StoreError::NotADirectory { path } => StoreError::NotADirectory { path: map(path) },
            StoreError::ParentNotDirectory { path, parent } => StoreError::ParentNotDirectory {
                path: map(path),
                parent: map(parent),
            },
            StoreError::Conflict { path } => StoreError::Conflict { path: map(path) },
            StoreError::Symlink { path } => StoreError::Symlink { path: map(path) },
            StoreError::TooLarge { path, len } => StoreError::TooLarge {
                path: map(path),
                len: len.saturating_sub(OVERHEAD),
            },
            StoreError::HardLink { path } => StoreError::HardLink { path: map(path) },
            StoreError::Invalid { path, reason } => StoreError::Invalid {
                path: map(path),
                reason,
            },
            StoreError::UnsupportedName { path, reason } => StoreError::UnsupportedName {
                path: map(path),
                reason,
            },
            StoreError::PathTooLong { path, limit } => StoreError::PathTooLong {
                path: map(path),
                limit,
            },
            StoreError::StoreFull { path, total, limit } => StoreError::StoreFull {
                path: map(path),
                total,
                limit,
            },
            StoreError::Io { op, path, source } => StoreError::Io {
                op,
                path: map(path),
                source,
            },
            StoreError::Backend { path, source } => StoreError::Backend {
                path: map(path),
                source,
            },
            StoreError::Unreachable {
                path,
                cause,
                source,
            } => StoreError::Unreachable {
                path: map(path),
                cause,
                source,
            },
            StoreError::OutcomeUnknown {
                path,
                cause,
                source,
            } => StoreError::OutcomeUnknown {
                path: map(path),
                cause,
                source,
            },
            StoreError::Integrity { path } => StoreError::Integrity { path: map(path) },
        }
    }
}
