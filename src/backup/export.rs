//! Reading a whole store into a backup: [`Backup::of_store`] into memory,
//! [`Backup::write_store`] streamed into a writer one file at a time,
//! after refusing what an import with the same limits would refuse.

use std::fmt;
use std::io::{self, Write};
use std::time::SystemTime;

use crate::config::Config;
use crate::path::MemoryPath;
use crate::store::{EntryKind, Flow, MemoryStore, Order, Step, StoreError, StoreResult, walk};

use super::format::{Backup, Entry, JsonWriter, VERSION};

/// The limits [`Backup::write_store`] applies: the same as
/// [`ImportOptions`](super::ImportOptions)' own, so what an import with
/// these limits would refuse is never exported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportOptions {
    /// Largest file exported, in bytes (default: none).
    pub max_file_size: Option<u64>,
    /// Largest total of the files exported (default: none).
    pub max_store_size: Option<u64>,
}

impl ExportOptions {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// The handler's limits: `max_file_size` and `max_store_size` of
    /// `config`, as [`ImportOptions::limits_of`](super::ImportOptions::limits_of).
    pub fn limits_of(mut self, config: &Config) -> Self {
        self.max_file_size = Some(config.max_file_size);
        self.max_store_size = config.max_store_size;
        self
    }
}

/// One reason a store cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportProblem {
    /// An entry whose name no memory path can spell (made outside the
    /// store's API, or by a release with looser path rules, such as a name
    /// not in NFC): a backup would silently miss it.
    Unspellable {
        /// Its directory's path and its name (a directory ends in `/`).
        path: String,
    },
    /// A file over the file size limit.
    FileTooLarge {
        /// The path.
        path: String,
        /// Its size.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The files total more than the store size limit.
    StoreTooLarge {
        /// Their total.
        total: u64,
        /// The limit.
        limit: u64,
    },
}

impl fmt::Display for ExportProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The name is anything a local process chose: shown escaped,
            // so it can neither forge a line nor drive the terminal.
            ExportProblem::Unspellable { path } => write!(
                f,
                "{}: no memory path can spell this name (made outside the store, or by a release with looser rules, such as a name not in NFC), so a backup would silently miss it; rename it on disk",
                crate::history::escape(path)
            ),
            ExportProblem::FileTooLarge { path, len, limit } => write!(
                f,
                "{path} is {len} bytes, over the file size limit of {limit}, which an import applies too"
            ),
            ExportProblem::StoreTooLarge { total, limit } => write!(
                f,
                "the files total {total} bytes, over the store size limit of {limit}, which an import applies too"
            ),
        }
    }
}

/// Why [`Backup::write_store`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The checks found problems; nothing was written.
    #[error("{}", refused(.0))]
    Refused(Vec<ExportProblem>),
    /// Reading the store failed, part way through.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the backup failed, part way through.
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn refused(problems: &[ExportProblem]) -> String {
    let mut text = format!(
        "nothing was exported: {} problem{} found",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        text.push_str("\n  ");
        text.push_str(&p.to_string());
    }
    text
}

/// What [`Backup::write_store`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The paths of the files written, in order.
    pub files: Vec<String>,
    /// Empty directories written.
    pub directories: usize,
}

/// An entry the walk found, before its content is read: a file (with its
/// listed size and time) or an empty directory.
struct Found {
    path: MemoryPath,
    file: Option<(u64, Option<SystemTime>)>,
}

/// Every file and empty directory of `store`, in path order, and the names
/// no memory path can spell. Reads no content.
fn survey<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<(Vec<Found>, Vec<String>)> {
    let mut found = Vec::new();
    let mut unspellable = Vec::new();
    // For each open directory, how many entries were found below it.
    let mut below: Vec<usize> = Vec::new();
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        match step {
            Step::Enter { path, .. } => {
                if let Some(n) = below.last_mut() {
                    *n += 1;
                }
                below.push(0);
                // The walk leaves out directories no path can spell:
                // name them, so the backup is not taken for complete.
                for e in store.list(path)? {
                    if e.kind == EntryKind::Directory && path.join(&e.name).is_none() {
                        unspellable.push(format!("{}/{}/", path.normalized(), e.name));
                    }
                }
            }
            Step::File { dir, entry, .. } => match dir.join(&entry.name) {
                Some(path) => {
                    found.push(Found {
                        path,
                        file: Some((entry.len, entry.modified)),
                    });
                    if let Some(n) = below.last_mut() {
                        *n += 1;
                    }
                }
                // A name no memory path can spell cannot be restored.
                None => unspellable.push(format!("{}/{}", dir.normalized(), entry.name)),
            },
            Step::Leave { path, depth } => {
                if below.pop() == Some(0) && depth > 0 {
                    found.push(Found {
                        path: path.clone(),
                        file: None,
                    });
                }
            }
        }
        Ok(Flow::Continue)
    })?;
    Ok((found, unspellable))
}

/// The entry for `found`, its content read within `limit`; `None` for a
/// file deleted since the walk.
fn read<S: MemoryStore + ?Sized>(
    store: &S,
    found: &Found,
    limit: u64,
) -> StoreResult<Option<Entry>> {
    let path = found.path.normalized();
    let Some((_, modified)) = found.file else {
        return Ok(Some(Entry::directory(path)));
    };
    match store.read(&found.path, limit) {
        Ok(content) => Ok(Some(Entry::file(path, content.data, modified))),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Backup {
    /// Every file of `store` (hidden ones included; UTF-8 files as `text`,
    /// others as `base64`) with its modification time, and every empty
    /// directory, in path order, all in memory, without limits: for a
    /// store of any size, use [`write_store`](Self::write_store). Names no
    /// memory path can spell are listed in
    /// [`unspellable`](Self::unspellable). Only reads the store.
    pub fn of_store<S: MemoryStore + ?Sized>(store: &S) -> StoreResult<Backup> {
        let (found, unspellable) = survey(store)?;
        let mut files = Vec::with_capacity(found.len());
        for f in &found {
            files.extend(read(store, f, u64::MAX)?);
        }
        let mut backup = Backup::new(files);
        backup.unspellable = unspellable;
        Ok(backup)
    }

    /// Writes the backup of `store` that [`of_store`](Self::of_store)
    /// makes, as [`to_json`](Self::to_json) lays it out, into `out`, one
    /// file at a time: memory holds one file, never the backup.
    ///
    /// First the store is walked without reading any content, and the
    /// export is refused with [`ExportError::Refused`], writing nothing,
    /// if any name is one no memory path can spell, or if a file or the
    /// total is over `options`' limits (what an import with those limits
    /// would refuse). A file deleted while the export runs is left out; a
    /// read or write failure after the start leaves `out` holding an
    /// incomplete document, which no import accepts. Only reads the store.
    pub fn write_store<S: MemoryStore + ?Sized>(
        store: &S,
        out: &mut dyn Write,
        options: &ExportOptions,
    ) -> Result<ExportSummary, ExportError> {
        let (found, unspellable) = survey(store)?;
        let mut problems: Vec<ExportProblem> = unspellable
            .into_iter()
            .map(|path| ExportProblem::Unspellable { path })
            .collect();
        let mut total = 0u64;
        for f in &found {
            let Some((len, _)) = f.file else { continue };
            total = total.saturating_add(len);
            if let Some(limit) = options.max_file_size
                && len > limit
            {
                problems.push(ExportProblem::FileTooLarge {
                    path: f.path.normalized(),
                    len,
                    limit,
                });
            }
        }
        if let Some(limit) = options.max_store_size
            && total > limit
        {
            problems.push(ExportProblem::StoreTooLarge { total, limit });
        }
        if !problems.is_empty() {
            return Err(ExportError::Refused(problems));
        }
        // A file that grew past the limit since the walk is not read whole.
        let limit = options.max_file_size.unwrap_or(u64::MAX);
        let mut summary = ExportSummary::default();
        let mut json = JsonWriter::start(out, super::FORMAT, VERSION)?;
        for f in &found {
            let Some(entry) = read(store, f, limit)? else {
                continue;
            };
            json.entry(&entry)?;
            if entry.directory {
                summary.directories += 1;
            } else {
                summary.files.push(entry.path);
            }
        }
        json.end()?;
        Ok(summary)
    }
}
