//! A writer that meets a rotation run by another process.
//!
//! `rekey` re-seals every file under its primary key, then retires the
//! others. A second process that opened the store earlier still seals
//! with its own primary, possibly a key about to be retired: a file it
//! wrote behind the rotation's walk would end up under a key the record
//! no longer lists (readable only by someone who kept that key).
//!
//! So before each write the wrapper looks at the key record: one `stat`
//! (its length and modification time), and a read only when that
//! changed. A record that is rotating to another key (`rekey_to`) or no
//! longer lists this process's primary refuses the write with
//! [`CryptError::Rotated`]: the process must reopen the store with the
//! new key. `rekey` itself also walks the store a second time before it
//! retires anything, for a write that slipped in before it set
//! `rekey_to`. What is left: a writer stalled between this check and its
//! write for the whole length of a rotation (see the README).

use std::sync::PoisonError;
use std::time::SystemTime;

use super::CryptError;
use super::record::{self, record_path};
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::{MemoryStore, StoreError, StoreResult};

/// What the last check saw of the key record (its length and time).
pub(crate) type Seen = Option<(u64, SystemTime)>;

impl<S: MemoryStore> EncryptedStore<S> {
    /// Refuses a write (of `path`) when another process is rotating the
    /// store to another key, or has retired this one.
    pub(crate) fn check_rotation(&self, path: &MemoryPath) -> StoreResult<()> {
        let meta = self.inner().stat(&record_path())?;
        let now: Seen = meta.and_then(|m| Some((m.len, m.modified?)));
        let mut seen = self
            .keys()
            .record_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if now.is_some() && *seen == now {
            return Ok(());
        }
        let backend = |e: CryptError| StoreError::Backend {
            path: path.clone(),
            source: Box::new(e),
        };
        let Some((rec, _)) = record::read(self.inner()).map_err(backend)? else {
            return Err(backend(CryptError::Record("the key record is gone")));
        };
        let primary = self.keys().sealers[0].id().to_hex();
        let rotating_away = rec.rekey_to.as_ref().is_some_and(|to| *to != primary);
        if rotating_away || !rec.keys.iter().any(|e| e.id == primary) {
            return Err(backend(CryptError::Rotated));
        }
        *seen = now;
        Ok(())
    }
}
