//! Issue 14: the store size limit holds against concurrent writers. Many
//! threads (and, for the filesystem store, two store instances on one root
//! and two processes) create files under a limit; the store must end at or
//! under it, and every refused create must have left nothing behind.

use std::collections::BTreeSet;
use std::process::Command;

use claude_memory::store::{MemoryStore, MemoryStoreExt as _};
use claude_memory::{
    Config, FilesystemStore, InMemoryStore, MemoryPath, MemoryTool, TenantId, TenantStore,
};
use serde_json::json;

/// Bytes per file and the limit: exactly `LIMIT / FILE` creates fit.
const FILE: usize = 100;
const LIMIT: u64 = 5_000;
const THREADS: usize = 6;
const PER_THREAD: usize = 20;

const FULL: &str = "Error: The memory store would hold ";

/// One writer's creates: `/memories/{prefix}/f{k}.md`, each `FILE` bytes.
/// Returns the paths created and the paths refused for the limit.
fn writer<S: MemoryStore>(tool: &MemoryTool<S>, prefix: &str) -> (Vec<String>, Vec<String>) {
    let (mut created, mut refused) = (Vec::new(), Vec::new());
    for k in 0..PER_THREAD {
        let path = format!("/memories/{prefix}/f{k}.md");
        let result = tool
            .dispatch(&json!({"command": "create", "path": path, "file_text": "x".repeat(FILE)}));
        let text = result.text().unwrap_or_default().to_owned();
        if !result.is_error {
            created.push(path);
        } else if text.starts_with(FULL)
            && text.ends_with(&format!("over the limit of {LIMIT} bytes"))
        {
            refused.push(path);
        } else {
            panic!("unexpected answer for {path}: {text}");
        }
    }
    (created, refused)
}

/// One writer's directory name, its created paths and its refused ones.
type Outcome = (String, (Vec<String>, Vec<String>));

fn config() -> Config {
    Config::default().with_max_store_size(LIMIT)
}

/// Checks the outcome on `store` (what the writers' handlers saw): at the
/// limit exactly (every refusal came when no file fitted any more), every
/// created file there, every refused one (and a writer's directory with
/// nothing created) absent.
fn check(store: &dyn MemoryStore, outcomes: &[Outcome]) {
    let total = store.total_size().expect("total");
    let created: usize = outcomes.iter().map(|(_, (c, _))| c.len()).sum();
    assert!(
        total <= LIMIT,
        "the store holds {total} bytes, over {LIMIT}"
    );
    assert_eq!(total, (created * FILE) as u64);
    assert_eq!(total, LIMIT, "refusals came before the store was full");
    let mut seen = BTreeSet::new();
    for (prefix, (made, refused)) in outcomes {
        for p in made {
            let path = MemoryPath::parse(p).expect("path");
            let m = store
                .stat(&path)
                .expect("stat")
                .expect("created file exists");
            assert_eq!(m.len, FILE as u64);
            assert!(seen.insert(p.clone()));
        }
        for p in refused {
            let path = MemoryPath::parse(p).expect("path");
            assert!(
                store.stat(&path).expect("stat").is_none(),
                "{p} was refused but exists"
            );
        }
        if made.is_empty() {
            let dir = MemoryPath::parse(&format!("/memories/{prefix}")).expect("path");
            assert!(
                store.stat(&dir).expect("stat").is_none(),
                "a refused create left /memories/{prefix}"
            );
        }
    }
}

/// `THREADS` writers, each with its handler from `tool(i)`.
fn race<S: MemoryStore>(name: &str, tool: impl Fn(usize) -> MemoryTool<S> + Sync) -> Vec<Outcome> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let tool = &tool;
                s.spawn(move || {
                    let prefix = format!("{name}w{i}");
                    let outcome = writer(&tool(i), &prefix);
                    (prefix, outcome)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    })
}

#[test]
fn concurrent_creates_never_exceed_the_limit_in_memory() {
    let store = InMemoryStore::new();
    let outcomes = race("", |_| MemoryTool::with_config(&store, config()));
    check(&store, &outcomes);
}

#[test]
fn concurrent_creates_never_exceed_the_limit_on_the_filesystem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FilesystemStore::builder(dir.path())
        .durable(false)
        .open()
        .expect("open");
    let outcomes = race("", |_| MemoryTool::with_config(&store, config()));
    check(&store, &outcomes);
}

#[test]
fn two_filesystem_stores_on_one_root_never_exceed_the_limit_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || {
        FilesystemStore::builder(dir.path())
            .durable(false)
            .open()
            .expect("open")
    };
    let stores = [open(), open()];
    let outcomes = race("", |i| MemoryTool::with_config(&stores[i % 2], config()));
    check(&stores[0], &outcomes);
}

/// Each tenant's limit covers its own files: two tenants racing in one
/// base each fill exactly their own limit.
#[test]
fn tenants_in_one_base_each_keep_their_own_limit() {
    let mem = InMemoryStore::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FilesystemStore::builder(dir.path())
        .durable(false)
        .open()
        .expect("open");
    let bases: [&dyn MemoryStore; 2] = [&mem, &fs];
    for base in bases {
        let tenants = [
            TenantStore::new(base, TenantId::parse("alice").expect("id")),
            TenantStore::new(base, TenantId::parse("bob").expect("id")),
        ];
        let outcomes = race("", |i| MemoryTool::with_config(&tenants[i % 2], config()));
        for (t, tenant) in tenants.iter().enumerate() {
            let mine: Vec<_> = outcomes
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == t)
                .map(|(_, o)| o.clone())
                .collect();
            check(tenant, &mine);
        }
        assert_eq!(base.total_size().expect("total"), 2 * LIMIT);
    }
}

/// Set in a child process of
/// [`two_processes_never_exceed_the_limit_together`]: the store root.
const CHILD_ROOT: &str = "CLAUDE_MEMORY_QUOTA_CHILD_ROOT";
const CHILD_NAME: &str = "CLAUDE_MEMORY_QUOTA_CHILD_NAME";

/// Not a test on its own: the body of a child process (does nothing unless
/// started by the test below). Prints one `QUOTA created|refused PATH` line
/// per create.
#[test]
fn quota_child_process() {
    let (Ok(root), Ok(name)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_NAME)) else {
        return;
    };
    let store = FilesystemStore::builder(&root)
        .durable(false)
        .open()
        .expect("open");
    let outcomes = race(&name, |_| MemoryTool::with_config(&store, config()));
    for (_, (created, refused)) in outcomes {
        for p in created {
            println!("QUOTA created {p}");
        }
        for p in refused {
            println!("QUOTA refused {p}");
        }
    }
}

#[test]
fn two_processes_never_exceed_the_limit_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("this test binary");
    let children: Vec<_> = ["p0", "p1"]
        .iter()
        .map(|name| {
            Command::new(&exe)
                .args([
                    "quota_child_process",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ROOT, dir.path())
                .env(CHILD_NAME, name)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut created = Vec::new();
    let mut refused = Vec::new();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{out:?}");
        // The harness's "test … ... " may precede a line on its own line.
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stdout
            .lines()
            .filter_map(|l| l.split_once("QUOTA ").map(|x| x.1))
        {
            match line.split_once(' ') {
                Some(("created", p)) => created.push(p.to_owned()),
                Some(("refused", p)) => refused.push(p.to_owned()),
                _ => {}
            }
        }
    }
    assert_eq!(created.len() + refused.len(), 2 * THREADS * PER_THREAD);
    let store = FilesystemStore::open(dir.path()).expect("open");
    let total = store.total_size().expect("total");
    assert!(
        total <= LIMIT,
        "the store holds {total} bytes, over {LIMIT}"
    );
    assert_eq!(total, LIMIT);
    assert_eq!(total, (created.len() * FILE) as u64);
    for p in &refused {
        let path = MemoryPath::parse(p).expect("path");
        assert!(
            store.stat(&path).expect("stat").is_none(),
            "{p} was refused but exists"
        );
        // A writer none of whose creates got through left no directory.
        let dir = path.parent().expect("parent");
        let prefix = format!("{}/", dir.normalized());
        if !created.iter().any(|c| c.starts_with(&prefix)) {
            assert!(
                store.stat(&dir).expect("stat").is_none(),
                "{prefix} was left"
            );
        }
    }
}

/// SQLite: every writer its own store (connection) on one database file,
/// so the cap is held by the database's lock, not by a shared handle.
#[cfg(feature = "sqlite")]
#[test]
fn sqlite_stores_on_one_file_never_exceed_the_limit_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("m.db");
    let stores: Vec<_> = (0..THREADS)
        .map(|_| claude_memory::SqliteStore::open(&db).expect("sqlite"))
        .collect();
    let outcomes = race("", |i| MemoryTool::with_config(&stores[i], config()));
    check(&stores[0], &outcomes);
}

/// PostgreSQL: every writer its own pool on one tenant of the test
/// database (skipped without CLAUDE_MEMORY_TEST_POSTGRES_URL, required in
/// CI).
#[cfg(feature = "postgres")]
#[test]
fn postgres_pools_never_exceed_the_limit_together() {
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL");
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tenant = claude_memory::TenantId::parse(&format!("quota-{}-{nanos}", std::process::id()))
        .expect("tenant id");
    let stores: Vec<_> = (0..THREADS)
        .map(|_| {
            claude_memory::PostgresStore::connect(&url, 1)
                .expect("postgres")
                .for_tenant(&tenant)
        })
        .collect();
    let outcomes = race("", |i| MemoryTool::with_config(&stores[i], config()));
    check(&stores[0], &outcomes);
}
