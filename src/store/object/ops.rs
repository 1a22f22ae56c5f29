//! The [`MemoryStore`] primitives over the bucket.
//!
//! Round trips are what cost on a bucket (10-50 ms each), so each
//! primitive sends the fewest requests it can and sends independent ones
//! together: a `stat` is a HEAD of the file and a one-key LIST below it at
//! once; a view of a file is one GET; an edit is a GET and a conditional
//! PUT; a listing is one delimited LIST per 1,000 entries, never a HEAD
//! per entry.

use std::io::Read;
use std::sync::Arc;

use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::errors::Sent;
use super::intent;
use super::listing::{any_below, bytes_below, children};
use super::{CloudStore, cond, keys};
use crate::path::MemoryPath;
use crate::store::retry;
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader, Lock,
    MemoryStore, Metadata, RenameOptions, StoreError, StoreResult, UpdateOptions, Updated, Version,
    WriteMode, WriteOptions,
};

/// What is at a path: a file (with its object's metadata), a directory,
/// or nothing.
enum Found {
    File(object_store::ObjectMeta),
    Dir,
    Nothing,
}

impl CloudStore {
    pub(super) fn bucket(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }

    /// HEAD of the file and a one-key LIST below it, together.
    fn find(&self, path: &MemoryPath) -> StoreResult<Found> {
        if path.is_root() {
            return Ok(Found::Dir);
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        self.call(path, Sent::Read, async move {
            let head = store.head(&key);
            let below = any_below(Arc::clone(&store), key.clone());
            let (head, below) = futures_util::join!(head, below);
            if below? {
                return Ok(Found::Dir);
            }
            match head {
                Ok(meta) => Ok(Found::File(meta)),
                Err(object_store::Error::NotFound { .. }) => Ok(Found::Nothing),
                Err(e) => Err(e),
            }
        })
    }

    /// Whether the directory at `path` exists (the root always does).
    fn is_dir(&self, path: &MemoryPath) -> StoreResult<bool> {
        if path.is_root() {
            return Ok(true);
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        self.call(path, Sent::Read, any_below(store, key))
    }

    /// Checks that `path`'s parent is a directory or can become one: no
    /// ancestor is a file. One LIST when the parent exists (the common
    /// case), else a HEAD of each ancestor, together.
    pub(super) fn check_parents(&self, path: &MemoryPath) -> StoreResult<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        if self.is_dir(&parent)? {
            return Ok(());
        }
        let ancestors: Vec<MemoryPath> = path.ancestors().filter(|a| !a.is_root()).collect();
        let keys: Vec<_> = ancestors.iter().map(|a| self.layout.key(a)).collect();
        let store = self.bucket();
        let files = self.call(path, Sent::Read, async move {
            let heads = keys.iter().map(|k| store.head(k));
            let mut out = Vec::new();
            for r in futures_util::future::join_all(heads).await {
                match r {
                    Ok(_) => out.push(true),
                    Err(object_store::Error::NotFound { .. }) => out.push(false),
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        })?;
        match files.iter().position(|f| *f) {
            Some(i) => Err(StoreError::parent_not_directory(path, i + 1)),
            None => Ok(()),
        }
    }

    /// One PUT in `mode`.
    fn put(&self, path: &MemoryPath, data: &[u8], mode: PutMode) -> StoreResult<Version> {
        let (store, key) = (self.bucket(), self.layout.key(path));
        let payload = PutPayload::from(data.to_vec());
        let put = self.call(path, Sent::Write, async move {
            store.put_opts(&key, payload, PutOptions::from(mode)).await
        });
        put.map(|r| cond::put_version(&r))
    }

    /// GET of a file of at most `limit` bytes, with its object metadata.
    fn get(
        &self,
        path: &MemoryPath,
        limit: u64,
    ) -> StoreResult<(Vec<u8>, object_store::ObjectMeta)> {
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        let got = self.call(path, Sent::Read, async move {
            let r = match store.get(&key).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let meta = r.meta.clone();
            if meta.size > limit {
                return Ok(Some(Err(meta.size)));
            }
            Ok(Some(Ok((r.bytes().await?.to_vec(), meta))))
        })?;
        match got {
            Some(Ok(pair)) => Ok(pair),
            Some(Err(len)) => Err(StoreError::TooLarge {
                path: path.clone(),
                len,
            }),
            None if self.is_dir(path)? => Err(StoreError::IsADirectory { path: path.clone() }),
            None => Err(StoreError::NotFound { path: path.clone() }),
        }
    }

    /// `write`, after the quota check if any.
    fn write_checked(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
    ) -> StoreResult<Version> {
        if path.is_root() {
            return Err(StoreError::write_to_root(path, mode));
        }
        if self.is_dir(path)? {
            return Err(match mode {
                WriteMode::Create => StoreError::AlreadyExists { path: path.clone() },
                _ => StoreError::IsADirectory { path: path.clone() },
            });
        }
        self.check_parents(path)?;
        match mode {
            WriteMode::Create => self.put(path, data, PutMode::Create),
            WriteMode::Overwrite => self.put(path, data, PutMode::Overwrite),
            WriteMode::Update(expected) => {
                let meta = match self.find(path)? {
                    Found::File(meta) => meta,
                    Found::Dir => return Err(StoreError::IsADirectory { path: path.clone() }),
                    Found::Nothing => return Err(StoreError::NotFound { path: path.clone() }),
                };
                if cond::meta_version(&meta) != expected {
                    return Err(StoreError::Conflict { path: path.clone() });
                }
                self.put(path, data, PutMode::Update(cond::condition(&meta)))
            }
        }
    }

    /// Holds the store size lease around `f`.
    fn with_quota_lock<T>(
        &self,
        path: &MemoryPath,
        f: impl FnOnce() -> StoreResult<T>,
    ) -> StoreResult<T> {
        let (store, key) = (self.bucket(), self.layout.own(keys::QUOTA_LOCK));
        let lease = self.settings.lease_for_locks();
        let mut acquired = false;
        for attempt in 0..cond::ATTEMPTS * 4 {
            let (store, key) = (Arc::clone(&store), key.clone());
            let taken = self.call(path, Sent::Write, async move {
                match intent::create(&store, &key, intent::nonce().into_bytes()).await {
                    Ok(()) => Ok(true),
                    // A lease left by a dead process is taken over by a
                    // write on its ETag: of two that find it stale, one
                    // takes it (deleting it would let both in).
                    Err(object_store::Error::AlreadyExists { .. }) => {
                        match store.head(&key).await {
                            Ok(m) if intent::stale(m.last_modified.into(), lease) => {
                                intent::take_over(&store, &m, intent::nonce().into_bytes()).await
                            }
                            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(false),
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                }
            })?;
            if taken {
                acquired = true;
                break;
            }
            cond::backoff(attempt.min(3));
        }
        if !acquired {
            return Err(StoreError::Conflict { path: path.clone() });
        }
        let result = f();
        let (store, key) = (self.bucket(), key);
        let released = self.call(path, Sent::Write, async move { store.delete(&key).await });
        match (result, released) {
            (Ok(v), Ok(())) => Ok(v),
            (Err(e), _) => Err(e),
            // The write happened; a lease left behind expires.
            (Ok(v), Err(_)) => Ok(v),
        }
    }

    fn bytes_in(&self, path: &MemoryPath, scope: &MemoryPath) -> StoreResult<u64> {
        let (store, key) = (self.bucket(), self.layout.key(scope));
        self.call(path, Sent::Read, bytes_below(store, key))
    }
}

/// A streaming view of an object: chunks are pulled through the I/O
/// thread as the caller reads, so a huge object is never held whole.
struct ChunkReader {
    io: super::Io,
    stream: Option<futures_util::stream::BoxStream<'static, object_store::Result<Vec<u8>>>>,
    buf: Vec<u8>,
    at: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.buf.len() {
            let Some(mut stream) = self.stream.take() else {
                return Ok(0);
            };
            let next = self
                .io
                .run(async move {
                    let item = stream.next().await;
                    (item, stream)
                })
                .ok_or_else(|| std::io::Error::other("the cloud store's I/O thread stopped"))?;
            match next {
                (Some(Ok(chunk)), stream) => {
                    self.buf = chunk;
                    self.at = 0;
                    self.stream = Some(stream);
                }
                (Some(Err(e)), _) => return Err(std::io::Error::other(e)),
                (None, _) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[deny(clippy::missing_trait_methods)]
impl MemoryStore for CloudStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.stash.clear();
        Ok(match self.find(path)? {
            Found::Dir => Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            }),
            Found::File(meta) => Some(Metadata {
                kind: EntryKind::File,
                len: meta.size,
                modified: Some(meta.last_modified.into()),
            }),
            Found::Nothing => None,
        })
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.stash.clear();
        let (data, meta) = self.get(path, limit)?;
        Ok(FileContent {
            data,
            version: cond::meta_version(&meta),
        })
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        self.stash.clear();
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        let got = self.call(path, Sent::Read, async move {
            match store.get(&key).await {
                Ok(r) => {
                    let len = r.meta.size;
                    let stream = r.into_stream().map(|b| b.map(|b| b.to_vec())).boxed();
                    Ok(Some((len, stream)))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        match got {
            Some((len, stream)) => Ok(FileReader {
                len,
                reader: Box::new(ChunkReader {
                    io: self.io.clone(),
                    stream: Some(stream),
                    buf: Vec::new(),
                    at: 0,
                }),
            }),
            None => {
                // Is a directory there? The delimited listing answers, and
                // is kept for the `list` a view sends next.
                let (store, key) = (self.bucket(), self.layout.key(path));
                let listed = self.call(path, Sent::Read, children(store, key.clone()))?;
                if !listed.exists {
                    return Err(StoreError::NotFound { path: path.clone() });
                }
                self.stash.keep(key, listed);
                Err(StoreError::IsADirectory { path: path.clone() })
            }
        }
    }

    /// With a quota: the scope is totalled and written under the quota
    /// lease, so writers with quotas never overshoot it together.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.stash.clear();
        self.settle(path)?;
        let WriteOptions { mode, quota, .. } = options;
        let Some(quota) = quota else {
            return self.write_checked(path, data, mode);
        };
        self.with_quota_lock(path, || {
            let replaced = match (self.find(path)?, mode) {
                (Found::File(_) | Found::Dir, WriteMode::Create) => {
                    return Err(StoreError::AlreadyExists { path: path.clone() });
                }
                (Found::File(meta), _) => meta.size,
                _ => 0,
            };
            let total = self.bytes_in(path, quota.scope)?;
            let after = total
                .saturating_sub(replaced)
                .saturating_add(data.len() as u64);
            quota.check(path, after)?;
            self.write_checked(path, data, mode)
        })
    }

    /// None: a walk lists each directory (one request each, as a
    /// listing of the whole prefix would page through every object).
    fn list_tree(&self, _dir: &MemoryPath) -> StoreResult<Option<crate::store::Tree>> {
        Ok(None)
    }

    /// A bucket holds any number of objects.
    fn max_files(&self) -> Option<u64> {
        None
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let (store, key) = (self.bucket(), self.layout.key(dir));
        let listed = match self.stash.take(&key) {
            Some(kept) => kept,
            None => {
                self.settle(dir)?;
                self.call(dir, Sent::Read, children(store, key))?
            }
        };
        if listed.exists || dir.is_root() {
            return Ok(listed.entries);
        }
        match self.find(dir)? {
            Found::File(_) => Err(StoreError::NotADirectory { path: dir.clone() }),
            _ => Err(StoreError::NotFound { path: dir.clone() }),
        }
    }

    /// An empty directory's marker goes only if a listing finds nothing
    /// below it; a file goes only if a `stat` just before the delete
    /// satisfies the condition (a bucket has no conditional delete, so a
    /// writer can still change the file in between).
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let condition = options.condition;
        self.stash.clear();
        if path.is_root() {
            return match condition {
                DeleteIf::Exists => Err(StoreError::delete_root(path)),
                _ => Ok(false),
            };
        }
        match condition {
            DeleteIf::Exists => {
                self.settle(path)?;
                self.delete_entry(path).map(|()| true)
            }
            DeleteIf::EmptyDir => {
                let (store, key) = (self.bucket(), self.layout.key(path));
                let listed = self.call(path, Sent::Read, children(store, key))?;
                if !listed.exists || !listed.entries.is_empty() {
                    return Ok(false);
                }
                let (store, layout, path2) = (self.bucket(), self.layout.clone(), path.clone());
                self.call(path, Sent::Write, async move {
                    intent::keep_parent(&store, &layout, &path2).await?;
                    store.delete(&layout.marker(&path2)).await
                })?;
                Ok(true)
            }
            DeleteIf::FileWhere(still) => {
                match self.stat(path)? {
                    Some(m) if m.kind == EntryKind::File && still(&m) => {}
                    _ => return Ok(false),
                }
                self.settle(path)?;
                match self.delete_entry(path) {
                    Ok(()) => Ok(true),
                    Err(StoreError::NotFound { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _: RenameOptions<'_>,
    ) -> StoreResult<()> {
        self.stash.clear();
        self.rename_entry(from, to)
    }

    /// A GET and a conditional PUT, again on a conflict; with a quota,
    /// under the quota lease.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        self.stash.clear();
        self.settle(path)?;
        let mut edit = || {
            retry::until_swapped(cond::ATTEMPTS, cond::BACKOFF, || {
                let (data, meta) = self.get(path, options.limit)?;
                let Ok(new) = change(&data) else {
                    return Ok(Some(Updated::Aborted));
                };
                if let Some(quota) = options.quota {
                    let total = self.bytes_in(path, quota.scope)?;
                    let after = total
                        .saturating_sub(meta.size)
                        .saturating_add(new.len() as u64);
                    quota.check(path, after)?;
                }
                match self.put(path, &new, PutMode::Update(cond::condition(&meta))) {
                    Ok(_) => Ok(Some(Updated::Written(new))),
                    // Changed (or deleted) since the read: read again.
                    Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            })?
            .ok_or_else(|| StoreError::Conflict { path: path.clone() })
        };
        match options.quota {
            Some(_) => self.with_quota_lock(path, edit),
            None => edit(),
        }
    }

    /// No lock: a bucket has none that its writers share (each write is
    /// conditional instead), so `f` runs with none.
    fn exclusive(
        &self,
        path: &MemoryPath,
        f: &mut dyn FnMut(Lock) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let _ = path;
        f(Lock::Absent)
    }
}
