//! `create`: a new file (or, under `CreatePolicy::Overwrite`, a replaced
//! one), written atomically with its missing parents.

use super::{MemoryTool, Outcome, parse};
use crate::config::CreatePolicy;
use crate::render;
use crate::result::Content;
use crate::store::{MemoryStore, StoreError, WriteMode};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn create(&self, raw: &str, file_text: &str) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::already_exists("/memories"));
        }
        if path.has_trailing_slash() {
            return Err(render::ends_in_slash(raw));
        }
        let file_text = self.apply_policy(&path, file_text.into())?;
        let file_text = file_text.as_ref();
        let size = file_text.len() as u64;
        self.check_file_size(raw, size)?;
        let mode = match self.config.create_policy {
            CreatePolicy::Reject => WriteMode::Create,
            CreatePolicy::Overwrite => WriteMode::Overwrite,
        };
        if self.config.max_store_size.is_some() {
            let existing = self
                .store
                .stat(&path)
                .map_err(|e| render::storage_failure(&e, raw))?;
            // A plain create would say "already exists" first.
            let replaced = match existing {
                Some(_) if mode == WriteMode::Create => return Err(render::already_exists(raw)),
                Some(m) => m.len,
                None => 0,
            };
            self.check_store_size(raw, replaced, size)?;
        }
        match self.store.write(&path, file_text.as_bytes(), mode) {
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
