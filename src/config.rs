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
    /// Most path segments below `/memories` a create or rename may make
    /// (`/memories/a/b.md` has 2); a rename to a path of no more segments
    /// than its source makes nothing deeper and is not measured. Default:
    /// none (SPEC's byte limits only).
    pub max_path_segments: Option<usize>,
    /// Most files the store may hold; a create of a new file past it
    /// fails. Default: none.
    pub max_files: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            view_output_limit: 16_000,
            max_file_size: 1024 * 1024,
            max_store_size: None,
            max_image_size: 5 * 1024 * 1024,
            create_policy: CreatePolicy::Reject,
            max_path_segments: None,
            max_files: None,
        }
    }
}

impl Config {
    /// The managed Memory Stores profile: the defaults, tightened to the
    /// limits of Anthropic's managed Memory Stores, so memories kept under
    /// it can move to that service unchanged: at most 20 path segments
    /// below `/memories` and 1,024 bytes per path (SPEC §2 already), UTF-8
    /// text of at most 100 kB (102,400 bytes) per memory, at most 2,000
    /// memories per store. SPEC's NFC and format-character rules already
    /// match the service's. Writes through the tool are always UTF-8
    /// text; files brought in another way are checked by
    /// [`profile::check`](crate::profile::check) (the CLI's `check`).
    ///
    /// The file count is checked before a create, not atomically with it:
    /// two processes creating at once may end one over the limit (unlike
    /// [`max_store_size`](Self::max_store_size), which the store checks
    /// inside the write). A store that caps its own files
    /// ([`MemoryStore::max_files`](crate::MemoryStore::max_files): a
    /// managed memory store, whose service refuses a create past 2,000)
    /// is not counted: its create answers, atomically.
    ///
    /// ```
    /// use claude_memory::{Config, InMemoryStore, MemoryTool};
    /// use serde_json::json;
    ///
    /// let tool = MemoryTool::with_config(InMemoryStore::new(), Config::managed_memory_stores());
    /// let deep = format!("/memories/{}x.md", "d/".repeat(20));
    /// let result = tool.dispatch(&json!({"command": "create", "path": deep, "file_text": "x"}));
    /// assert!(result.is_error);
    /// ```
    pub fn managed_memory_stores() -> Self {
        Config {
            max_file_size: crate::profile::MAX_FILE_SIZE,
            max_path_segments: Some(crate::profile::MAX_PATH_SEGMENTS),
            max_files: Some(crate::profile::MAX_FILES),
            ..Config::default()
        }
    }

    /// Sets [`max_path_segments`](Self::max_path_segments).
    pub fn with_max_path_segments(mut self, segments: usize) -> Self {
        self.max_path_segments = Some(segments);
        self
    }

    /// Sets [`max_files`](Self::max_files).
    pub fn with_max_files(mut self, files: u64) -> Self {
        self.max_files = Some(files);
        self
    }

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
