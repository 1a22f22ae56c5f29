//! The operation an I/O error happened in, as a closed set.
//!
//! Its words reach the model (`Error: Could not {op} (…) for {path}`), so
//! they are a fixed vocabulary rather than a free string a backend could
//! fill with a host path or a driver message (fs-err names operations the
//! same way).

use std::fmt;

/// What a store was doing when an I/O call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Opening a file.
    Open,
    /// Opening a directory.
    OpenDirectory,
    /// Reading a file's metadata.
    Stat,
    /// Reading a file's bytes.
    Read,
    /// Writing a file's bytes.
    Write,
    /// Flushing a file or directory to stable storage.
    Sync,
    /// Creating a directory.
    CreateDirectory,
    /// Listing a directory.
    List,
    /// Removing a file or directory.
    Delete,
    /// Moving a file or directory.
    Rename,
    /// Taking the store's lock.
    Lock,
}

impl Op {
    /// The words shown after `Could not`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::OpenDirectory => "open directory",
            Op::Stat => "stat",
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "sync",
            Op::CreateDirectory => "create directory",
            Op::List => "list",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Lock => "lock",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
