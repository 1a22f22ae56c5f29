//! The command line, declared with clap: every option and its help.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use claude_memory::history::VersionId;

const AFTER_HELP: &str = "\
STORE is a directory, sqlite:PATH (a SQLite database file; sqlite://PATH
too), a postgres:// / postgresql:// URL, or object storage: s3://BUCKET/PREFIX,
az://CONTAINER/PREFIX, gs://BUCKET/PREFIX, or managed:MEMSTORE_ID (a
memory store of Claude Managed Agents; ANTHROPIC_API_KEY, and
ANTHROPIC_BASE_URL if set). Without --store or --root, CLAUDE_MEMORY_STORE
is used, then CLAUDE_MEMORY_DIR (a directory).

view, export, stats, prune --dry-run, history, show and diff only read:
they never create or change a store, and fail if it does not exist.

Exit status: 0 success, 1 the operation failed, 2 usage error.";

/// Operate a Claude memory store.
#[derive(Debug, Parser)]
#[command(
    name = "claude-memory",
    // Usage lines name the tool as installed, whatever the file is called
    // (the test suite builds it as claude-memory-cli).
    bin_name = "claude-memory",
    version,
    about = "claude-memory: operate a Claude memory store",
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Cli {
    /// The store: a directory, sqlite:PATH, a postgres:// URL, s3://, az://, gs://BUCKET/PREFIX or managed:MEMSTORE_ID
    /// [env: CLAUDE_MEMORY_STORE]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "STORE"
    )]
    pub store: Option<String>,

    /// A directory store (same as --store DIR) [env: CLAUDE_MEMORY_DIR]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "DIR",
        conflicts_with = "store"
    )]
    pub root: Option<PathBuf>,

    /// Characters a view shows before truncating [default: 16000]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "CHARS"
    )]
    pub view_limit: Option<usize>,

    /// Largest file a write or an import may bring, in bytes [default: 1048576]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "BYTES"
    )]
    pub max_file_size: Option<u64>,

    /// Largest total of the store, in bytes [default: none]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "BYTES"
    )]
    pub max_store_size: Option<u64>,

    /// Limits profile: `managed` applies Anthropic's managed Memory Stores
    /// limits (20 path segments, 102,400 bytes per memory, 2,000 memories);
    /// --max-file-size still overrides [default: none]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "PROFILE",
        value_enum
    )]
    pub profile: Option<Profile>,

    /// Keep every change serve, import and prune make as a version (see
    /// `history`) [default: off]
    #[arg(long, global = true, help_heading = "Store options")]
    pub history: bool,

    /// Open the store encrypted with this key file (32 bytes, mode 0600,
    /// from `keygen`); repeat for older keys, the first is the primary
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "FILE"
    )]
    pub key_file: Vec<PathBuf>,

    /// Open the store encrypted with the passphrase in FILE's first line
    /// (Argon2id); after any --key-file
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        value_name = "FILE"
    )]
    pub passphrase_file: Option<PathBuf>,

    /// One tenant's memories in a shared store: its rows of a SQL store
    /// (`for_tenant`), or its directory below a directory store
    /// (`TenantStore`), for every subcommand. Lowercase ASCII letters,
    /// digits, `_`, `-` and `.`, 1 to 64 bytes
    #[arg(long, global = true, help_heading = "Store options", value_name = "ID")]
    pub tenant: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer JSON-lines tool calls on stdin (one tool_result per line).
    ///
    /// Reads one tool call per line (a bare input object or a tool_use
    /// block) and writes one tool_result per line, flushed at once. Blank
    /// lines get no answer. Exits 0 at end of input. Creates a directory
    /// store if it is missing.
    Serve,

    /// Serve the memory tool over MCP (stdio, or streamable HTTP).
    ///
    /// Without --http: MCP over stdin/stdout, for `claude mcp add` and
    /// Claude Desktop. With --http ADDR: streamable HTTP at
    /// http://ADDR/mcp, which needs --token-file (or, on a loopback
    /// address only, --allow-unauthenticated). Creates a directory store
    /// if it is missing. SIGINT/SIGTERM stop it after the calls in flight.
    Mcp(crate::mcp::McpArgs),

    /// Open the review page: the store and its history in a browser.
    ///
    /// Prints the page's URL on its first line. Browse the tree, a file as
    /// the model sees it, search; with a history (or a managed store's own
    /// versions), each file's timeline, diffs of any two versions, and
    /// revert, restore, redact, erase; edit, rename and delete by hand.
    /// Every change is shown before it is made and is recorded (actor
    /// ui:USER) like any other. Loopback by default; any other address
    /// needs --token-file. SIGINT/SIGTERM stop it.
    Ui(crate::ui::UiArgs),

    /// Consolidate the memory with a model: merge duplicates, keep the
    /// newest evidence, drop the obsolete, keep an index.
    ///
    /// Over the Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), with
    /// the memory tool only, reading --sessions (Messages API JSON or
    /// Claude Code JSONL transcripts) as evidence, never as orders. By
    /// default the result goes to a new directory and the store is never
    /// written; --in-place changes a store with history under one actor,
    /// dream:ID, that `revert --actor dream:ID` undoes; --dry-run prints
    /// the diff. Prints a line per tool call (stderr) and a summary.
    Dream(crate::dream::DreamArgs),

    /// Keep this store in step with a managed memory store.
    ///
    /// Both ways, by the rules of Anthropic's SDKs: a change on one side
    /// reaches the other; a change on both keeps the memory store's
    /// version and says so; a file deleted here deletes its memory only
    /// after staying deleted for 30 s, at most a few per pass; every file
    /// vanishing at once is a wipe (re-downloaded), never deletions. The
    /// first pass writes the marker file .anthropic-memory-store and
    /// deletes nothing. Prints one line per change. Needs
    /// ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if set).
    Sync(crate::sync::SyncArgs),

    /// Show PATH as the model would see it.
    ///
    /// Prints what the model would see for `view PATH`. Exits 1 if the view
    /// is an error. Only reads the store.
    View {
        /// A memory path, such as /memories or /memories/notes.md
        path: String,
        /// Lines START to END (END may be -1 for the end of the file)
        #[arg(long, value_name = "START:END", value_parser = parse_range, allow_hyphen_values = true)]
        range: Option<[i64; 2]>,
    },

    /// Write the whole store as a JSON backup (to stdout by default).
    ///
    /// Every file, hidden ones included (UTF-8 as text, others as base64),
    /// with its modification time, and every empty directory:
    /// {"format": "claude-memory-export", "version": 2, "files": [{"path",
    /// "text" | "base64" | "directory": true, "modified"}]}, streamed. A
    /// file over --max-file-size (or a total over --max-store-size), which
    /// import would refuse, refuses the export. With --output, a regular
    /// file is replaced atomically (mode 0600); a FIFO or device such as
    /// /dev/stdout is written into; a directory is refused. Only reads
    /// the store.
    Export {
        /// Write to FILE instead of stdout ("-" is stdout)
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// On an encrypted store, write the plaintext (by default the
        /// backup holds the store's ciphertext and key record)
        #[arg(long)]
        plaintext: bool,
    },

    /// Write a new random key file (32 bytes, mode 0600) for --key-file.
    Keygen {
        /// The file to create (it must not exist)
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
    },

    /// Re-encrypt every file under the first --key-file (or passphrase)
    /// and retire the others from the store; safe to kill and run again.
    Rekey,

    /// Load a JSON backup (version 1 or 2), all or nothing.
    ///
    /// Everything is checked before anything is written: paths, encodings,
    /// duplicates, --max-file-size and --max-store-size, and conflicts with
    /// the store (an existing file is refused unless --overwrite). If a
    /// write still fails, what was written is undone. Restored files get the
    /// time of the import as their modification time. Creates a directory
    /// store if it is missing.
    Import {
        /// The backup file ("-" for stdin)
        file: PathBuf,
        /// Replace existing files
        #[arg(long)]
        overwrite: bool,
    },

    /// Remove files not written for AGE, then empty directories.
    ///
    /// Removes files last written more than AGE ago, then directories left
    /// empty. "Written" is what counts: reads do not keep a file alive.
    Prune {
        /// How long unwritten: 30d, 12h, 1d12h, "30 days", 90s, …
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: Duration,
        /// Only say what would be removed (only reads the store)
        #[arg(long)]
        dry_run: bool,
    },

    /// Print the number of files, bytes, the largest and oldest file.
    ///
    /// Only reads the store.
    Stats,

    /// Archive a managed memory store, for good.
    ///
    /// Its memories stay readable (view, export, history); every write is
    /// refused from then on, here and in every other client. Archiving
    /// cannot be undone, so it needs --yes. Only for --store
    /// managed:memstore_….
    Archive {
        /// Archive it (without this, nothing is sent)
        #[arg(long)]
        yes: bool,
    },

    /// List what would not fit a managed Memory Store.
    ///
    /// Every file deeper than 20 path segments, larger than 100 kB
    /// (102,400 bytes) or not UTF-8 text, every name no memory path can
    /// spell, and a store of more than 2,000 files. Exits 1 if anything
    /// would not fit. Only reads the store.
    Check,

    /// List the store's versions (all, or PATH's across renames).
    ///
    /// One line per version: id, time, operation, path (`old -> new` for a
    /// rename), actor (label/tool_use id), sha256 prefix, size, and a note
    /// for reverts, restores and repairs. `history prune` removes old
    /// versions. Listing only reads the store.
    History {
        #[command(subcommand)]
        action: Option<HistoryAction>,
        /// Versions of the file at PATH (following renames)
        path: Option<String>,
        /// Versions at or below this path
        #[arg(long, value_name = "PATH")]
        prefix: Option<String>,
        /// Made at or after TIME (RFC 3339, or an age such as 2h)
        #[arg(long, value_name = "TIME", value_parser = crate::history::parse_time)]
        since: Option<std::time::SystemTime>,
        /// Made at or before TIME
        #[arg(long, value_name = "TIME", value_parser = crate::history::parse_time)]
        until: Option<std::time::SystemTime>,
        /// Made by ACTOR (a label or a tool_use id)
        #[arg(long, value_name = "ACTOR")]
        actor: Option<String>,
        /// Made in the call ID (a tool_use id)
        #[arg(long, value_name = "ID")]
        call: Option<String>,
        /// Only the newest N (the next page back: --before the oldest one
        /// shown) [default: every version, oldest first]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// Only versions older than this one
        #[arg(long, value_name = "ID", value_parser = parse_version)]
        before: Option<VersionId>,
    },

    /// Print one version: its record and its content. Only reads the store.
    Show {
        /// The version id (v12 or 12; memver_… on a managed store)
        #[arg(value_parser = parse_version)]
        id: VersionId,
    },

    /// Unified diff between two versions, or a version and the file now.
    ///
    /// Only reads the store.
    Diff {
        /// From this version
        #[arg(value_parser = parse_version)]
        from: VersionId,
        /// To this version [default: the file as it is now]
        #[arg(value_parser = parse_version)]
        to: Option<VersionId>,
    },

    /// Put a file back as it was in a version (for a delete, the content
    /// removed); or undo everything one actor or one call did. A revert is
    /// itself a change, kept in the history.
    Revert {
        /// The version id (or --actor LABEL, or --call ID)
        #[arg(value_parser = parse_version, required_unless_present_any = ["actor", "call"])]
        id: Option<VersionId>,
        /// Undo every change this actor made (a label, such as dream:ID)
        #[arg(long, value_name = "LABEL", conflicts_with_all = ["id", "call"], value_parser = non_empty)]
        actor: Option<String>,
        /// Undo every change made in this call (a tool_use id)
        #[arg(long, value_name = "ID", conflicts_with = "id", value_parser = non_empty)]
        call: Option<String>,
    },

    /// Put the whole store, or a prefix, back as it was at a time.
    ///
    /// Files created since are deleted, changed ones rewritten, deleted
    /// ones brought back; each change is a new version.
    Restore {
        /// The time (RFC 3339, or an age such as 10m)
        #[arg(long, value_name = "TIME", value_parser = crate::history::parse_time)]
        at: std::time::SystemTime,
        /// Only this path and below
        #[arg(long, value_name = "PATH")]
        prefix: Option<String>,
        /// Only say what would be restored or deleted (changes nothing)
        #[arg(long)]
        dry_run: bool,
    },

    /// Erase a version's content, keeping its record; or, with --text,
    /// erase a text from every version that holds it.
    Redact {
        /// The version id
        #[arg(value_parser = parse_version, required_unless_present = "text")]
        id: Option<VersionId>,
        /// Erase this text from every version's content instead
        #[arg(long, value_name = "TEXT", conflicts_with = "id")]
        text: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// Replay every version, oldest first, into an empty store that keeps
    /// a history: a --history store's into a managed memory store (the
    /// service makes one version of each change), a managed store's into
    /// a --history store, or one backend's into another's. Each change
    /// notes its source version's id, time and author; its own time is
    /// the copy's. Redacted versions are skipped.
    Copy {
        /// The destination, as --store names one (it must be empty)
        #[arg(long, value_name = "STORE")]
        to: String,
    },
    /// Remove versions older than AGE and/or beyond N per file (the latest
    /// version of every live file is always kept).
    Prune {
        /// How old: 30d, 12h, …
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: Option<Duration>,
        /// Versions kept per file (the newest)
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Only say what would be removed (changes nothing)
        #[arg(long)]
        dry_run: bool,
    },
}

/// A version id: `12`, `v12` or `memver_…` (the library's parse).
pub fn parse_version(text: &str) -> Result<VersionId, String> {
    text.parse()
}

/// A human duration: humantime's `30d`, `1d12h`, `30 days`, `90s`, …
pub fn parse_age(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{e}; an age is like 30d, 12h, 1d12h, \"30 days\" or 90s"))
}

/// `START:END`.
pub fn parse_range(text: &str) -> Result<[i64; 2], String> {
    let (a, b) = text
        .split_once(':')
        .ok_or_else(|| "a range is START:END, such as 1:20 or 5:-1".to_owned())?;
    let parse = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| format!("`{s}` is not an integer"))
    };
    Ok([parse(a)?, parse(b)?])
}

/// A named set of limits (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// Anthropic's managed Memory Stores.
    Managed,
}

/// A value that is not empty (an empty actor or call selects nothing).
fn non_empty(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an empty value names nothing".into());
    }
    Ok(s.to_owned())
}
