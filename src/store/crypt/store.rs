//! [`EncryptedStore`]: the wrapper. Every path is encrypted name by name
//! on its way in, every content sealed for its path; listings, sizes and
//! errors are turned back into the plaintext view on the way out.

use std::sync::{Arc, Mutex};

use super::CryptError;
use super::key::Keyring;
use super::names::{NameCipher, TOO_LONG};
use super::read::{MAX_FILE_BYTES, normalized};
use super::record::{self, CONTROL_PREFIX, Record};
use super::seal::{self, OVERHEAD, Sealer};
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    EntryKind, FileContent, MemoryStore, Metadata, StoreError, StoreResult, Version,
};

/// A store whose contents and names are encrypted at rest, over any other
/// store (SPEC §7): contents with an AEAD (AES-256-GCM or XChaCha20-Poly1305) bound to their path,
/// names with AES-SIV bound to their parent, a key record that refuses the
/// wrong key at open. See the README's threat model.
///
/// ```
/// use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// let key = Key::generate()?;
/// let store = EncryptedStore::open(InMemoryStore::new(), Keyring::new(key))?;
/// let tool = MemoryTool::new(store);
/// let out = tool.dispatch(&json!({"type": "tool_use", "id": "t", "name": "memory",
///     "input": {"command": "create", "path": "/memories/a.md", "file_text": "secret\n"}}));
/// assert!(!out.is_error);
/// # Ok::<(), claude_memory::store::crypt::CryptError>(())
/// ```
pub struct EncryptedStore<S> {
    pub(super) inner: S,
    pub(super) keys: Arc<Keys>,
}

pub(crate) struct Keys {
    /// The primary first.
    pub(crate) sealers: Vec<Sealer>,
    pub(crate) names: NameCipher,
    /// Serialises this process's size-capped writes (the cap's check is
    /// also conditional in the wrapped store, see `write_opts`).
    pub(super) quota: Mutex<()>,
    /// What the last rotation check saw of the key record.
    pub(crate) record_seen: Mutex<super::rotation::Seen>,
    /// Set while this handle moves a tree or finishes a move, under the
    /// wrapped store's lock: the move's own writes must not stop to
    /// finish the journal it is working through.
    pub(crate) moving: std::sync::atomic::AtomicBool,
}

impl<S: Clone> Clone for EncryptedStore<S> {
    fn clone(&self) -> Self {
        EncryptedStore {
            inner: self.inner.clone(),
            keys: Arc::clone(&self.keys),
        }
    }
}

impl<S> std::fmt::Debug for EncryptedStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedStore")
            .field(
                "keys",
                &self.keys.sealers.iter().map(Sealer::id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<S: MemoryStore> EncryptedStore<S> {
    /// Opens `inner` with `ring` (its first key the primary). A store with
    /// no key record yet gets one (refused if it already holds files); a
    /// ring none of whose keys the record lists is [`CryptError::WrongKey`]
    /// before any file is read. A move an earlier process left half done
    /// is finished first.
    pub fn open(inner: S, ring: Keyring) -> Result<Self, CryptError> {
        Self::open_with(inner, ring, true)
    }

    /// [`open`](Self::open), but only a store that already has its key
    /// record: a store never written is [`CryptError::Uninitialised`]
    /// instead of getting a record. For readers (a read-only store could
    /// not write the record, and a reader of a mistyped path or tenant
    /// should hear so, not get an empty store). A move left half done is
    /// not finished here (that needs writing), but by the next `open`.
    pub fn open_existing(inner: S, ring: Keyring) -> Result<Self, CryptError> {
        Self::open_with(inner, ring, false)
    }

    fn open_with(inner: S, ring: Keyring, create: bool) -> Result<Self, CryptError> {
        let opened = record::open(&inner, &ring, create)?;
        let store = EncryptedStore {
            inner,
            keys: Arc::new(Keys {
                sealers: opened.sealers,
                names: opened.names,
                quota: Mutex::new(()),
                record_seen: Mutex::new(None),
                moving: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        store.check_names()?;
        // A reader (which may hold the store read-only) leaves a move
        // another process left half done to the next writer: it sees the
        // entries where they are, and is not refused for it.
        if create {
            store.recover_moves()?;
        }
        Ok(store)
    }

    /// Refuses a key record that is not this store's: one copied from
    /// another store made with the same key opens (its keys are right)
    /// but its name key decrypts none of the names here. Entries of the
    /// root are tried until one decrypts (usually the first), so this
    /// costs one listing of the root at open; a file planted beside
    /// genuine ones does not stop the store opening (its listing reports
    /// it, SPEC §7).
    fn check_names(&self) -> Result<(), CryptError> {
        let root = MemoryPath::root();
        let entries = self.inner.list(&root).map_err(CryptError::Store)?;
        let mut ours = entries
            .iter()
            .filter(|e| !e.name.starts_with(CONTROL_PREFIX))
            .peekable();
        if ours.peek().is_none() || ours.any(|e| self.keys.names.decrypt(&root, &e.name).is_some())
        {
            return Ok(());
        }
        Err(CryptError::Record(
            "no stored name decrypts with this key record's name key: the key record is another store's (restore this store's own), or every name here was planted",
        ))
    }

    /// The wrapped store (what it holds is ciphertext).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The key record as it is now.
    pub(crate) fn record(&self) -> Result<(Record, Version), CryptError> {
        record::read(&self.inner)?.ok_or(CryptError::Record("the key record is gone"))
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    pub(crate) fn keys_arc(&self) -> Arc<Keys> {
        Arc::clone(&self.keys)
    }

    /// The stored path of `path`; `None` if a name is too long to exist.
    pub(crate) fn enc(&self, path: &MemoryPath) -> Option<MemoryPath> {
        self.enc_shared(path, &normalized(path))
            .map(|p| MemoryPath::clone(&p))
    }

    /// [`enc`](Self::enc), shared, for `path`'s normalised form `key`.
    ///
    /// Remembered per path (see `cache`): a hit is one lookup instead of
    /// one AES-SIV and one path check per component, and no copy.
    pub(crate) fn enc_shared(&self, path: &MemoryPath, key: &str) -> Option<Arc<MemoryPath>> {
        let memo = &self.keys.names.memo;
        if let Some(stored) = memo.path(key) {
            return Some(stored);
        }
        let mut plain = MemoryPath::root();
        let mut stored = MemoryPath::root();
        for name in path.components() {
            let e = self.keys.names.encrypt(&plain, name)?;
            stored = stored.join(&e)?;
            plain = plain.join(name)?;
        }
        let stored = Arc::new(stored);
        memo.put_path(key.to_owned(), Arc::clone(&stored));
        Some(stored)
    }

    /// [`enc`](Self::enc) for a write: a name too long is refused with
    /// the reason.
    pub(crate) fn enc_new(&self, path: &MemoryPath) -> StoreResult<MemoryPath> {
        self.enc(path).ok_or_else(|| StoreError::UnsupportedName {
            path: path.clone(),
            reason: TOO_LONG,
        })
    }

    /// Seals `plain` as the content of `path`, with the primary key.
    pub(crate) fn seal(&self, path: &MemoryPath, plain: &[u8]) -> StoreResult<Vec<u8>> {
        self.keys.sealers[0]
            .seal(plain, path.normalized().as_bytes())
            .map_err(|e| StoreError::Backend {
                path: path.clone(),
                source: Box::new(e),
            })
    }

    /// Opens the stored bytes of `path`; anything wrong is SPEC §4's
    /// integrity answer.
    pub(crate) fn unseal(&self, path: &MemoryPath, sealed: &[u8]) -> StoreResult<Vec<u8>> {
        let id = seal::key_id_of(sealed);
        self.keys
            .sealers
            .iter()
            .find(|s| Some(s.id()) == id)
            .and_then(|s| s.open(sealed, path.normalized().as_bytes()))
            .ok_or_else(|| StoreError::Integrity { path: path.clone() })
    }

    /// Plaintext and stored bytes of the files below `scope`.
    pub(super) fn totals(&self, scope: &MemoryPath) -> StoreResult<(u64, u64)> {
        let (mut plain, mut stored) = (0u64, 0u64);
        let Some(inner_scope) = self.enc(scope) else {
            return Ok((0, 0));
        };
        let result = walk(&self.inner, &inner_scope, Order::AsListed, &mut |step| {
            if let Step::File { dir, entry, .. } = step {
                stored = stored.saturating_add(entry.len);
                if !(dir.is_root() && entry.name.starts_with(CONTROL_PREFIX)) {
                    plain = plain.saturating_add(entry.len.saturating_sub(OVERHEAD));
                }
            }
            Ok(Flow::Continue)
        });
        match result {
            Ok(()) | Err(StoreError::NotFound { .. } | StoreError::NotADirectory { .. }) => {
                Ok((plain, stored))
            }
            Err(e) => Err(self.outer(e, &[(&inner_scope, scope)])),
        }
    }

    pub(super) fn plain_meta(meta: Metadata) -> Metadata {
        match meta.kind {
            EntryKind::File => Metadata {
                len: meta.len.saturating_sub(OVERHEAD),
                ..meta
            },
            EntryKind::Directory => meta,
        }
    }

    /// The content of `path` and its version, decrypted (`limit` in
    /// plaintext bytes).
    pub(super) fn read_plain(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        let Some(ep) = self.enc(path) else {
            return Err(StoreError::NotFound { path: path.clone() });
        };
        let file = self
            .inner
            .read(&ep, limit.min(MAX_FILE_BYTES).saturating_add(OVERHEAD))
            .map_err(|e| self.outer(e, &[(&ep, path)]))?;
        let id = seal::key_id_of(&file.data);
        let data = self
            .keys
            .sealers
            .iter()
            .find(|s| Some(s.id()) == id)
            .and_then(|s| s.open_owned(file.data, path.normalized().as_bytes()))
            .ok_or_else(|| StoreError::Integrity { path: path.clone() })?;
        Ok(FileContent {
            data,
            version: file.version,
        })
    }
}

/// True when `store` holds an encrypted store's key record: opening it
/// without a key would show ciphertext, and writing to it would put
/// plaintext beside it (the CLI refuses both).
pub fn is_encrypted<S: MemoryStore + ?Sized>(store: &S) -> Result<bool, StoreError> {
    Ok(store.stat(&record::record_path())?.is_some())
}
