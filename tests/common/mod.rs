//! Helpers shared by integration tests.
#![allow(dead_code)] // not every test binary uses every helper

use std::collections::BTreeSet;
use std::path::PathBuf;

use claude_memory::{MemoryStore, MemoryTool};
use serde_json::json;

/// What a concurrent-edit run reports.
pub struct EditRace {
    /// Lines whose insert was reported as a success.
    pub succeeded: BTreeSet<String>,
    /// Inserts reported as failures.
    pub failed: usize,
    /// Lines in the file afterwards.
    pub in_file: BTreeSet<String>,
}

/// Creates `path` empty, then runs `writers` threads, each with its own
/// handler from `open` (its own connection or handle), inserting
/// `per_writer` unique lines at the top of `path`; then reads the file back.
pub fn insert_race<S: MemoryStore>(
    open: impl Fn() -> MemoryTool<S> + Sync,
    path: &str,
    writers: usize,
    per_writer: usize,
) -> EditRace {
    let tool = open();
    let _ = tool.dispatch(&json!({"command": "delete", "path": path}));
    let created = tool.dispatch(&json!({"command": "create", "path": path, "file_text": ""}));
    assert!(!created.is_error, "{created:?}");
    let results: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let open = &open;
                s.spawn(move || {
                    let tool = open();
                    (0..per_writer)
                        .map(|k| {
                            let token = format!("w{w}_{k}");
                            let input = json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": token});
                            (token, !tool.dispatch(&input).is_error)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("writer"))
            .collect()
    });
    let view = tool.dispatch(&json!({"command": "view", "path": path}));
    let in_file = view
        .text()
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .map(|(_, t)| t.to_owned())
        .collect();
    let succeeded: BTreeSet<String> = results
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(t, _)| t.clone())
        .collect();
    EditRace {
        failed: results.len() - succeeded.len(),
        succeeded,
        in_file,
    }
}

/// The `stdio` example binary.
pub fn stdio_binary() -> PathBuf {
    example_binary("stdio")
}

/// An example binary, which `cargo test` builds next to the test binaries
/// (in `target/<profile>/examples`).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test`, which builds the examples",
        bin.display()
    );
    bin
}

/// Lowercase hex sha256 of `data`: what a history version's `sha256` holds.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
