//! [`MemoryStore`] for [`EncryptedStore`]: each primitive encrypts its
//! paths and seals its contents on the way in, and opens them on the way
//! out.

use std::sync::PoisonError;

use super::read::{check_len, normalized};
use super::record::CONTROL_PREFIX;
use super::seal::{self, OVERHEAD};
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::retry;
use crate::store::{
    Change, Context, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader, Lock,
    MemoryStore, Metadata, Quota, RenameOptions, StoreError, StoreResult, UPDATE_ATTEMPTS,
    UpdateOptions, Updated, Version, WriteMode, WriteOptions,
};

impl<S: MemoryStore> EncryptedStore<S> {
    /// Runs a change under the wrapped store's write lock, after
    /// finishing any move a killed process left (see
    /// [`finish_pending_locked`](Self::finish_pending_locked)), where the
    /// wrapped store has such a lock; else as it is.
    fn guarded<T>(&self, path: &MemoryPath, op: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        let mut op = Some(op);
        let mut out = None;
        self.inner.exclusive(&MemoryPath::root(), &mut |lock| {
            self.finish_pending_locked(path, lock)?;
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

    /// The capped write of [`write_opts`](MemoryStore::write_opts), inside
    /// its guard: `ep` and `sealed` are the stored path and bytes.
    fn write_capped(
        &self,
        path: &MemoryPath,
        ep: &MemoryPath,
        data: &[u8],
        sealed: &[u8],
        options: WriteOptions<'_>,
        quota: Quota<'_>,
    ) -> StoreResult<Version> {
        let WriteOptions { mode, context, .. } = options;
        let escope = self.enc_new(quota.scope)?;
        let _serial = self
            .keys
            .quota
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut last = None;
        for _ in 0..UPDATE_ATTEMPTS {
            let existing = self
                .inner
                .stat(ep)
                .map_err(|e| self.outer(e, &[(ep, path)]))?;
            let replaced = match (&existing, mode) {
                // The wrapped store answers "already exists".
                (Some(_), WriteMode::Create) => {
                    let options = WriteOptions {
                        mode,
                        quota: None,
                        context,
                    };
                    return self
                        .inner
                        .write_opts(ep, sealed, options)
                        .map_err(|e| self.outer(e, &[(ep, path)]));
                }
                (Some(m), _) if m.kind == EntryKind::File => m.len,
                _ => 0,
            };
            let (plain, stored) = self.totals(quota.scope)?;
            let after = plain
                .saturating_sub(replaced.saturating_sub(OVERHEAD))
                .saturating_add(data.len() as u64);
            quota.check(path, after)?;
            let cap = Quota {
                scope: &escope,
                max_bytes: stored
                    .saturating_sub(replaced)
                    .saturating_add(sealed.len() as u64),
            };
            let options = WriteOptions {
                mode,
                quota: Some(cap),
                context,
            };
            match self.inner.write_opts(ep, sealed, options) {
                Err(StoreError::StoreFull { .. }) => last = Some(after),
                other => {
                    return other.map_err(|e| self.outer(e, &[(ep, path), (&escope, quota.scope)]));
                }
            }
        }
        Err(StoreError::StoreFull {
            path: path.clone(),
            total: last.unwrap_or(0),
            limit: quota.max_bytes,
        })
    }

    /// The capped edit of [`update_opts`](MemoryStore::update_opts): the
    /// compare-and-swap loop over this wrapper's capped write.
    fn update_capped(
        &self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        context: Context<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.guarded(path, || {
            retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
                let file = self.read_plain(path, limit)?;
                let Ok(new) = change(&file.data) else {
                    return Ok(Some(Updated::Aborted));
                };
                let options = WriteOptions {
                    mode: WriteMode::Update(file.version),
                    quota: Some(quota),
                    context,
                };
                match self.write_opts(path, &new, options) {
                    Ok(_) => Ok(Some(Updated::Written(new))),
                    Err(StoreError::Conflict { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })?
            .ok_or_else(|| StoreError::Conflict { path: path.clone() })
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
    /// copy. A stored file over [`MAX_FILE_BYTES`](super::read::MAX_FILE_BYTES) (planted: no write
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

    /// A quota counts **plaintext** bytes (what the model wrote, what a
    /// walk of this store totals). It is checked here and again,
    /// atomically, by the wrapped store: the write goes down with a cap
    /// of exactly the stored bytes this check saw plus the write's, so a
    /// concurrent writer (another process) that changed the scope
    /// meanwhile makes it fail, and the check runs again on the new
    /// totals.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.guarded(path, || {
            check_len(path, data)?;
            self.check_rotation(path)?;
            let ep = self.enc_new(path)?;
            let sealed = self.seal(path, data)?;
            match options.quota {
                None => self
                    .inner
                    .write_opts(&ep, &sealed, options)
                    .map_err(|e| self.outer(e, &[(&ep, path)])),
                Some(quota) => self.write_capped(path, &ep, data, &sealed, options, quota),
            }
        })
    }

    /// None: each listed name is decrypted and checked by [`list`](Self::list),
    /// so a walk lists each directory through it.
    fn list_tree(&self, _dir: &MemoryPath) -> StoreResult<Option<crate::store::Tree>> {
        Ok(None)
    }

    /// The inner store's: its own records count too, so the limit only
    /// comes sooner.
    fn max_files(&self) -> Option<u64> {
        self.inner.max_files()
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

    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let DeleteOptions { condition, context } = options;
        self.guarded(path, || {
            if path.is_root() && !matches!(condition, DeleteIf::Exists) {
                return Ok(false);
            }
            let Some(ep) = self.enc(path) else {
                return match condition {
                    DeleteIf::Exists => Err(StoreError::NotFound { path: path.clone() }),
                    _ => Ok(false),
                };
            };
            let result = match condition {
                DeleteIf::FileWhere(still) => {
                    let still = &mut |m: &Metadata| still(&Self::plain_meta(m.clone()));
                    let condition = DeleteIf::FileWhere(still);
                    self.inner
                        .delete_opts(&ep, DeleteOptions { condition, context })
                }
                condition => self
                    .inner
                    .delete_opts(&ep, DeleteOptions { condition, context }),
            };
            result.map_err(|e| self.outer(e, &[(&ep, path)]))
        })
    }

    /// A copy under the new names, then the source deleted, journalled and
    /// under the wrapped store's lock (see `move_entry`).
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _: RenameOptions<'_>,
    ) -> StoreResult<()> {
        self.move_entry(from, to)
    }

    /// Without a quota, the wrapped store's update, sealing in its
    /// closure; with one, the compare-and-swap loop over this wrapper's
    /// capped write.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        let UpdateOptions {
            limit,
            quota,
            context,
        } = options;
        if let Some(quota) = quota {
            return self.update_capped(path, limit, quota, context, change);
        }
        self.guarded(path, || {
            let Some(ep) = self.enc(path) else {
                return Err(StoreError::NotFound { path: path.clone() });
            };
            self.check_rotation(path)?;
            let stored = UpdateOptions {
                limit: limit.saturating_add(OVERHEAD),
                quota: None,
                context,
            };
            let mut failure: Option<StoreError> = None;
            let mut written: Option<Vec<u8>> = None;
            let result = self.inner.update_opts(&ep, stored, &mut |sealed| {
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

    /// The wrapped store's lock, as its `rename` holds it; where the
    /// wrapped store locks its writers, a move a killed process left is
    /// finished first (as before every encrypted write), so what `f` looks
    /// at is never a half-moved tree (a history writer checking another
    /// writer's rename versions against the store keeps those of a move
    /// that is then finished).
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let stored = self.enc(path).unwrap_or_else(MemoryPath::root);
        self.inner
            .exclusive(&stored, &mut |lock| {
                self.finish_pending_locked(path, lock)?;
                f(lock)
            })
            .map_err(|e| self.outer(e, &[(&stored, path)]))
    }
}
