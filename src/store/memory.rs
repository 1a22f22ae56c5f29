//! `InMemoryStore`: a tree in a lock, for tests, ephemeral agents and as the
//! reference the other backends are compared against.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use super::{
    DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, FileReader, MemoryStore, Metadata,
    Quota, RenameOptions, StoreError, StoreResult, Version, WriteMode, WriteOptions,
};
use crate::path::MemoryPath;

/// A store held in memory; nothing survives the process.
///
/// Every primitive runs under one lock, so each is atomic, and
/// [`WriteMode::Update`] compares a per-store generation counter: a
/// concurrent edit is always detected.
///
/// ```
/// use claude_memory::{InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// let tool = MemoryTool::new(InMemoryStore::new());
/// tool.dispatch(&json!({"command": "create", "path": "/memories/n.md", "file_text": "one\n"}));
/// let view = tool.dispatch(&json!({"command": "view", "path": "/memories/n.md"}));
/// assert_eq!(view.text(), Some("Here's the content of /memories/n.md with line numbers:\n     1\tone"));
/// ```
#[derive(Debug, Default)]
pub struct InMemoryStore {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    root: Dir,
    generation: u64,
}

#[derive(Debug, Default)]
struct Dir {
    children: BTreeMap<String, Node>,
}

#[derive(Debug)]
enum Node {
    /// Shared, so a view streams it without copying or holding the lock.
    File {
        data: Arc<[u8]>,
        version: u64,
        modified: SystemTime,
    },
    Dir(Dir),
}

/// Where a path leads in the tree.
enum Lookup<'a> {
    Found(&'a Node),
    /// Nothing there; all existing ancestors are directories.
    Missing,
    /// The ancestor with this many components is a file.
    ParentFile(usize),
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_inner(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // Nothing panics while holding the lock; if a caller's panic ever
        // poisoned it, the tree is still consistent (mutations are applied
        // only after all checks), so go on.
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_inner(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl InMemoryStore {
    /// `write_opts`, with its quota if any, in one step under the
    /// write lock.
    fn write_checked(
        &self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Option<Quota<'_>>,
    ) -> StoreResult<Version> {
        let mut inner = self.write_inner();
        if path.is_root() {
            return Err(StoreError::write_to_root(path, mode));
        }
        let found = inner.root.lookup(path.components());
        if let Some(quota) = quota {
            let replaced = match found {
                Lookup::Found(_) if mode == WriteMode::Create => {
                    return Err(StoreError::AlreadyExists { path: path.clone() });
                }
                Lookup::Found(Node::File { data, .. }) => data.len() as u64,
                _ => 0,
            };
            let after = inner
                .root
                .total_below(quota.scope)
                .saturating_sub(replaced)
                .saturating_add(data.len() as u64);
            quota.check(path, after)?;
        }
        let existing = match found {
            Lookup::ParentFile(depth) => return Err(StoreError::parent_not_directory(path, depth)),
            Lookup::Found(Node::Dir(_)) => Some(None),
            Lookup::Found(Node::File { version, .. }) => {
                Some(Some(Version::new(u128::from(*version))))
            }
            Lookup::Missing => None,
        };
        StoreError::check_write(path, existing, mode)?;
        inner.generation += 1;
        let version = inner.generation;
        let name = path.name().unwrap_or_default().to_owned();
        let parent = inner
            .root
            .parent_mut(path.components())
            .ok_or_else(|| StoreError::parent_not_directory(path, 0))?;
        parent.children.insert(
            name,
            Node::File {
                data: Arc::from(data),
                version,
                modified: SystemTime::now(),
            },
        );
        Ok(Version::new(u128::from(version)))
    }

    /// The shared bytes and version of a file.
    fn file(&self, path: &MemoryPath) -> StoreResult<(Arc<[u8]>, u64)> {
        let inner = self.read_inner();
        if path.is_root() {
            return Err(StoreError::IsADirectory { path: path.clone() });
        }
        match inner.root.lookup(path.components()) {
            Lookup::Found(Node::File { data, version, .. }) => Ok((Arc::clone(data), *version)),
            Lookup::Found(Node::Dir(_)) => Err(StoreError::IsADirectory { path: path.clone() }),
            _ => Err(StoreError::NotFound { path: path.clone() }),
        }
    }
}

impl Dir {
    fn lookup(&self, components: &[String]) -> Lookup<'_> {
        let Some((last, parents)) = components.split_last() else {
            return Lookup::Missing; // the root is handled by callers
        };
        let mut dir = self;
        for (i, c) in parents.iter().enumerate() {
            match dir.children.get(c) {
                Some(Node::Dir(d)) => dir = d,
                Some(Node::File { .. }) => return Lookup::ParentFile(i + 1),
                None => return Lookup::Missing,
            }
        }
        dir.children
            .get(last)
            .map_or(Lookup::Missing, Lookup::Found)
    }

    /// The parent directory of `components`, creating missing ones. Callers
    /// have checked (via `lookup`) that no ancestor is a file.
    fn parent_mut(&mut self, components: &[String]) -> Option<&mut Dir> {
        let (_, parents) = components.split_last()?;
        let mut dir = self;
        for c in parents {
            let node = dir
                .children
                .entry(c.clone())
                .or_insert_with(|| Node::Dir(Dir::default()));
            match node {
                Node::Dir(d) => dir = d,
                Node::File { .. } => return None,
            }
        }
        Some(dir)
    }

    /// Bytes of every file below, iteratively (no recursion per level:
    /// a tree of any depth is totalled on a fixed stack).
    fn total(&self) -> u64 {
        let mut total = 0u64;
        let mut stack = vec![self];
        while let Some(dir) = stack.pop() {
            for node in dir.children.values() {
                match node {
                    Node::File { data, .. } => total = total.saturating_add(data.len() as u64),
                    Node::Dir(d) => stack.push(d),
                }
            }
        }
        total
    }

    /// Bytes of every file below `scope` (0 if it is not a directory).
    fn total_below(&self, scope: &MemoryPath) -> u64 {
        if scope.is_root() {
            return self.total();
        }
        match self.lookup(scope.components()) {
            Lookup::Found(Node::Dir(d)) => d.total(),
            _ => 0,
        }
    }

    /// The longest relative path below this directory, in bytes: for an
    /// entry `a/b` below it, `"/a/b".len()`. Iterative.
    fn deepest(&self) -> usize {
        let mut longest = 0;
        let mut stack = vec![(self, 0usize)];
        while let Some((dir, len)) = stack.pop() {
            for (name, node) in &dir.children {
                let here = len + 1 + name.len();
                longest = longest.max(here);
                if let Node::Dir(d) = node {
                    stack.push((d, here));
                }
            }
        }
        longest
    }
}

impl Drop for Dir {
    /// Frees the tree iteratively: the derived drop would recurse once per
    /// level and overflow the stack on a deep tree.
    fn drop(&mut self) {
        let mut pending: Vec<Dir> = Vec::new();
        let take = |dir: &mut Dir, pending: &mut Vec<Dir>| {
            for (_, node) in std::mem::take(&mut dir.children) {
                if let Node::Dir(d) = node {
                    pending.push(d);
                }
            }
        };
        take(self, &mut pending);
        while let Some(mut dir) = pending.pop() {
            take(&mut dir, &mut pending);
            // `dir` is dropped here with no children: no recursion.
        }
    }
}

fn metadata(node: &Node) -> Metadata {
    match node {
        Node::File { data, modified, .. } => Metadata {
            kind: EntryKind::File,
            len: data.len() as u64,
            modified: Some(*modified),
        },
        Node::Dir(_) => Metadata {
            kind: EntryKind::Directory,
            len: 0,
            modified: None,
        },
    }
}

impl MemoryStore for InMemoryStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        let inner = self.read_inner();
        if path.is_root() {
            return Ok(Some(metadata(&Node::Dir(Dir::default()))));
        }
        Ok(match inner.root.lookup(path.components()) {
            Lookup::Found(n) => Some(metadata(n)),
            _ => None,
        })
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        let (data, version) = self.file(path)?;
        if data.len() as u64 > limit {
            return Err(StoreError::TooLarge {
                path: path.clone(),
                len: data.len() as u64,
            });
        }
        Ok(FileContent {
            data: data.to_vec(),
            version: Version::new(u128::from(version)),
        })
    }

    fn open(&self, path: &MemoryPath) -> StoreResult<FileReader<'_>> {
        let (data, _) = self.file(path)?;
        Ok(FileReader {
            len: data.len() as u64,
            reader: Box::new(Cursor::new(data)),
        })
    }

    /// The quota is checked under the same lock as the write.
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.write_checked(path, data, options.mode, options.quota)
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let inner = self.read_inner();
        let d = if dir.is_root() {
            &inner.root
        } else {
            match inner.root.lookup(dir.components()) {
                Lookup::Found(Node::Dir(d)) => d,
                Lookup::Found(Node::File { .. }) => {
                    return Err(StoreError::NotADirectory { path: dir.clone() });
                }
                _ => return Err(StoreError::NotFound { path: dir.clone() }),
            }
        };
        Ok(d.children
            .iter()
            .map(|(name, node)| {
                let m = metadata(node);
                DirEntry {
                    name: name.clone(),
                    kind: m.kind,
                    len: m.len,
                    modified: m.modified,
                }
            })
            .collect())
    }

    /// The condition is checked under the same lock as the delete.
    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        let mut inner = self.write_inner();
        let allowed = match (options.condition, inner.root.lookup(path.components())) {
            (DeleteIf::Exists, _) if path.is_root() => return Err(StoreError::delete_root(path)),
            (_, _) if path.is_root() => false,
            (DeleteIf::Exists, Lookup::Found(_)) => true,
            (DeleteIf::Exists, _) => return Err(StoreError::NotFound { path: path.clone() }),
            (DeleteIf::EmptyDir, Lookup::Found(Node::Dir(d))) => d.children.is_empty(),
            (DeleteIf::FileWhere(still), Lookup::Found(node @ Node::File { .. })) => {
                still(&metadata(node))
            }
            _ => false,
        };
        if !allowed {
            return Ok(false);
        }
        let name = path.name().unwrap_or_default();
        Ok(inner
            .root
            .parent_mut(path.components())
            .and_then(|parent| parent.children.remove(name))
            .is_some())
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _: RenameOptions<'_>,
    ) -> StoreResult<()> {
        let mut inner = self.write_inner();
        StoreError::check_rename(from, to)?;
        let below = match inner.root.lookup(from.components()) {
            Lookup::Found(Node::Dir(d)) => d.deepest(),
            Lookup::Found(Node::File { .. }) => 0,
            _ => return Err(StoreError::NotFound { path: from.clone() }),
        };
        if to.is_root() {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        match inner.root.lookup(to.components()) {
            Lookup::Found(_) => return Err(StoreError::AlreadyExists { path: to.clone() }),
            Lookup::ParentFile(depth) => return Err(StoreError::parent_not_directory(to, depth)),
            Lookup::Missing => {}
        }
        StoreError::check_depth(from, to, below)?;
        let from_name = from.name().unwrap_or_default();
        let node = inner
            .root
            .parent_mut(from.components())
            .and_then(|p| p.children.remove(from_name))
            .ok_or_else(|| StoreError::NotFound { path: from.clone() })?;
        let to_name = to.name().unwrap_or_default().to_owned();
        let parent = inner
            .root
            .parent_mut(to.components())
            .ok_or_else(|| StoreError::parent_not_directory(to, 0))?;
        parent.children.insert(to_name, node);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `depth` directories built beneath the API.
    fn chain(depth: usize) -> Dir {
        let mut dir = Dir::default();
        dir.children.insert(
            "f".to_owned(),
            Node::File {
                data: Arc::from(&b"abc"[..]),
                version: 0,
                modified: SystemTime::UNIX_EPOCH,
            },
        );
        for _ in 0..depth {
            let mut up = Dir::default();
            up.children.insert("d".to_owned(), Node::Dir(dir));
            dir = up;
        }
        dir
    }

    #[test]
    fn a_tree_deeper_than_any_stack_is_totalled_measured_and_freed() {
        // A 64 KiB stack: a recursive drop or total would overflow at a
        // few hundred levels; this tree has a million.
        let worker = std::thread::Builder::new().stack_size(64 * 1024).spawn(|| {
            let dir = chain(1_000_000);
            let total = dir.total();
            let deepest = dir.deepest();
            drop(dir);
            (total, deepest)
        });
        let Ok(worker) = worker else {
            panic!("spawn failed");
        };
        match worker.join() {
            Ok((total, deepest)) => {
                assert_eq!(total, 3);
                assert_eq!(deepest, 2 * 1_000_000 + 2);
            }
            Err(_) => panic!("the deep tree crashed its thread"),
        }
    }
}
