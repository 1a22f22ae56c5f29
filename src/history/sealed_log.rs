//! [`SealedLog`]: a history log whose versions are sealed with the
//! store's keys, for `HistoryStore<EncryptedStore<S>, SealedLog<L>>`.
//!
//! The history sits *above* the encrypted store, so it sees what the
//! model sees (plaintext paths and contents) and `diff`, `revert`,
//! `restore` and `redact` work unchanged for the key holder; the log it
//! writes through this wrapper holds each version's path, source path,
//! content and content hash sealed (the content seal: AES-256-GCM or XChaCha20-Poly1305, fresh nonce), so
//! the journal file or table keeps no plaintext. Ids, times, operations,
//! sizes, labels and `tool_use` ids stay in the clear (the log's own
//! bookkeeping).

use std::sync::Arc;

use super::log::{Filter, Order};
use super::{HistoryError, HistoryLog, Revision};
use crate::store::MemoryStore;
use crate::store::crypt::EncryptedStore;
use crate::store::crypt::record::{hex_decode, hex_encode};
use crate::store::crypt::store::Keys;

const CONTEXT: &[u8] = b"claude-memory history v1";

/// A [`HistoryLog`] that seals every version before the log it wraps
/// stores it.
pub struct SealedLog<L> {
    inner: L,
    keys: Arc<Keys>,
}

impl<L> std::fmt::Debug for SealedLog<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedLog").finish_non_exhaustive()
    }
}

/// The keys of one [`EncryptedStore`], to seal history logs with after the
/// store itself has been moved into a box or a `HistoryStore`.
#[derive(Clone)]
pub struct LogSealer {
    keys: Arc<Keys>,
}

impl std::fmt::Debug for LogSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSealer").finish_non_exhaustive()
    }
}

impl LogSealer {
    /// The sealer of `store`'s keys.
    pub fn new<S: MemoryStore>(store: &EncryptedStore<S>) -> Self {
        LogSealer {
            keys: store.keys_arc(),
        }
    }

    /// `inner`, its versions sealed with these keys.
    pub fn wrap<L: HistoryLog>(&self, inner: L) -> SealedLog<L> {
        SealedLog {
            inner,
            keys: Arc::clone(&self.keys),
        }
    }
}

impl<L: HistoryLog> SealedLog<L> {
    /// Seals `inner`'s versions with `store`'s keys (the primary for new
    /// versions; any loaded key opens old ones).
    pub fn new<S: MemoryStore>(inner: L, store: &EncryptedStore<S>) -> Self {
        LogSealer::new(store).wrap(inner)
    }

    fn seal(&self, data: &[u8]) -> Result<Vec<u8>, HistoryError> {
        self.keys.sealers[0]
            .seal(data, CONTEXT)
            .map_err(|e| HistoryError::Log(e.to_string()))
    }

    fn seal_text(&self, text: &str) -> Result<String, HistoryError> {
        Ok(hex_encode(&self.seal(text.as_bytes())?))
    }

    fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, HistoryError> {
        let id = crate::store::crypt::seal::key_id_of(sealed);
        self.keys
            .sealers
            .iter()
            .find(|s| Some(s.id()) == id)
            .and_then(|s| s.open(sealed, CONTEXT))
            .ok_or_else(|| HistoryError::Log("a version failed its integrity check".to_owned()))
    }

    /// Opens a record's sealed path, source and hash (not its content).
    fn open_record(&self, v: &mut Revision) -> Result<(), HistoryError> {
        v.path = self.open_text(&v.path)?;
        v.from = v.from.as_deref().map(|f| self.open_text(f)).transpose()?;
        v.sha256 = self.open_text(&v.sha256)?;
        Ok(())
    }

    fn open_text(&self, hex: &str) -> Result<String, HistoryError> {
        let sealed = hex_decode(hex)
            .ok_or_else(|| HistoryError::Log("a sealed version is not hex".to_owned()))?;
        String::from_utf8(self.open(&sealed)?)
            .map_err(|_| HistoryError::Log("a sealed version is not text".to_owned()))
    }
}

#[deny(clippy::missing_trait_methods)]
impl<L: HistoryLog> HistoryLog for SealedLog<L> {
    fn append(&self, versions: &mut [Revision]) -> Result<(), HistoryError> {
        let mut sealed = Vec::with_capacity(versions.len());
        for v in versions.iter() {
            let mut s = v.clone();
            s.path = self.seal_text(&v.path)?;
            s.from = v.from.as_deref().map(|f| self.seal_text(f)).transpose()?;
            s.sha256 = self.seal_text(&v.sha256)?;
            s.content = v.content.as_deref().map(|c| self.seal(c)).transpose()?;
            sealed.push(s);
        }
        self.inner.append(&mut sealed)?;
        for (v, s) in versions.iter_mut().zip(&sealed) {
            v.id = s.id;
            v.file = s.file;
        }
        Ok(())
    }

    fn get(&self, id: u64) -> Result<Option<Revision>, HistoryError> {
        let Some(mut v) = self.inner.get(id)? else {
            return Ok(None);
        };
        self.open_record(&mut v)?;
        v.content = v.content.as_deref().map(|c| self.open(c)).transpose()?;
        Ok(Some(v))
    }

    /// The inner log answers what is in the clear (ids, files, times,
    /// actors); a path or prefix is sealed there, so those are checked
    /// here once opened, page by page of the inner log's answers.
    fn find(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
    ) -> Result<Vec<Revision>, HistoryError> {
        let clear = Filter {
            path: None,
            prefix: None,
            ..filter.clone()
        };
        let sealed_fields = filter.path.is_some() || filter.prefix.is_some();
        let mut out = Vec::new();
        let mut inner_filter = clear.clone();
        loop {
            let page = self.inner.find(&inner_filter, order, limit.max(1))?;
            let Some(edge) = page.last().map(|v| v.id) else {
                return Ok(out);
            };
            for mut v in page {
                self.open_record(&mut v)?;
                if !sealed_fields || filter.matches(&v) {
                    out.push(v);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
            if !sealed_fields {
                return Ok(out);
            }
            match order {
                Order::Oldest => inner_filter.after = Some(edge),
                Order::Newest => inner_filter.before = Some(edge),
            }
        }
    }

    fn checkpoint(&self) -> Result<Option<Vec<u8>>, HistoryError> {
        // One that does not open with the store's keys (planted, or
        // sealed with a key since removed) is no checkpoint: the open
        // reads the history instead, and the next checkpoint replaces it.
        Ok(self
            .inner
            .checkpoint()?
            .and_then(|sealed| self.open(&sealed).ok()))
    }

    fn save_checkpoint(&self, data: &[u8]) -> Result<(), HistoryError> {
        self.inner.save_checkpoint(&self.seal(data)?)
    }

    fn mark_redacted(&self, id: u64) -> Result<bool, HistoryError> {
        self.inner.mark_redacted(id)
    }

    fn drop_versions(&self, ids: &[u64]) -> Result<(), HistoryError> {
        self.inner.drop_versions(ids)
    }

    fn redact(&self, id: u64) -> Result<bool, HistoryError> {
        self.inner.redact(id)
    }

    fn replace_content(
        &self,
        id: u64,
        content: Vec<u8>,
        redacted: bool,
    ) -> Result<bool, HistoryError> {
        self.inner
            .replace_content(id, self.seal(&content)?, redacted)
    }

    fn compact(&self) -> Result<(), HistoryError> {
        self.inner.compact()
    }

    fn exclusive(&self, change: &mut dyn FnMut(u64)) -> Result<(), HistoryError> {
        self.inner.exclusive(change)
    }

    fn locks_writers(&self) -> bool {
        self.inner.locks_writers()
    }
}
