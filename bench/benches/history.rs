//! The cost of history: durable writes with history off and on, side by
//! side in one run, on the filesystem and SQLite stores:
//! `cargo bench -p claude-memory-bench --bench history --features sqlite,postgres`
//! (PostgreSQL with CLAUDE_MEMORY_TEST_POSTGRES_URL set).
//!
//! Each configuration runs the same workload (create a file, then edit it
//! with `str_replace`, through the handler) in alternating rounds, so
//! disk and machine noise hits all alike; the table gives the median
//! round's microseconds per write and the ratio to history off.

use std::time::Instant;

use claude_memory::history::{FileLog, HistoryStore};
use claude_memory::{FilesystemStore, MemoryStore, MemoryTool};
use serde_json::json;

const WRITES: usize = 20;
const ROUNDS: usize = 61;

/// Microseconds per write of one round on a fresh store.
fn round<S: MemoryStore>(tool: &MemoryTool<S>, round: usize) -> f64 {
    let note: String = (0..20)
        .map(|k| format!("- remembered fact {k} about the customer\n"))
        .collect();
    let start = Instant::now();
    for i in 0..WRITES / 2 {
        let path = format!("/memories/r{round}/f{i}.md");
        let r = tool.dispatch(
            &json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "memory",
            "input": {"command": "create", "path": path, "file_text": note}}),
        );
        assert!(!r.is_error, "{:?}", r.text());
        let r = tool.dispatch(&json!({"type": "tool_use", "id": format!("toolu_e{i}"), "name": "memory",
            "input": {"command": "str_replace", "path": path, "old_str": "fact 7 about", "new_str": "FACT 7 about"}}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    start.elapsed().as_secs_f64() * 1e6 / WRITES as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

type Setup = Box<dyn Fn(&std::path::Path) -> Box<dyn Fn(usize) -> f64>>;

fn fs_off() -> Setup {
    Box::new(|dir| {
        let tool = MemoryTool::new(FilesystemStore::open(dir).expect("open"));
        Box::new(move |r| round(&tool, r))
    })
}

fn fs_on(sync: bool) -> Setup {
    Box::new(move |dir| {
        let log = FileLog::for_store(dir).expect("log").sync(sync);
        let store =
            HistoryStore::open(FilesystemStore::open(dir).expect("open"), log).expect("history");
        let tool = MemoryTool::new(store.with_label("bench"));
        Box::new(move |r| round(&tool, r))
    })
}

#[cfg(feature = "sqlite")]
fn sqlite_off() -> Setup {
    Box::new(|dir| {
        let store = claude_memory::SqliteStore::open(dir.join("m.db")).expect("open");
        let tool = MemoryTool::new(store);
        Box::new(move |r| round(&tool, r))
    })
}

#[cfg(feature = "sqlite")]
fn sqlite_on() -> Setup {
    Box::new(|dir| {
        let db = dir.join("m.db");
        let store = claude_memory::SqliteStore::open(&db).expect("open");
        let log = claude_memory::history::SqliteLog::for_store(&store, "").expect("log");
        let store = HistoryStore::open(store, log).expect("history");
        let tool = MemoryTool::new(store.with_label("bench"));
        Box::new(move |r| round(&tool, r))
    })
}

#[cfg(feature = "sqlite")]
fn sqlite_separate() -> Setup {
    Box::new(|dir| {
        let db = dir.join("m.db");
        let store = claude_memory::SqliteStore::open(&db).expect("open");
        let log = claude_memory::history::SqliteLog::open(dir.join("h.db"), "").expect("log");
        let store = HistoryStore::open(store, log).expect("history");
        let tool = MemoryTool::new(store.with_label("bench"));
        Box::new(move |r| round(&tool, r))
    })
}

/// A PostgreSQL store on a scope of its own per configuration and round
/// set (the tenant's tables are the store's; history scopes by tenant).
#[cfg(feature = "postgres")]
fn postgres(history: Option<bool>) -> Setup {
    Box::new(move |dir| {
        let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").expect("url");
        let tenant = format!(
            "bench{}",
            dir.file_name()
                .map(|n| n
                    .to_string_lossy()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), ""))
                .unwrap_or_default()
                .to_lowercase()
        );
        let id = claude_memory::TenantId::parse(&tenant).expect("tenant");
        let store = claude_memory::PostgresStore::connect(&url, 4)
            .expect("connect")
            .for_tenant(&id);
        // `Some(true)`: the log on the store's pool (`for_store`, the
        // CLI's), each version in its change's transaction; `Some(false)`:
        // a log with a pool of its own (`connect`).
        let log = match history {
            None => {
                let tool = MemoryTool::new(store);
                return Box::new(move |r| round(&tool, r));
            }
            Some(true) => claude_memory::history::PostgresLog::for_store(&store, &tenant),
            Some(false) => claude_memory::history::PostgresLog::connect(&url, &tenant),
        };
        let store = HistoryStore::open(store, log.expect("log")).expect("history");
        let tool = MemoryTool::new(store.with_label("bench"));
        Box::new(move |r| round(&tool, r))
    })
}

fn compare(backend: &str, configs: Vec<(&str, Setup)>) {
    let dirs: Vec<tempfile::TempDir> = configs
        .iter()
        .map(|_| {
            tempfile::tempdir_in(std::env::var_os("BENCH_DIR").unwrap_or_else(|| ".".into()))
                .expect("dir")
        })
        .collect();
    let runners: Vec<Box<dyn Fn(usize) -> f64>> = configs
        .iter()
        .zip(&dirs)
        .map(|((_, setup), dir)| setup(dir.path()))
        .collect();
    let mut times = vec![Vec::new(); runners.len()];
    for r in 0..ROUNDS {
        for (i, run) in runners.iter().enumerate() {
            times[i].push(run(r));
        }
    }
    let base = median(times[0].clone());
    for ((name, _), t) in configs.iter().zip(times) {
        let m = median(t);
        println!("| {backend} | {name} | {m:.0} | {:.2}x |", m / base);
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "{WRITES} durable writes per round (create + str_replace), median of {ROUNDS} alternating rounds"
    );
    println!();
    println!("| store | history | µs per write | vs off |");
    println!("|---|---|---|---|");
    compare(
        "filesystem (durable)",
        vec![
            ("off", fs_off()),
            ("on (journal unsynced: default)", fs_on(false)),
            ("on (journal synced: FileLog::sync)", fs_on(true)),
        ],
    );
    #[cfg(feature = "sqlite")]
    compare(
        "SQLite (WAL, synchronous=FULL)",
        vec![
            ("off", sqlite_off()),
            ("on (log in the store's database)", sqlite_on()),
            (
                "on (log in a file of its own: the CLI's choice)",
                sqlite_separate(),
            ),
        ],
    );
    #[cfg(feature = "postgres")]
    if std::env::var_os("CLAUDE_MEMORY_TEST_POSTGRES_URL").is_some() {
        compare(
            "PostgreSQL",
            vec![
                ("off", postgres(None)),
                (
                    "on (`PostgresLog::for_store`: the CLI's)",
                    postgres(Some(true)),
                ),
                (
                    "on (`PostgresLog::connect`: a pool of its own)",
                    postgres(Some(false)),
                ),
            ],
        );
    } else {
        println!("skipped PostgreSQL: set CLAUDE_MEMORY_TEST_POSTGRES_URL (.ci/postgres.sh)");
    }
}
