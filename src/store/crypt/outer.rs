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
        // A wrapped file's length counts its sealing, the caller's not.
        match error.map_paths(map) {
            StoreError::TooLarge { path, len } => StoreError::TooLarge {
                path,
                len: len.saturating_sub(OVERHEAD),
            },
            other => other,
        }
    }
}
