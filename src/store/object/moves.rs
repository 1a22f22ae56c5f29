//! `rename` and `delete` over the bucket, in the fewest round trips.
//!
//! - A rename sends its lookups together (a HEAD of the source, a one-key
//!   LIST below the destination; the flat listing below the source only
//!   when no file is there), writes its intent record, copies each object
//!   conditionally and deletes the sources with the record in one batch:
//!   a file rename is five requests (four for the floor), a directory of
//!   100 is 106 (102).
//! - A delete sends a HEAD: a file is then one DELETE (two requests, the
//!   floor); a directory is its listing, streamed into batched deletes
//!   (one request per 1,000 objects on S3): three requests, bounded
//!   memory.
//! - Where another program made a file and a directory of one name, the
//!   file is what a delete or rename acts on first.

use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use super::errors::Sent;
use super::intent::{self, Copied, Intent};
use super::listing::{all_below, any_below, prefix};
use super::{CloudStore, cond, keys};
use crate::path::MemoryPath;
use crate::store::{StoreError, StoreResult};

type Listing = futures_util::stream::BoxStream<'static, object_store::Result<ObjectMeta>>;

impl CloudStore {
    /// Deletes the file or directory at `path` (not the root).
    pub(super) fn delete_entry(&self, path: &MemoryPath) -> StoreResult<()> {
        if let Some(file) = self.head(path)? {
            // A file: the parent's marker, then one DELETE. (A directory
            // another program made under the same name stays, and is
            // what a second delete removes.)
            let (store, layout, p) = (self.bucket(), self.layout.clone(), path.clone());
            return self.call(path, Sent::Write, async move {
                intent::keep_parent(&store, &layout, &p).await?;
                match store.delete(&file.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            });
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        let (first, rest) = self.call(path, Sent::Read, async move {
            let mut listing: Listing = store.list(prefix(&key));
            let first = listing.next().await.transpose()?;
            Ok((first, listing))
        })?;
        let Some(first) = first else {
            return Err(StoreError::NotFound { path: path.clone() });
        };
        let (store, layout, p) = (self.bucket(), self.layout.clone(), path.clone());
        self.call(path, Sent::Write, async move {
            intent::keep_parent(&store, &layout, &p).await?;
            // Every key below, streamed from the listing into batched
            // deletes, so a huge directory is never held whole.
            let keys = stream::once(async move { Ok(first.location) })
                .chain(rest.map_ok(|m| m.location))
                .boxed();
            let mut results = store.delete_stream(keys);
            while let Some(r) = results.next().await {
                match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
    }

    /// Moves the file or directory `from` to `to`, never over an entry.
    pub(super) fn rename_entry(&self, from: &MemoryPath, to: &MemoryPath) -> StoreResult<()> {
        StoreError::check_rename(from, to)?;
        let (store, from_key, to_key) = (self.bucket(), self.layout.key(from), self.layout.key(to));
        let to_root = to.is_root();
        // Is the source a file, is a directory at the destination?
        let (head, taken) = self.call(from, Sent::Read, async move {
            let to_below = async {
                if to_root {
                    Ok(true)
                } else {
                    any_below(Arc::clone(&store), to_key).await
                }
            };
            let (head, taken) = futures_util::join!(store.head(&from_key), to_below);
            let head = match head {
                Ok(m) => Some(m),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            Ok((head, taken?))
        })?;
        let below = match head {
            Some(_) => Vec::new(),
            None => {
                let (store, key) = (self.bucket(), self.layout.key(from));
                self.call(from, Sent::Read, all_below(store, key))?
            }
        };
        let is_dir = !below.is_empty();
        if !is_dir && head.is_none() {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        if taken {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        if is_dir {
            // The copies guard every key below `to`, not `to` itself.
            if self.head(to)?.is_some() {
                return Err(StoreError::AlreadyExists { path: to.clone() });
            }
            StoreError::check_depth(from, to, self.deepest(from, &below))?;
        }
        // A source's parent is a directory; the same parent needs no check.
        if to.parent() != from.parent() {
            self.check_parents(to)?;
        }
        let mut sources: Vec<(Path, u64)> =
            below.into_iter().map(|m| (m.location, m.size)).collect();
        if let Some(m) = head {
            sources.push((m.location, m.size));
        }
        self.move_under_intent(from, to, sources)
    }

    /// The object at `path`'s own key, if any (one HEAD).
    fn head(&self, path: &MemoryPath) -> StoreResult<Option<ObjectMeta>> {
        if path.is_root() {
            return Ok(None);
        }
        let (store, key) = (self.bucket(), self.layout.key(path));
        self.call(path, Sent::Read, async move {
            match store.head(&key).await {
                Ok(m) => Ok(Some(m)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// The longest path below `dir` among `below`, in bytes after `dir`'s.
    fn deepest(&self, dir: &MemoryPath, below: &[ObjectMeta]) -> usize {
        let depth = dir.components().len();
        below
            .iter()
            .filter_map(|m| self.layout.relative(&m.location))
            .map(|parts| {
                let below = parts.get(depth..).unwrap_or_default();
                // The marker names no entry: its directory is the path.
                let below = match below.split_last() {
                    Some((last, rest)) if last == keys::MARKER => rest,
                    _ => below,
                };
                below.iter().map(|p| p.len() + 1).sum::<usize>()
            })
            .max()
            .unwrap_or(0)
    }

    /// Writes the intent record, copies `sources`, and deletes them with
    /// the record; waits (or recovers a stale record) while another
    /// rename holds it.
    fn move_under_intent(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        sources: Vec<(Path, u64)>,
    ) -> StoreResult<()> {
        let record = intent::Record {
            intent: Intent::Rename {
                from: from.normalized(),
                to: to.normalized(),
            },
            owner: intent::nonce(),
        };
        let body = serde_json::to_vec(&record).map_err(|e| StoreError::Backend {
            path: from.clone(),
            source: Box::new(e),
        })?;
        let intent_key = self.layout.own(keys::INTENT);
        for attempt in 0..cond::ATTEMPTS {
            let (store, key, b) = (self.bucket(), intent_key.clone(), body.clone());
            let created = self.call(from, Sent::Write, async move {
                match intent::create(&store, &key, b).await {
                    Ok(()) => Ok(true),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            })?;
            if created {
                return self.moved(from, to, sources, body);
            }
            if self
                .intent_size(from)?
                .is_some_and(|size| size > intent::MAX_RECORD)
            {
                return Err(StoreError::Invalid {
                    path: from.clone(),
                    reason: "an object that is no rename record is in the way: .claude-memory-intent at the store's root; an operator must remove it",
                });
            }
            // Another rename is under way, or one was interrupted: finish
            // it once its lease is over, else wait.
            self.recover(from)?;
            cond::backoff(attempt.min(4));
        }
        Err(StoreError::Conflict { path: from.clone() })
    }

    /// The copies and deletes of a rename whose record this process
    /// wrote (`body`).
    fn moved(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        sources: Vec<(Path, u64)>,
        body: Vec<u8>,
    ) -> StoreResult<()> {
        let (store, layout, how) = (self.bucket(), self.layout.clone(), self.settings.copy);
        let (f, t) = (from.clone(), to.clone());
        let intent_key = layout.own(keys::INTENT);
        let done = self.call(from, Sent::Write, async move {
            // An error leaves the record: the next open finishes the move.
            match intent::copy_all(&store, &layout, (&f, &t), &sources, how, true).await? {
                Copied::All => {}
                Copied::Refused => {
                    store.delete(&intent_key).await?;
                    return Ok(Some(StoreError::AlreadyExists { path: t }));
                }
                Copied::Gone => {
                    store.delete(&intent_key).await?;
                    return Ok(Some(StoreError::NotFound { path: f }));
                }
            }
            intent::keep_parent(&store, &layout, &f).await?;
            let mut keys: Vec<Path> = sources.into_iter().map(|(k, _)| k).collect();
            keys.push(intent_key.clone());
            if let Err(e) = intent::delete_all(&store, keys).await {
                // The batch may have taken the record and left a source:
                // put the record back, so the next open finishes it.
                let _ = intent::create(&store, &intent_key, body).await;
                return Err(e);
            }
            Ok(None)
        })?;
        done.map_or(Ok(()), Err)
    }
}
