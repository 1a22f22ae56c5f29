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

mod recover;

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::CryptError;
use super::record::CONTROL_PREFIX;
use super::store::EncryptedStore;
use crate::path::MemoryPath;
use crate::store::walk::{Flow, Order, Step, walk, walk_skipping_unlistable};
use crate::store::{
    EntryKind, Lock, MemoryStore, MemoryStoreExt, StoreError, StoreResult, WriteMode,
};

const JOURNAL_PREFIX: &str = "_claude-memory-move-";
/// The journal's name where the wrapped store locks its writers (moves
/// are then one at a time, so one name does, and a writer finds a move a
/// killed process left with one `stat`).
const LOCKED_JOURNAL: &str = "_claude-memory-move-0";
const JOURNAL_CONTEXT: &[u8] = b"claude-memory move journal";
/// The most of a journal that is read: a larger one is refused (planted).
const JOURNAL_MAX_BYTES: u64 = 1 << 16;

/// On a store without a writer lock, a journal younger than this may be
/// another process's move in progress: an open leaves it to that process
/// (finishing it under the mover made the mover's own copies fail with
/// "already exists"); an older one was left by a killed process.
const JOURNAL_LEASE: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
struct Journal {
    from: String,
    to: String,
    /// Set when finishing left entries behind (see `set_aside`): the
    /// source paths left, the only ones a later finish moves (files or
    /// directories, with what is below them), so a file made in the
    /// source since is not moved. Absent: the whole of `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    only: Option<Vec<String>>,
}

/// How a tree is copied: by a live move (every destination new: one that
/// exists was made by a writer that takes no lock, and stops the move), or
/// when a move a killed process left is finished at open (a destination
/// that exists is the move's own copy, or a newer edit of it: it is kept).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Copying {
    Live,
    Finishing,
}

/// What a copy did, to undo it (a live move that failed) or to finish it.
#[derive(Default)]
struct Copied {
    /// Destination files this copy wrote.
    written: Vec<MemoryPath>,
    /// Source files whose content is now at the destination, to delete.
    moved: Vec<MemoryPath>,
    /// Empty directories renamed: (source, destination).
    dirs: Vec<(MemoryPath, MemoryPath)>,
    /// Source entries left where they are (finishing only): unreadable,
    /// damaged, planted, or different from a destination that exists.
    left: Vec<MemoryPath>,
}

/// Marks a handle as moving (see `Keys::moving`) until dropped, also when
/// the move unwinds.
struct Moving<'a>(&'a super::store::Keys);

impl<'a> Moving<'a> {
    fn start(keys: &'a super::store::Keys) -> Self {
        keys.moving.store(true, Ordering::Relaxed);
        Moving(keys)
    }
}

impl Drop for Moving<'_> {
    fn drop(&mut self) {
        self.0.moving.store(false, Ordering::Relaxed);
    }
}

impl<S: MemoryStore> EncryptedStore<S> {
    /// Checks as every store does (SPEC §3 rename), journals, moves: all
    /// under the wrapped store's write lock
    /// ([`MemoryStore::exclusive`]), so on a store that has one (the
    /// filesystem store) no other writer, in any process, sees or edits
    /// the half-moved tree.
    pub(crate) fn move_entry(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let stored = self.enc(from).unwrap_or_else(MemoryPath::root);
        let mut result = Ok(());
        self.inner()
            .exclusive(&stored, &mut |lock| {
                result = self.move_locked(from, to, lock);
                Ok(())
            })
            .map_err(|e| self.outer(e, &[(&stored, from)]))?;
        result
    }

    fn move_locked(&self, from: &MemoryPath, to: &MemoryPath, lock: Lock) -> StoreResult<()> {
        self.finish_pending_locked(from, lock)?;
        let _moving = Moving::start(self.keys());
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
        let journal = self.write_journal(from, to, lock)?;
        let mut copied = Copied::default();
        if let Err(e) = self.copy_tree(from, to, Copying::Live, None, &mut copied) {
            // All or nothing (SPEC §7): a copy that failed part way (a
            // full disk, a store gone away, a destination another writer
            // made) is undone: what it wrote goes, and nothing else (not
            // a file another writer put below `to`). Nothing of the
            // source is touched yet. If the undo fails too, the journal
            // stays and the next open finishes the move instead, as after
            // a kill.
            if self.undo_copy(to, &copied) {
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

    /// Moves a journal that finishing left (something could not be
    /// moved) from the fixed name to a name of its own, re-sealed for it
    /// and listing only the entries `left` (a later finish moves those,
    /// not a file the model made in the source since),
    /// so that the next open still takes it up but the writes of this
    /// process do not: each write finishes only the fixed name's journal,
    /// and taking a left one up again at every write would move files the
    /// model made in the left source since (a create answered at one path,
    /// then found at another), and would keep the fixed name taken, so
    /// every later rename would fail its journal's create as "already
    /// exists". Written before the fixed one goes: a kill between leaves
    /// two journals of one move, and finishing it twice does nothing more.
    fn set_aside(
        &self,
        fixed: &MemoryPath,
        journal: &Journal,
        left: &[MemoryPath],
    ) -> Result<(), CryptError> {
        let mut body = serde_json::to_vec(&Journal {
            from: journal.from.clone(),
            to: journal.to.clone(),
            only: Some(left.iter().map(MemoryPath::normalized).collect()),
        })
        .map_err(|_| CryptError::Record("a move journal is not valid"))?;
        // A list too long to be read back (many deep entries left) would
        // stop the store opening: the journal then names the whole source
        // again, as a live move's does.
        if body.len() as u64 + super::seal::OVERHEAD > JOURNAL_MAX_BYTES {
            body = serde_json::to_vec(&Journal {
                from: journal.from.clone(),
                to: journal.to.clone(),
                only: None,
            })
            .map_err(|_| CryptError::Record("a move journal is not valid"))?;
        }
        let mut id = [0u8; 8];
        getrandom::getrandom(&mut id).map_err(|e| CryptError::Random(e.to_string()))?;
        let name = format!("{JOURNAL_PREFIX}{}", super::record::hex_encode(&id));
        let Some(path) = MemoryPath::root().join(&name) else {
            return Err(CryptError::Record("a move journal's name is not valid"));
        };
        let sealed = self.keys().sealers[0].seal(&body, &self.journal_context(&name))?;
        self.inner()
            .write(&path, &sealed, WriteMode::Create)
            .map_err(CryptError::Store)?;
        match self.inner().delete(fixed) {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(CryptError::Store(e)),
        }
    }

    fn write_journal(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        lock: Lock,
    ) -> StoreResult<MemoryPath> {
        // A process whose key is being rotated away writes no journal (it
        // would be sealed under a key the rotation retires).
        self.check_rotation(from)?;
        let backend = |e: CryptError| StoreError::Backend {
            path: from.clone(),
            source: Box::new(e),
        };
        let name = if lock == Lock::Held {
            LOCKED_JOURNAL.to_owned()
        } else {
            // No lock: moves may run at once, each with its own journal.
            let mut id = [0u8; 8];
            getrandom::getrandom(&mut id)
                .map_err(|e| backend(CryptError::Random(e.to_string())))?;
            format!("{JOURNAL_PREFIX}{}", super::record::hex_encode(&id))
        };
        let path = MemoryPath::root()
            .join(&name)
            .ok_or_else(|| StoreError::Invalid {
                path: from.clone(),
                reason: "journal name",
            })?;
        let body = serde_json::to_vec(&Journal {
            from: from.normalized(),
            to: to.normalized(),
            only: None,
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
    /// stay. What it did is in `copied`, also when it fails.
    ///
    /// Live, the first failure stops it. Finishing, an entry that cannot
    /// be read (damaged, planted, over the size bound), a directory that
    /// cannot be listed, or a destination that cannot be written (a
    /// planted link) is left where it is and counted; so is a source file
    /// whose destination exists with other content (an edit made to the
    /// copy after the kill: both stay, nothing is lost). Only failures of
    /// the store itself stop it.
    fn copy_tree(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        how: Copying,
        only: Option<&[MemoryPath]>,
        copied: &mut Copied,
    ) -> StoreResult<()> {
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
            let visit = &mut |step: Step<'_>| {
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
            };
            match how {
                Copying::Live => walk(self, from, Order::AsListed, visit)?,
                Copying::Finishing => {
                    if walk_skipping_unlistable(self, from, Order::AsListed, visit).is_err() {
                        // The source itself cannot be listed: all of it
                        // stays, the journal too.
                        copied.left.push(from.clone());
                        return Ok(());
                    }
                }
            }
        }
        if let Some(only) = only {
            let listed = |p: &MemoryPath| {
                only.iter()
                    .any(|o| p.components().starts_with(o.components()))
            };
            files.retain(|f| listed(f));
            empty_dirs.retain(|d| listed(d));
        }
        for file in &files {
            let Some(dest) = map(file) else { continue };
            let content = match self.read(file, super::read::MAX_FILE_BYTES) {
                Ok(c) => c,
                Err(e) if how == Copying::Live => return Err(e),
                Err(_) => {
                    copied.left.push(file.clone());
                    continue;
                }
            };
            match self.write(&dest, &content.data, WriteMode::Create) {
                Ok(_) => {
                    copied.written.push(dest);
                    copied.moved.push(file.clone());
                }
                Err(e) if how == Copying::Live => return Err(e),
                Err(StoreError::AlreadyExists { .. }) => {
                    // The move's own copy (the kill came after it), or an
                    // edit of that copy since: the source goes only if it
                    // holds nothing the destination does not.
                    match self.read(&dest, super::read::MAX_FILE_BYTES) {
                        Ok(there) if there.data == content.data => copied.moved.push(file.clone()),
                        _ => copied.left.push(file.clone()),
                    }
                }
                Err(_) => copied.left.push(file.clone()),
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
            // Seen empty through this store, but a directory it could not
            // list (a planted name) is not: renaming it would put its
            // stored names under a parent they were not encrypted for.
            match self.inner().list(&es) {
                Ok(entries) if entries.is_empty() => {}
                Ok(_) | Err(_) if how == Copying::Finishing => {
                    copied.left.push(dir.clone());
                    continue;
                }
                Ok(_) => continue,
                Err(e) => return Err(self.outer(e, &[(&es, dir)])),
            }
            match self.inner().rename(&es, &ed) {
                Ok(()) => copied.dirs.push((dir.clone(), dest)),
                Err(e) if how == Copying::Live => {
                    return Err(self.outer(e, &[(&es, dir), (&ed, &dest)]));
                }
                Err(_) => copied.left.push(dir.clone()),
            }
        }
        Ok(())
    }

    /// Undoes a live copy that failed: deletes the files it wrote, moves
    /// the empty directories back, and removes the directories below `to`
    /// (and `to`) that are empty now. Whether all of it went back.
    fn undo_copy(&self, to: &MemoryPath, copied: &Copied) -> bool {
        let mut whole = true;
        for dest in copied.written.iter().rev() {
            whole &= matches!(self.delete(dest), Ok(()) | Err(StoreError::NotFound { .. }));
        }
        for (dir, dest) in copied.dirs.iter().rev() {
            whole &= match (self.enc(dest), self.enc(dir)) {
                (Some(ed), Some(es)) => self.inner().rename(&ed, &es).is_ok(),
                _ => false,
            };
        }
        // The directories the copy made: every ancestor of what it wrote,
        // up to `to`, deepest first; one that holds another writer's file
        // is not empty and stays.
        let mut dirs: Vec<MemoryPath> = copied
            .written
            .iter()
            .flat_map(|w| {
                w.ancestors()
                    .skip(1)
                    .take_while(|a| a.components().len() >= to.components().len())
                    .collect::<Vec<_>>()
            })
            .collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().len()));
        dirs.dedup();
        for dir in &dirs {
            whole &= self.remove_empty_dir(dir).is_ok();
        }
        whole
    }

    /// Deletes the source files a copy moved, then the source's
    /// directories that are empty now, deepest first (all of the source
    /// when nothing was left behind).
    fn delete_moved(&self, from: &MemoryPath, copied: &Copied, partial: bool) -> StoreResult<()> {
        for file in &copied.moved {
            match self.delete(file) {
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if partial || !copied.left.is_empty() {
            let mut dirs: Vec<MemoryPath> = copied
                .moved
                .iter()
                .flat_map(|m| {
                    m.ancestors()
                        .skip(1)
                        .take_while(|a| a.components().len() >= from.components().len())
                        .collect::<Vec<_>>()
                })
                .collect();
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().len()));
            dirs.dedup();
            for dir in &dirs {
                self.remove_empty_dir(dir)?;
            }
            return Ok(());
        }
        self.delete_source(from)
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
}
