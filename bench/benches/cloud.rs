//! The cloud store's cost per command against a floor written directly
//! with object_store, side by side on moto's S3 server:
//! `source .ci/cloud.sh && cargo bench -p claude-memory-bench --bench cloud --features s3`.
//!
//! Requests are counted where they arrive: the lines moto's log gains
//! during the command (every HTTP request, retries and pages included).
//! Times are medians of alternating rounds (store, floor, store, …), so
//! machine noise hits both alike. The floor is the fewest requests that
//! give the command's answer with SPEC semantics: a create must also know
//! no directory has that name (a one-key LIST), a delete or rename must
//! know its source exists (a HEAD), a view of a path must learn whether
//! it is a file or a directory.

use std::sync::Arc;
use std::time::Instant;

use claude_memory::object_store::aws::{AmazonS3Builder, S3CopyIfNotExists};
use claude_memory::object_store::path::Path;
use claude_memory::object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use claude_memory::{CloudStore, MemoryTool};
use serde_json::{Value, json};

const ROUNDS: usize = 9;
const BUCKET: &str = "claude-memory-test";

/// The client; `copies` as `CloudStore::from_url` configures S3 (copies
/// conditional on `If-None-Match: *`, which the floor's plain copies do
/// not send).
fn client(endpoint: &str, copies: bool) -> Arc<dyn ObjectStore> {
    CloudStore::install_crypto_provider();
    let mut builder = AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test");
    if copies {
        builder = builder.with_copy_if_not_exists(S3CopyIfNotExists::Header(
            "If-None-Match".into(),
            "*".into(),
        ));
    }
    Arc::new(builder.build().expect("client"))
}

/// Requests moto has logged so far.
fn requests(log: &str) -> usize {
    std::fs::read_to_string(log)
        .map(|t| {
            t.lines()
                .filter(|l| {
                    l.contains("\" 2")
                        || l.contains("\" 3")
                        || l.contains("\" 4")
                        || l.contains("\" 5")
                })
                .count()
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The commands, each as (name, setup-free tool input maker).
const COMMANDS: &[&str] = &[
    "view file",
    "create",
    "str_replace",
    "insert",
    "delete file",
    "rename file",
    "view dir of 100",
    "delete dir of 100",
    "rename dir of 100",
];

/// Writes what a command needs under `prefix`, straight into the bucket.
fn setup(rt: &tokio::runtime::Runtime, bucket: &Arc<dyn ObjectStore>, prefix: &str, command: &str) {
    rt.block_on(async {
        let put = |k: String, body: &'static [u8]| {
            let b = Arc::clone(bucket);
            async move {
                b.put(&Path::from(k), PutPayload::from_static(body))
                    .await
                    .expect("put")
            }
        };
        put(format!("{prefix}/f.md"), b"line one\nline two\n").await;
        if command.ends_with("of 100") {
            let mut set = tokio::task::JoinSet::new();
            for i in 0..100 {
                let b = Arc::clone(bucket);
                let k = Path::from(format!("{prefix}/d/n{i:03}.md"));
                set.spawn(async move {
                    b.put(&k, PutPayload::from_static(b"note\n"))
                        .await
                        .map(|_| ())
                });
            }
            while let Some(r) = set.join_next().await {
                r.expect("join").expect("put");
            }
        }
    });
}

fn input(command: &str) -> Value {
    match command {
        "view file" => json!({"command": "view", "path": "/memories/f.md"}),
        "create" => json!({"command": "create", "path": "/memories/new.md", "file_text": "new\n"}),
        "str_replace" => {
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "one", "new_str": "ONE"})
        }
        "insert" => {
            json!({"command": "insert", "path": "/memories/f.md", "insert_line": 1, "insert_text": "added"})
        }
        "delete file" => json!({"command": "delete", "path": "/memories/f.md"}),
        "rename file" => {
            json!({"command": "rename", "old_path": "/memories/f.md", "new_path": "/memories/g.md"})
        }
        "view dir of 100" => json!({"command": "view", "path": "/memories/d"}),
        "delete dir of 100" => json!({"command": "delete", "path": "/memories/d"}),
        _ => json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    }
}

/// The floor: the command written directly with object_store.
async fn floor(b: &Arc<dyn ObjectStore>, prefix: &str, command: &str) {
    let k = |s: &str| Path::from(format!("{prefix}/{s}"));
    let exists_below = |p: Path| {
        let b = Arc::clone(b);
        async move {
            use futures_lite::next;
            next(&mut b.list(Some(&p))).await.is_some()
        }
    };
    match command {
        "view file" => {
            b.get(&k("f.md"))
                .await
                .expect("get")
                .bytes()
                .await
                .expect("body");
        }
        "create" => {
            assert!(!exists_below(k("new.md")).await);
            b.put_opts(
                &k("new.md"),
                PutPayload::from_static(b"new\n"),
                PutOptions::from(PutMode::Create),
            )
            .await
            .expect("put");
        }
        "str_replace" | "insert" => {
            let got = b.get(&k("f.md")).await.expect("get");
            let meta = got.meta.clone();
            let body = got.bytes().await.expect("body");
            let new = String::from_utf8_lossy(&body).replace("one", "ONE");
            let cond = UpdateVersion {
                e_tag: meta.e_tag,
                version: meta.version,
            };
            b.put_opts(
                &k("f.md"),
                PutPayload::from(new.into_bytes()),
                PutOptions::from(PutMode::Update(cond)),
            )
            .await
            .expect("put");
        }
        "delete file" => {
            b.head(&k("f.md")).await.expect("head");
            b.delete(&k("f.md")).await.expect("delete");
        }
        "rename file" => {
            b.head(&k("f.md")).await.expect("head");
            assert!(b.head(&k("g.md")).await.is_err());
            b.copy(&k("f.md"), &k("g.md")).await.expect("copy");
            b.delete(&k("f.md")).await.expect("delete");
        }
        "view dir of 100" => {
            assert!(b.get(&k("d")).await.is_err());
            b.list_with_delimiter(Some(&k("d"))).await.expect("list");
        }
        "delete dir of 100" => {
            let keys = b.list(Some(&k("d"))).map_ok(|m| m.location).boxed();
            b.delete_stream(keys)
                .try_collect::<Vec<_>>()
                .await
                .expect("delete");
        }
        _ => {
            let metas: Vec<_> = b.list(Some(&k("d"))).try_collect().await.expect("list");
            let mut set = tokio::task::JoinSet::new();
            for m in &metas {
                let (b, from) = (Arc::clone(b), m.location.clone());
                let to = Path::from(from.as_ref().replacen("/d/", "/e/", 1));
                set.spawn(async move { b.copy(&from, &to).await });
            }
            while let Some(r) = set.join_next().await {
                r.expect("join").expect("copy");
            }
            let keys =
                futures_util::stream::iter(metas.into_iter().map(|m| Ok(m.location))).boxed();
            b.delete_stream(keys)
                .try_collect::<Vec<_>>()
                .await
                .expect("delete");
        }
    }
}

use futures_util::{StreamExt, TryStreamExt};

mod futures_lite {
    use futures_util::StreamExt;
    pub async fn next<S: futures_util::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
        s.next().await
    }
}

fn main() {
    let Ok(endpoint) = std::env::var("CLAUDE_MEMORY_TEST_S3_ENDPOINT") else {
        eprintln!("skipped: run `source .ci/cloud.sh` first (CLAUDE_MEMORY_TEST_S3_ENDPOINT)");
        return;
    };
    let log = std::env::var("CLAUDE_MEMORY_BENCH_MOTO_LOG")
        .unwrap_or_else(|_| "/tmp/claude-memory-cloud/moto.log".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let setup_client = client(&endpoint, false);
    let floor_client = client(&endpoint, false);
    // CLAUDE_MEMORY_BENCH_PLAIN_COPIES=1: a client without conditional
    // copies (the store then copies through the client).
    let plain = std::env::var_os("CLAUDE_MEMORY_BENCH_PLAIN_COPIES").is_some();
    let store_client = client(&endpoint, !plain);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    println!("| command | requests: store | floor | ratio | ms: store | floor | ratio |");
    println!("|---|---|---|---|---|---|---|");
    for command in COMMANDS {
        let (mut store_ms, mut floor_ms) = (Vec::new(), Vec::new());
        let (mut store_req, mut floor_req) = (0, 0);
        for round in 0..ROUNDS {
            let p1 = format!("bench/{nanos}/{}/{round}/s", command.replace(' ', "_"));
            let p2 = format!("bench/{nanos}/{}/{round}/f", command.replace(' ', "_"));
            setup(&rt, &setup_client, &p1, command);
            setup(&rt, &setup_client, &p2, command);
            let tool =
                MemoryTool::new(CloudStore::open(Arc::clone(&store_client), &p1).expect("open"));
            let before = requests(&log);
            let start = Instant::now();
            let r = tool.dispatch(&input(command));
            store_ms.push(start.elapsed().as_secs_f64() * 1e3);
            // moto logs a request after answering it: let the lines land.
            std::thread::sleep(std::time::Duration::from_millis(50));
            store_req = requests(&log) - before;
            assert!(!r.is_error, "{command}: {:?}", r.text());
            let before = requests(&log);
            let start = Instant::now();
            rt.block_on(floor(&floor_client, &p2, command));
            floor_ms.push(start.elapsed().as_secs_f64() * 1e3);
            std::thread::sleep(std::time::Duration::from_millis(50));
            floor_req = requests(&log) - before;
        }
        let (s, f) = (median(store_ms), median(floor_ms));
        println!(
            "| {command} | {store_req} | {floor_req} | {:.2}x | {s:.1} | {f:.1} | {:.2}x |",
            store_req as f64 / floor_req.max(1) as f64,
            s / f
        );
    }
}
