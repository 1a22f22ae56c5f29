//! [`EncryptedStore`]: the wrapper. Every path is encrypted name by name
//! on its way in, every content sealed for its path; listings, sizes and
//! errors are turned back into the plaintext view on the way out.

use std::sync::{Arc, Mutex, PoisonError};

use super::CryptError;
use super::key::Keyring;
use super::names::{NameCipher, TOO_LONG};
use super::read::{MAX_FILE_BYTES, check_len, normalized};
use super::record::{self, CONTROL_PREFIX, Record};
use super::seal::{self, OVERHEAD, Sealer};
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{
    Change, DirEntry, EntryKind, FileContent, FileReader, MemoryStore, Metadata, Quota, StoreError,
    StoreResult, Updated, Version, WriteMode, check_quota,
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
    inner: S,
    keys: Arc<Keys>,
}

pub(crate) struct Keys {
    /// The primary first.
    pub(crate) sealers: Vec<Sealer>,
    pub(crate) names: NameCipher,
    /// Serialises this process's size-capped writes (the cap's check is
    /// also conditional in the wrapped store, see `write_within`).
    quota: Mutex<()>,
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
    fn totals(&self, scope: &MemoryPath) -> StoreResult<(u64, u64)> {
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

    fn plain_meta(meta: Metadata) -> Metadata {
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
    fn read_plain(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
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

impl<S: MemoryStore> EncryptedStore<S> {
    /// Runs a change under the wrapped store's write lock, after
    /// finishing any move a killed process left (see
    /// [`finish_pending_locked`](Self::finish_pending_locked)), where the
    /// wrapped store has such a lock; else as it is.
    fn guarded<T>(&self, path: &MemoryPath, op: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        if !self.inner.locks_writers() {
            return op();
        }
        let mut op = Some(op);
        let mut out = None;
        self.inner.exclusive(&MemoryPath::root(), &mut || {
            self.finish_pending_locked(path)?;
            if let Some(op) = op.take() {
                out = Some(op());
            }
            Ok(())
        })?;
        out.unwrap_or_else(|| {
            Err(StoreError::Backend {
                path: path.clone(),
                source: "the locked change did not run".into(),
            })
        })
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for EncryptedStore<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        let Some(ep) = self.enc(path) else {
            return Ok(None);
        };
        let meta = self
            .inner
            .stat(&ep)
            .map_err(|e| self.outer(e, &[(&ep, path)]))?;
        Ok(meta.map(Self::plain_meta))
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.read_plain(path, limit)
    }

    /// Reads the file whole to check its tag before a byte is shown (an
    /// AEAD opens all or nothing), then streams the plaintext. The file is
    /// opened as the wrapped store opens it (its fast path, one `fstat`
    /// for the length) and read in one pass into a buffer of exactly that
    /// length, which is then decrypted in place: no second read, stat or
    /// copy. A stored file over [`MAX_FILE_BYTES`] (planted: no write
    /// makes one) is refused before any of it is read.
    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        let key = normalized(path);
        let Some(ep) = self.enc_shared(path, &key) else {
            return Err(StoreError::NotFound { path: path.clone() });
        };
        let file = self
            .inner
            .open(&ep)
            .map_err(|e| self.outer(e, &[(&*ep, path)]))?;
        let data = self.read_sealed(path, &key, file)?;
        // The plaintext starts after the seal's header: read from there
        // instead of moving it.
        let mut reader = std::io::Cursor::new(data);
        reader.set_position(seal::HEADER as u64);
        Ok(FileReader {
            len: (reader.get_ref().len() - seal::HEADER) as u64,
            reader: Box::new(reader),
        })
    }

    fn write(&self, path: &MemoryPath, data: &[u8], mode: WriteMode) -> StoreResult<Version> {
        self.guarded(path, || {
            check_len(path, data)?;
            self.check_rotation(path)?;
            let ep = self.enc_new(path)?;
            let sealed = self.seal(path, data)?;
            self.inner
                .write(&ep, &sealed, mode)
                .map_err(|e| self.outer(e, &[(&ep, path)]))
        })
    }

    /// None: each listed name is decrypted and checked by [`list`](Self::list),
    /// so a walk lists each directory through it.
    fn list_tree(&self, _dir: &MemoryPath) -> StoreResult<Option<crate::store::Tree>> {
        Ok(None)
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let Some(ed) = self.enc(dir) else {
            return Err(StoreError::NotFound { path: dir.clone() });
        };
        let entries = self
            .inner
            .list(&ed)
            .map_err(|e| self.outer(e, &[(&ed, dir)]))?;
        let mut out = Vec::with_capacity(entries.len());
        let memo = &self.keys.names.memo;
        let stored_dir = ed.normalized();
        for entry in entries {
            if dir.is_root() && entry.name.starts_with(CONTROL_PREFIX) {
                continue;
            }
            // Remembered by (stored directory, stored name): the stored
            // directory names the plaintext one, so a hit is the name
            // this key decrypts there, already checked.
            let name = match memo.name(&stored_dir, &entry.name) {
                Some(name) => name,
                None => {
                    let name = self
                        .keys
                        .names
                        .decrypt(dir, &entry.name)
                        .filter(|n| dir.is_valid_child(n))
                        // SPEC §7: an entry that is not ours is reported,
                        // never skipped.
                        .ok_or_else(|| StoreError::Integrity { path: dir.clone() })?;
                    memo.put_name(&stored_dir, &entry.name, name.clone());
                    name
                }
            };
            let len = match entry.kind {
                EntryKind::File => entry.len.saturating_sub(OVERHEAD),
                EntryKind::Directory => entry.len,
            };
            out.push(DirEntry { name, len, ..entry });
        }
        Ok(out)
    }

    fn delete(&self, path: &MemoryPath) -> StoreResult<()> {
        self.guarded(path, || {
            let Some(ep) = self.enc(path) else {
                return Err(StoreError::NotFound { path: path.clone() });
            };
            self.inner
                .delete(&ep)
                .map_err(|e| self.outer(e, &[(&ep, path)]))
        })
    }

    fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        self.move_entry(from, to)
    }

    fn update(
        &self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.guarded(path, || {
            let Some(ep) = self.enc(path) else {
                return Err(StoreError::NotFound { path: path.clone() });
            };
            self.check_rotation(path)?;
            let mut failure: Option<StoreError> = None;
            let mut written: Option<Vec<u8>> = None;
            let result = self
                .inner
                .update(&ep, limit.saturating_add(OVERHEAD), &mut |sealed| {
                    let plain = match self.unseal(path, sealed) {
                        Ok(p) => p,
                        Err(e) => {
                            failure = Some(e);
                            return Err(crate::store::Abort);
                        }
                    };
                    let new = change(&plain)?;
                    let resealed = match self.seal(path, &new) {
                        Ok(s) => s,
                        Err(e) => {
                            failure = Some(e);
                            return Err(crate::store::Abort);
                        }
                    };
                    written = Some(new);
                    Ok(resealed)
                });
            if let Some(e) = failure {
                return Err(e);
            }
            match result.map_err(|e| self.outer(e, &[(&ep, path)]))? {
                Updated::Aborted => Ok(Updated::Aborted),
                Updated::Written(_) => Ok(Updated::Written(written.unwrap_or_default())),
            }
        })
    }

    fn remove_empty_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        self.guarded(path, || {
            if path.is_root() {
                return Ok(false);
            }
            let Some(ep) = self.enc(path) else {
                return Ok(false);
            };
            self.inner
                .remove_empty_dir(&ep)
                .map_err(|e| self.outer(e, &[(&ep, path)]))
        })
    }

    /// Plaintext bytes: each file's stored length less the seal's fixed
    /// overhead, the wrapper's own files left out.
    fn total_size(&self) -> StoreResult<u64> {
        Ok(self.totals(&MemoryPath::root())?.0)
    }

    /// The cap counts **plaintext** bytes (what the model wrote, what
    /// `total_size` reports). It is checked here and again, atomically, by
    /// the wrapped store: the write goes down as the wrapped store's own
    /// `write_within` with a cap of exactly the stored bytes this check
    /// saw plus the write's, so a concurrent writer (another process) that
    /// changed the scope meanwhile makes it fail, and the check runs again
    /// on the new totals.
    fn write_within(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        self.guarded(path, || {
            check_len(path, data)?;
            self.check_rotation(path)?;
            let ep = self.enc_new(path)?;
            let escope = self.enc_new(quota.scope)?;
            let _serial = self
                .keys
                .quota
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let sealed = self.seal(path, data)?;
            let mut last = None;
            for _ in 0..crate::store::UPDATE_ATTEMPTS {
                let existing = self
                    .inner
                    .stat(&ep)
                    .map_err(|e| self.outer(e, &[(&ep, path)]))?;
                let replaced = match (&existing, mode) {
                    (Some(_), WriteMode::Create) => return self.write(path, data, mode),
                    (Some(m), _) if m.kind == EntryKind::File => m.len,
                    _ => 0,
                };
                let (plain, stored) = self.totals(quota.scope)?;
                let after = plain
                    .saturating_sub(replaced.saturating_sub(OVERHEAD))
                    .saturating_add(data.len() as u64);
                check_quota(path, after, quota)?;
                let cap = Quota {
                    scope: &escope,
                    max_bytes: stored
                        .saturating_sub(replaced)
                        .saturating_add(sealed.len() as u64),
                };
                match self.inner.write_within(&ep, &sealed, mode, cap) {
                    Err(StoreError::StoreFull { .. }) => last = Some(after),
                    other => {
                        return other
                            .map_err(|e| self.outer(e, &[(&ep, path), (&escope, quota.scope)]));
                    }
                }
            }
            Err(StoreError::StoreFull {
                path: path.clone(),
                total: last.unwrap_or(0),
                limit: quota.max_bytes,
            })
        })
    }

    /// The compare-and-swap loop over this wrapper's `write_within`.
    fn update_within(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.guarded(path, || {
            for _ in 0..crate::store::UPDATE_ATTEMPTS {
                let file = self.read_plain(path, limit)?;
                let Ok(new) = change(&file.data) else {
                    return Ok(Updated::Aborted);
                };
                match self.write_within(path, &new, WriteMode::Update(file.version), quota) {
                    Ok(_) => return Ok(Updated::Written(new)),
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(StoreError::Conflict { path: path.clone() })
        })
    }

    fn delete_file_if(
        &self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        self.guarded(path, || {
            let Some(ep) = self.enc(path) else {
                return Ok(false);
            };
            self.inner
                .delete_file_if(&ep, &mut |m| still(&Self::plain_meta(m.clone())))
                .map_err(|e| self.outer(e, &[(&ep, path)]))
        })
    }

    /// The wrapped store's lock, as its `rename` holds it; where the
    /// wrapped store locks its writers, a move a killed process left is
    /// finished first (as before every encrypted write), so what `f` looks
    /// at is never a half-moved tree (a history writer checking another
    /// writer's rename versions against the store keeps those of a move
    /// that is then finished).
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut() -> StoreResult<()>,
    ) -> StoreResult<()> {
        let stored = self.enc(path).unwrap_or_else(MemoryPath::root);
        self.inner
            .exclusive(&stored, &mut || {
                self.finish_pending_locked(path)?;
                f()
            })
            .map_err(|e| self.outer(e, &[(&stored, path)]))
    }

    fn locks_writers(&self) -> bool {
        self.inner.locks_writers()
    }
}
