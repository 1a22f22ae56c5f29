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

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

fn http(base: &str, key: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).expect("connect");
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
         anthropic-version: 2023-06-01\r\nanthropic-beta: agent-memory-2026-07-22\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("answer");
    let text = String::from_utf8_lossy(&answer);
    text.split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null)
}

#[cfg(feature = "managed")]
fn run(base: &str, key: &str, max: usize) {
    use claude_memory::history::{Query, Versions as _};
    use claude_memory::store::{MemoryStoreExt as _, WriteMode};
    use claude_memory::{ManagedStore, MemoryPath};
    let requests = |id: &str| {
        http(
            base,
            key,
            "GET",
            &format!("/_emulator/requests?memory_store_id={id}"),
            None,
        )["count"]
            .as_u64()
            .unwrap_or(0)
    };
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
