//! Backups: a whole store as one versioned JSON document, to keep a copy or
//! to move a store between backends (the `claude-memory` CLI's `export` and
//! `import`).
//!
//! - [`format`](mod@format): the document, [`Backup`] and its [`Entry`]s, and its
//!   versions (version 1 documents are still read; newer ones are refused).
//! - `export`: [`Backup::of_store`] reads a store into memory;
//!   [`Backup::write_store`] streams it, one file at a time, refusing
//!   first what an import with the same limits would refuse (both only
//!   read the store).
//! - `plan`: everything an import checks before it writes.
//! - `restore`: [`Backup::restore`] writes all or nothing.
//! - `output`: [`OutputFile`], where a backup written to a path goes: a
//!   regular file replaced atomically and privately, a FIFO or device
//!   written into, anything else refused.
//!
//! ```
//! use claude_memory::backup::{Backup, ExportOptions, ImportOptions};
//! use claude_memory::{Config, InMemoryStore};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (from, to, config) = (InMemoryStore::new(), InMemoryStore::new(), Config::default());
//! // Into any writer (a file, stdout), one file in memory at a time.
//! let mut json = Vec::new();
//! Backup::write_store(&from, &mut json, &ExportOptions::new().limits_of(&config))?;
//! let options = ImportOptions::new().limits_of(&config);
//! Backup::from_json(std::str::from_utf8(&json)?)?.restore(&to, &options)?;
//! # Ok(())
//! # }
//! ```

mod export;
pub mod format;
mod output;
mod plan;
mod restore;

use serde_json::Value;

pub use export::{ExportError, ExportOptions, ExportProblem, ExportSummary};
pub use format::{Backup, Content, Entry, FORMAT, FormatError, OLDEST_VERSION, VERSION};
pub use output::OutputFile;
pub use plan::{ImportOptions, Problem};
pub use restore::ImportReport;

use crate::store::{MemoryStore, StoreError, StoreResult};

/// Why an import failed. In every case but [`UndoFailed`](Self::UndoFailed)
/// the store is as it was before.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The document is not a backup this crate reads.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The checks found problems; nothing was written.
    #[error("{}", refused(.0))]
    Refused(Vec<Problem>),
    /// A storage failure; what had been written was undone.
    #[error("{0} (nothing was imported: what had been written was undone)")]
    Store(#[from] StoreError),
    /// A write failed and so did part of its undo: the store holds part of
    /// the import.
    #[error("{error}; undoing the partial import failed too, the store holds part of it: {}", list(.failures))]
    UndoFailed {
        /// The write that failed (boxed: this variant is rare and large).
        error: Box<StoreError>,
        /// What could not be undone.
        failures: Vec<StoreError>,
    },
}

fn refused(problems: &[Problem]) -> String {
    let mut text = format!(
        "nothing was imported: {} problem{} found",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        text.push_str("\n  ");
        text.push_str(&p.to_string());
    }
    text
}

fn list(errors: &[StoreError]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// The store as a version 1 document (files only, no times or empty
/// directories), for callers of the first API. New code should use
/// [`Backup::of_store`], which writes the current [`VERSION`].
pub fn export<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Value> {
    let mut backup = Backup::of_store(store)?;
    backup.version = 1;
    backup.files.retain(|e| !e.directory);
    for entry in &mut backup.files {
        entry.modified = None;
    }
    Ok(serde_json::to_value(&backup).unwrap_or_default())
}

/// Imports a document of any readable version, all or nothing and without
/// size limits (see [`Backup::restore`]); returns how many files were
/// written.
pub fn import<S: MemoryStore + ?Sized>(
    store: &S,
    doc: &Value,
    overwrite: bool,
) -> Result<usize, ImportError> {
    let backup = Backup::from_value(doc)?;
    let report = backup.restore(store, &ImportOptions::new().overwrite(overwrite))?;
    Ok(report.files())
}
