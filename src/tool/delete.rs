//! `delete`: a file, or a directory with everything below it; never the
//! root.

use super::{MemoryTool, Outcome, parse};
use crate::render;
use crate::result::Content;
use crate::store::{MemoryStore, MemoryStoreExt as _, StoreError};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn delete(&self, raw: &str) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::delete_root());
        }
        match self.store.delete(&path) {
            Ok(()) => Ok(Content::Text(render::deleted(raw))),
            Err(StoreError::NotFound { .. }) => Err(render::missing(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }
}
