//! A managed memory store's history against its length, in requests: the
//! service's own versions read through the one versions API, on the
//! emulator of the memory stores API (which counts requests), at 1,000 to
//! 250,000 versions (the service's cap):
//!
//! ```text
//! source .ci/managed.sh
//! cargo bench -p claude-memory-bench --bench managed_history --features managed
//! ```
//!
//! Each store holds 100 memories, rewritten in turn by another client
//! (the emulator's API, one request a version). Then, counted: opening
//! the store and one create; one memory's history (a page of 10); the
//! store's newest 100 versions since an hour ago; a diff of two versions;
//! a revert.

use std::time::{Duration, SystemTime};

use claude_memory_bench::emulator as http;
use serde_json::json;

#[cfg(feature = "managed")]
fn run(base: &str, key: &str, max: usize) {
    use claude_memory::history::{Query, Versions as _};
    use claude_memory::store::{MemoryStoreExt as _, WriteMode};
    use claude_memory::{ManagedStore, MemoryPath};
    let requests = |id: &str| claude_memory_bench::emulator_requests(base, key, id);
    println!(
        "| versions | open + create | one memory's history (10) | newest 100 since 1h | diff | revert |"
    );
    println!("|---|---|---|---|---|---|");
    for n in [1_000usize, 10_000, 100_000, 250_000]
        .into_iter()
        .filter(|n| *n <= max)
    {
        let store = http(
            base,
            key,
            "POST",
            "/v1/memory_stores",
            Some(&json!({"name": "bench"})),
        );
        let id = store["id"].as_str().expect("a store").to_owned();
        let mut ids = Vec::new();
        for k in 0..100 {
            let m = http(
                base,
                key,
                "POST",
                &format!("/v1/memory_stores/{id}/memories"),
                Some(&json!({"path": format!("/f{k:03}.md"), "content": "version 0\n"})),
            );
            ids.push(m["id"].as_str().expect("a memory").to_owned());
        }
        for i in 100..n {
            let m = &ids[i % 100];
            http(
                base,
                key,
                "POST",
                &format!("/v1/memory_stores/{id}/memories/{m}"),
                Some(&json!({"content": format!("version {i}\n")})),
            );
        }
        let open = |id: &str| {
            ManagedStore::builder(id)
                .base_url(base)
                .api_key(key)
                .open()
                .expect("open")
        };
        let before = requests(&id);
        let s = open(&id);
        s.write(
            &MemoryPath::parse("/memories/new.md").expect("path"),
            b"x\n",
            WriteMode::Create,
        )
        .expect("create");
        let open_create = requests(&id) - before;
        let count = |f: &dyn Fn()| {
            let before = requests(&id);
            f();
            requests(&id) - before
        };
        let f007 = Query {
            path: Some(MemoryPath::parse("/memories/f007.md").expect("path")),
            limit: Some(10),
            ..Query::default()
        };
        let one = count(&|| {
            let page = s.history(&f007).expect("history");
            assert_eq!(page.len(), 10);
        });
        let older = s.history(&f007).expect("history");
        let since = count(&|| {
            let again = s
                .history(&Query {
                    since: SystemTime::now().checked_sub(Duration::from_secs(3600)),
                    limit: Some(100),
                    ..Query::default()
                })
                .expect("history");
            assert_eq!(again.len(), 100);
        });
        // Two versions of one memory, older than its current one.
        let (a, b) = (older[0].id.clone(), older[5].id.clone());
        let diff = count(&|| {
            s.diff_versions(&a, Some(&b)).expect("diff");
        });
        let revert = count(&|| {
            s.revert_to(&a).expect("revert");
        });
        println!("| {n} | {open_create} | {one} | {since} | {diff} | {revert} |");
    }
}

#[cfg(not(feature = "managed"))]
fn run(_: &str, _: &str, _: usize) {
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
    // `-- 10000`: stop at that many versions.
    let max = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(250_000);
    run(&base, &key, max);
}
