//! Export and import of a whole store as one JSON document, so a store can
//! be backed up or moved between backends (used by the `claude-memory`
//! CLI).

use serde_json::{Value, json};

use crate::base64;
use crate::path::{MemoryPath, PathError};
use crate::store::{Flow, MemoryStore, Order, Step, StoreError, StoreResult, WriteMode, walk};

/// The `format` field of an export.
pub const FORMAT: &str = "claude-memory-export";

/// Every file of `store` (hidden ones included): UTF-8 files as `text`,
/// others as `base64`.
pub fn export<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Value> {
    let mut files = Vec::new();
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        if let Step::File { dir, entry, .. } = step
            && let Some(child) = dir.join(&entry.name)
        {
            let data = store.read(&child, u64::MAX)?.data;
            let path = child.normalized();
            files.push(match String::from_utf8(data) {
                Ok(text) => json!({"path": path, "text": text}),
                Err(e) => json!({"path": path, "base64": base64::encode(e.as_bytes())}),
            });
        }
        Ok(Flow::Continue)
    })?;
    Ok(json!({"format": FORMAT, "version": 1, "files": files}))
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The document is not an export.
    #[error("not a claude-memory export: {0}")]
    Format(String),
    /// A storage failure.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes every file of an export into `store`; existing files are refused
/// unless `overwrite`. Returns how many files were written.
pub fn import<S: MemoryStore + ?Sized>(
    store: &S,
    doc: &Value,
    overwrite: bool,
) -> Result<usize, ImportError> {
    if doc.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(ImportError::Format(
            "the format field is missing or wrong".into(),
        ));
    }
    let files = doc
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::Format("no files array".into()))?;
    // Check everything before writing anything.
    let mut planned = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let path = file
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| ImportError::Format(format!("file {i} has no path")))?;
        // A shared base store's export holds tenant paths longer than the
        // model's 1,024 bytes (the tenant prefix comes on top): restore
        // them too, from their valid components.
        let parsed = match MemoryPath::parse(path) {
            Err(PathError::TooLong) => MemoryPath::from_stored(path).ok_or(PathError::TooLong),
            other => other,
        };
        let path = parsed.map_err(|e| {
            ImportError::Format(format!("file {i}: {path} is not a valid memory path: {e}"))
        })?;
        let data = match (
            file.get("text").and_then(Value::as_str),
            file.get("base64").and_then(Value::as_str),
        ) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::decode(b64)
                .ok_or_else(|| ImportError::Format(format!("file {i}: bad base64")))?,
            _ => {
                return Err(ImportError::Format(format!(
                    "file {i} needs exactly one of text or base64"
                )));
            }
        };
        planned.push((path, data));
    }
    let mode = if overwrite {
        WriteMode::Overwrite
    } else {
        WriteMode::Create
    };
    for (path, data) in &planned {
        store.write(path, data, mode)?;
    }
    Ok(planned.len())
}
