//! `rename`: moves a file or directory, never over an existing entry,
//! with the spec's checks in the spec's order.

use super::{MemoryTool, Outcome, parse};
use crate::render;
use crate::result::Content;
use crate::store::{Context, MemoryStore, RenameOptions, StoreError};

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
        // A move to a path no deeper than its source deepens nothing: only
        // a deeper one is measured (a store checks the byte limit itself,
        // under its lock: MemoryStore::rename_opts).
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
