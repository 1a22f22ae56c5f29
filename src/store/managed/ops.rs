//! The [`MemoryStore`] primitives over the memory stores API.
//!
//! The service has memories at paths and nothing else: a directory exists
//! while a memory is below it, and an empty one keeps the empty marker
//! memory [`MARKER`], written whenever a directory could become empty (a
//! delete or a move out of it). A path is found by listing its parent
//! (`depth=1`), which also says whether it is a directory.

use std::collections::HashSet;

use super::ManagedStore;
use super::api::{Fail, Item, Memory};
use crate::path::{MemoryPath, is_reserved};
use crate::store::{
    DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, MemoryStore, Metadata,
    RenameOptions, StoreError, StoreResult, Tree, UPDATE_ATTEMPTS, Version, WriteMode,
    WriteOptions,
};

/// The marker memory that keeps an empty directory.
pub(super) const MARKER: &str = ".claude-memory-dir";
/// The service's limits (its API reference).
pub(crate) const MAX_BYTES: usize = 102_400;
pub(crate) const MAX_SEGMENTS: usize = 20;

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

/// A content hash as a [`Version`]: its first 128 bits.
fn version(sha: &str) -> Version {
    Version::new(u128::from_str_radix(sha.get(..32).unwrap_or(""), 16).unwrap_or(0))
}

/// The service's failure as the store's, for `path`.
pub(super) fn fail(e: Fail, path: &MemoryPath) -> StoreError {
    let path = path.clone();
    match e {
        Fail::Conflict => StoreError::Conflict { path },
        Fail::NotFound => StoreError::NotFound { path },
        Fail::Refused => StoreError::Invalid {
            path,
            reason: "the memory store refused it",
        },
        Fail::Unreachable(cause) => StoreError::Unreachable {
            path,
            cause,
            source: None,
        },
        Fail::Unknown(cause) => StoreError::OutcomeUnknown {
            path,
            cause,
            source: None,
        },
    }
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
fn find_in(items: &[Item], path: &str) -> Found {
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

fn is_marker(item: &Item) -> bool {
    matches!(item, Item::Memory(m) if m.path.rsplit('/').next() == Some(MARKER))
}

/// Refuses, before any request, what the service would refuse.
fn fits<'d>(path: &MemoryPath, data: &'d [u8]) -> StoreResult<&'d str> {
    let invalid = |reason| StoreError::Invalid {
        path: path.clone(),
        reason,
    };
    let text = std::str::from_utf8(data)
        .map_err(|_| invalid("a managed memory store holds UTF-8 text only"))?;
    if text.len() > MAX_BYTES {
        return Err(invalid("a managed memory holds at most 102,400 bytes"));
    }
    if path.components().len() > MAX_SEGMENTS {
        return Err(invalid("a managed memory path has at most 20 segments"));
    }
    Ok(text)
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

    /// The bytes of the memories below `scope`, the crate's own excluded.
    fn total(&self, scope: &MemoryPath) -> StoreResult<u64> {
        Ok(self
            .below(scope)?
            .iter()
            .filter(|m| !m.path.split('/').any(is_reserved))
            .map(|m| m.content_size_bytes)
            .sum())
    }

    /// One attempt of a write: `Ok(None)` to try again after a conflict.
    fn write_once(
        &self,
        path: &MemoryPath,
        text: &str,
        options: &WriteOptions<'_>,
    ) -> StoreResult<Option<Version>> {
        let (found, siblings) = self.find(path)?;
        let existing = match &found {
            Found::File(m) => Some(Some(version(&m.content_sha256))),
            Found::Dir => Some(None),
            Found::Missing => None,
        };
        if existing.is_some() && options.mode == WriteMode::Create {
            return Err(StoreError::AlreadyExists { path: path.clone() });
        }
        if let Some(quota) = options.quota {
            let replaced = match &found {
                Found::File(m) => m.content_size_bytes,
                _ => 0,
            };
            let total = self.total(quota.scope)?;
            quota.check(path, total.saturating_sub(replaced) + text.len() as u64)?;
        }
        StoreError::check_write(path, existing, options.mode)?;
        self.check_parents(path, &siblings)?;
        let written = match found {
            Found::File(m) => self.api.update(&m.id, &m.content_sha256, Some(text), None),
            _ => self.api.create(&key(path), text),
        };
        match written {
            Ok(m) => {
                self.drop_marker(&siblings);
                Ok(Some(version(&m.content_sha256)))
            }
            // Someone else wrote first: an update of what we saw must not
            // land, a create finds the file there; an overwrite goes again.
            Err(Fail::Conflict) => match options.mode {
                WriteMode::Overwrite => Ok(None),
                WriteMode::Create => Err(StoreError::AlreadyExists { path: path.clone() }),
                WriteMode::Update(_) => Err(StoreError::Conflict { path: path.clone() }),
            },
            Err(e) => Err(fail(e, path)),
        }
    }

    /// A file moved by updating its path (it keeps its id and versions).
    fn rename_file(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        for _ in 0..UPDATE_ATTEMPTS {
            let (found, _) = self.find(from)?;
            let Found::File(m) = found else {
                return Err(StoreError::NotFound { path: from.clone() });
            };
            let (there, siblings) = self.find(to)?;
            if !matches!(there, Found::Missing) {
                return Err(StoreError::AlreadyExists { path: to.clone() });
            }
            self.check_parents(to, &siblings)?;
            match self
                .api
                .update(&m.id, &m.content_sha256, None, Some(&key(to)))
            {
                Ok(_) => {
                    self.drop_marker(&siblings);
                    self.keep_parent(from);
                    return Ok(());
                }
                // Edited or the destination taken meanwhile: look again.
                Err(Fail::Conflict) => continue,
                Err(e) => return Err(fail(e, from)),
            }
        }
        Err(StoreError::Conflict { path: from.clone() })
    }

    /// Deletes a file if `accept` takes it, retrying when it changed.
    fn delete_file(
        &self,
        path: &MemoryPath,
        accept: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        for _ in 0..UPDATE_ATTEMPTS {
            let Found::File(m) = self.find(path)?.0 else {
                return Ok(false);
            };
            if !accept(&metadata(&m)) {
                return Ok(false);
            }
            match self.api.delete(&m.id, &m.content_sha256) {
                Ok(()) => {
                    self.keep_parent(path);
                    return Ok(true);
                }
                Err(Fail::Conflict) => continue,
                Err(Fail::NotFound) => return Ok(false),
                Err(e) => return Err(fail(e, path)),
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    /// Deletes every memory below `dir` (and a memory another client put
    /// at `dir` itself, which the directory hid), under the lease so no
    /// directory move interleaves, then keeps its parent. Stopped half
    /// way, it leaves memories deleted one by one: the next delete
    /// finishes it.
    fn delete_tree(&self, dir: &MemoryPath, siblings: Vec<Item>) -> StoreResult<()> {
        let _lease = self.lease(dir)?;
        let shadowed = siblings.into_iter().filter_map(|i| match i {
            Item::Memory(m) if m.path == key(dir) => Some(m),
            _ => None,
        });
        let mut all: Vec<Memory> = shadowed.collect();
        all.extend(self.below(dir)?);
        if all.is_empty() {
            // Moved or deleted while this call waited for the lease.
            return Err(StoreError::NotFound { path: dir.clone() });
        }
        for pass in 0..UPDATE_ATTEMPTS {
            if pass > 0 {
                all = self.below(dir)?;
            }
            if all.is_empty() {
                self.keep_parent(dir);
                return Ok(());
            }
            for m in all.drain(..) {
                match self.api.delete(&m.id, &m.content_sha256) {
                    // Changed or gone meanwhile: the next pass sees it.
                    Ok(()) | Err(Fail::Conflict | Fail::NotFound) => {}
                    Err(e) => return Err(super::lease::half_done(fail(e, dir), dir)),
                }
            }
        }
        Err(StoreError::Conflict { path: dir.clone() })
    }
}

fn metadata(m: &Memory) -> Metadata {
    Metadata {
        kind: EntryKind::File,
        len: m.content_size_bytes,
        modified: humantime::parse_rfc3339_weak(&m.updated_at).ok(),
    }
}

impl MemoryStore for ManagedStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        Ok(match self.find(path)?.0 {
            Found::File(m) => Some(metadata(&m)),
            Found::Dir => Some(Metadata {
                kind: EntryKind::Directory,
                len: 0,
                modified: None,
            }),
            Found::Missing => None,
        })
    }

    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        let m = match self.find(path)?.0 {
            Found::File(m) => m,
            Found::Dir => return Err(StoreError::IsADirectory { path: path.clone() }),
            Found::Missing => return Err(StoreError::NotFound { path: path.clone() }),
        };
        if m.content_size_bytes > limit {
            return Err(StoreError::TooLarge {
                path: path.clone(),
                len: m.content_size_bytes,
            });
        }
        let full = self.api.retrieve(&m.id).map_err(|e| fail(e, path))?;
        // Moved away between the listing and the read: not here any more.
        if full.path != key(path) {
            return Err(StoreError::NotFound { path: path.clone() });
        }
        // The body must be what the service says it is: a body that does
        // not match its own sha256 is corrupt, and an edit made on it
        // would store the corruption as a real change.
        let data = full.content.unwrap_or_default().into_bytes();
        if crate::store::sha256_hex(&data) != full.content_sha256 {
            return Err(StoreError::Integrity { path: path.clone() });
        }
        if data.len() as u64 > limit {
            return Err(StoreError::TooLarge {
                path: path.clone(),
                len: data.len() as u64,
            });
        }
        Ok(FileContent {
            version: version(&full.content_sha256),
            data,
        })
    }

    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let items = self.children(dir)?;
        if items.is_empty() && !dir.is_root() {
            return Err(match self.find(dir)?.0 {
                Found::File(_) => StoreError::NotADirectory { path: dir.clone() },
                _ => StoreError::NotFound { path: dir.clone() },
            });
        }
        let base = prefix(dir);
        let dirs: HashSet<String> = items
            .iter()
            .filter_map(|i| match i {
                Item::Prefix { path } => Some(path.strip_prefix(&base)?.strip_suffix('/')?.into()),
                Item::Memory(_) => None,
            })
            .collect();
        let mut entries = Vec::with_capacity(items.len());
        for item in &items {
            let (rest, kind, m) = match item {
                Item::Memory(m) => (m.path.strip_prefix(&base), EntryKind::File, Some(m)),
                Item::Prefix { path } => (path.strip_prefix(&base), EntryKind::Directory, None),
            };
            let Some(name) = rest.map(|r| r.trim_end_matches('/')) else {
                continue;
            };
            if name.is_empty() || name.contains('/') || is_reserved(name) {
                continue;
            }
            // A memory shadowed by a directory of its name (see find_in).
            if kind == EntryKind::File && dirs.contains(name) {
                continue;
            }
            entries.push(DirEntry {
                name: name.to_owned(),
                kind,
                len: m.map_or(0, |m| m.content_size_bytes),
                modified: m.and_then(|m| metadata(m).modified),
            });
        }
        Ok(entries)
    }

    /// One paged listing of everything below `dir` (at most 2,000
    /// memories, 20 pages), so a directory view or a file count costs a
    /// few requests whatever the tree's shape.
    fn list_tree(&self, dir: &MemoryPath) -> StoreResult<Option<Tree>> {
        let all = self.below(dir)?;
        if all.is_empty() {
            // Missing, a file, or the empty root: `list` says which.
            self.list(dir)?;
            return Ok(None);
        }
        let base = prefix(dir);
        let rels: Vec<(&str, &Memory)> = all
            .iter()
            .filter(|m| canonical(&m.path))
            .filter_map(|m| Some((m.path.strip_prefix(&base)?, m)))
            .collect();
        let mut dirs = HashSet::new();
        for (rel, _) in &rels {
            let mut end = 0;
            while let Some(slash) = rel[end..].find('/') {
                end += slash;
                dirs.insert(&rel[..end]);
                end += 1;
            }
        }
        let mut tree = Tree::new();
        let mut entry = |rel: &str, kind, m: Option<&Memory>| {
            let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            if !name.is_empty() && !is_reserved(name) {
                tree.push(
                    parent,
                    DirEntry {
                        name: name.to_owned(),
                        kind,
                        len: m.map_or(0, |m| m.content_size_bytes),
                        modified: m.and_then(|m| metadata(m).modified),
                    },
                );
            }
        };
        for d in &dirs {
            entry(d, EntryKind::Directory, None);
        }
        for (rel, m) in &rels {
            if !dirs.contains(rel) {
                entry(rel, EntryKind::File, Some(m));
            }
        }
        Ok(Some(tree))
    }

    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> StoreResult<Version> {
        if path.is_root() {
            return Err(StoreError::write_to_root(path, options.mode));
        }
        let text = fits(path, data)?;
        // A size-limited write holds the lease, so two cannot both fit.
        let _lease = match options.quota {
            Some(_) => Some(self.lease(path)?),
            None => None,
        };
        for _ in 0..UPDATE_ATTEMPTS {
            if let Some(v) = self.write_once(path, text, &options)? {
                return Ok(v);
            }
        }
        Err(StoreError::Conflict { path: path.clone() })
    }

    fn delete_opts(&self, path: &MemoryPath, options: DeleteOptions<'_>) -> StoreResult<bool> {
        if path.is_root() {
            // Only "whatever is there" names the root; the conditions
            // never hold for it.
            return match options.condition {
                DeleteIf::Exists => Err(StoreError::delete_root(path)),
                _ => Ok(false),
            };
        }
        match options.condition {
            DeleteIf::Exists => match self.find(path)? {
                (Found::Missing, _) => Err(StoreError::NotFound { path: path.clone() }),
                (Found::File(_), _) => match self.delete_file(path, &mut |_| true)? {
                    true => Ok(true),
                    false => Err(StoreError::NotFound { path: path.clone() }),
                },
                (Found::Dir, siblings) => self.delete_tree(path, siblings).map(|()| true),
            },
            DeleteIf::EmptyDir => {
                if !matches!(self.find(path)?.0, Found::Dir) {
                    return Ok(false);
                }
                let items = self.children(path)?;
                if !items.iter().all(is_marker) {
                    return Ok(false);
                }
                for item in items {
                    if let Item::Memory(m) = item {
                        match self.api.delete(&m.id, &m.content_sha256) {
                            Ok(()) | Err(Fail::NotFound) => {}
                            Err(e) => return Err(fail(e, path)),
                        }
                    }
                }
                self.keep_parent(path);
                Ok(true)
            }
            DeleteIf::FileWhere(accept) => self.delete_file(path, accept),
        }
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _options: RenameOptions<'_>,
    ) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        match self.find(from)?.0 {
            Found::Missing => Err(StoreError::NotFound { path: from.clone() }),
            Found::File(_) => {
                StoreError::check_depth(from, to, 0)?;
                self.rename_file(from, to)
            }
            Found::Dir => self.rename_dir(from, to),
        }
    }
}
