//! The workload of issue 23, built once against each version of the crate
//! by `benches/versions.rs` (so it uses only API that 0.1 has too): 1,000
//! notes of 30 lines in 10 directories, then `MemoryTool::dispatch` of a
//! `view` of each note and of one directory of 100 files, on the in-memory
//! and the filesystem store. Prints one line per row, `row<TAB>µs per
//! call`, the best of `ROUNDS` rounds of 1,000 and 100 calls.

use std::time::Instant;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::json;

const ROUNDS: usize = 5;

fn fill<S: MemoryStore>(tool: &MemoryTool<S>) -> Vec<serde_json::Value> {
    let note: String = (0..30)
        .map(|k| format!("- remembered fact {k} about the customer and their order\n"))
        .collect();
    let mut views = Vec::new();
    for d in 0..10 {
        for f in 0..100 {
            let path = format!("/memories/d{d}/note{f}.md");
            let r = tool.dispatch(&json!({"command": "create", "path": path, "file_text": note}));
            assert!(!r.is_error, "create failed");
            views.push(json!({"command": "view", "path": path}));
        }
    }
    views
}

/// Best of `ROUNDS` rounds of `calls`, in µs per call.
fn best<S: MemoryStore>(tool: &MemoryTool<S>, calls: &[serde_json::Value]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for c in calls {
            let r = tool.dispatch(c);
            assert!(!r.is_error, "view failed");
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e6 / calls.len() as f64);
    }
    best
}

fn rows<S: MemoryStore>(name: &str, tool: &MemoryTool<S>) {
    let notes = fill(tool);
    let dir: Vec<_> = (0..100)
        .map(|_| json!({"command": "view", "path": "/memories/d3"}))
        .collect();
    // One warm-up round each, not counted.
    for c in notes.iter().chain(&dir) {
        tool.dispatch(c);
    }
    println!("{name} view of a note\t{:.3}", best(tool, &notes));
    println!("{name} view of a directory of 100\t{:.3}", best(tool, &dir));
}

fn main() {
    let only = std::env::args().nth(1);
    if only.as_deref().is_none_or(|o| o == "in-memory") {
        rows("in-memory", &MemoryTool::new(InMemoryStore::new()));
    }
    if only.as_deref().is_none_or(|o| o == "filesystem") {
        let dir = std::env::temp_dir().join(format!("claude-memory-versions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        rows(
            "filesystem",
            &MemoryTool::new(FilesystemStore::open(&dir).expect("open the store")),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
