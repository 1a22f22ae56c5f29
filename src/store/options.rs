//! The option values of [`MemoryStore`]'s primitives: how a write treats
//! what is there, a size cap, and which entry a delete may remove.

use super::{MemoryStore, Metadata, StoreError, StoreResult, Version, walk};
use crate::path::MemoryPath;

/// How a write treats an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Create only if nothing exists at the path (atomic create-if-absent);
    /// otherwise [`StoreError::AlreadyExists`].
    Create,
    /// Create or replace a file; a directory is [`StoreError::IsADirectory`].
    Overwrite,
    /// Replace the file only if it is still at this version; otherwise
    /// [`StoreError::Conflict`], or [`StoreError::NotFound`] if it is gone.
    Update(Version),
}

/// A size cap on part of a store: the bytes of every file below `scope`
/// (hidden ones included) may not exceed `max_bytes` after the write.
///
/// `scope` is the root for a whole store, or (in a shared base) the
/// directory of one tenant; the path written must be below it.
#[derive(Debug, Clone, Copy)]
pub struct Quota<'a> {
    /// The directory whose files are counted (it need not exist yet).
    pub scope: &'a MemoryPath,
    /// The most bytes its files may hold after the write.
    pub max_bytes: u64,
}

impl Quota<'_> {
    /// The error for a write to `path` that would take this quota's scope
    /// to `total` bytes, if that is over the cap: for a store's own check,
    /// made under the same lock as its write.
    pub fn check(&self, path: &MemoryPath, total: u64) -> StoreResult<()> {
        if total > self.max_bytes {
            return Err(StoreError::StoreFull {
                path: path.clone(),
                total,
                limit: self.max_bytes,
            });
        }
        Ok(())
    }

    /// [`check`](Self::check) of a write of `new` bytes in place of a file
    /// of `replaced` bytes, on a walk of the scope: for a store that
    /// holds its write lock meanwhile.
    pub(crate) fn check_walked<S: MemoryStore + ?Sized>(
        &self,
        store: &S,
        path: &MemoryPath,
        replaced: u64,
        new: u64,
    ) -> StoreResult<()> {
        let total = bytes_below(store, self.scope)?;
        self.check(path, total.saturating_sub(replaced).saturating_add(new))
    }
}

/// Who asks for a change, for a store that records changes (a
/// [`HistoryStore`](crate::history::HistoryStore) keeps it with each
/// version); every other store passes it on or ignores it.
/// [`MemoryTool`](crate::MemoryTool) fills it from each `tool_use` block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Context<'a> {
    /// The call that makes the change, such as the `tool_use` block's id.
    pub call: Option<&'a str>,
    /// A note kept with the change's versions, such as what a revert
    /// went back to.
    pub note: Option<&'a str>,
}

/// The options of [`MemoryStore::write_opts`].
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions<'a> {
    /// What an entry already at the path does to the write.
    pub mode: WriteMode,
    /// A size cap checked atomically with the write: over it, nothing is
    /// written and the answer is [`StoreError::StoreFull`].
    pub quota: Option<Quota<'a>>,
    /// Who asks.
    pub context: Context<'a>,
}

impl From<WriteMode> for WriteOptions<'_> {
    fn from(mode: WriteMode) -> Self {
        WriteOptions {
            mode,
            quota: None,
            context: Context::default(),
        }
    }
}

/// The options of [`MemoryStore::update_opts`].
#[derive(Debug, Clone, Copy)]
pub struct UpdateOptions<'a> {
    /// The largest file the edit reads; a larger one is
    /// [`StoreError::TooLarge`].
    pub limit: u64,
    /// A size cap on the edited bytes, as in [`WriteOptions::quota`].
    pub quota: Option<Quota<'a>>,
    /// Who asks.
    pub context: Context<'a>,
}

impl UpdateOptions<'_> {
    /// An edit of a file of at most `limit` bytes, with no cap.
    pub fn new(limit: u64) -> Self {
        UpdateOptions {
            limit,
            quota: None,
            context: Context::default(),
        }
    }
}

/// The options of [`MemoryStore::delete_opts`].
#[derive(Debug)]
pub struct DeleteOptions<'a> {
    /// Which entry may go.
    pub condition: DeleteIf<'a>,
    /// Who asks.
    pub context: Context<'a>,
}

impl<'a> From<DeleteIf<'a>> for DeleteOptions<'a> {
    fn from(condition: DeleteIf<'a>) -> Self {
        DeleteOptions {
            condition,
            context: Context::default(),
        }
    }
}

/// The options of [`MemoryStore::rename_opts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RenameOptions<'a> {
    /// Who asks.
    pub context: Context<'a>,
}

/// Which entry [`MemoryStore::delete_opts`] may remove, decided at the
/// instant of the delete, so another writer's change is never lost to it.
pub enum DeleteIf<'a> {
    /// Whatever is there: a file, or a directory with everything below
    /// it. Nothing there is [`StoreError::NotFound`].
    Exists,
    /// Only an empty directory (`rmdir`); a full one, a file or nothing
    /// answers `Ok(false)`. Expiry uses it, so an entry another agent has
    /// just created in the directory is never removed.
    EmptyDir,
    /// Only a file whose metadata the closure accepts; a directory,
    /// nothing, or a refusal answers `Ok(false)`. Expiry uses it to delete
    /// a file only while it is still old. The closure may run under the
    /// store's lock: it must not call the store.
    FileWhere(&'a mut dyn FnMut(&Metadata) -> bool),
}

impl std::fmt::Debug for DeleteIf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeleteIf::Exists => "Exists",
            DeleteIf::EmptyDir => "EmptyDir",
            DeleteIf::FileWhere(_) => "FileWhere(..)",
        })
    }
}

/// What [`MemoryStore::exclusive`] holds while its closure runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// The store's write lock: every other writer, in every process,
    /// waits until the closure returns.
    Held,
    /// Nothing: the store has no lock its writers share, so another
    /// writer may change the store meanwhile.
    Absent,
}

/// Bytes of the files below `scope`, 0 if it does not exist (yet) or is
/// not a directory: the quota measure of a store that walks.
fn bytes_below<S: MemoryStore + ?Sized>(store: &S, scope: &MemoryPath) -> StoreResult<u64> {
    match walk::total_size(store, scope) {
        Err(StoreError::NotFound { .. } | StoreError::NotADirectory { .. }) => Ok(0),
        other => other,
    }
}
