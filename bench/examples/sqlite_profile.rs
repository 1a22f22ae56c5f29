//! A driver for profiling the SQLite store's tree view, view and delete
//! under `valgrind --tool=callgrind` (the `backends` bench's workload: 300
//! notes of 20 lines in one directory): `cargo build --release -p
//! claude-memory-bench --example sqlite_profile --features sqlite`, then
//! `valgrind --tool=callgrind --toggle-collect='*measured*'
//! target/release/examples/sqlite_profile`.

use claude_memory::{MemoryTool, SqliteStore};
use serde_json::json;

const N: usize = 300;

#[inline(never)]
fn measured_tree(tool: &MemoryTool<SqliteStore>) {
    for _ in 0..N / 10 {
        let r = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
        assert!(!r.is_error);
    }
}

#[inline(never)]
fn measured_view(tool: &MemoryTool<SqliteStore>) {
    for i in 0..N {
        let r =
            tool.dispatch(&json!({"command": "view", "path": format!("/memories/bench/f{i}.md")}));
        assert!(!r.is_error);
    }
}

#[inline(never)]
fn measured_delete(tool: &MemoryTool<SqliteStore>) {
    for i in 0..N {
        let r = tool
            .dispatch(&json!({"command": "delete", "path": format!("/memories/bench/f{i}.md")}));
        assert!(!r.is_error);
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let tool = MemoryTool::new(SqliteStore::open(dir.path().join("m.db")).expect("open"));
    let note: String = (0..20)
        .map(|k| format!("- remembered fact {k} about the customer\n"))
        .collect();
    for i in 0..N {
        let r = tool.dispatch(&json!({"command": "create", "path": format!("/memories/bench/f{i}.md"), "file_text": note}));
        assert!(!r.is_error);
    }
    measured_tree(&tool);
    measured_view(&tool);
    measured_delete(&tool);
}
