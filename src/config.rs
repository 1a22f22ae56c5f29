//! Limits and policies (SPEC §5).

/// What `create` does when the file already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CreatePolicy {
    /// Refuse with `Error: File {path} already exists` (the reference
    /// behaviour).
    #[default]
    Reject,
    /// Replace an existing file. A directory is still never replaced.
    Overwrite,
}

/// Configuration of a [`MemoryTool`](crate::MemoryTool).
///
/// Start from `Config::default()` and change the fields you need; the
/// defaults are SPEC §5's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Characters of numbered lines (or listing lines) a view shows before
    /// truncating. Default 16,000.
    pub view_output_limit: usize,
    /// Largest file a create or edit may produce, in bytes. Default 1 MiB.
    pub max_file_size: u64,
    /// Largest total of all files in the store, in bytes. Default: none.
    pub max_store_size: Option<u64>,
    /// Largest image `view` returns, in bytes. Default 5 MiB.
    pub max_image_size: u64,
    /// What `create` does with an existing file. Default [`CreatePolicy::Reject`].
    pub create_policy: CreatePolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            view_output_limit: 16_000,
            max_file_size: 1024 * 1024,
            max_store_size: None,
            max_image_size: 5 * 1024 * 1024,
            create_policy: CreatePolicy::Reject,
        }
    }
}
