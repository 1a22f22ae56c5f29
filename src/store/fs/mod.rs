//! `FilesystemStore`: memories as files under a root directory, one
//! implementation per platform family behind one type.
//!
//! - [`unix`]: directory handles and the `*at` system calls (rustix):
//!   `openat2(RESOLVE_BENEATH)` on Linux with an `O_NOFOLLOW` walk
//!   elsewhere, `renameat2`/`renameatx_np` no-replace renames,
//!   `F_FULLFSYNC` on macOS.
//! - [`windows`]: the chain of directories held open without delete
//!   sharing, reparse points refused, hard-link no-replace creates, names
//!   Windows cannot store refused.
//! - `lock`: the write lock both take around every change.
//! - `version`: the content hash both use for compare-and-swap.
//!
//! docs/safety.md says where the platforms' guarantees differ.

mod lock;
#[cfg(unix)]
mod unix;
mod version;
#[cfg(windows)]
mod windows;

#[cfg(unix)]
pub use unix::{FilesystemStore, FilesystemStoreBuilder};
#[cfg(windows)]
pub use windows::{FilesystemStore, FilesystemStoreBuilder};
