//! The cloud store under stress, against moto (S3) and Azurite (see
//! tests/cloud/servers.rs for how to run them): four CLI `serve` processes making
//! 300 edits each of one file; a process killed at random points of
//! directory renames, 20 rounds and more; six writers under one size
//! limit. Skipped with a printed line without the servers.
#![cfg(all(feature = "cli", feature = "s3", feature = "azure"))]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{CloudStore, Config, MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../cloud_support/mod.rs"]
mod cloud_support;

use cloud_support::{bucket, cli_store, unique};

const PROCESSES: usize = 4;
const EDITS: usize = 300;

/// Four `claude-memory --store s3://… serve` processes each insert 300
/// unique lines at the top of one file: every insert succeeds and every
/// line is in the file afterwards.
#[test]
fn four_serve_processes_lose_no_edit() {
    for backend in ["s3", "azure"] {
        let Some(_) = bucket(backend) else { continue };
        let (url, env) = cli_store(backend, "serve").expect("configured");
        let spawn = || {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"));
            cmd.args(["--store", &url, "serve"]);
            for (k, v) in &env {
                cmd.env(k, v);
            }
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn serve")
        };
        let mut first = spawn();
        let mut stdin = first.stdin.take().expect("stdin");
        writeln!(
            stdin,
            "{}",
            json!({"command": "create", "path": "/memories/log.md", "file_text": ""})
        )
        .expect("write");
        drop(stdin);
        let out = first.wait_with_output().expect("wait");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("File created successfully"),
            "{out:?}"
        );
        let children: Vec<_> = (0..PROCESSES)
            .map(|p| {
                let mut child = spawn();
                let mut stdin = child.stdin.take().expect("stdin");
                std::thread::spawn(move || {
                    for k in 0..EDITS {
                        let input = json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": format!("p{p}_{k}")});
                        writeln!(stdin, "{input}").expect("write");
                    }
                });
                child
            })
            .collect();
        let mut failures = Vec::new();
        let mut answers = 0;
        for child in children {
            let out = child.wait_with_output().expect("wait");
            for line in BufReader::new(&out.stdout[..]).lines() {
                let line = line.expect("utf-8");
                answers += 1;
                if line.contains("\"is_error\":true") {
                    failures.push(line);
                }
            }
        }
        let store = CloudStore::open(
            bucket(backend).expect("bucket"),
            url.splitn(4, '/').nth(3).unwrap_or(""),
        )
        .expect("open");
        let file = store
            .read(
                &MemoryPath::parse("/memories/log.md").expect("path"),
                u64::MAX,
            )
            .expect("read");
        let lines: BTreeSet<String> = String::from_utf8_lossy(&file.data)
            .lines()
            .map(str::to_owned)
            .collect();
        println!(
            "{backend}: {} edits from {PROCESSES} serve processes, {} failed, {} lines in the file",
            answers,
            failures.len(),
            lines.len()
        );
        assert_eq!(answers, PROCESSES * EDITS);
        assert!(
            failures.is_empty(),
            "{:?}",
            &failures[..failures.len().min(3)]
        );
        assert_eq!(lines.len(), PROCESSES * EDITS, "edits were lost");
    }
}

const CHILD: &str = "CLAUDE_MEMORY_CLOUD_CHILD";

/// Run by `interrupted_renames_leave_every_entry_in_one_place`: renames
/// the directory back and forth (and deletes and recreates a second one)
/// until it is killed.
#[test]
fn interruption_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (backend, prefix) = spec.split_once(' ').expect("spec");
    let store = CloudStore::open(bucket(backend).expect("bucket"), prefix).expect("open");
    let (a, b) = (
        MemoryPath::parse("/memories/a").expect("path"),
        MemoryPath::parse("/memories/b").expect("path"),
    );
    println!("READY");
    loop {
        let _ = store.rename(&a, &b);
        let _ = store.rename(&b, &a);
    }
}

/// Kills a process at random points of directory renames (10 files and an
/// empty subdirectory), 24 rounds per backend; after each, the next open
/// finishes the interrupted rename, and every entry is at its old path or
/// its new one: never both, never neither.
#[test]
fn interrupted_renames_leave_every_entry_in_one_place() {
    for backend in ["s3", "azure"] {
        let Some(b) = bucket(backend) else { continue };
        let prefix = unique("kill");
        let store = CloudStore::open(Arc::clone(&b), &prefix).expect("open");
        let names: Vec<String> = (0..10).map(|i| format!("f{i}.md")).collect();
        for n in &names {
            let p = MemoryPath::parse(&format!("/memories/a/{n}")).expect("path");
            store
                .write(&p, n.as_bytes(), claude_memory::store::WriteMode::Create)
                .expect("write");
        }
        store
            .write(
                &MemoryPath::parse("/memories/a/sub/x.md").expect("path"),
                b"x",
                claude_memory::store::WriteMode::Create,
            )
            .expect("write");
        store
            .delete(&MemoryPath::parse("/memories/a/sub/x.md").expect("path"))
            .expect("delete");
        let exe = std::env::current_exe().expect("exe");
        let mut finished = 0;
        for round in 0..24u64 {
            let mut child = Command::new(&exe)
                .args([
                    "interruption_child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{backend} {prefix}"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            while !line.contains("READY") {
                line.clear();
                if out.read_line(&mut line).expect("read") == 0 {
                    break;
                }
            }
            // 20 to 1,500 ms into the renames.
            let wait = 20 + (round * 7919 + u64::from(std::process::id())) % 1480;
            std::thread::sleep(Duration::from_millis(wait));
            child.kill().expect("kill");
            child.wait().expect("wait");
            // The next open (lease 0: the dead process's record is stale
            // at once) finishes the interrupted rename. With no lease, a
            // request the dead process sent may still be running on the
            // server and make an open fail: it is tried again, and what
            // counts is where the entries end up.
            let reopen = || {
                CloudStore::builder(Arc::clone(&b))
                    .prefix(&prefix)
                    .lease(Duration::ZERO)
                    .open()
            };
            let mut reopened = reopen();
            for _ in 0..5 {
                let Err(e) = &reopened else { break };
                eprintln!(
                    "{backend}: round {round}: reopen failed, again in 1 s: {e}: {:?}",
                    std::error::Error::source(e)
                );
                std::thread::sleep(Duration::from_secs(1));
                reopened = reopen();
            }
            let reopened =
                reopened.unwrap_or_else(|e| panic!("{backend}: round {round}: reopen: {e:?}"));
            let mut at = Vec::new();
            for dir in ["a", "b"] {
                let d = MemoryPath::parse(&format!("/memories/{dir}")).expect("path");
                if reopened.stat(&d).expect("stat").is_some() {
                    at.push(dir);
                    let listed: BTreeSet<String> = reopened
                        .list(&d)
                        .expect("list")
                        .into_iter()
                        .map(|e| e.name)
                        .collect();
                    let mut want: BTreeSet<String> = names.iter().cloned().collect();
                    want.insert("sub".into());
                    assert_eq!(listed, want, "round {round}: /memories/{dir} is incomplete");
                    let sub = d.join("sub").expect("sub");
                    assert!(reopened.list(&sub).expect("empty sub").is_empty());
                }
            }
            assert_eq!(at.len(), 1, "round {round}: the tree is at {at:?}");
            let root: Vec<_> = reopened
                .list(&MemoryPath::root())
                .expect("root")
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(root.len(), 1, "round {round}: {root:?}");
            finished += 1;
        }
        println!("{backend}: {finished} rounds killed mid-rename, every entry in one place");
    }
}

const FILE: usize = 100;
const LIMIT: u64 = 5_000;
const WRITERS: usize = 6;
const PER_WRITER: usize = 20;

/// Six writers, each its own client (as six machines), create files under
/// one store size limit: the store ends exactly at the limit, every
/// refused create left nothing.
#[test]
fn six_writers_never_exceed_the_size_limit() {
    for backend in ["s3", "azure"] {
        let Some(_) = bucket(backend) else { continue };
        let prefix = unique("quota");
        let stores: Vec<_> = (0..WRITERS)
            .map(|_| CloudStore::open(bucket(backend).expect("bucket"), &prefix).expect("open"))
            .collect();
        let outcomes: Vec<(Vec<String>, Vec<String>)> = std::thread::scope(|s| {
            let handles: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(w, store)| {
                    s.spawn(move || {
                        let tool = MemoryTool::with_config(store, Config::default().with_max_store_size(LIMIT));
                        let (mut made, mut refused) = (Vec::new(), Vec::new());
                        for k in 0..PER_WRITER {
                            let path = format!("/memories/w{w}/f{k}.md");
                            let r = tool.dispatch(&json!({"command": "create", "path": path, "file_text": "x".repeat(FILE)}));
                            let text = r.text().unwrap_or_default().to_owned();
                            if !r.is_error {
                                made.push(path);
                            } else if text.starts_with("Error: The memory store would hold ") {
                                refused.push(path);
                            } else {
                                panic!("unexpected answer for {path}: {text}");
                            }
                        }
                        (made, refused)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("writer"))
                .collect()
        });
        let store = &stores[0];
        let total = store.total_size().expect("total");
        let made: usize = outcomes.iter().map(|(m, _)| m.len()).sum();
        println!("{backend}: {made} creates fitted, store at {total} of {LIMIT} bytes");
        assert_eq!(total, LIMIT, "the store must end exactly at the limit");
        assert_eq!(total, (made * FILE) as u64);
        for (_, refused) in &outcomes {
            for p in refused {
                let path = MemoryPath::parse(p).expect("path");
                assert!(
                    store.stat(&path).expect("stat").is_none(),
                    "{p} was refused but exists"
                );
            }
        }
    }
}
