//! `rename` and `delete` over the bucket, in the fewest round trips.
//!
//! - A rename sends its lookups together (a HEAD of the source, the flat
//!   listing below it, a one-key LIST below the destination), writes its
//!   intent record, copies each object conditionally and deletes the
//!   sources with the record in one batch: a file rename is six requests
//!   (four for the floor), a directory of 100 is 106 (102).
//! - A delete sends a HEAD and the first page of the listing below
//!   together, then deletes in batches as the listing streams (one
//!   request per 1,000 objects on S3): three requests, bounded memory.

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
        let (store, key) = (self.bucket(), self.layout.key(path));
        // The lookups: is it a file, is anything below it?
        let (head, first, rest) = self.call(path, Sent::Read, async move {
            let mut listing: Listing = store.list(prefix(&key));
            let (head, first) = futures_util::join!(store.head(&key), listing.next());
            let head = match head {
                Ok(m) => Some(m),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            Ok((head, first.transpose()?, listing))
        })?;
        if head.is_none() && first.is_none() {
            return Err(StoreError::NotFound { path: path.clone() });
        }
        let (store, layout, p) = (self.bucket(), self.layout.clone(), path.clone());
        self.call(path, Sent::Write, async move {
            intent::keep_parent(&store, &layout, &p).await?;
            let key = layout.key(&p);
            let Some(first) = first else {
                return match store.delete(&key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e),
                };
            };
            // The directory: every key below (streamed from the listing,
            // so a huge one is never held whole) and a file of its name.
            let keys = stream::once(async move { Ok(first.location) })
                .chain(rest.map_ok(|m| m.location))
                .chain(stream::once(async move { Ok(key) }))
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
        let (head, below, taken) = self.call(from, Sent::Read, async move {
            let to_below = async {
                if to_root {
                    Ok(true)
                } else {
                    any_below(Arc::clone(&store), to_key).await
                }
            };
            let (head, below, taken) = futures_util::join!(
                store.head(&from_key),
                all_below(Arc::clone(&store), from_key.clone()),
                to_below
            );
            let head = match head {
                Ok(m) => Some(m),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            Ok((head, below?, taken?))
        })?;
        let is_dir = !below.is_empty();
        if !is_dir && head.is_none() {
            return Err(StoreError::NotFound { path: from.clone() });
        }
        if taken {
            return Err(StoreError::AlreadyExists { path: to.clone() });
        }
        if is_dir {
            // The copies guard every key below `to`, not `to` itself.
            if self.head_exists(to)? {
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

    /// Whether an object is at `path`'s own key.
    fn head_exists(&self, path: &MemoryPath) -> StoreResult<bool> {
        let (store, key) = (self.bucket(), self.layout.key(path));
        self.call(path, Sent::Read, async move {
            match store.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
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
                    return Ok(false);
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
            Ok(true)
        })?;
        if done {
            Ok(())
        } else {
            Err(StoreError::AlreadyExists { path: to.clone() })
        }
    }
}
