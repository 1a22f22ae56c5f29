//! Writing a checked import all-or-nothing: every write is logged, and if
//! one fails (a disk error, or another writer getting there between the
//! check and the write) the log is undone, newest first, so the store is
//! left as it was.

use crate::path::MemoryPath;
use crate::store::{EntryKind, MemoryStore, MemoryStoreExt as _, StoreError, WriteMode};

use super::ImportError;
use super::format::Backup;
use super::plan::{ImportOptions, Plan, Step, plan};

/// What [`Backup::restore`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportReport {
    /// Files created.
    pub created: usize,
    /// Existing files replaced.
    pub replaced: usize,
    /// Empty directories created.
    pub directories: usize,
}

impl ImportReport {
    /// Files written, created or replaced.
    pub fn files(&self) -> usize {
        self.created + self.replaced
    }
}

/// The name of the file written (and removed at once) to make an empty
/// directory, since stores make directories only as parents of files. The
/// directory is new (checked), so nothing else can be at that name.
const PLACEHOLDER: &str = ".import-placeholder";

/// One done write, for the undo.
enum Done {
    Created(MemoryPath),
    Replaced(MemoryPath, Vec<u8>),
    /// A write the store could not confirm (no answer came): it may have
    /// happened, so the undo puts back `old` (`None`: removes the file)
    /// if the path holds what was sent.
    Unsure {
        path: MemoryPath,
        sent: Vec<u8>,
        old: Option<Vec<u8>>,
    },
}

impl Backup {
    /// Imports this backup into `store`, all or nothing.
    ///
    /// First everything is checked, without writing: paths, encodings and
    /// times, duplicates and files-under-files inside the backup, the size
    /// limits of `options`, and every entry against the store (an existing
    /// file is refused unless `options.overwrite`; a file never replaces a
    /// directory or the reverse). Any problem refuses the whole import with
    /// [`ImportError::Refused`], listing them all.
    ///
    /// Then it writes. New files are written create-if-absent and replaced
    /// ones only if unchanged since the check, so a concurrent writer is
    /// never overwritten. If any write fails, what was written is undone
    /// (created files and directories removed, replaced files restored)
    /// and the error returned, as [`ImportError::Store`]; only if the undo
    /// fails too is it [`ImportError::UndoFailed`].
    ///
    /// Restored files carry the time of the import as their modification
    /// time: stores have no primitive to set it, so the backup's `modified`
    /// times are checked but not applied.
    pub fn restore<S: MemoryStore + ?Sized>(
        &self,
        store: &S,
        options: &ImportOptions,
    ) -> Result<ImportReport, ImportError> {
        let plan = plan(store, self, options)?;
        let mut done = Vec::with_capacity(plan.steps.len());
        match write(store, &plan, &mut done) {
            Ok(report) => Ok(report),
            Err(error) => {
                let failures = undo(store, &plan, done);
                if failures.is_empty() {
                    Err(ImportError::Store(error))
                } else {
                    Err(ImportError::UndoFailed {
                        error: Box::new(error),
                        failures,
                    })
                }
            }
        }
    }
}

fn write<S: MemoryStore + ?Sized>(
    store: &S,
    plan: &Plan,
    done: &mut Vec<Done>,
) -> Result<ImportReport, StoreError> {
    let mut report = ImportReport::default();
    // A write that may have happened is undone as one that did.
    let unsure = |done: &mut Vec<Done>, e: StoreError, path: &MemoryPath, sent, old| {
        if matches!(e, StoreError::OutcomeUnknown { .. }) {
            done.push(Done::Unsure {
                path: path.clone(),
                sent,
                old,
            });
        }
        e
    };
    for step in &plan.steps {
        match step {
            Step::Create { path, data } => {
                store
                    .write(path, data, WriteMode::Create)
                    .map_err(|e| unsure(done, e, path, data.clone(), None))?;
                done.push(Done::Created(path.clone()));
                report.created += 1;
            }
            Step::Replace { path, data, old } => {
                store
                    .write(path, data, WriteMode::Update(old.version))
                    .map_err(|e| unsure(done, e, path, data.clone(), Some(old.data.clone())))?;
                done.push(Done::Replaced(path.clone(), old.data.clone()));
                report.replaced += 1;
            }
            Step::MakeDir { path } => {
                let Some(placeholder) = path.join(PLACEHOLDER) else {
                    return Err(StoreError::Invalid {
                        path: path.clone(),
                        reason: "cannot name a placeholder in it",
                    });
                };
                store.write(&placeholder, &[], WriteMode::Create)?;
                done.push(Done::Created(placeholder.clone()));
                store.delete(&placeholder)?;
                done.pop();
                report.directories += 1;
            }
        }
    }
    Ok(report)
}

/// Undoes `done`, newest first, then removes the directories the plan
/// created (deepest first) if they are empty. Returns what failed.
fn undo<S: MemoryStore + ?Sized>(store: &S, plan: &Plan, done: Vec<Done>) -> Vec<StoreError> {
    let mut failures = Vec::new();
    for step in done.into_iter().rev() {
        let result = match step {
            Done::Created(path) => match store.delete(&path) {
                Err(StoreError::NotFound { .. }) => Ok(()),
                other => other,
            },
            Done::Replaced(path, old) => store.write(&path, &old, WriteMode::Overwrite).map(|_| ()),
            Done::Unsure { path, sent, old } => match store.read(&path, sent.len() as u64) {
                Ok(now) if now.data == sent => match old {
                    Some(old) => store
                        .write(&path, &old, WriteMode::Update(now.version))
                        .map(|_| ()),
                    None => store.delete(&path),
                },
                // Not written, or written over since: not this import's.
                Ok(_) | Err(StoreError::NotFound { .. } | StoreError::TooLarge { .. }) => Ok(()),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = result {
            failures.push(e);
        }
    }
    let mut dirs: Vec<&MemoryPath> = plan.new_dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().len()));
    for dir in dirs {
        let result = match store.stat(dir) {
            Ok(Some(m)) if m.kind == EntryKind::Directory => match store.list(dir) {
                Ok(children) if children.is_empty() => store.delete(dir),
                Ok(_) => Ok(()), // someone else's files: leave them
                Err(e) => Err(e),
            },
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            failures.push(e);
        }
    }
    failures
}
