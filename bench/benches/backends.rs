//! Operations per second on each backend, single-threaded, with default
//! (durable) settings: `cargo bench -p claude-memory-bench --bench backends --features sqlite,postgres`
//! (PostgreSQL when CLAUDE_MEMORY_TEST_POSTGRES_URL is set).

use std::time::Instant;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::json;

fn measure<S: MemoryStore>(name: &str, tool: MemoryTool<S>) {
    let n = 300;
    let note: String = (0..20)
        .map(|k| format!("- remembered fact {k} about the customer\n"))
        .collect();
    let rate = |start: Instant| n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..n {
        let r = tool.dispatch(&json!({"command": "create", "path": format!("/memories/bench/f{i}.md"), "file_text": note}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    let create = rate(start);
    let start = Instant::now();
    for i in 0..n {
        assert!(
            !tool
                .dispatch(&json!({"command": "view", "path": format!("/memories/bench/f{i}.md")}))
                .is_error
        );
    }
    let view = rate(start);
    let start = Instant::now();
    for i in 0..n {
        let r = tool.dispatch(&json!({"command": "str_replace", "path": format!("/memories/bench/f{i}.md"), "old_str": "fact 7 about", "new_str": "FACT 7 about"}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    let replace = rate(start);
    let start = Instant::now();
    for _ in 0..n / 10 {
        assert!(
            !tool
                .dispatch(&json!({"command": "view", "path": "/memories"}))
                .is_error
        );
    }
    let listing = (n / 10) as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..n {
        assert!(
            !tool
                .dispatch(&json!({"command": "delete", "path": format!("/memories/bench/f{i}.md")}))
                .is_error
        );
    }
    let delete = rate(start);
    println!("| {name} | {create:.0} | {view:.0} | {replace:.0} | {listing:.0} | {delete:.0} |");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "| backend | create/s | view/s | str_replace/s | view of a 300-file tree/s | delete/s |"
    );
    println!("|---|---|---|---|---|---|");
    measure("in-memory", MemoryTool::new(InMemoryStore::new()));
    let dir = tempfile::tempdir().expect("temporary directory");
    measure(
        "filesystem (durable)",
        MemoryTool::new(FilesystemStore::open(dir.path().join("fs")).expect("open")),
    );
    #[cfg(feature = "sqlite")]
    measure(
        "sqlite (WAL, synchronous=FULL)",
        MemoryTool::new(claude_memory::SqliteStore::open(dir.path().join("m.db")).expect("sqlite")),
    );
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        let tenant =
            claude_memory::TenantId::parse(&format!("bench-{}", std::process::id())).expect("id");
        let store = claude_memory::PostgresStore::connect(&url, 2)
            .expect("postgres")
            .for_tenant(&tenant);
        measure("postgres (local, one connection)", MemoryTool::new(store));
    }
}
