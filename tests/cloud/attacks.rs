//! Attacks on `CloudStore`, each written as the attack, against moto (S3,
//! with and without conditional copies) and Azurite (see tests/cloud/servers.rs
//! for how to run them): another program writing the bucket (planted
//! intent records, huge ones, stale leases), a second writer racing a
//! rename, and a network that fails in the middle of one. Races are made
//! to happen every run by holding chosen requests back (`Tap`), never by
//! answering in the server's place.
#![cfg(all(feature = "s3", feature = "azure"))]

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use claude_memory::object_store::path::Path;
use claude_memory::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{CloudStore, Config, MemoryPath, MemoryStore, MemoryTool, StoreError};
use serde_json::json;

#[path = "../cloud_support/mod.rs"]
mod cloud_support;

use cloud_support::tap::{Op, Tap};
use cloud_support::{bucket, unique};

const BACKENDS: [&str; 3] = ["s3", "s3-plain", "azure"];

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Writes `body` at the raw key `key`, as another program would (a
/// client of its own: one used on this short-lived runtime must not be
/// given to a store).
fn plant(backend: &str, key: &str, body: Vec<u8>) {
    let b = bucket(backend).expect("bucket");
    let key = Path::from(key);
    block_on(async move { b.put(&key, PutPayload::from(body)).await.expect("plant") });
}

fn exists(backend: &str, key: &str) -> bool {
    let b = bucket(backend).expect("bucket");
    let key = Path::from(key);
    block_on(async move { b.head(&key).await.is_ok() })
}

fn content(s: &CloudStore, path: &str) -> Option<Vec<u8>> {
    match s.read(&p(path), 1 << 20) {
        Ok(c) => Some(c.data),
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => panic!("read {path}: {e}"),
    }
}

/// Attack: another program creates a file inside a rename's destination
/// after the rename checked it was free and before its copies land.
/// Before: the copy overwrote it (its create had answered success: a lost
/// write). Now each copy is conditional: the rename undoes its copies and
/// answers "destination exists"; every entry is where it was.
#[test]
fn a_create_racing_a_rename_is_never_overwritten() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("race-create");
        let other = CloudStore::open(Arc::clone(&b), &prefix).expect("open");
        other
            .write(&p("/memories/a/x.md"), b"mine", WriteMode::Create)
            .expect("x");
        other
            .write(&p("/memories/a/y.md"), b"y", WriteMode::Create)
            .expect("y");
        // The renamer's copies (and, without conditional copies, its
        // reads of the sources) are held back 600 ms.
        let slow = Tap::new(Arc::clone(&b), |op, key| {
            (matches!(op, Op::Copy | Op::Get) && key.contains("/a/"))
                .then_some(Duration::from_millis(600))
        });
        let renamer = CloudStore::open(slow, &prefix).expect("open");
        let mover =
            std::thread::spawn(move || renamer.rename(&p("/memories/a"), &p("/memories/c")));
        std::thread::sleep(Duration::from_millis(300));
        // Another program's conditional create (a store of this crate
        // waits for the pending rename first, so it cannot race it).
        let key = Path::from(format!("{prefix}/c/x.md").as_str());
        let raced = Arc::clone(&b);
        block_on(async move {
            let mode = claude_memory::object_store::PutMode::Create;
            raced
                .put_opts(&key, PutPayload::from_static(b"theirs"), mode.into())
                .await
        })
        .expect("the racing create");
        let moved = mover.join().expect("join");
        assert_eq!(
            content(&other, "/memories/c/x.md").as_deref(),
            Some(&b"theirs"[..]),
            "{backend}: the racing create was overwritten"
        );
        assert!(
            matches!(moved, Err(StoreError::AlreadyExists { .. })),
            "{backend}: {moved:?}"
        );
        assert_eq!(
            content(&other, "/memories/a/x.md").as_deref(),
            Some(&b"mine"[..])
        );
        assert_eq!(
            content(&other, "/memories/a/y.md").as_deref(),
            Some(&b"y"[..])
        );
        assert_eq!(
            content(&other, "/memories/c/y.md"),
            None,
            "{backend}: y at both paths"
        );
    }
}

/// Attack: a size lease left by a dead process is found stale by two
/// writers at once, one of them on a slow network. Before: each deleted
/// it and created its own, the slow one deleting the other's live lease,
/// so both checked the limit before either wrote and the store ended
/// over it. Now a stale lease is taken over by a write on its ETag: one
/// takes it, the other waits, and the limit holds.
#[test]
fn a_stale_size_lease_is_taken_by_one_writer() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("stale-lease");
        plant(
            backend,
            &format!("{prefix}/.claude-memory-quota-lock"),
            Vec::new(),
        );
        // Stale after 3 s (longer than A holds it: about a second).
        std::thread::sleep(Duration::from_millis(3200));
        let open = |client: Arc<dyn ObjectStore>| {
            let store = CloudStore::builder(client)
                .prefix(&prefix)
                .lease(Duration::from_secs(3))
                .open()
                .expect("open");
            MemoryTool::with_config(store, Config::default().with_max_store_size(10))
        };
        // A writes its file slowly; B's requests on the lease are slow.
        let a = open(Tap::new(Arc::clone(&b), |op, key| {
            (op == Op::Put && key.ends_with("a.md")).then_some(Duration::from_millis(900))
        }));
        let bb = open(Tap::new(Arc::clone(&b), |op, key| {
            (matches!(op, Op::Delete | Op::Update) && key.ends_with("quota-lock"))
                .then_some(Duration::from_millis(300))
        }));
        let go = Arc::new(Barrier::new(2));
        let run = |tool: MemoryTool<CloudStore>, name: &'static str, go: Arc<Barrier>| {
            std::thread::spawn(move || {
                go.wait();
                tool.dispatch(&json!({"command": "create", "path": format!("/memories/{name}"), "file_text": "123456"}))
            })
        };
        let ra = run(a, "a.md", Arc::clone(&go));
        let rb = run(bb, "b.md", go);
        let (ra, rb) = (ra.join().expect("a"), rb.join().expect("b"));
        let check = CloudStore::open(Arc::clone(&b), &prefix).unwrap_or_else(|e| {
            panic!("{backend}: open: {e}: {:?}", std::error::Error::source(&e))
        });
        let total = check.total_size().expect("total");
        assert!(
            total <= 10,
            "{backend}: the store holds {total} bytes, over 10 ({ra:?} {rb:?})"
        );
        assert_eq!(
            [ra.is_error, rb.is_error].iter().filter(|e| !**e).count(),
            1,
            "{backend}: {ra:?} {rb:?}"
        );
    }
}

/// Attack: another program plants intent records that would move or
/// delete the whole store (`/memories` itself, and a move into itself).
/// Before: the next open "finished" them, moving every file (the store's
/// own objects too) below `/memories/moved`, or deleting all. Now a
/// record this crate could not have written is discarded.
#[test]
fn planted_intent_records_cannot_move_or_delete_the_store() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("planted");
        let store = CloudStore::open(Arc::clone(&b), &prefix).expect("open");
        store
            .write(&p("/memories/keep.md"), b"k", WriteMode::Create)
            .expect("keep");
        store
            .write(&p("/memories/d/x.md"), b"x", WriteMode::Create)
            .expect("x");
        for record in [
            json!({"op": "rename", "from": "/memories", "to": "/memories/moved"}),
            json!({"op": "delete", "path": "/memories"}),
            json!({"op": "rename", "from": "/memories/d", "to": "/memories/d/e"}),
            json!({"op": "rename", "from": "/memories/../x", "to": "/memories/y"}),
            json!("not a record"),
        ] {
            let key = format!("{prefix}/.claude-memory-intent");
            plant(backend, &key, serde_json::to_vec(&record).expect("json"));
            let reopened = CloudStore::builder(Arc::clone(&b))
                .prefix(&prefix)
                .lease(Duration::ZERO)
                .open()
                .expect("reopen");
            assert_eq!(
                content(&reopened, "/memories/keep.md").as_deref(),
                Some(&b"k"[..]),
                "{backend}: {record}"
            );
            assert_eq!(
                content(&reopened, "/memories/d/x.md").as_deref(),
                Some(&b"x"[..]),
                "{backend}: {record}"
            );
            assert!(
                reopened
                    .stat(&p("/memories/moved"))
                    .expect("stat")
                    .is_none()
            );
            assert!(
                !exists(backend, &key),
                "{backend}: the planted record was kept"
            );
        }
    }
}

/// Attack: another program plants a huge object as the intent record.
/// Before: the next open read it whole into memory (a 2 GiB object, 2 GiB
/// of memory). Now a record over 64 KiB is discarded unread.
#[test]
fn a_huge_planted_intent_record_is_never_read() {
    for backend in BACKENDS {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("huge-record");
        let key = format!("{prefix}/.claude-memory-intent");
        let mut body = br#"{"op":"rename","from":"/memories/a","to":"/memories/b"}"#.to_vec();
        body.resize(2 << 20, b' ');
        plant(backend, &key, body);
        let tap = Tap::new(Arc::clone(&b), |_, _| None);
        let client: Arc<dyn ObjectStore> = Arc::clone(&tap) as Arc<dyn ObjectStore>;
        let store = CloudStore::builder(client)
            .prefix(&prefix)
            .lease(Duration::ZERO)
            .open()
            .expect("open");
        assert!(
            !tap.sent(Op::Get, ".claude-memory-intent"),
            "{backend}: the huge record was read"
        );
        assert!(
            !exists(backend, &key),
            "{backend}: the huge record was kept"
        );
        store
            .write(&p("/memories/n.md"), b"n", WriteMode::Create)
            .expect("the store works");
    }
}

/// Attack: the network fails in the middle of a directory rename (the
/// proxy to the server is cut, then refuses connections). The model gets
/// SPEC §4's answers, naming no host, port, bucket or prefix; once the
/// network is back, the next open finishes the rename and every entry is
/// at one place.
#[test]
fn a_network_cut_mid_rename_is_reported_and_recovered() {
    let Some(endpoint) = cloud_support::endpoint("s3") else {
        let _ = bucket("s3"); // prints the skip line (or fails when required)
        return;
    };
    let target: std::net::SocketAddr = endpoint
        .trim_start_matches("http://")
        .parse()
        .expect("endpoint address");
    let proxy = cloud_support::proxy::Proxy::start(target, 0);
    let port = proxy.port();
    let client = || -> Arc<dyn ObjectStore> {
        claude_memory::CloudStore::install_crypto_provider();
        Arc::new(
            claude_memory::object_store::aws::AmazonS3Builder::new()
                .with_endpoint(format!("http://127.0.0.1:{port}"))
                .with_allow_http(true)
                .with_bucket_name(cloud_support::BUCKET)
                .with_region("us-east-1")
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .with_retry(claude_memory::object_store::RetryConfig {
                    max_retries: 1,
                    retry_timeout: Duration::from_secs(2),
                    ..Default::default()
                })
                .build()
                .expect("client"),
        )
    };
    let prefix = unique("cut");
    let names: Vec<String> = (0..40).map(|i| format!("f{i:02}.md")).collect();
    {
        let store = CloudStore::open(client(), &prefix).expect("open");
        for n in &names {
            store
                .write(
                    &p(&format!("/memories/a/{n}")),
                    n.as_bytes(),
                    WriteMode::Create,
                )
                .expect("write");
        }
    }
    // Copies (this client copies through itself: a GET, then a PUT, 8 at
    // a time) held back 150 ms each: the rename takes most of a second,
    // and the cut lands in its middle.
    let slow = Tap::new(client(), |op, _| {
        (op == Op::Copy || op == Op::Get).then_some(Duration::from_millis(150))
    });
    let store = CloudStore::builder(slow)
        .prefix(&prefix)
        .timeout(Duration::from_secs(10))
        .open()
        .expect("open");
    let tool = MemoryTool::new(store);
    let cutter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        proxy.cut();
        proxy
    });
    let r = tool.dispatch(
        &json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
    );
    let proxy = cutter.join().expect("cutter");
    let during = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    for answer in [&r, &during] {
        let text = answer.text().unwrap_or_default().to_owned();
        assert!(answer.is_error, "{text}");
        assert!(
            text.starts_with("Error: Could not confirm the write (")
                || text.starts_with("Error: Could not reach the memory store ("),
            "{text}"
        );
        for secret in [
            "127.0.0.1",
            &port.to_string(),
            cloud_support::BUCKET,
            &prefix,
            "http",
            "test",
        ] {
            assert!(!text.contains(secret), "{text:?} names {secret:?}");
        }
    }
    assert_eq!(
        during.text(),
        Some("Error: Could not reach the memory store (connection refused) for /memories")
    );
    drop(tool);
    let back = proxy.restart();
    let reopened = CloudStore::builder(client())
        .prefix(&prefix)
        .lease(Duration::ZERO)
        .open()
        .expect("reopen after the network is back");
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for dir in ["a", "b"] {
        if let Ok(entries) = reopened.list(&p(&format!("/memories/{dir}"))) {
            for e in entries {
                *at.entry(e.name).or_default() += 1;
            }
        }
    }
    for n in &names {
        assert_eq!(at.get(n), Some(&1), "{n} is at {:?} places", at.get(n));
    }
    assert_eq!(at.len(), names.len());
    drop(back);
}

/// PUTs `body` at the raw key `key` on moto, bytes exactly as given
/// (object_store would encode what memory paths cannot spell; another
/// program need not).
fn plant_raw_s3(key: &str, body: &'static [u8]) {
    let endpoint = cloud_support::endpoint("s3").expect("endpoint");
    let encoded: String = key
        .split('/')
        .map(|part| {
            percent_encoding::utf8_percent_encode(part, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("/");
    let url = format!("{endpoint}/{}/{encoded}", cloud_support::BUCKET);
    let r = reqwest::blocking::Client::new()
        .put(url)
        .body(body)
        .send()
        .expect("raw put");
    assert!(
        r.status().is_success(),
        "raw put of {key:?}: {}",
        r.status()
    );
}

/// Attack: another program writes keys no memory path can spell into a
/// directory (a C1 control character, a 300-byte name, a decomposed `é`,
/// a literal `%41` that decodes to another name). A view of the
/// directory and of the root still answers and shows the valid file;
/// every listed name can be viewed (before: `x%41` was listed as `xA`,
/// which named nothing); the directory can be renamed and deleted whole.
/// Keys object_store 0.14 cannot parse at all (an ASCII control
/// character, `..`, an empty level) fail the whole listing page: the view is an
/// error for the directory, never a panic and never a listing that
/// silently leaves entries out.
#[test]
fn keys_no_memory_path_can_spell_do_not_break_the_directory() {
    let Some(b) = bucket("s3") else { return };
    let prefix = unique("bad-keys");
    let store = CloudStore::open(Arc::clone(&b), &prefix).expect("open");
    store
        .write(&p("/memories/d/ok.md"), b"ok\n", WriteMode::Create)
        .expect("ok");
    let long = "n".repeat(300);
    for bad in ["a\u{85}b", long.as_str(), "cafe\u{301}.md", "x%41"] {
        plant_raw_s3(&format!("{prefix}/d/{bad}/f"), b"planted");
        plant_raw_s3(&format!("{prefix}/d/{bad}"), b"planted");
    }
    let tool = MemoryTool::new(store);
    for path in ["/memories/d", "/memories"] {
        let view = tool.dispatch(&json!({"command": "view", "path": path}));
        let text = view.text().unwrap_or_default().to_owned();
        assert!(!view.is_error, "{path}: {text}");
        assert!(text.contains("/memories/d/ok.md"), "{path}: {text}");
        // Every listed path can be viewed.
        for line in text.lines().skip(1) {
            let Some((_, shown)) = line.split_once('\t') else {
                continue;
            };
            let r = tool.dispatch(&json!({"command": "view", "path": shown}));
            assert!(!r.is_error, "{shown} is listed but: {:?}", r.text());
        }
    }
    let r = tool.dispatch(
        &json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    );
    assert!(!r.is_error, "{:?}", r.text());
    let r = tool.dispatch(&json!({"command": "delete", "path": "/memories/e"}));
    assert!(!r.is_error, "{:?}", r.text());
    let r = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        r.text(),
        Some(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories"
        )
    );
    // Unparseable keys: an error for the directory, not a short listing.
    tool.dispatch(&json!({"command": "create", "path": "/memories/u/ok.md", "file_text": "ok"}));
    plant_raw_s3(&format!("{prefix}/u/a\u{1}b"), b"planted");
    let r = tool.dispatch(&json!({"command": "view", "path": "/memories/u"}));
    assert!(r.is_error, "{:?}", r.text());
    assert_eq!(
        r.text(),
        Some("Error: The storage operation failed for /memories/u")
    );
}

/// Attack: a key object_store cannot parse (`d/ctl\x01x`) beside
/// `d/ok.md`. Before: `view /memories` showed `d/` as an empty directory
/// and `stats` counted one file less with exit 0. Now the view marks the
/// directory as not listed, and `stats` names it and exits 1.
#[cfg(feature = "cli")]
#[test]
fn a_key_that_cannot_be_parsed_marks_its_directory_as_unlisted_everywhere() {
    // (Also installs the TLS crypto provider the raw PUT's client needs.)
    if bucket("s3").is_none() {
        return;
    }
    let Some((url, env)) = cloud_support::cli_store("s3", "unparsed") else {
        return;
    };
    let prefix = url
        .strip_prefix(&format!("s3://{}/", cloud_support::BUCKET))
        .expect("prefix")
        .to_owned();
    let created = cli(
        &url,
        &env,
        &["serve"],
        r#"{"command":"create","path":"/memories/d/ok.md","file_text":"ok\n"}"#,
    );
    assert!(created.status.success(), "{created:?}");
    plant_raw_s3(&format!("{prefix}/d/ctl\u{1}x"), b"planted");
    let view = cli(&url, &env, &["view", "/memories"], "");
    let shown = String::from_utf8_lossy(&view.stdout);
    assert!(
        shown.contains("/memories/d/ (Error: could not be listed)"),
        "{shown}"
    );
    let stats = cli(&url, &env, &["stats"], "");
    let err = String::from_utf8_lossy(&stats.stderr);
    assert_eq!(stats.status.code(), Some(1), "{err}");
    assert!(err.contains("/memories/d"), "{err}");
}

/// Runs the CLI on `url` with `env`, `args`, `stdin`.
#[cfg(feature = "cli")]
fn cli(
    url: &str,
    env: &[(&'static str, String)],
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"));
    cmd.args(["--store", url]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the CLI");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin");
    child.wait_with_output().expect("wait")
}

/// `--history` with `--tenant` on a cloud store (refused before: the
/// bucket had one log for every tenant): each tenant's versions are kept
/// below its own prefix, and one tenant's `history` shows none of
/// another's.
#[cfg(feature = "cli")]
#[test]
fn each_tenant_keeps_its_own_history_in_the_bucket() {
    for backend in ["s3", "azure"] {
        let Some(_) = bucket(backend) else { continue };
        let (url, env) = cloud_support::cli_store(backend, "tenant-history").expect("configured");
        for (tenant, file) in [("alice", "alice-notes.md"), ("bob", "bob-notes.md")] {
            let call = json!({"command": "create", "path": format!("/memories/{file}"), "file_text": "hi\n"});
            let out = cli(
                &url,
                &env,
                &["--tenant", tenant, "--history", "serve"],
                &format!("{call}\n"),
            );
            assert!(out.status.success(), "{backend} {tenant}: {out:?}");
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("File created successfully"),
                "{out:?}"
            );
        }
        for (tenant, own, other) in [
            ("alice", "alice-notes.md", "bob-notes.md"),
            ("bob", "bob-notes.md", "alice-notes.md"),
        ] {
            let out = cli(&url, &env, &["--tenant", tenant, "history"], "");
            let shown = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{backend} {tenant}: {out:?}");
            assert!(shown.contains(own), "{backend} {tenant}: {shown}");
            assert!(
                !shown.contains(other),
                "{backend} {tenant} sees {other}: {shown}"
            );
        }
        // The log is below the tenant's prefix, hidden from every view.
        let whole = cli(&url, &env, &["view", "/memories"], "");
        let shown = String::from_utf8_lossy(&whole.stdout).into_owned();
        assert!(shown.contains("/memories/alice/alice-notes.md"), "{shown}");
        assert!(!shown.contains("claude-memory-history"), "{shown}");
    }
}
