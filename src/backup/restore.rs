//! Writing a checked import all-or-nothing: every write is logged, and if
//! one fails (a disk error, or another writer getting there between the
//! check and the write) the log is undone, newest first, so the store is
//! left as it was.

use crate::path::MemoryPath;
use crate::store::{DeleteIf, EntryKind, MemoryStore, MemoryStoreExt as _, StoreError, WriteMode};

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

/// One write, for the undo: the bytes written at `path`, and what was
/// there before (`None`: nothing). Writes whose outcome is unknown (the
/// store got no answer) are kept too: they may have happened.
struct Done {
    path: MemoryPath,
    sent: Vec<u8>,
    old: Option<Vec<u8>>,
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
    // A write that may have happened (no answer came) is undone as one
    // that did: the undo looks at what is there first.
    let written = |done: &mut Vec<Done>, path: &MemoryPath, sent: &[u8], old, mode| {
        let result = store.write(path, sent, mode);
        if matches!(result, Ok(_) | Err(StoreError::OutcomeUnknown { .. })) {
            done.push(Done {
                path: path.clone(),
                sent: sent.to_vec(),
                old,
            });
        }
        result.map(|_| ())
    };
    for step in &plan.steps {
        match step {
            Step::Create { path, data } => {
                written(done, path, data, None, WriteMode::Create)?;
                report.created += 1;
            }
            Step::Replace { path, data, old } => {
                let mode = WriteMode::Update(old.version);
                written(done, path, data, Some(old.data.clone()), mode)?;
                report.replaced += 1;
            }
            Step::MakeDir { path } => {
                let Some(placeholder) = path.join(PLACEHOLDER) else {
                    return Err(StoreError::Invalid {
                        path: path.clone(),
                        reason: "cannot name a placeholder in it",
                    });
                };
                written(done, &placeholder, &[], None, WriteMode::Create)?;
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
        if let Err(e) = put_back(store, step) {
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

/// Undoes one write if the path still holds what it wrote: puts back
/// what was there (only over what it wrote), or removes the file (only
/// if unchanged since it was checked). Another writer's change since is
/// theirs: left as it is.
fn put_back<S: MemoryStore + ?Sized>(store: &S, done: Done) -> Result<(), StoreError> {
    let Done { path, sent, old } = done;
    let Some(before) = store.stat(&path)? else {
        return Ok(());
    };
    let now = match store.read(&path, sent.len() as u64) {
        Ok(now) if now.data == sent => now,
        Ok(_) | Err(StoreError::NotFound { .. } | StoreError::TooLarge { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    match old {
        Some(old) => store
            .write(&path, &old, WriteMode::Update(now.version))
            .map(|_| ()),
        None => {
            let mut same = |m: &crate::store::Metadata| *m == before;
            store
                .delete_opts(&path, DeleteIf::FileWhere(&mut same).into())
                .map(|_| ())
        }
    }
}
