//! Round trips per command on the PostgreSQL store, counted on the wire:
//! `CLAUDE_MEMORY_TEST_POSTGRES_URL=postgres://user@127.0.0.1:PORT/db
//! cargo run -p claude-memory-bench --example pg_round_trips --features postgres`.
//!
//! The store connects (one pooled connection) through a TCP relay in this
//! process, which counts a round trip each time the client sends after the
//! server last spoke: pipelined requests sent before an answer count once.
//! Unlike the timings of the `backends` bench, these counts do not move
//! with the machine's load. Each command runs once untimed first, so the
//! connection has prepared its statements.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use claude_memory::history::{HistoryStore, PostgresLog};
use claude_memory::{MemoryStore, MemoryTool, PostgresStore, TenantId};
use serde_json::{Value, json};

/// What the relay has seen.
#[derive(Default)]
struct Wire {
    /// Client flights: sends that followed an answer (or were the first).
    trips: AtomicU64,
    /// The server spoke after the client's last send.
    answered: AtomicBool,
}

/// Copies `from` to `to`; `client` marks the client's direction.
fn pump(mut from: TcpStream, mut to: TcpStream, wire: Arc<Wire>, client: bool) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if client {
            if wire.answered.swap(false, Ordering::SeqCst) {
                wire.trips.fetch_add(1, Ordering::SeqCst);
            }
        } else {
            wire.answered.store(true, Ordering::SeqCst);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// Starts the relay to `upstream`; returns its address.
fn relay(upstream: String, wire: Arc<Wire>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let server = TcpStream::connect(&upstream).expect("upstream");
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let (w1, w2) = (Arc::clone(&wire), Arc::clone(&wire));
            std::thread::spawn(move || pump(client, server, w1, true));
            std::thread::spawn(move || pump(s2, c2, w2, false));
        }
    });
    addr
}

fn main() {
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL")
        .expect("set CLAUDE_MEMORY_TEST_POSTGRES_URL (postgres://user@host:port/db)");
    // postgres://user@HOST:PORT/db: the relay takes HOST:PORT's place.
    let (scheme_user, rest) = url.split_once('@').expect("a URL with user@host:port");
    let (hostport, db) = rest.split_once('/').expect("a URL with /database");
    let wire = Arc::new(Wire::default());
    let proxied = format!(
        "{scheme_user}@{}/{db}",
        relay(hostport.to_owned(), Arc::clone(&wire))
    );
    let tenant = TenantId::parse(&format!("trips-{}", std::process::id())).expect("tenant");
    let store = PostgresStore::connect(&proxied, 1)
        .expect("connect")
        .for_tenant(&tenant);
    println!("Without history:\n");
    table(&MemoryTool::new(store), &wire);
    // History on, as `--history` on a postgres:// store builds it: the
    // log on the store's own pool (one connection), through the same relay.
    let tenant = TenantId::parse(&format!("trips-h-{}", std::process::id())).expect("tenant");
    let store = PostgresStore::connect(&proxied, 1)
        .expect("connect")
        .for_tenant(&tenant);
    let log = PostgresLog::for_store(&store, tenant.as_str()).expect("log");
    let history = HistoryStore::open(store, Arc::new(log)).expect("history");
    println!("\nWith history (PostgresLog in the same database):\n");
    table(&MemoryTool::new(history), &wire);
}

/// Counts each command's round trips through `tool`, as a table.
fn table<S: MemoryStore>(tool: &MemoryTool<S>, wire: &Wire) {
    let run_as = |cmd: &Value, fails: bool| {
        let r = tool.dispatch(cmd);
        assert_eq!(r.is_error, fails, "{cmd}: {:?}", r.text());
    };
    let run = |cmd: &Value| run_as(cmd, false);
    let note = "- a fact\n- another fact\n";
    // A tree of two levels below the root, as in the bench.
    for i in 0..20 {
        run(
            &json!({"command": "create", "path": format!("/memories/bench/seed{i}.md"), "file_text": note}),
        );
    }
    const K: u64 = 10;
    let count_as = |name: &str, fails: bool, each: &dyn Fn(u64) -> Value| {
        run_as(&each(K), fails); // prepares its statements on the connection
        // Wait for the server's last answer to reach the relay's counter.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let before = wire.trips.load(Ordering::SeqCst);
        for i in 0..K {
            run_as(&each(i), fails);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let trips = wire.trips.load(Ordering::SeqCst) - before;
        println!("| {name} | {} |", trips as f64 / K as f64);
    };
    let count = |name: &str, each: &dyn Fn(u64) -> Value| count_as(name, false, each);
    println!("| command | round trips |");
    println!("|---|---|");
    count(
        "create",
        &|i| json!({"command": "create", "path": format!("/memories/bench/f{i}.md"), "file_text": note}),
    );
    count(
        "create in a new directory",
        &|i| json!({"command": "create", "path": format!("/memories/new{i}/f.md"), "file_text": note}),
    );
    count(
        "view",
        &|i| json!({"command": "view", "path": format!("/memories/bench/f{i}.md")}),
    );
    count(
        "str_replace",
        &|i| json!({"command": "str_replace", "path": format!("/memories/bench/f{i}.md"), "old_str": "a fact", "new_str": "A fact"}),
    );
    count(
        "insert",
        &|i| json!({"command": "insert", "path": format!("/memories/bench/f{i}.md"), "insert_line": 1, "insert_text": "x"}),
    );
    count(
        "tree view (2 levels)",
        &|_| json!({"command": "view", "path": "/memories"}),
    );
    count(
        "view of a directory",
        &|_| json!({"command": "view", "path": "/memories/bench"}),
    );
    count(
        "rename",
        &|i| json!({"command": "rename", "old_path": format!("/memories/bench/f{i}.md"), "new_path": format!("/memories/moved/f{i}.md")}),
    );
    count(
        "delete",
        &|i| json!({"command": "delete", "path": format!("/memories/moved/f{i}.md")}),
    );
    count_as(
        "create refused (exists)",
        true,
        &|_| json!({"command": "create", "path": "/memories/bench/seed0.md", "file_text": note}),
    );
}
