//! A managed memory store's commands in requests and time, against the
//! store's size, on the emulator of the memory stores API (which counts
//! requests and can hold each one for a round trip's time):
//!
//! ```text
//! source .ci/managed.sh
//! cargo bench -p claude-memory-bench --bench managed_requests --features managed
//! ```
//!
//! Each store holds 10, 500 or 1,990 memories, 50 a directory
//! (`/dNN/fKKK.md`, the emulator's `fill`). Then each command runs once
//! through `MemoryTool` under the managed profile, with every request held
//! 150 ms (`-- 0` for none): the requests it made, the fewest the API
//! allows for it, and its time.

use std::time::Instant;

use claude_memory_bench::{emulator, emulator_requests};
use serde_json::{Value, json};

/// Each command: its name, its input, and the fewest requests the API
/// allows for it.
fn commands() -> Vec<(&'static str, Value, u64)> {
    vec![
        (
            "`view` a file",
            json!({"command": "view", "path": "/memories/d00/f000.md"}),
            2,
        ),
        (
            "`view` a directory",
            json!({"command": "view", "path": "/memories/d00"}),
            1,
        ),
        (
            "`create` in an existing directory",
            json!({"command": "create", "path": "/memories/d00/new.md", "file_text": "new\n"}),
            1,
        ),
        (
            "`create` in a new directory",
            json!({"command": "create", "path": "/memories/new/x.md", "file_text": "new\n"}),
            1,
        ),
        (
            "`str_replace`",
            json!({"command": "str_replace", "path": "/memories/d00/f001.md",
                   "old_str": "line one", "new_str": "line 1"}),
            3,
        ),
        (
            "`insert`",
            json!({"command": "insert", "path": "/memories/d00/f002.md",
                   "insert_line": 1, "insert_text": "inserted"}),
            3,
        ),
        (
            "`rename` a file",
            json!({"command": "rename", "old_path": "/memories/d00/f003.md",
                   "new_path": "/memories/d00/g003.md"}),
            2,
        ),
        (
            "`rename` a file to another directory",
            json!({"command": "rename", "old_path": "/memories/d00/f005.md",
                   "new_path": "/memories/new/f005.md"}),
            2,
        ),
        (
            "`rename` a file to a longer path",
            json!({"command": "rename", "old_path": "/memories/d00/f006.md",
                   "new_path": "/memories/new/renamed-f006.md"}),
            2,
        ),
        (
            "`delete` a file",
            json!({"command": "delete", "path": "/memories/d00/f004.md"}),
            2,
        ),
    ]
}

#[cfg(feature = "managed")]
fn run(base: &str, key: &str, latency_ms: u64) {
    use claude_memory::{Config, ManagedStore, MemoryTool};
    let sizes = [10usize, 500, 1_990];
    let commands = commands();
    // [command][size] = (requests, milliseconds)
    let mut figures = vec![Vec::new(); commands.len()];
    for &n in &sizes {
        let store = emulator(
            base,
            key,
            "POST",
            "/v1/memory_stores",
            Some(&json!({"name": "bench"})),
        );
        let id = store["id"].as_str().expect("a store").to_owned();
        let fill = json!({"memory_store_id": id, "count": n});
        let filled = emulator(base, key, "POST", "/_emulator/fill", Some(&fill));
        assert_eq!(filled["ok"], true, "fill: {filled}");
        let store = ManagedStore::builder(&id)
            .base_url(base)
            .api_key(key)
            .open()
            .expect("open");
        let tool = MemoryTool::with_config(store, Config::managed_memory_stores());
        emulator(
            base,
            key,
            "POST",
            "/_emulator/latency",
            Some(&json!({"ms": latency_ms})),
        );
        for (i, (name, input, _)) in commands.iter().enumerate() {
            let before = emulator_requests(base, key, &id);
            let started = Instant::now();
            let result = tool.dispatch(input);
            let ms = started.elapsed().as_millis();
            assert!(!result.is_error, "{name} at {n}: {:?}", result.text());
            figures[i].push((emulator_requests(base, key, &id) - before, ms));
        }
        emulator(
            base,
            key,
            "POST",
            "/_emulator/latency",
            Some(&json!({"ms": 0})),
        );
    }
    println!("Requests per command:\n");
    println!("| command | 10 memories | 500 | 1,990 | fewest the API allows |");
    println!("| --- | --- | --- | --- | --- |");
    for ((name, _, fewest), row) in commands.iter().zip(&figures) {
        let cells: Vec<String> = row.iter().map(|(r, _)| r.to_string()).collect();
        println!("| {name} | {} | {fewest} |", cells.join(" | "));
    }
    println!("\nTime per command, {latency_ms} ms a request:\n");
    println!("| command | 10 memories | 500 | 1,990 |");
    println!("| --- | --- | --- | --- |");
    for ((name, _, _), row) in commands.iter().zip(&figures) {
        let cells: Vec<String> = row.iter().map(|(_, ms)| format!("{ms} ms")).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}

#[cfg(not(feature = "managed"))]
fn run(_: &str, _: &str, _: u64) {
    let _ = commands();
    println!("skipped: needs --features managed");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Ok(base) = std::env::var("CLAUDE_MEMORY_TEST_MANAGED_URL") else {
        println!("skipped: no memory stores emulator (source .ci/managed.sh)");
        return;
    };
    let key = std::env::var("CLAUDE_MEMORY_TEST_MANAGED_KEY").unwrap_or_else(|_| "test-key".into());
    // `-- 0`: no latency.
    let latency = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(150);
    run(&base, &key, latency);
}
