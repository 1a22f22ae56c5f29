//! The one tree walk: every whole-tree job (directory views, the store size
//! total, backups, expiry, the CLI's statistics) runs on it.
//!
//! It keeps an explicit stack instead of recursing, so no tree is too deep
//! for it, and it holds no store handle between steps (each directory is
//! listed once, into memory), so it never has more than one directory open.

use std::collections::HashMap;

use super::{DirEntry, EntryKind, MemoryStore, StoreResult};
use crate::path::MemoryPath;

/// Every entry below one directory, at every depth, grouped by the
/// directory holding it: what [`MemoryStore::list_tree`] returns, so a
/// store that can read a whole tree at once (one query) spares a walk its
/// listing of each directory.
///
/// Directories are named by their path below the tree's top, components
/// joined by `/` (`""` for the top itself), so a wrapper that moves paths
/// (a tenant's directory) passes a tree through unchanged.
#[derive(Debug, Default)]
pub struct Tree {
    dirs: HashMap<String, Vec<DirEntry>>,
}

impl Tree {
    /// An empty tree (an empty directory).
    pub fn new() -> Self {
        Tree::default()
    }

    /// Adds `entry`, a child of the directory at `parent` (its path below
    /// the top, `""` for the top). Every directory an entry names as its
    /// parent must be in the tree as an entry of its own parent, or the
    /// walk never reaches it; a directory with no entries need not be
    /// named.
    pub fn push(&mut self, parent: &str, entry: DirEntry) {
        match self.dirs.get_mut(parent) {
            Some(children) => children.push(entry),
            None => {
                self.dirs.insert(parent.to_owned(), vec![entry]);
            }
        }
    }

    /// The children of the directory at `parent`, taken out (a walk lists
    /// each directory once).
    pub(crate) fn take(&mut self, parent: &str) -> Vec<DirEntry> {
        self.dirs.remove(parent).unwrap_or_default()
    }

    /// Whether every directory's children have been taken.
    #[cfg(feature = "conformance")]
    pub(crate) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// One step of a [`walk`], in depth-first order: a directory's `Enter`,
/// then its children, then its `Leave`.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A directory, before its children. `entry` is `None` for the
    /// directory the walk started at (depth 0).
    Enter {
        /// The directory.
        path: &'a MemoryPath,
        /// How it was listed in its parent.
        entry: Option<&'a DirEntry>,
        /// 0 for the start, 1 for its children, …
        depth: usize,
    },
    /// A file.
    File {
        /// The directory holding it.
        dir: &'a MemoryPath,
        /// The file as listed (name, size, modification time).
        entry: &'a DirEntry,
        /// 1 for the start's children, …
        depth: usize,
    },
    /// A directory, after its children (and after an `Enter` that
    /// returned [`Flow::Skip`]: every `Enter` has its `Leave`).
    Leave {
        /// The directory.
        path: &'a MemoryPath,
        /// As in its `Enter`.
        depth: usize,
    },
}

/// What the visitor wants after an [`Step::Enter`] (ignored after other
/// steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Walk into the directory.
    Continue,
    /// Leave the directory's subtree out.
    Skip,
}

/// The order in which a directory's children are visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// As the store lists them (cheapest).
    AsListed,
    /// By name, in byte order (what views and exports print).
    ByName,
}

/// Walks the tree below `start` (a directory), calling `visit` for every
/// step; the first error, from the store or the visitor, ends the walk.
///
/// Directories whose full path no [`MemoryPath`] can spell (a name made
/// outside the store's API) are left out with their subtrees; files are
/// passed as listed, and `dir.join(&entry.name)` or `dir.is_valid_child`
/// tells the visitor whether a path spells them.
///
/// The visitor may change the store (expiry deletes as it goes): each
/// directory is listed once, when it is entered.
pub fn walk<S: MemoryStore + ?Sized>(
    store: &S,
    start: &MemoryPath,
    order: Order,
    visit: &mut dyn FnMut(Step<'_>) -> StoreResult<Flow>,
) -> StoreResult<()> {
    walk_inner(store, start, order, false, visit)
}

/// [`walk`], except that a directory below `start` that cannot be listed
/// (no permission, removed meanwhile, a storage failure) is walked as if
/// empty instead of ending the walk: its `Enter` and `Leave` still come.
/// For directory views and statistics, where one unreadable subdirectory
/// must not hide every other file.
///
/// For visitors that only read: where the store can, the whole tree is
/// read at once when the walk starts ([`MemoryStore::list_tree`]: one
/// query on the SQL stores), not each directory when it is entered.
pub fn walk_skipping_unlistable<S: MemoryStore + ?Sized>(
    store: &S,
    start: &MemoryPath,
    order: Order,
    visit: &mut dyn FnMut(Step<'_>) -> StoreResult<Flow>,
) -> StoreResult<()> {
    walk_inner(store, start, order, true, visit)
}

/// [`walk_skipping_unlistable`], noting in `unlisted` each directory that
/// could not be listed, so a view or a count can say which entry it could
/// not read instead of showing it as empty.
pub fn walk_noting_unlistable<S: MemoryStore + ?Sized>(
    store: &S,
    start: &MemoryPath,
    order: Order,
    unlisted: &mut Vec<MemoryPath>,
    visit: &mut dyn FnMut(Step<'_>) -> StoreResult<Flow>,
) -> StoreResult<()> {
    walk_inner_noting(store, start, order, true, Some(unlisted), visit)
}

fn walk_inner<S: MemoryStore + ?Sized>(
    store: &S,
    start: &MemoryPath,
    order: Order,
    read_only: bool,
    visit: &mut dyn FnMut(Step<'_>) -> StoreResult<Flow>,
) -> StoreResult<()> {
    walk_inner_noting(store, start, order, read_only, None, visit)
}

fn walk_inner_noting<S: MemoryStore + ?Sized>(
    store: &S,
    start: &MemoryPath,
    order: Order,
    read_only: bool,
    mut unlisted: Option<&mut Vec<MemoryPath>>,
    visit: &mut dyn FnMut(Step<'_>) -> StoreResult<Flow>,
) -> StoreResult<()> {
    struct Frame {
        path: MemoryPath,
        depth: usize,
        children: std::vec::IntoIter<DirEntry>,
    }
    let mut stack = Vec::new();
    let first = visit(Step::Enter {
        path: start,
        entry: None,
        depth: 0,
    })?;
    // The whole tree, read when the start is entered, if the store reads
    // it at once (for a visitor that only reads); else each directory is
    // listed when entered.
    let mut tree = match first {
        Flow::Continue if read_only => store.list_tree(start)?,
        _ => None,
    };
    let top = start.components().len();
    let mut list = |dir: &MemoryPath| -> StoreResult<std::vec::IntoIter<DirEntry>> {
        let mut children = match &mut tree {
            Some(tree) => tree.take(&dir.components()[top..].join("/")),
            None => store.list(dir)?,
        };
        if order == Order::ByName {
            children.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(children.into_iter())
    };
    let skip_unlistable = read_only;
    let children = match first {
        Flow::Continue => list(start)?,
        Flow::Skip => Vec::new().into_iter(),
    };
    stack.push(Frame {
        path: start.clone(),
        depth: 0,
        children,
    });
    while let Some(top) = stack.last_mut() {
        let depth = top.depth + 1;
        let Some(entry) = top.children.next() else {
            if let Some(done) = stack.pop() {
                visit(Step::Leave {
                    path: &done.path,
                    depth: done.depth,
                })?;
            }
            continue;
        };
        match entry.kind {
            EntryKind::File => {
                visit(Step::File {
                    dir: &top.path,
                    entry: &entry,
                    depth,
                })?;
            }
            EntryKind::Directory => {
                let Some(path) = top.path.join(&entry.name) else {
                    continue;
                };
                let flow = visit(Step::Enter {
                    path: &path,
                    entry: Some(&entry),
                    depth,
                })?;
                let children = match flow {
                    Flow::Continue => match list(&path) {
                        Ok(children) => children,
                        Err(_) if skip_unlistable => {
                            if let Some(unlisted) = unlisted.as_deref_mut() {
                                unlisted.push(path.clone());
                            }
                            Vec::new().into_iter()
                        }
                        Err(e) => return Err(e),
                    },
                    Flow::Skip => Vec::new().into_iter(),
                };
                stack.push(Frame {
                    path,
                    depth,
                    children,
                });
            }
        }
    }
    Ok(())
}

/// The total bytes of the files below `start`, hidden ones included: the
/// store's [`total_size`](crate::store::MemoryStoreExt::total_size).
pub fn total_size<S: MemoryStore + ?Sized>(store: &S, start: &MemoryPath) -> StoreResult<u64> {
    let mut total = 0u64;
    walk(store, start, Order::AsListed, &mut |step| {
        if let Step::File { entry, .. } = step {
            total = total.saturating_add(entry.len);
        }
        Ok(Flow::Continue)
    })?;
    Ok(total)
}
