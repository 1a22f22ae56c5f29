//! The [`MemoryStore`] primitives over the memory stores API, each at the
//! fewest requests that keep its checks (`docs/managed.md` has the
//! counts): a write lists the path's parent once and sends one request;
//! an edit adds the read; the service's own limits that it answers
//! atomically (its cap of memories, an archived store) are asked about
//! only when it refuses.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::ManagedStore;
use super::api::{Fail, Item, Memory};
use super::tree::{Found, canonical, find_in, is_marker, key, prefix};
use crate::path::{MemoryPath, is_reserved};
use crate::store::{
    Change, DeleteIf, DeleteOptions, DirEntry, EntryKind, FileContent, MemoryStore, Metadata,
    RenameOptions, StoreError, StoreResult, Tree, UPDATE_ATTEMPTS, UpdateOptions, Updated, Version,
    WriteMode, WriteOptions, retry,
};

/// The service's limits (its API reference).
pub(crate) const MAX_BYTES: usize = 102_400;
pub(crate) const MAX_SEGMENTS: usize = 20;
pub(crate) const MAX_MEMORIES: u64 = 2_000;

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

/// A lease refused in a store at its cap of memories.
const FULL: &str = "the memory store holds its 2,000 memories, and a directory move needs room for one more for a moment: delete a file first";

/// Which write the service refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// A memory's create.
    Create,
    /// An update, a move or a delete.
    Change,
    /// The lease's create.
    Lease,
}

/// A write to an archived memory store.
fn archived(path: &MemoryPath) -> StoreError {
    StoreError::Invalid {
        path: path.clone(),
        reason: "the memory store is archived: it can be read, not changed",
    }
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
    /// Refuses a write, before its request, to a store known to be
    /// archived. Called after the command's own checks (their answers
    /// come first, as on any store).
    pub(super) fn writable(&self, path: &MemoryPath) -> StoreResult<()> {
        match self.archived.load(Ordering::Relaxed) {
            true => Err(archived(path)),
            false => Ok(()),
        }
    }

    /// Why the service refused a write as invalid when every rule this
    /// store checks first held, asked only now, on the refusal: the
    /// store was archived, or it is at its cap of memories (for a
    /// create, [`StoreError::TooManyFiles`]; for the lease a directory
    /// move or delete needs, an error that says to delete a file first).
    pub(super) fn refused(&self, path: &MemoryPath, write: Refused) -> StoreError {
        if self.api.store().is_ok_and(|s| s.archived_at.is_some()) {
            self.archived.store(true, Ordering::Relaxed);
            return archived(path);
        }
        let full = || {
            self.below(&MemoryPath::root())
                .is_ok_and(|all| all.len() as u64 >= MAX_MEMORIES)
        };
        match write {
            Refused::Create if full() => StoreError::TooManyFiles {
                path: path.clone(),
                limit: MAX_MEMORIES,
            },
            Refused::Lease if full() => StoreError::Invalid {
                path: path.clone(),
                reason: FULL,
            },
            _ => fail(Fail::Refused, path),
        }
    }

    /// The memory at `path` (a file of at most `limit` bytes) and its
    /// content, checked against its own sha256: a listing of its parent,
    /// then a retrieve.
    fn fetch(&self, path: &MemoryPath, limit: u64) -> StoreResult<(Memory, Vec<u8>)> {
        let m = match self.find(path)?.0 {
            Found::File(m) => m,
            Found::Dir => return Err(StoreError::IsADirectory { path: path.clone() }),
            Found::Missing => return Err(StoreError::NotFound { path: path.clone() }),
        };
        let too_large = |len| StoreError::TooLarge {
            path: path.clone(),
            len,
        };
        if m.content_size_bytes > limit {
            return Err(too_large(m.content_size_bytes));
        }
        let mut full = self.api.retrieve(&m.id).map_err(|e| fail(e, path))?;
        // A retrieve answering for another memory is a faulty service: an
        // edit must go to the memory the listing named.
        if full.id != m.id {
            return Err(StoreError::Integrity { path: path.clone() });
        }
        // Moved away between the listing and the read: not here any more.
        if full.path != key(path) {
            return Err(StoreError::NotFound { path: path.clone() });
        }
        // The body must be what the service says it is: a body that does
        // not match its own sha256 is corrupt, and an edit made on it
        // would store the corruption as a real change.
        let data = full.content.take().unwrap_or_default().into_bytes();
        if crate::store::sha256_hex(&data) != full.content_sha256 {
            return Err(StoreError::Integrity { path: path.clone() });
        }
        if data.len() as u64 > limit {
            return Err(too_large(data.len() as u64));
        }
        Ok((full, data))
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
        self.writable(path)?;
        let creating = !matches!(found, Found::File(_));
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
            Err(Fail::Refused) => Err(self.refused(
                path,
                if creating {
                    Refused::Create
                } else {
                    Refused::Change
                },
            )),
            Err(e) => Err(fail(e, path)),
        }
    }

    /// A file moved by updating its path (it keeps its id and versions).
    /// `seen` is the first look at `from`: the memory and its parent's
    /// listing, which also answers for `to` when both share a parent.
    fn rename_file(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        mut seen: Option<(Memory, Vec<Item>)>,
    ) -> StoreResult<()> {
        let same_parent = from.parent() == to.parent();
        for _ in 0..UPDATE_ATTEMPTS {
            let (m, from_siblings) = match seen.take() {
                Some(seen) => seen,
                None => match self.find(from)? {
                    (Found::File(m), siblings) => (m, siblings),
                    _ => return Err(StoreError::NotFound { path: from.clone() }),
                },
            };
            let (there, siblings) = match same_parent {
                true => (find_in(&from_siblings, &key(to)), from_siblings.clone()),
                false => self.find(to)?,
            };
            if !matches!(there, Found::Missing) {
                return Err(StoreError::AlreadyExists { path: to.clone() });
            }
            self.check_parents(to, &siblings)?;
            self.writable(from)?;
            match self
                .api
                .update(&m.id, &m.content_sha256, None, Some(&key(to)))
            {
                Ok(_) => {
                    if !same_parent {
                        self.drop_marker(&siblings);
                        self.keep_parent(from);
                    }
                    return Ok(());
                }
                // Edited or the destination taken meanwhile: look again.
                Err(Fail::Conflict) => continue,
                Err(Fail::Refused) => return Err(self.refused(from, Refused::Change)),
                Err(e) => return Err(fail(e, from)),
            }
        }
        Err(StoreError::Conflict { path: from.clone() })
    }

    /// Deletes a file if `accept` takes it, retrying when it changed;
    /// `seen` is the first look at it, if the caller had one.
    fn delete_file(
        &self,
        path: &MemoryPath,
        mut seen: Option<Memory>,
        accept: &mut dyn FnMut(&Metadata) -> bool,
    ) -> StoreResult<bool> {
        for _ in 0..UPDATE_ATTEMPTS {
            let m = match seen.take() {
                Some(m) => m,
                None => match self.find(path)?.0 {
                    Found::File(m) => m,
                    _ => return Ok(false),
                },
            };
            if !accept(&metadata(&m)) {
                return Ok(false);
            }
            self.writable(path)?;
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
        self.writable(dir)?;
        let _lease = match self.lease(dir) {
            // At the cap the lease has no room: one of the directory's own
            // memories, deleted first as any file is, makes it.
            Err(StoreError::Invalid { reason: FULL, .. }) => {
                if let Some(m) = self.below(dir)?.first() {
                    match self.api.delete(&m.id, &m.content_sha256) {
                        Ok(()) | Err(Fail::Conflict | Fail::NotFound) => {}
                        Err(e) => return Err(fail(e, dir)),
                    }
                }
                self.lease(dir)?
            }
            other => other?,
        };
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
    /// The service's cap: a create past it is refused by the service.
    fn max_files(&self) -> Option<u64> {
        Some(MAX_MEMORIES)
    }

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
        let (m, data) = self.fetch(path, limit)?;
        Ok(FileContent {
            version: version(&m.content_sha256),
            data,
        })
    }

    /// Reads, changes and writes back with the content it read as the
    /// precondition: three requests, and a 409 reads again.
    fn update_opts(
        &self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> StoreResult<Updated> {
        // A size-limited write holds the lease, so two cannot both fit.
        let _lease = match options.quota {
            Some(_) => Some(self.lease(path)?),
            None => None,
        };
        retry::until_swapped(UPDATE_ATTEMPTS, retry::LOCAL, || {
            let (m, data) = self.fetch(path, options.limit)?;
            let Ok(new) = change(&data) else {
                return Ok(Some(Updated::Aborted));
            };
            let text = fits(path, &new)?;
            if let Some(quota) = options.quota {
                let total = self.total(quota.scope)?;
                let after = total.saturating_sub(m.content_size_bytes) + new.len() as u64;
                quota.check(path, after)?;
            }
            self.writable(path)?;
            match self.api.update(&m.id, &m.content_sha256, Some(text), None) {
                Ok(_) => Ok(Some(Updated::Written(new))),
                // Changed or deleted since the read: read again.
                Err(Fail::Conflict | Fail::NotFound) => Ok(None),
                Err(Fail::Refused) => Err(self.refused(path, Refused::Change)),
                Err(e) => Err(fail(e, path)),
            }
        })?
        .ok_or_else(|| StoreError::Conflict { path: path.clone() })
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
                (Found::File(m), _) => match self.delete_file(path, Some(m), &mut |_| true)? {
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
                self.writable(path)?;
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
            DeleteIf::FileWhere(accept) => self.delete_file(path, None, accept),
        }
    }

    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        _options: RenameOptions<'_>,
    ) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        match self.find(from)? {
            (Found::Missing, _) => Err(StoreError::NotFound { path: from.clone() }),
            (Found::File(m), siblings) => {
                StoreError::check_depth(from, to, 0)?;
                self.rename_file(from, to, Some((m, siblings)))
            }
            (Found::Dir, _) => self.rename_dir(from, to),
        }
    }
}
