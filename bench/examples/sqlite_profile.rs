//! A driver for profiling the SQLite store's tree view, view and delete
//! under `valgrind --tool=callgrind`, beside the `backends` bench's floors for
//! the tree view and delete (the `backends` bench's workload: 300
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

/// The `backends` bench's floor for the tree view: one select of both
/// levels, on the store's own database file.
#[inline(never)]
fn measured_floor_tree(conn: &rusqlite::Connection) {
    for _ in 0..N / 10 {
        let n = conn
            .prepare_cached("SELECT name, is_dir, len, modified_ms FROM claude_memory_entries WHERE tenant = ?1 AND parent IN ('', 'bench')")
            .and_then(|mut s| {
                Ok(s.query_map([""], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
                })?
                .count())
            })
            .expect("select");
        assert!(n > N);
    }
}

/// The floor's delete: one statement, autocommit.
#[inline(never)]
fn measured_floor_delete(conn: &rusqlite::Connection) {
    for i in 0..N {
        conn.prepare_cached("DELETE FROM claude_memory_entries WHERE tenant = ?1 AND path = ?2")
            .and_then(|mut s| s.execute(rusqlite::params!["", format!("floor/f{i}.md")]))
            .expect("delete");
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
    // The floor reads the same rows, on a connection of its own.
    let conn = rusqlite::Connection::open(dir.path().join("m.db")).expect("raw connection");
    measured_floor_tree(&conn);
    measured_delete(&tool);
    for i in 0..N {
        let r = tool.dispatch(&json!({"command": "create", "path": format!("/memories/floor/f{i}.md"), "file_text": note}));
        assert!(!r.is_error);
    }
    measured_floor_delete(&conn);
}
