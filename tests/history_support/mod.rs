//! Helpers of the journal's tests (`tests/history/journal.rs`,
//! `log_attacks.rs`): a store with its journal, the journal's path, a
//! whole listing, a write attributed to a call, and the bytes a call reads.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use claude_memory::history::{FileLog, HistoryStore, Query};
use claude_memory::store::{Context, WriteMode, WriteOptions};
use claude_memory::{FilesystemStore, MemoryPath, MemoryStore};

pub fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

/// The filesystem store at `root` with its journal.
pub fn open(root: &Path) -> HistoryStore<FilesystemStore> {
    HistoryStore::open(
        FilesystemStore::open(root).expect("store"),
        FileLog::for_store(root).expect("log"),
    )
    .expect("open")
}

pub fn journal(root: &Path) -> PathBuf {
    root.join(".claude-memory-history/journal.jsonl")
}

/// A query for every version.
pub fn all() -> Query {
    Query {
        limit: Some(usize::MAX),
        ..Query::default()
    }
}

/// Writes `text` at `path` as `tool_use` call `call`.
pub fn write_by<S: MemoryStore>(s: &S, path: &str, text: impl AsRef<[u8]>, call: &str) {
    let options = WriteOptions {
        mode: WriteMode::Overwrite,
        quota: None,
        context: Context {
            call: Some(call),
            note: None,
        },
    };
    s.write_opts(&p(path), text.as_ref(), options)
        .expect("write");
}

/// Bytes this thread has read so far (Linux: `rchar` of
/// /proc/thread-self/io; the history reads on the calling thread, and
/// tests run in parallel).
#[cfg(target_os = "linux")]
pub fn bytes_read() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("/proc/thread-self/io");
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("rchar")
}

/// The bytes `f` reads.
#[cfg(target_os = "linux")]
pub fn cost(f: impl FnOnce()) -> u64 {
    let before = bytes_read();
    f();
    bytes_read() - before
}

pub fn mib(n: u64) -> f64 {
    n as f64 / (1 << 20) as f64
}
