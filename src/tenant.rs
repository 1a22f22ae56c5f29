//! Tenant ids: the validated name of one user's (or project's) memories.
//!
//! A leaf value like [`MemoryPath`](crate::MemoryPath): the stores key rows
//! and directories by it, and [`TenantStore`](crate::store::TenantStore)
//! gives each tenant its own `/memories` inside a shared base store.

use std::path::{Path, PathBuf};

/// Longest tenant id, in bytes.
pub const MAX_TENANT_ID_BYTES: usize = 64;

/// A tenant id checked as strictly as a path: 1 to 64 lowercase ASCII letters,
/// digits, `_`, `-` or `.`, not starting or ending with `.`, and not a
/// name Windows reserves for a device (`con`, `prn`, `aux`, `nul`,
/// `com1`–`com9`, `lpt1`–`lpt9`, with or without an extension). It is safe
/// as a directory name and as a path component, and names the same
/// directory on every platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

/// Why a tenant id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TenantError {
    /// The id was empty.
    #[error("the tenant id is empty")]
    Empty,
    /// Longer than [`MAX_TENANT_ID_BYTES`].
    #[error("the tenant id is longer than 64 bytes")]
    TooLong,
    /// A character outside `[A-Za-z0-9_.-]` (capitals get [`TenantError::Uppercase`]).
    #[error("the tenant id may only hold lowercase ASCII letters, digits, '_', '-' and '.'")]
    InvalidCharacter,
    /// Holds an ASCII capital letter: ids are lowercase, so two ids that
    /// differ only in case never share a directory on a case-insensitive
    /// filesystem.
    #[error("the tenant id must be lowercase")]
    Uppercase,
    /// Starts with `.` (hidden names, `.`, `..`).
    #[error("the tenant id must not start with '.'")]
    LeadingDot,
    /// Ends with `.`: Windows drops trailing dots, so `alice.` would open
    /// tenant `alice`'s directory.
    #[error("the tenant id must not end with '.'")]
    TrailingDot,
    /// A name Windows reserves for a device (`con`, `nul`, `com1`, …), with
    /// or without an extension: its directory cannot be opened there.
    #[error("the tenant id is a name Windows reserves for a device")]
    WindowsDeviceName,
}

/// Names Windows reserves for devices, whatever follows a first `.`.
const WINDOWS_DEVICES: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

impl TenantId {
    /// Validates a tenant id.
    pub fn parse(id: &str) -> Result<Self, TenantError> {
        if id.is_empty() {
            return Err(TenantError::Empty);
        }
        if id.len() > MAX_TENANT_ID_BYTES {
            return Err(TenantError::TooLong);
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(TenantError::InvalidCharacter);
        }
        if id.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(TenantError::Uppercase);
        }
        if id.starts_with('.') {
            return Err(TenantError::LeadingDot);
        }
        // Trailing spaces are refused above: a space is no id character.
        if id.ends_with('.') {
            return Err(TenantError::TrailingDot);
        }
        let stem = id.split('.').next().unwrap_or(id);
        if WINDOWS_DEVICES.contains(&stem) {
            return Err(TenantError::WindowsDeviceName);
        }
        Ok(TenantId(id.to_owned()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `base/<id>`: a directory of its own for a `FilesystemStore` per
    /// tenant, each with its own lock.
    pub fn dir_in(&self, base: impl AsRef<Path>) -> PathBuf {
        base.as_ref().join(&self.0)
    }
}

impl std::fmt::Display for TenantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
