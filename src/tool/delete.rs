//! `delete`: a file, or a directory with everything below it; never the
//! root.

use super::{MemoryTool, Outcome, parse};
use crate::render;
use crate::result::Content;
use crate::store::{Context, DeleteIf, DeleteOptions, MemoryStore, StoreError};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn delete(&self, raw: &str, context: Context<'_>) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::delete_root());
        }
        let options = DeleteOptions {
            condition: DeleteIf::Exists,
            context,
        };
        match self.store.delete_opts(&path, options) {
            Ok(_) => Ok(Content::Text(render::deleted(raw))),
            Err(StoreError::NotFound { .. }) => Err(render::missing(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }
}
