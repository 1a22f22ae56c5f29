//! Many agent processes writing one PostgreSQL store, with history and
//! without, side by side in alternating rounds of one run:
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench history_writers --features postgres
//! ```
//!
//! (CLAUDE_MEMORY_TEST_POSTGRES_URL set.) Each round starts 16 processes
//! on one database: each agent with a tenant of its own (its own memory
//! and history, as users of one MCP server have), or all 16 on one
//! tenant (one shared memory). Each opens the store (with `--history`'s
//! log, `PostgresLog::for_store`, or none), says it is ready, and on the
//! go makes 40 calls through the handler (a create and a `str_replace` of
//! its own files, each call a `tool_use` with its id). The round's
//! throughput is all calls over the time from the go to the last process
//! done; the table gives the median of the rounds and the ratio of
//! history on to off.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

const PROCESSES: usize = 16;
const CALLS: usize = 40;
const ROUNDS: usize = 5;
const CHILD: &str = "CLAUDE_MEMORY_BENCH_WRITER";

#[cfg(feature = "postgres")]
fn child(spec: &str) {
    use claude_memory::history::{HistoryStore, PostgresLog};
    use claude_memory::{MemoryStore, MemoryTool, PostgresStore, TenantId};
    let mut parts = spec.split(' ');
    let (mode, shared, worker) = (
        parts.next().expect("mode"),
        parts.next().expect("tenant"),
        parts.next().expect("worker"),
    );
    // `…-each`: a tenant per agent.
    let own = format!("{}{worker}", shared.trim_end_matches("each"));
    let tenant = if shared.ends_with("each") {
        &own
    } else {
        shared
    };
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").expect("url");
    let id = TenantId::parse(tenant).expect("tenant");
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&id);
    let store: Box<dyn MemoryStore> = if mode == "on" {
        let log = PostgresLog::for_store(&store, tenant).expect("log");
        Box::new(
            HistoryStore::open(store, log)
                .expect("history")
                .with_label(format!("agent-{worker}")),
        )
    } else {
        Box::new(store)
    };
    let tool = MemoryTool::new(store);
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("go");
    for i in 0..CALLS / 2 {
        let path = format!("/memories/w{worker}/f{i}.md");
        let r = tool.dispatch(
            &json!({"type": "tool_use", "id": format!("toolu_{worker}_c{i}"),
            "name": "memory", "input": {"command": "create", "path": path,
            "file_text": "- a remembered fact about the customer\n"}}),
        );
        assert!(!r.is_error, "{:?}", r.text());
        let r = tool.dispatch(
            &json!({"type": "tool_use", "id": format!("toolu_{worker}_e{i}"),
            "name": "memory", "input": {"command": "str_replace", "path": path,
            "old_str": "a remembered", "new_str": "one remembered"}}),
        );
        assert!(!r.is_error, "{:?}", r.text());
    }
    println!("done");
}

#[cfg(not(feature = "postgres"))]
fn child(_: &str) {}

/// One round: calls per second of `PROCESSES` processes in `mode`.
fn round(mode: &str, tenant: &str) -> f64 {
    let me = std::env::current_exe().expect("this bench");
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|w| {
            Command::new(&me)
                .env(CHILD, format!("{mode} {tenant} {w}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut outs: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    for out in &mut outs {
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(line.trim(), "ready", "a writer did not start");
    }
    let start = Instant::now();
    for c in &mut children {
        c.stdin
            .as_mut()
            .expect("stdin")
            .write_all(b"go\n")
            .expect("go");
    }
    for out in &mut outs {
        let mut line = String::new();
        out.read_line(&mut line).expect("done");
        assert_eq!(line.trim(), "done", "a writer failed");
    }
    let took = start.elapsed().as_secs_f64();
    for mut c in children {
        let _ = c.wait();
    }
    (PROCESSES * CALLS) as f64 / took
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    if !cfg!(feature = "postgres") || std::env::var_os("CLAUDE_MEMORY_TEST_POSTGRES_URL").is_none()
    {
        println!("skipped: needs --features postgres and CLAUDE_MEMORY_TEST_POSTGRES_URL");
        return;
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!(
        "{PROCESSES} processes x {CALLS} calls on one PostgreSQL database, median of {ROUNDS} rounds"
    );
    println!("| agents | history | calls per second | vs off |");
    println!("|---|---|---|---|");
    for (what, each) in [("a tenant each", "each"), ("one shared tenant", "")] {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for r in 0..ROUNDS {
            off.push(round("off", &format!("w{stamp}off{r}x{each}")));
            on.push(round("on", &format!("w{stamp}on{r}x{each}")));
        }
        let (off, on) = (median(off), median(on));
        println!("| {what} | off | {off:.0} | 1.00x |");
        println!(
            "| {what} | on (`PostgresLog::for_store`) | {on:.0} | {:.2}x |",
            on / off
        );
    }
}
