//! `rename` on an encrypted store. A file's content is sealed for its
//! path and a name for its parent, so a move re-seals every file it moves
//! (a copy under the new names, then the old tree deleted) instead of one
//! rename in the wrapped store.
//!
//! That makes a move several steps, so (SPEC §7) it is journalled first:
//! a sealed journal (`_claude-memory-move-<random>`) names the source and
//! the destination; if the process dies part way, the next open finishes
//! the move (copies are idempotent, the source goes last), so afterwards
//! each entry is at its new path only.

use serde::{Deserialize, Serialize};

use super::CryptError;
use super::record::CONTROL_PREFIX;
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk};
use crate::store::{EntryKind, MemoryStore, StoreError, StoreResult, WriteMode};

const JOURNAL_PREFIX: &str = "_claude-memory-move-";
const JOURNAL_CONTEXT: &[u8] = b"claude-memory move journal";

#[derive(Serialize, Deserialize)]
struct Journal {
    from: String,
    to: String,
}

impl<S: MemoryStore> EncryptedStore<S> {
    /// Checks as every store does (SPEC §3 rename), journals, moves.
    pub(crate) fn move_entry(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let Some(kind) = self.stat(from)?.map(|m| m.kind) else {
            return Err(StoreError::NotFound { path: from.clone() });
        };
        if to.is_root() || self.stat(to)?.is_some() {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        for ancestor in to.ancestors().skip(1) {
            if let Some(m) = self.stat(&ancestor)?
                && m.kind == EntryKind::File
            {
                return Err(StoreError::ParentNotDirectory {
                    path: to.clone(),
                    parent: ancestor,
                });
            }
        }
        self.enc_new(to)?;
        // Every name below must fit the encrypted limit, and every path
        // the model's limit, before anything moves.
        let mut below = 0usize;
        if kind == EntryKind::Directory {
            walk(self, from, Order::AsListed, &mut |step| {
                let path_len = match step {
                    Step::File { dir, entry, .. } => dir.normalized_len() + 1 + entry.name.len(),
                    Step::Enter { path, .. } | Step::Leave { path, .. } => path.normalized_len(),
                };
                below = below.max(path_len - from.normalized_len());
                Ok(Flow::Continue)
            })?;
        }
        StoreError::check_depth(from, to, below)?;
        let journal = self.write_journal(from, to)?;
        if let Err(e) = self.copy_tree(from, to, WriteMode::Create) {
            // All or nothing (SPEC §7): a copy that failed part way (a
            // full disk, a store gone away) is undone. `to` did not exist
            // before, and nothing of the source is touched yet, so
            // removing `to` restores the store. If even that fails, the
            // journal stays and the next open finishes the move instead,
            // as after a kill.
            if matches!(self.delete(to), Ok(()) | Err(StoreError::NotFound { .. })) {
                let _ = self.inner().delete(&journal);
            }
            return Err(e);
        }
        // The copy is whole. From here the move is only ever finished,
        // never undone: a delete of the source that failed may have
        // removed part of it (a tree half deleted) or all of it (an
        // unlink whose directory sync failed), and removing the copy then
        // would lose those files from both places.
        if let Err(e) = self.delete_source(from)
            && !matches!(self.stat(from), Ok(None))
        {
            // The journal stays: the next open finishes the move.
            return Err(e);
        }
        self.inner()
            .delete(&journal)
            .map_err(|e| self.outer(e, &[(&journal, from)]))
    }

    fn write_journal(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<MemoryPath> {
        // A process whose key is being rotated away writes no journal (it
        // would be sealed under a key the rotation retires).
        self.check_rotation(from)?;
        let backend = |e: CryptError| StoreError::Backend {
            path: from.clone(),
            source: Box::new(e),
        };
        let mut id = [0u8; 8];
        getrandom::getrandom(&mut id).map_err(|e| backend(CryptError::Random(e.to_string())))?;
        let name = format!("{JOURNAL_PREFIX}{}", super::record::hex_encode(&id));
        let path = MemoryPath::root()
            .join(&name)
            .ok_or_else(|| StoreError::Invalid {
                path: from.clone(),
                reason: "journal name",
            })?;
        let body = serde_json::to_vec(&Journal {
            from: from.normalized(),
            to: to.normalized(),
        })
        .map_err(|e| StoreError::Backend {
            path: from.clone(),
            source: Box::new(e),
        })?;
        let sealed = self.keys().sealers[0]
            .seal(&body, &self.journal_context(&name))
            .map_err(backend)?;
        self.inner()
            .write(&path, &sealed, WriteMode::Create)
            .map_err(|e| self.outer(e, &[(&path, from)]))?;
        Ok(path)
    }

    /// Copies every file below `from` (or `from` itself) to the same place
    /// below `to`, re-sealed, and moves empty directories; `from`'s files
    /// stay.
    fn copy_tree(&self, from: &MemoryPath, to: &MemoryPath, mode: WriteMode) -> StoreResult<()> {
        let Some(meta) = self.stat(from)? else {
            return Ok(());
        };
        let map = |p: &MemoryPath| -> Option<MemoryPath> {
            let mut out = to.clone();
            for c in &p.components()[from.components().len()..] {
                out = out.join(c)?;
            }
            Some(out)
        };
        let mut files = Vec::new();
        let mut empty_dirs = Vec::new();
        if meta.kind == EntryKind::File {
            files.push(from.clone());
        } else {
            let mut children: Vec<usize> = Vec::new();
            walk(self, from, Order::AsListed, &mut |step| {
                match step {
                    Step::Enter { .. } => children.push(0),
                    Step::File { dir, entry, .. } => {
                        if let Some(c) = children.last_mut() {
                            *c += 1;
                        }
                        if let Some(p) = dir.join(&entry.name) {
                            files.push(p);
                        }
                    }
                    Step::Leave { path, .. } => {
                        if children.pop() == Some(0) {
                            empty_dirs.push(path.clone());
                        }
                        if let Some(c) = children.last_mut() {
                            *c += 1;
                        }
                    }
                }
                Ok(Flow::Continue)
            })?;
        }
        for file in &files {
            let Some(dest) = map(file) else { continue };
            let content = self.read(file, super::read::MAX_FILE_BYTES)?;
            match self.write(&dest, &content.data, mode) {
                Err(StoreError::AlreadyExists { .. }) if mode == WriteMode::Create => {
                    self.write(&dest, &content.data, WriteMode::Overwrite)?;
                }
                other => {
                    other?;
                }
            }
        }
        for dir in &empty_dirs {
            let Some(dest) = map(dir) else { continue };
            if self.stat(&dest)?.is_some() {
                continue;
            }
            let (Some(es), Some(ed)) = (self.enc(dir), self.enc(&dest)) else {
                continue;
            };
            self.inner()
                .rename(&es, &ed)
                .map_err(|e| self.outer(e, &[(&es, dir), (&ed, &dest)]))?;
        }
        Ok(())
    }

    /// The last step of a move: the source goes (already gone is done).
    fn delete_source(&self, from: &MemoryPath) -> StoreResult<()> {
        match self.delete(from) {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// What a journal is sealed for: its own file name and this store's
    /// name key (through a name it encrypts), so a journal copied from
    /// another store made with the same key, or renamed, fails its check
    /// instead of moving this store's files.
    fn journal_context(&self, name: &str) -> Vec<u8> {
        let store = self
            .keys()
            .names
            .encrypt(&MemoryPath::root(), "move journal")
            .unwrap_or_default();
        [
            JOURNAL_CONTEXT,
            b"\0",
            name.as_bytes(),
            b"\0",
            store.as_bytes(),
        ]
        .concat()
    }

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
            let stored = match self.inner().read(&path, 1 << 16) {
                Ok(f) => f,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(CryptError::Store(e)),
            };
            let id = super::seal::key_id_of(&stored.data);
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

    /// Finishes every move a killed process left journalled.
    pub(crate) fn recover_moves(&self) -> Result<(), CryptError> {
        let root = MemoryPath::root();
        let entries = self.inner().list(&root).map_err(CryptError::Store)?;
        for entry in entries {
            if !entry.name.starts_with(JOURNAL_PREFIX) || !entry.name.starts_with(CONTROL_PREFIX) {
                continue;
            }
            let Some(path) = root.join(&entry.name) else {
                continue;
            };
            let sealed = match self.inner().read(&path, 1 << 16) {
                Ok(f) => f.data,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(CryptError::Store(e)),
            };
            let id = super::seal::key_id_of(&sealed);
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
            self.copy_tree(&from, &to, WriteMode::Overwrite)
                .and_then(|()| self.delete_source(&from))
                .map_err(CryptError::Store)?;
            match self.inner().delete(&path) {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(CryptError::Store(e)),
            }
        }
        Ok(())
    }
}
