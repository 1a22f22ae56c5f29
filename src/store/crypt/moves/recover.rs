//! Moves another process left: journals re-sealed before a key is
//! retired, and moves a killed process left finished under the store's
//! write lock.

use super::*;

impl<S: MemoryStore> EncryptedStore<S> {
    /// Re-seals under the primary key every move journal another (killed,
    /// or still running) process left sealed under another key, so that
    /// retiring that key does not leave a journal no loaded key opens.
    /// A journal deleted meanwhile (its move finished) stays deleted: the
    /// write is conditional on the version read.
    pub(crate) fn reseal_journals(&self) -> Result<(), CryptError> {
        let primary = self.keys().sealers[0].id();
        let root = MemoryPath::root();
        for entry in self.inner().list(&root).map_err(CryptError::Store)? {
            if !entry.name.starts_with(JOURNAL_PREFIX) {
                continue;
            }
            let Some(path) = root.join(&entry.name) else {
                continue;
            };
            let stored = match self.inner().read(&path, JOURNAL_MAX_BYTES) {
                Ok(f) => f,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(CryptError::Store(e)),
            };
            let id = crate::store::crypt::seal::key_id_of(&stored.data);
            if id == Some(primary) {
                continue;
            }
            let context = self.journal_context(&entry.name);
            // One no loaded key opens is left for the open to report.
            let Some(body) = self
                .keys()
                .sealers
                .iter()
                .find(|s| Some(s.id()) == id)
                .and_then(|s| s.open(&stored.data, &context))
            else {
                continue;
            };
            let sealed = self.keys().sealers[0].seal(&body, &context)?;
            match self
                .inner()
                .write(&path, &sealed, WriteMode::Update(stored.version))
            {
                Ok(_) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                Err(e) => return Err(CryptError::Store(e)),
            }
        }
        Ok(())
    }

    /// Where the wrapped store locks its writers and holds the lock now:
    /// finishes a move a killed process left, before a change is made to
    /// a tree it may have half moved (an edit of a half-made copy would
    /// otherwise meet the finished move later). One `stat` when there is
    /// none. `path` names the change in an error.
    pub(crate) fn finish_pending_locked(&self, path: &MemoryPath, lock: Lock) -> StoreResult<()> {
        if lock == Lock::Absent || self.keys().moving.load(Ordering::Relaxed) {
            return Ok(());
        }
        let Some(journal) = MemoryPath::root().join(LOCKED_JOURNAL) else {
            return Ok(());
        };
        if self.inner().stat(&journal)?.is_none() {
            return Ok(());
        }
        self.recover_locked(lock).map(|_| ()).map_err(|e| match e {
            CryptError::Store(e) => e,
            e => StoreError::Backend {
                path: path.clone(),
                source: Box::new(e),
            },
        })
    }

    /// Finishes every move a killed process left journalled, under the
    /// wrapped store's write lock (no writer runs meanwhile). What cannot
    /// be moved (see [`copy_tree`](Self::copy_tree)) stays at its old
    /// path, and so does the journal, so a later open finishes the move
    /// once the damaged or planted entry is gone; the store opens either
    /// way. Returns how many entries were left.
    pub(crate) fn recover_moves(&self) -> Result<usize, CryptError> {
        let root = MemoryPath::root();
        let mut result = Ok(0);
        self.inner()
            .exclusive(&root, &mut |lock| {
                result = self.recover_locked(lock);
                Ok(())
            })
            .map_err(CryptError::Store)?;
        result
    }

    fn recover_locked(&self, lock: Lock) -> Result<usize, CryptError> {
        let _moving = Moving::start(self.keys());
        let root = MemoryPath::root();
        let entries = self.inner().list(&root).map_err(CryptError::Store)?;
        let locked = lock == Lock::Held;
        let mut left = 0;
        for entry in entries {
            if !entry.name.starts_with(JOURNAL_PREFIX) || !entry.name.starts_with(CONTROL_PREFIX) {
                continue;
            }
            let live = entry
                .modified
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age < JOURNAL_LEASE);
            if !locked && live {
                continue;
            }
            let Some(path) = root.join(&entry.name) else {
                continue;
            };
            let sealed = match self.inner().read(&path, JOURNAL_MAX_BYTES) {
                Ok(f) => f.data,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(CryptError::Store(e)),
            };
            let id = crate::store::crypt::seal::key_id_of(&sealed);
            let body = self
                .keys()
                .sealers
                .iter()
                .find(|s| Some(s.id()) == id)
                .and_then(|s| s.open(&sealed, &self.journal_context(&entry.name)))
                .ok_or(CryptError::Record(
                    "a move journal failed its integrity check",
                ))?;
            let journal: Journal = serde_json::from_slice(&body)
                .map_err(|_| CryptError::Record("a move journal is not valid"))?;
            let (Some(from), Some(to)) = (
                MemoryPath::from_stored(&journal.from),
                MemoryPath::from_stored(&journal.to),
            ) else {
                return Err(CryptError::Record("a move journal names an invalid path"));
            };
            let only = match &journal.only {
                None => None,
                Some(paths) => Some(
                    paths
                        .iter()
                        .map(|p| MemoryPath::from_stored(p))
                        .collect::<Option<Vec<_>>>()
                        .ok_or(CryptError::Record("a move journal names an invalid path"))?,
                ),
            };
            let mut copied = Copied::default();
            self.copy_tree(&from, &to, Copying::Finishing, only.as_deref(), &mut copied)
                .and_then(|()| self.delete_moved(&from, &copied, only.is_some()))
                .map_err(CryptError::Store)?;
            if !copied.left.is_empty() {
                left += copied.left.len();
                // Best effort: where the aside copy cannot be written (a
                // full disk) the journal stays at the fixed name, taken up
                // again by the next write, rather than this write (maybe a
                // delete freeing room) being refused for it.
                if entry.name == LOCKED_JOURNAL {
                    let _ = self.set_aside(&path, &journal, &copied.left);
                }
                continue;
            }
            match self.inner().delete(&path) {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(CryptError::Store(e)),
            }
        }
        Ok(left)
    }
}
