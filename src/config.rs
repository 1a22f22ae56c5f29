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
/// The defaults are SPEC §5's. Build one with chained setters (the struct
/// is `#[non_exhaustive]`, so a literal cannot name every field):
///
/// ```
/// use claude_memory::{Config, CreatePolicy};
///
/// let config = Config::default()
///     .with_max_store_size(10 * 1024 * 1024)
///     .with_create_policy(CreatePolicy::Overwrite);
/// assert_eq!(config.max_store_size, Some(10 * 1024 * 1024));
/// assert_eq!(config.max_file_size, 1024 * 1024); // the default
/// ```
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

impl Config {
    /// Sets [`view_output_limit`](Self::view_output_limit).
    pub fn with_view_output_limit(mut self, chars: usize) -> Self {
        self.view_output_limit = chars;
        self
    }

    /// Sets [`max_file_size`](Self::max_file_size).
    pub fn with_max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes;
        self
    }

    /// Sets [`max_store_size`](Self::max_store_size).
    pub fn with_max_store_size(mut self, bytes: u64) -> Self {
        self.max_store_size = Some(bytes);
        self
    }

    /// Sets [`max_image_size`](Self::max_image_size).
    pub fn with_max_image_size(mut self, bytes: u64) -> Self {
        self.max_image_size = bytes;
        self
    }

    /// Sets [`create_policy`](Self::create_policy).
    pub fn with_create_policy(mut self, policy: CreatePolicy) -> Self {
        self.create_policy = policy;
        self
    }
}
