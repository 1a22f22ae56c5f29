//! History against its length: the same questions asked of a history of
//! 1,000 versions and of 1,000,000, on the filesystem (`FileLog`), SQLite
//! and PostgreSQL (with CLAUDE_MEMORY_TEST_POSTGRES_URL set), side by side
//! in one run:
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench history_length --features sqlite,postgres
//! cargo bench -p claude-memory-bench --bench history_length --features sqlite -- fs 100000
//! ```
//!
//! Each history has 100 files, rewritten in turn, one version every 10 s
//! back from now (so `--since 1h` matches the last 360 at every length,
//! as a store written at a steady pace does). It is built by
//! appending to the log directly (the store's files then hold each file's
//! last version) and opened once, which reads it whole and saves the
//! checkpoint, as the first open of a 0.4 history does. Then a child
//! process (so its peak memory is its own) times the median of 5 runs of:
//! opening the store with history and one create; one file's history (a
//! page of 10); `history --since 1h` (a page of 100); a revert; a diff of
//! two versions. The ratios are to the 1,000-version history's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use claude_memory::history::{
    ChangeOp, FileLog, HistoryLog, HistoryStore, Query, Revision, sha256_hex,
};
use claude_memory::path::MemoryPath;
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{FilesystemStore, MemoryStore, MemoryTool};
use serde_json::json;

const FILES: usize = 100;
const RUNS: usize = 5;
/// The child's marker in the environment: `backend size dir`.
const CHILD: &str = "CLAUDE_MEMORY_BENCH_HISTORY_CHILD";

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn path(i: usize) -> String {
    format!("/memories/f{:03}.md", i % FILES)
}

fn text(i: usize) -> String {
    format!("version {i} of a remembered fact\n")
}

/// The store and its log, for a backend, at `dir` (a directory, a SQLite
/// file's directory, or a PostgreSQL tenant id).
fn open(backend: &str, dir: &Path) -> (Box<dyn MemoryStore>, Box<dyn HistoryLog>) {
    match backend {
        "fs" => (
            Box::new(
                FilesystemStore::builder(dir.join("store"))
                    .durable(false)
                    .open()
                    .expect("store"),
            ),
            Box::new(FileLog::for_store(dir.join("store")).expect("log")),
        ),
        #[cfg(feature = "sqlite")]
        "sqlite" => (
            Box::new(claude_memory::SqliteStore::open(dir.join("m.db")).expect("store")),
            Box::new(
                claude_memory::history::SqliteLog::open(dir.join("m.db.claude-memory-history"), "")
                    .expect("log"),
            ),
        ),
        #[cfg(feature = "postgres")]
        "postgres" => {
            let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").expect("a PostgreSQL URL");
            let tenant = dir
                .file_name()
                .and_then(|n| n.to_str())
                .map(|n| {
                    n.to_lowercase()
                        .replace(|c: char| !c.is_ascii_alphanumeric(), "")
                })
                .expect("a tenant name");
            let tenant = claude_memory::TenantId::parse(&format!("h{tenant}")).expect("tenant");
            let store = claude_memory::PostgresStore::connect(&url, 4)
                .expect("connect")
                .for_tenant(&tenant);
            let log = claude_memory::history::PostgresLog::for_store(&store, tenant.as_str())
                .expect("log");
            (Box::new(store), Box::new(log))
        }
        other => panic!("no backend {other} in this build"),
    }
}

/// A history of `n` versions, appended in batches, and the store's files
/// as its last versions left them; then one open (the whole history read
/// once, the checkpoint saved). The seconds that open took.
fn build(backend: &str, dir: &Path, n: usize) -> f64 {
    let (store, log) = open(backend, dir);
    let now = SystemTime::now();
    let mut i = 0;
    while i < n {
        let end = (i + 10_000).min(n);
        let mut batch: Vec<Revision> = (i..end)
            .map(|k| {
                let t = text(k);
                Revision {
                    id: 0,
                    file: if k < FILES { 0 } else { (k % FILES + 1) as u64 },
                    op: if k < FILES {
                        ChangeOp::Created
                    } else {
                        ChangeOp::Modified
                    },
                    path: path(k),
                    from: None,
                    time: now - Duration::from_secs(10 * (n - k) as u64),
                    actor: Some("agent".into()),
                    call: Some(format!("toolu_{k}")),
                    sha256: sha256_hex(t.as_bytes()),
                    size: t.len() as u64,
                    content: Some(t.into_bytes()),
                    redacted: false,
                    note: None,
                    prev: None,
                }
            })
            .collect();
        log.append(&mut batch).expect("append");
        i = end;
    }
    for k in n.saturating_sub(FILES)..n {
        store
            .write(
                &MemoryPath::parse(&path(k)).expect("path"),
                text(k).as_bytes(),
                WriteMode::Overwrite,
            )
            .expect("file");
    }
    let start = Instant::now();
    drop(HistoryStore::open(store, log).expect("the first open"));
    start.elapsed().as_secs_f64()
}

/// The child: the timed questions, one line of results.
fn child(backend: &str, n: usize, dir: &Path) {
    let mut creates = 0;
    let open_create = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let (store, log) = open(backend, dir);
            let tool = MemoryTool::new(HistoryStore::open(store, log).expect("open"));
            let p = format!("/memories/new/n{creates}.md");
            creates += 1;
            let r = tool.dispatch(&json!({"command": "create", "path": p, "file_text": "x\n"}));
            assert!(!r.is_error, "{r:?}");
            start.elapsed()
        })
        .collect();
    let (store, log) = open(backend, dir);
    let h = HistoryStore::open(store, log).expect("open");
    let time = |f: &mut dyn FnMut()| {
        median(
            (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    f();
                    start.elapsed()
                })
                .collect(),
        )
    };
    let file = Query {
        path: Some(MemoryPath::parse("/memories/f007.md").expect("path")),
        limit: Some(10),
        ..Query::default()
    };
    let one_file = time(&mut || {
        let page = h.versions(&file).expect("versions");
        assert_eq!(page.len(), 10.min(n / FILES));
    });
    let hour = Query {
        since: SystemTime::now().checked_sub(Duration::from_secs(3600)),
        limit: Some(100),
        ..Query::default()
    };
    let since = time(&mut || {
        let page = h.versions(&hour).expect("versions");
        assert_eq!(page.len(), 100);
    });
    // Versions of f008 from the middle of the history: ids are positions
    // plus one (appended in order, none dropped).
    let middle = |back: usize| ((n / 2 / FILES) * FILES + 8 - back * FILES + 1) as u64;
    let mut flip = 0;
    let revert = time(&mut || {
        flip += 1;
        h.revert(middle(flip % 2)).expect("revert");
    });
    let diff = time(&mut || {
        let d = h.diff(middle(1), Some(middle(0))).expect("diff");
        assert!(!d.is_empty());
    });
    println!(
        "RESULT {} {} {} {} {} {} {:.1}",
        median(open_create).as_nanos(),
        one_file.as_nanos(),
        since.as_nanos(),
        revert.as_nanos(),
        diff.as_nanos(),
        n,
        peak_rss_mib()
    );
}

/// The bytes of PostgreSQL's history table and its indexes (the tables of
/// every size's history, which the parent measures before and after one).
#[cfg(feature = "postgres")]
fn pg_bytes() -> Option<u64> {
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").ok()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .ok()?;
        tokio::spawn(conn);
        let row = client
            .query_one(
                "SELECT COALESCE(pg_total_relation_size(to_regclass('claude_memory_history')), 0)::BIGINT",
                &[],
            )
            .await
            .ok()?;
        u64::try_from(row.get::<_, i64>(0)).ok()
    })
}

#[cfg(not(feature = "postgres"))]
fn pg_bytes() -> Option<u64> {
    None
}

/// Bytes of the log's storage.
fn log_bytes(backend: &str, dir: &Path) -> Option<u64> {
    let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    match backend {
        "fs" => {
            let d = dir.join("store").join(claude_memory::history::HISTORY_DIR);
            Some(size(d.join("journal.jsonl")) + size(d.join("checkpoint.json")))
        }
        "sqlite" => {
            let base = dir.join("m.db.claude-memory-history");
            let mut wal = base.clone().into_os_string();
            wal.push("-wal");
            Some(size(base) + size(PathBuf::from(wal)))
        }
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if let Ok(spec) = std::env::var(CHILD) {
        let mut parts = spec.splitn(3, ' ');
        let backend = parts.next().expect("backend");
        let n: usize = parts.next().and_then(|n| n.parse().ok()).expect("size");
        let dir = PathBuf::from(parts.next().expect("dir"));
        child(backend, n, &dir);
        return;
    }
    let mut backends: Vec<&str> = vec!["fs"];
    if cfg!(feature = "sqlite") {
        backends.push("sqlite");
    }
    if cfg!(feature = "postgres") && std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").is_ok() {
        backends.push("postgres");
    }
    if let Some(only) = args
        .iter()
        .find(|a| ["fs", "sqlite", "postgres"].contains(&a.as_str()))
    {
        backends.retain(|b| b == only);
    }
    let max: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let sizes: Vec<usize> = [1_000, 10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|s| *s <= max)
        .collect();
    let me = std::env::current_exe().expect("this bench");
    for backend in backends {
        println!(
            "\n{backend}: versions | open + create | one file's history | since 1h | revert | diff | peak RSS | disk per version | first open"
        );
        let mut base: Option<Vec<f64>> = None;
        for &n in &sizes {
            let mut dir = tempfile::Builder::new()
                .prefix(&format!("hist{n}"))
                .tempdir()
                .expect("dir");
            // Kept for a look afterwards (EXPLAIN, a profiler).
            dir.disable_cleanup(std::env::var_os("CLAUDE_MEMORY_BENCH_KEEP").is_some());
            let pg_before = (backend == "postgres").then(pg_bytes).flatten();
            let first_open = build(backend, dir.path(), n);
            let bytes = match pg_before {
                Some(before) => pg_bytes().map(|after| after.saturating_sub(before)),
                None => log_bytes(backend, dir.path()),
            };
            let disk = bytes.map(|b| {
                let content: u64 = (0..n).map(|k| text(k).len() as u64).sum();
                (b.saturating_sub(content)) as f64 / n as f64
            });
            let out = Command::new(&me)
                .env(CHILD, format!("{backend} {n} {}", dir.path().display()))
                .output()
                .expect("run the child");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
                panic!("the child failed: {}", String::from_utf8_lossy(&out.stderr));
            };
            let v: Vec<f64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            let b = base.get_or_insert_with(|| v.clone());
            let cell = |i: usize| {
                format!(
                    "{} ({:.2}x)",
                    fmt(Duration::from_nanos(v[i] as u64)),
                    v[i] / b[i]
                )
            };
            println!(
                "  {n:>9} | {} | {} | {} | {} | {} | {:.1} MiB ({:.2}x) | {} | {:.1} s",
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                cell(4),
                v[6],
                v[6] / b[6],
                disk.map_or_else(|| "-".to_owned(), |d| format!("{d:.0} B + content")),
                first_open
            );
        }
    }
}
