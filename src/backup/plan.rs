//! Checking a whole [`Backup`] against a store before anything is written:
//! paths, encodings, duplicates and clashes inside the backup, the size
//! limits, and conflicts with what the store already holds. The result is
//! a [`Plan`] that only writes, or every problem found.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::config::Config;
use crate::path::{MemoryPath, PathError};
use crate::store::{
    EntryKind, FileContent, MemoryStore, MemoryStoreExt as _, Metadata, StoreError,
};

use super::ImportError;
use super::format::{Backup, Content};

/// How [`Backup::restore`] treats the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Replace existing files (default: an existing file is a problem).
    /// A directory is never replaced by a file, nor a file by a directory.
    pub overwrite: bool,
    /// Largest file the backup may hold, in bytes (default: none).
    pub max_file_size: Option<u64>,
    /// Largest total the store may reach after the import (default: none).
    pub max_store_size: Option<u64>,
}

impl ImportOptions {
    /// No overwriting, no limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`overwrite`](Self::overwrite).
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// The handler's limits: `max_file_size` and `max_store_size` of
    /// `config`, so an import cannot bring in what the model could not
    /// write.
    pub fn limits_of(mut self, config: &Config) -> Self {
        self.max_file_size = Some(config.max_file_size);
        self.max_store_size = config.max_store_size;
        self
    }
}

/// One reason a backup cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// An entry's path is not a valid memory path.
    InvalidPath {
        /// The entry's position in `files`.
        index: usize,
        /// The path as written.
        path: String,
        /// Why.
        reason: PathError,
    },
    /// An entry's content or time is malformed (see [`Entry`](super::Entry)).
    Malformed {
        /// The entry's position in `files`.
        index: usize,
        /// The path as written.
        path: String,
        /// Why.
        reason: String,
    },
    /// Two entries name the same path.
    Duplicate {
        /// The later entry's position.
        index: usize,
        /// The first entry's position.
        first: usize,
        /// The path.
        path: String,
    },
    /// An entry lies below a path that is a file, in the backup or in the
    /// store.
    UnderAFile {
        /// The entry's path.
        path: String,
        /// The file above it.
        file: String,
        /// Whether that file is in the store (else in the backup).
        in_store: bool,
    },
    /// A file exists at the path, and overwriting was not asked for.
    Exists {
        /// The path.
        path: String,
    },
    /// The store has a directory where the backup has a file, or a file
    /// where it has a directory.
    KindClash {
        /// The path.
        path: String,
        /// What the store has there.
        store_has: EntryKind,
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
    /// The store would exceed its size limit.
    StoreTooLarge {
        /// The total after the import.
        after: u64,
        /// The limit.
        limit: u64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::InvalidPath {
                index,
                path,
                reason,
            } => write!(
                f,
                "entry {index}: {path} is not a valid memory path: {reason}"
            ),
            Problem::Malformed {
                index,
                path,
                reason,
            } => write!(f, "entry {index} ({path}): {reason}"),
            Problem::Duplicate { index, first, path } => {
                write!(f, "entry {index}: {path} is already entry {first}")
            }
            Problem::UnderAFile {
                path,
                file,
                in_store: true,
            } => write!(f, "{path}: {file} is a file in the store"),
            Problem::UnderAFile {
                path,
                file,
                in_store: false,
            } => write!(f, "{path}: {file} is a file in the backup"),
            Problem::Exists { path } => {
                write!(
                    f,
                    "{path} already exists (allow overwriting to replace it: --overwrite on the command line, ImportOptions::overwrite(true) in code)"
                )
            }
            Problem::KindClash {
                path,
                store_has: EntryKind::Directory,
            } => write!(
                f,
                "{path} is a directory in the store, a file in the backup"
            ),
            Problem::KindClash { path, .. } => {
                write!(
                    f,
                    "{path} is a file in the store, a directory in the backup"
                )
            }
            Problem::FileTooLarge { path, len, limit } => {
                write!(
                    f,
                    "{path} is {len} bytes, over the file size limit of {limit}"
                )
            }
            Problem::StoreTooLarge { after, limit } => write!(
                f,
                "the store would hold {after} bytes, over its size limit of {limit}"
            ),
        }
    }
}

/// One write of a checked import.
#[derive(Debug)]
pub(super) enum Step {
    /// A new file (written create-if-absent).
    Create { path: MemoryPath, data: Vec<u8> },
    /// A file replacing `old` (written only if still at `old`'s version).
    Replace {
        path: MemoryPath,
        data: Vec<u8>,
        old: FileContent,
    },
    /// A new empty directory.
    MakeDir { path: MemoryPath },
}

/// A checked import: what to write, and the directories it will create
/// (deepest last), for an undo.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) steps: Vec<Step>,
    pub(super) new_dirs: Vec<MemoryPath>,
}

/// Checks everything; returns the plan or every problem found.
pub(super) fn plan<S: MemoryStore + ?Sized>(
    store: &S,
    backup: &Backup,
    options: &ImportOptions,
) -> Result<Plan, ImportError> {
    let mut problems = Vec::new();
    // 1. Each entry on its own.
    let mut entries = Vec::with_capacity(backup.files.len());
    let mut seen: HashMap<MemoryPath, (usize, bool)> = HashMap::new();
    for (index, entry) in backup.files.iter().enumerate() {
        let raw = &entry.path;
        // A shared base store's export holds tenant paths longer than the
        // model's 1,024 bytes (the tenant prefix comes on top): restore
        // them too, from their valid components.
        let parsed = match MemoryPath::parse(raw) {
            Err(PathError::TooLong) => MemoryPath::from_stored(raw).ok_or(PathError::TooLong),
            other => other,
        };
        let path = match parsed {
            Ok(path) => path,
            Err(reason) => {
                problems.push(Problem::InvalidPath {
                    index,
                    path: raw.clone(),
                    reason,
                });
                continue;
            }
        };
        let content = match entry.content() {
            Ok(content) => content,
            Err(reason) => {
                problems.push(Problem::Malformed {
                    index,
                    path: raw.clone(),
                    reason,
                });
                continue;
            }
        };
        if let Err(reason) = entry.modified_time() {
            problems.push(Problem::Malformed {
                index,
                path: raw.clone(),
                reason,
            });
        }
        let is_file = matches!(content, Content::File(_));
        if path.is_root() {
            if is_file {
                problems.push(Problem::Malformed {
                    index,
                    path: raw.clone(),
                    reason: "the root is a directory, not a file".to_owned(),
                });
            }
            continue;
        }
        if let Content::File(data) = &content
            && let Some(limit) = options.max_file_size
            && data.len() as u64 > limit
        {
            problems.push(Problem::FileTooLarge {
                path: path.normalized(),
                len: data.len() as u64,
                limit,
            });
        }
        if let Some(&(first, _)) = seen.get(&path) {
            problems.push(Problem::Duplicate {
                index,
                first,
                path: path.normalized(),
            });
            continue;
        }
        seen.insert(path.clone(), (index, is_file));
        entries.push((path, content));
    }
    // 2. Clashes inside the backup: anything below one of its files.
    for (path, _) in &entries {
        if let Some(file) = path
            .ancestors()
            .find(|a| seen.get(a).is_some_and(|&(_, is_file)| is_file))
        {
            problems.push(Problem::UnderAFile {
                path: path.normalized(),
                file: file.normalized(),
                in_store: false,
            });
        }
    }
    // Directories that entries below them will make anyway.
    let implied: HashSet<MemoryPath> = entries
        .iter()
        .flat_map(|(path, _)| path.ancestors())
        .collect();
    // 3. Against the store.
    let mut stats: HashMap<MemoryPath, Option<Metadata>> = HashMap::new();
    let mut stat = |p: &MemoryPath| -> Result<Option<Metadata>, StoreError> {
        if let Some(m) = stats.get(p) {
            return Ok(m.clone());
        }
        let m = store.stat(p)?;
        stats.insert(p.clone(), m.clone());
        Ok(m)
    };
    let mut plan = Plan::default();
    let mut new_dirs = HashSet::new();
    let (mut added, mut removed) = (0u64, 0u64);
    for (path, content) in entries {
        let mut blocked = false;
        for ancestor in path.ancestors().filter(|a| !a.is_root()) {
            match stat(&ancestor)? {
                Some(Metadata {
                    kind: EntryKind::File,
                    ..
                }) => {
                    problems.push(Problem::UnderAFile {
                        path: path.normalized(),
                        file: ancestor.normalized(),
                        in_store: true,
                    });
                    blocked = true;
                    break;
                }
                Some(_) => {}
                None => {
                    if new_dirs.insert(ancestor.clone()) {
                        plan.new_dirs.push(ancestor);
                    }
                }
            }
        }
        if blocked {
            continue;
        }
        let existing = stat(&path)?.map(|m| m.kind);
        match (content, existing) {
            (Content::Directory, None) => {
                if new_dirs.insert(path.clone()) {
                    plan.new_dirs.push(path.clone());
                }
                if !implied.contains(&path) {
                    plan.steps.push(Step::MakeDir { path });
                }
            }
            (Content::Directory, Some(EntryKind::Directory)) => {}
            (Content::File(data), None) => {
                added += data.len() as u64;
                plan.steps.push(Step::Create { path, data });
            }
            (Content::File(data), Some(EntryKind::File)) if options.overwrite => {
                let old = store.read(&path, u64::MAX)?;
                added += data.len() as u64;
                removed += old.data.len() as u64;
                plan.steps.push(Step::Replace { path, data, old });
            }
            (Content::File(_), Some(EntryKind::File)) => problems.push(Problem::Exists {
                path: path.normalized(),
            }),
            (_, Some(store_has)) => problems.push(Problem::KindClash {
                path: path.normalized(),
                store_has,
            }),
        }
    }
    if let Some(limit) = options.max_store_size {
        let after = store.total_size()?.saturating_sub(removed) + added;
        if after > limit {
            problems.push(Problem::StoreTooLarge { after, limit });
        }
    }
    if problems.is_empty() {
        Ok(plan)
    } else {
        Err(ImportError::Refused(problems))
    }
}
