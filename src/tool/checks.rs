//! The checks every write passes before it reaches the store: the content
//! policy, the file size limit and the optional path-segment and file-count
//! limits (the managed Memory Stores profile). (The store size limit is checked by the
//! store, atomically with the write: `MemoryStore::write_opts` and
//! `update_opts` with a quota.)

use std::borrow::Cow;

use super::MemoryTool;
use crate::path::MemoryPath;
use crate::policy::Decision;
use crate::render::{self, ModelError};
use crate::store::walk::walk_skipping_unlistable;
use crate::store::{EntryKind, Flow, MemoryStore, Order, Step, StoreError, walk};

impl<S: MemoryStore> MemoryTool<S> {
    /// The content policy's verdict on a write: the text to write, or the
    /// model-facing refusal.
    pub(super) fn apply_policy<'t>(
        &self,
        path: &MemoryPath,
        text: Cow<'t, str>,
    ) -> Result<Cow<'t, str>, ModelError> {
        let Some(policy) = &self.policy else {
            return Ok(text);
        };
        match policy.check(path, &text) {
            Decision::Allow => Ok(text),
            Decision::Reject(reason) => Err(render::policy_refused(path.as_str(), &reason)),
            Decision::Redact(redacted) => Ok(redacted.into()),
        }
    }

    /// The content policy's verdict on a name a write creates: `Err` with
    /// `refusal(reason)`, the model-facing text, if it refuses it.
    pub(super) fn check_name(
        &self,
        path: &MemoryPath,
        refusal: impl FnOnce(&str) -> ModelError,
    ) -> Result<(), ModelError> {
        match self.policy.as_ref().and_then(|p| p.check_path(path)) {
            Some(reason) => Err(refusal(&reason)),
            None => Ok(()),
        }
    }

    pub(super) fn check_file_size(&self, raw: &str, size: u64) -> Result<(), ModelError> {
        let limit = self.config.max_file_size;
        if size > limit {
            return Err(render::file_too_large(raw, size, limit));
        }
        Ok(())
    }

    /// `Err(refusal(segments, limit))` if an entry at `path` would be
    /// deeper than [`max_path_segments`](crate::Config::max_path_segments).
    pub(super) fn check_segments(
        &self,
        segments: usize,
        refusal: impl FnOnce(usize, usize) -> ModelError,
    ) -> Result<(), ModelError> {
        match self.config.max_path_segments {
            Some(limit) if segments > limit => Err(refusal(segments, limit)),
            _ => Ok(()),
        }
    }

    /// Under [`max_files`](crate::Config::max_files): refuses a create of a
    /// new file when the store already holds that many. (Counted before
    /// the write, not atomically with it.) A store that refuses creates
    /// past a limit of its own no higher ([`MemoryStore::max_files`]) is
    /// not counted: its create answers.
    pub(super) fn check_file_count(&self, path: &MemoryPath, raw: &str) -> Result<(), ModelError> {
        let Some(limit) = self.config.max_files else {
            return Ok(());
        };
        if self.store.max_files().is_some_and(|own| own <= limit) {
            return Ok(());
        }
        let exists = self
            .store
            .stat(path)
            .map_err(|e| render::storage_failure(&e, raw))?;
        if exists.is_some() {
            // Replaced (or refused as existing): no new file.
            return Ok(());
        }
        // Counting stops going into directories once the limit is
        // reached, so a huge store is not walked whole for every create;
        // a store that reads its tree at once (list_tree) does it in one
        // call, not one per directory.
        let mut files = 0u64;
        walk_skipping_unlistable(
            &self.store,
            &MemoryPath::root(),
            Order::AsListed,
            &mut |step| {
                Ok(match step {
                    Step::File { .. } => {
                        files += 1;
                        Flow::Continue
                    }
                    Step::Enter { .. } if files >= limit => Flow::Skip,
                    _ => Flow::Continue,
                })
            },
        )
        .map_err(|e| render::storage_failure(&e, raw))?;
        if files >= limit {
            return Err(render::too_many_files(raw, limit));
        }
        Ok(())
    }

    /// The deepest entry below `from` (a directory), in segments below
    /// `from`: 0 for an empty directory, a file or a symbolic link (which
    /// a rename moves itself).
    pub(super) fn depth_below(&self, from: &MemoryPath, raw: &str) -> Result<usize, ModelError> {
        let is_dir = match self.store.stat(from) {
            Ok(m) => m.is_some_and(|m| m.kind == EntryKind::Directory),
            Err(StoreError::Symlink { .. }) => false,
            Err(e) => return Err(render::storage_failure(&e, raw)),
        };
        if !is_dir {
            return Ok(0);
        }
        let mut deepest = 0;
        walk(&self.store, from, Order::AsListed, &mut |step| {
            match step {
                Step::Enter { depth, .. } | Step::File { depth, .. } => {
                    deepest = deepest.max(depth);
                }
                Step::Leave { .. } => {}
            }
            Ok(Flow::Continue)
        })
        .map_err(|e| render::storage_failure(&e, raw))?;
        Ok(deepest)
    }
}
