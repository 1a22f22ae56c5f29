//! `rename`: moves a file or directory, never over an existing entry,
//! with the spec's checks in the spec's order.

use super::{MemoryTool, Outcome, parse};
use crate::path::MemoryPath;
use crate::render;
use crate::result::Content;
use crate::store::{
    Context, EntryKind, Flow, MemoryStore, Order, RenameOptions, Step, StoreError, walk,
};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn rename(&self, old_raw: &str, new_raw: &str, context: Context<'_>) -> Outcome {
        let from = parse(old_raw)?;
        let to = parse(new_raw)?;
        if from.is_root() {
            return Err(render::rename_root());
        }
        if to.is_strictly_inside(&from) {
            let exists = self
                .store
                .stat(&from)
                .map_err(|e| render::storage_failure(&e, old_raw))?;
            return Err(match exists {
                None => render::missing(old_raw),
                Some(_) => render::move_into_itself(old_raw),
            });
        }
        self.check_name(&to, |reason| {
            render::rename_refused(old_raw, new_raw, reason)
        })?;
        // Checked here, above the trait, so no store can move an entry
        // past the path limit (the built-in stores check it again under
        // their lock, atomically with the move).
        match self.too_deep(&from, &to) {
            Ok(Some(limit)) => return Err(render::rename_too_deep(old_raw, new_raw, limit)),
            // A symbolic link at either end (a final one is moved itself,
            // or is in the way) or on the way: the store answers.
            Ok(None) | Err(StoreError::Symlink { .. }) => {}
            Err(e) => return Err(render::storage_failure(&e, old_raw)),
        }
        // A move to a path no deeper than its source deepens nothing: only
        // a deeper one is measured.
        if self.config.max_path_segments.is_some()
            && to.components().len() > from.components().len()
        {
            let deepest = to.components().len() + self.depth_below(&from, old_raw)?;
            self.check_segments(deepest, |n, limit| {
                render::rename_too_many_segments(old_raw, new_raw, n, limit)
            })?;
        }
        match self
            .store
            .rename_opts(&from, &to, RenameOptions { context })
        {
            Ok(()) => Ok(Content::Text(render::renamed(old_raw, new_raw))),
            Err(StoreError::NotFound { .. }) => Err(render::missing(old_raw)),
            Err(StoreError::AlreadyExists { .. }) => Err(render::destination_exists(new_raw)),
            Err(StoreError::PathTooLong { limit, .. }) => {
                Err(render::rename_too_deep(old_raw, new_raw, limit))
            }
            Err(StoreError::ParentNotDirectory { parent, .. }) => Err(
                render::rename_parent_is_file(old_raw, new_raw, &parent.normalized()),
            ),
            Err(e) => {
                let shown = match &e {
                    StoreError::Symlink { path } if *path == to => new_raw,
                    _ => old_raw,
                };
                Err(render::storage_failure(&e, shown))
            }
        }
    }
}

impl<S: MemoryStore> MemoryTool<S> {
    /// `Some(limit)` when moving the directory `from` to `to` would put an
    /// entry below it at a path longer than `to`'s limit (SPEC §2). Only a
    /// directory moved to a longer path can; the others cost one `stat` at
    /// most. When the move is refused for another reason first (the source
    /// is missing or a file, the destination exists, a parent of it is a
    /// file), `None`: the store gives that answer, in the spec's order.
    fn too_deep(&self, from: &MemoryPath, to: &MemoryPath) -> Result<Option<usize>, StoreError> {
        let growth = match to.normalized_len().checked_sub(from.normalized_len()) {
            Some(growth) if growth > 0 => growth,
            _ => return Ok(None),
        };
        let is_dir =
            |m: Option<crate::store::Metadata>| m.is_some_and(|m| m.kind == EntryKind::Directory);
        if !is_dir(self.store.stat(from)?) {
            return Ok(None);
        }
        if self.store.stat(to)?.is_some() {
            return Ok(None);
        }
        // The longest path below `from` that still fits once moved.
        let room = to.limit().saturating_sub(growth);
        let mut over = false;
        walk(&self.store, from, Order::AsListed, &mut |step| {
            let len = match step {
                Step::Enter { path, .. } => path.normalized_len(),
                Step::File { dir, entry, .. } => dir.normalized_len() + 1 + entry.name.len(),
                Step::Leave { .. } => 0,
            };
            if len > room {
                over = true;
                // Ends the walk: one entry too deep is enough.
                return Err(StoreError::PathTooLong {
                    path: from.clone(),
                    limit: to.limit(),
                });
            }
            Ok(Flow::Continue)
        })
        // A subtree the walk cannot list (an unreadable directory) leaves
        // the answer to the store, whose own check runs under its lock.
        .ok();
        if !over {
            return Ok(None);
        }
        // A file among the destination's parents is the answer the spec
        // gives first; the store will give it.
        for ancestor in to.ancestors().skip(1) {
            if self
                .store
                .stat(&ancestor)?
                .is_some_and(|m| m.kind == EntryKind::File)
            {
                return Ok(None);
            }
        }
        Ok(Some(to.limit()))
    }
}
