//! The review page's heaviest views, each answered over HTTP by a page
//! served in-process (median of 7, after one warm-up), on this machine:
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench ui --features ui
//! ```
//!
//! - the root of a directory store of 10,000 files (all at the root: the
//!   page lists them all and shows 200);
//! - one file's timeline, 10,000 versions long (the newest 100);
//! - a diff of two versions of 1 MiB (20,000 lines, every tenth changed).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use claude_memory::history::{FileLog, HistoryStore};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::ui::{Backend, ReviewServer, UiOptions};
use claude_memory::{FilesystemStore, MemoryPath};

fn get(addr: SocketAddr, target: &str) -> (u16, usize) {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("read");
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, answer.len())
}

fn median(addr: SocketAddr, target: &str) -> (Duration, usize) {
    let (status, size) = get(addr, target);
    assert_eq!(status, 200, "{target}");
    let mut times: Vec<Duration> = (0..7)
        .map(|_| {
            let t = Instant::now();
            get(addr, target);
            t.elapsed()
        })
        .collect();
    times.sort();
    (times[3], size)
}

/// Serves `backend` on a thread; its address.
fn serve(backend: Backend) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async move {
            let page = ReviewServer::bind(
                "127.0.0.1:0".parse().expect("addr"),
                backend,
                UiOptions::default(),
            )
            .await
            .expect("bind");
            tx.send(page.url()).expect("url");
            page.serve(std::future::pending()).await.expect("serve");
        });
    });
    let url = rx.recv().expect("url");
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("addr")
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let p = |s: &str| MemoryPath::parse(s).expect("path");
    println!("| view | size | answered in (median of 7) | page |");
    println!("| --- | --- | --- | --- |");

    let flat = tempfile::tempdir().expect("tempdir");
    for i in 0..10_000 {
        std::fs::write(flat.path().join(format!("note-{i:05}.md")), "a memory\n").expect("write");
    }
    let addr = serve(Backend::Plain(Box::new(
        FilesystemStore::open(flat.path()).expect("store"),
    )));
    let (t, size) = median(addr, "/");
    println!(
        "| the root | 10,000 files | {:.1} ms | {} KiB |",
        t.as_secs_f64() * 1e3,
        size / 1024
    );

    let long = tempfile::tempdir().expect("tempdir");
    let history = HistoryStore::open(
        FilesystemStore::open(long.path()).expect("store"),
        FileLog::for_store(long.path()).expect("log"),
    )
    .expect("history");
    for i in 0..10_000 {
        history
            .write(
                &p("/memories/todo.md"),
                format!("version {i}\n").as_bytes(),
                WriteMode::Overwrite,
            )
            .expect("write");
    }
    let big: String = (0..20_000)
        .map(|i| format!("line {i:05} of a one-mebibyte memory, padded to 56 bytes..\n"))
        .collect();
    let changed: String = big
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i % 10 == 0 {
                format!("{} (changed)\n", l)
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    history
        .write(&p("/memories/big.md"), big.as_bytes(), WriteMode::Overwrite)
        .expect("write");
    history
        .write(
            &p("/memories/big.md"),
            changed.as_bytes(),
            WriteMode::Overwrite,
        )
        .expect("write");
    let addr = serve(Backend::History(Box::new(history)));
    let (t, size) = median(addr, "/changes?path=/memories/todo.md");
    println!(
        "| a file's timeline | 10,000 versions | {:.1} ms | {} KiB |",
        t.as_secs_f64() * 1e3,
        size / 1024
    );
    let (t, size) = median(addr, "/diff?from=v10001&to=v10002");
    println!(
        "| a diff of two versions | {} KiB each | {:.1} ms | {} KiB |",
        big.len() / 1024,
        t.as_secs_f64() * 1e3,
        size / 1024
    );
}
