//! The tree over the service's flat memories: a memory path's service
//! path, what a listing says is at a path (the directory wins over a
//! memory of its name), and the marker memory [`MARKER`] that keeps an
//! empty directory, written whenever a directory could become empty (a
//! delete or a move out of it). A path is found by listing its parent
//! (`depth=1`), which also says whether it is a directory.

use super::ManagedStore;
use super::api::{Fail, Item, Memory};
use super::ops::fail;
use crate::path::MemoryPath;
use crate::store::{StoreError, StoreResult};

/// The marker memory that keeps an empty directory.
pub(super) const MARKER: &str = ".claude-memory-dir";

/// What a path names.
pub(super) enum Found {
    File(Memory),
    Dir,
    Missing,
}

/// The service's path for a memory path: `/memories/a/b` is `/a/b`.
pub(super) fn key(path: &MemoryPath) -> String {
    let mut s = String::new();
    for c in path.components() {
        s.push('/');
        s.push_str(c);
    }
    s
}

/// Whether a service path is spelled as this store spells one (`/a/b`:
/// one leading slash, no empty segment). Another client may write `//a`
/// or `a`; trimmed, those would land on `/a`, beside the memory that is
/// there: they are skipped instead.
pub(super) fn canonical(service: &str) -> bool {
    service
        .strip_prefix('/')
        .is_some_and(|rest| rest.split('/').all(|c| !c.is_empty()))
}

/// The memory path of a service path, if it spells one exactly.
pub(crate) fn memory_path(service: &str) -> Option<MemoryPath> {
    MemoryPath::from_stored(&format!("{}{service}", crate::path::ROOT)).filter(|p| !p.is_root())
}

/// The listing prefix of a directory: `/a/b/`, or `/` for the root.
pub(super) fn prefix(path: &MemoryPath) -> String {
    let mut s = key(path);
    s.push('/');
    s
}

/// A listing's failure: a missing memory store is not a missing path.
fn listing_failed(e: Fail, dir: &MemoryPath) -> StoreError {
    match e {
        Fail::NotFound => fail(
            Fail::Unreachable(crate::store::RemoteCause::Unavailable),
            dir,
        ),
        other => fail(other, dir),
    }
}

/// What `items` (a listing of `path`'s parent) say is at `path`. Another
/// client may have made both a memory `/a` and memories below `/a/`: the
/// directory wins, so the tree the tool shows is always a tree.
pub(super) fn find_in(items: &[Item], path: &str) -> Found {
    let mut found = Found::Missing;
    for item in items {
        match item {
            Item::Memory(m) if m.path == path => found = Found::File(m.clone()),
            Item::Prefix { path: p } if p.strip_suffix('/') == Some(path) => return Found::Dir,
            _ => {}
        }
    }
    found
}

pub(super) fn is_marker(item: &Item) -> bool {
    matches!(item, Item::Memory(m) if m.path.rsplit('/').next() == Some(MARKER))
}

impl ManagedStore {
    /// The children of `dir`, as the service lists them.
    pub(super) fn children(&self, dir: &MemoryPath) -> StoreResult<Vec<Item>> {
        self.api
            .list(&prefix(dir), 1)
            .map_err(|e| listing_failed(e, dir))
    }

    /// Every memory below `dir`, at any depth.
    pub(crate) fn below(&self, dir: &MemoryPath) -> StoreResult<Vec<Memory>> {
        let items = self
            .api
            .list(&prefix(dir), 0)
            .map_err(|e| listing_failed(e, dir))?;
        Ok(items
            .into_iter()
            .filter_map(|i| match i {
                Item::Memory(m) => Some(m),
                Item::Prefix { .. } => None,
            })
            .collect())
    }

    /// What is at `path`, and the listing of its parent that said so.
    pub(super) fn find(&self, path: &MemoryPath) -> StoreResult<(Found, Vec<Item>)> {
        let Some(parent) = path.parent() else {
            return Ok((Found::Dir, Vec::new()));
        };
        let items = self.children(&parent)?;
        Ok((find_in(&items, &key(path)), items))
    }

    /// `ParentNotDirectory` if an ancestor of `path` is a file; `siblings`
    /// is the listing of its parent (a listed parent is a directory).
    pub(super) fn check_parents(&self, path: &MemoryPath, siblings: &[Item]) -> StoreResult<()> {
        if !siblings.is_empty() {
            return Ok(());
        }
        let ancestors: Vec<MemoryPath> = path.ancestors().collect();
        for (depth, ancestor) in ancestors.iter().enumerate().skip(1).rev() {
            match self.find(ancestor)?.0 {
                Found::File(_) => return Err(StoreError::parent_not_directory(path, depth)),
                Found::Dir => return Ok(()),
                Found::Missing => {}
            }
        }
        Ok(())
    }

    /// Keeps `path`'s parent in existence after its entry left it. Best
    /// effort: the change itself is done, and a store at its 2,000-memory
    /// cap (or a failing service) only lets the emptied directory go.
    pub(super) fn keep_parent(&self, path: &MemoryPath) {
        let Some(parent) = path.parent().filter(|p| !p.is_root()) else {
            return;
        };
        if self.children(&parent).is_ok_and(|items| items.is_empty()) {
            let _ = self.api.create(&format!("{}{MARKER}", prefix(&parent)), "");
        }
    }

    /// Drops the marker of a directory that now holds an entry.
    pub(super) fn drop_marker(&self, siblings: &[Item]) {
        for item in siblings.iter().filter(|i| is_marker(i)) {
            if let Item::Memory(m) = item {
                // Best effort: a marker left over hides nothing.
                let _ = self.api.delete(&m.id, &m.content_sha256);
            }
        }
    }
}
