//! The command line, declared with clap: every option and its help.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

const AFTER_HELP: &str = "\
STORE is a directory, sqlite:PATH (a SQLite database file) or a
postgres:// / postgresql:// URL. Without --store or --root, CLAUDE_MEMORY_STORE
is used, then CLAUDE_MEMORY_DIR (a directory).

view, export, stats and prune --dry-run only read: they never create or
change a store, and fail if it does not exist.

Exit status: 0 success, 1 the operation failed, 2 usage error.";

/// Operate a Claude memory store.
#[derive(Debug, Parser)]
#[command(
    name = "claude-memory",
    version,
    about = "claude-memory: operate a Claude memory store",
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Cli {
    /// The store: a directory, sqlite:PATH or a postgres:// URL
    /// [env: CLAUDE_MEMORY_STORE]
    #[arg(long, global = true, value_name = "STORE")]
    pub store: Option<String>,

    /// A directory store (same as --store DIR) [env: CLAUDE_MEMORY_DIR]
    #[arg(long, global = true, value_name = "DIR", conflicts_with = "store")]
    pub root: Option<PathBuf>,

    /// Characters a view shows before truncating [default: 16000]
    #[arg(long, global = true, value_name = "CHARS")]
    pub view_limit: Option<usize>,

    /// Largest file a write or an import may bring, in bytes [default: 1048576]
    #[arg(long, global = true, value_name = "BYTES")]
    pub max_file_size: Option<u64>,

    /// Largest total of the store, in bytes [default: none]
    #[arg(long, global = true, value_name = "BYTES")]
    pub max_store_size: Option<u64>,

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
    /// "text" | "base64" | "directory": true, "modified"}]}. With --output,
    /// the file is written atomically, mode 0600. Only reads the store.
    Export {
        /// Write to FILE instead of stdout ("-" is stdout)
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },

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
