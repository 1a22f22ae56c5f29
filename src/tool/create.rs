//! `create`: a new file (or, under `CreatePolicy::Overwrite`, a replaced
//! one), written atomically with its missing parents.

use super::{MemoryTool, Outcome, parse};
use crate::config::CreatePolicy;
use crate::path::MemoryPath;
use crate::render;
use crate::result::Content;
use crate::store::{Context, MemoryStore, Quota, StoreError, WriteMode, WriteOptions};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn create(&self, raw: &str, file_text: &str, context: Context<'_>) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::already_exists("/memories"));
        }
        if path.has_trailing_slash() {
            return Err(render::ends_in_slash(raw));
        }
        self.check_name(&path, |reason| render::policy_refused(raw, reason))?;
        self.check_segments(path.components().len(), |n, limit| {
            render::create_too_deep(raw, n, limit)
        })?;
        let file_text = self.apply_policy(&path, file_text.into())?;
        let file_text = file_text.as_ref();
        let size = file_text.len() as u64;
        self.check_file_size(raw, size)?;
        self.check_file_count(&path, raw)?;
        let mode = match self.config.create_policy {
            CreatePolicy::Reject => WriteMode::Create,
            CreatePolicy::Overwrite => WriteMode::Overwrite,
        };
        let data = file_text.as_bytes();
        // With a store limit, the store checks it atomically with the write
        // (after "already exists", before the other checks).
        let root = MemoryPath::root();
        let quota = self.config.max_store_size.map(|max_bytes| Quota {
            scope: &root,
            max_bytes,
        });
        let options = WriteOptions {
            mode,
            quota,
            context,
        };
        let written = self.store.write_opts(&path, data, options);
        match written {
            Ok(_) => Ok(Content::Text(render::created(raw))),
            Err(StoreError::AlreadyExists { .. } | StoreError::IsADirectory { .. }) => {
                Err(render::already_exists(raw))
            }
            Err(StoreError::ParentNotDirectory { parent, .. }) => {
                Err(render::parent_is_file(raw, &parent.normalized()))
            }
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }
}
