//! The checks every write passes before it reaches the store: the content
//! policy and the file size limit. (The store size limit is checked by the
//! store, atomically with the write: `MemoryStore::write_within` and
//! `update_within`.)

use std::borrow::Cow;

use super::MemoryTool;
use crate::path::MemoryPath;
use crate::policy::Decision;
use crate::render;
use crate::store::MemoryStore;

impl<S: MemoryStore> MemoryTool<S> {
    /// The content policy's verdict on a write: the text to write, or the
    /// model-facing refusal.
    pub(super) fn apply_policy<'t>(
        &self,
        path: &MemoryPath,
        text: Cow<'t, str>,
    ) -> Result<Cow<'t, str>, String> {
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
        refusal: impl FnOnce(&str) -> String,
    ) -> Result<(), String> {
        match self.policy.as_ref().and_then(|p| p.check_path(path)) {
            Some(reason) => Err(refusal(&reason)),
            None => Ok(()),
        }
    }

    pub(super) fn check_file_size(&self, raw: &str, size: u64) -> Result<(), String> {
        let limit = self.config.max_file_size;
        if size > limit {
            return Err(render::file_too_large(raw, size, limit));
        }
        Ok(())
    }
}
