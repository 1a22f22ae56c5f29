//! One MCP HTTP server (the defaults of `HttpOptions`) on a filesystem
//! store, with 100 concurrent clients on kept-alive connections, each
//! doing 50 calls (a create, then a view of it, in turn); beside one stdio
//! `serve` doing the same 5,000 calls, in the same minute. Prints failed
//! calls, the latency percentiles, and the throughput ratio. Run by hand:
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench clients --features mcp
//! cargo bench -p claude-memory-bench --bench clients --features mcp -- tokens   # a token per client
//! cargo bench -p claude-memory-bench --bench clients --features mcp -- views    # views only
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use claude_memory::mcp::{HttpOptions, HttpServer, MemoryServer, Tokens};
use claude_memory::{FilesystemStore, MemoryTool};
use serde_json::{Value, json};

const CLIENTS: usize = 100;
const CALLS: usize = 50;

/// A kept-alive HTTP/1.1 connection to the server's `/mcp`.
struct Conn {
    stream: BufReader<TcpStream>,
    port: u16,
    token: String,
    session: Option<String>,
}

impl Conn {
    fn open(port: u16, token: &str) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Conn {
            stream: BufReader::new(stream),
            port,
            token: token.to_owned(),
            session: None,
        }
    }

    /// One POST and its whole response: status, session header, body;
    /// `None` if the connection failed (a refusal closes it).
    fn post(&mut self, message: &Value) -> Option<(u16, Option<String>, String)> {
        let body = message.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: Bearer {}\r\n\
             MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
            self.port,
            self.token,
            body.len()
        );
        if let Some(s) = &self.session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        self.stream.get_mut().write_all(req.as_bytes()).ok()?;
        let mut status = 0;
        let mut session = None;
        let mut length = None;
        let mut chunked = false;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stream.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if status == 0 {
                status = l
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
            } else if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                match k.as_str() {
                    "mcp-session-id" => session = Some(v.to_owned()),
                    "content-length" => length = v.parse().ok(),
                    "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.stream.read_line(&mut line).ok()?;
                let n = usize::from_str_radix(line.trim(), 16).ok()?;
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk).ok()?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = length {
            out.resize(n, 0);
            self.stream.read_exact(&mut out).ok()?;
        }
        Some((status, session, String::from_utf8_lossy(&out).into_owned()))
    }
}

/// The JSON-RPC answer in a body: JSON, or the SSE `data:` line with an id.
fn answer(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or(Value::Null)
    })
}

/// `views`: every call views one file (the transports' own cost, with no
/// write to wait for); else a create, then a view of it.
static VIEWS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Round `r`, client `c`'s call `i`: a create, then a view of it.
fn input(r: usize, c: usize, i: usize) -> Value {
    if *VIEWS.get().unwrap_or(&false) {
        return json!({"command": "view", "path": "/memories/seed.md"});
    }
    let path = format!("/memories/r{r}/c{c}/f{}.md", i / 2);
    if i.is_multiple_of(2) {
        json!({"command": "create", "path": path, "file_text": format!("client {c}, note {i}\n")})
    } else {
        json!({"command": "view", "path": path})
    }
}

/// 100 clients at once; each call's latency, and the failures.
fn http_run(port: u16, tokens: &[String], round: usize) -> (Vec<Duration>, usize, Duration) {
    let start = Arc::new(Barrier::new(CLIENTS + 1));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let start = start.clone();
            let token = tokens[c % tokens.len()].clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(port, &token);
                let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}});
                let opened = conn.post(&init);
                let ok = matches!(opened, Some((200, Some(_), _)));
                if let Some((_, session, _)) = opened {
                    conn.session = session;
                }
                let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                let ok = ok && conn.post(&note).is_some();
                start.wait();
                if !ok {
                    // No session: every call of this client fails.
                    return (Vec::new(), CALLS);
                }
                let mut took = Vec::with_capacity(CALLS);
                let mut failed = 0;
                for i in 0..CALLS {
                    let m = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                        "params": {"name": "memory", "arguments": input(round, c, i)}});
                    let t = Instant::now();
                    let got = conn.post(&m);
                    took.push(t.elapsed());
                    match got {
                        Some((200, _, body))
                            if answer(&body)["result"]["isError"].as_bool() == Some(false) => {}
                        Some(_) => failed += 1,
                        // The connection is gone: so is every later call.
                        None => {
                            failed += CALLS - i;
                            break;
                        }
                    }
                }
                (took, failed)
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let mut all = Vec::new();
    let mut failed = 0;
    for th in threads {
        let (took, f) = th.join().expect("client");
        all.extend(took);
        failed += f;
    }
    (all, failed, t.elapsed())
}

/// One stdio `serve` (the JSON-lines bridge) doing the same calls, as a
/// stdio client makes them: one line, then its answer, then the next,
/// over a pipe each way (the serve in a thread of this process, which
/// spares it a process of its own).
fn stdio_run() -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("seed.md"), "a note\n").expect("seed");
    let tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("store"));
    let (requests, mut to_server) = std::io::pipe().expect("pipe");
    let (from_server, answers) = std::io::pipe().expect("pipe");
    let server = std::thread::spawn(move || {
        claude_memory::bridge::serve(&tool, BufReader::new(requests), answers).expect("serve");
    });
    let mut from_server = BufReader::new(from_server);
    let mut line = String::new();
    let t = Instant::now();
    for c in 0..CLIENTS {
        for i in 0..CALLS {
            let mut call = input(0, c, i).to_string();
            call.push('\n');
            to_server.write_all(call.as_bytes()).expect("send");
            line.clear();
            from_server.read_line(&mut line).expect("answer");
            assert!(!line.contains("\"is_error\":true"), "{line}");
        }
    }
    let took = t.elapsed();
    drop(to_server);
    server.join().expect("serve thread");
    took
}

fn main() {
    let per_token = std::env::args().any(|a| a == "tokens");
    VIEWS
        .set(std::env::args().any(|a| a == "views"))
        .expect("once");
    let tokens: Vec<String> = if per_token {
        (0..CLIENTS)
            .map(|i| format!("token-{i:03}-bench-secret"))
            .collect()
    } else {
        vec!["one-shared-bench-token".into()]
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("seed.md"), "a note\n").expect("seed");
    let store = FilesystemStore::open(dir.path()).expect("store");
    let server = MemoryServer::new(MemoryTool::new(store));
    let options =
        HttpOptions::default().with_tokens(Tokens::parse(&tokens.join("\n")).expect("tokens"));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let http = HttpServer::bind(([127, 0, 0, 1], 0).into(), server, options)
                .await
                .expect("bind");
            ready_tx
                .send(http.local_addr().expect("addr").port())
                .expect("ready");
            http.serve(std::future::pending()).await.expect("serve");
        });
    });
    let port = ready.recv().expect("server up");

    // Rounds in turn (the disk's speed drifts): stdio, HTTP, stdio, …;
    // each HTTP round against the stdio runs either side of it.
    const ROUNDS: usize = 3;
    let mut stdio = vec![stdio_run()];
    let mut ratios = Vec::new();
    let mut took = Vec::new();
    let mut failed = 0;
    for round in 0..ROUNDS {
        let (t, f, wall) = http_run(port, &tokens, round);
        stdio.push(stdio_run());
        let http_rate = (CLIENTS * CALLS) as f64 / wall.as_secs_f64();
        let floor = (stdio[round] + stdio[round + 1]) / 2;
        let stdio_rate = (CLIENTS * CALLS) as f64 / floor.as_secs_f64();
        println!(
            "round {round}: HTTP {http_rate:.0} calls/s, stdio serve {stdio_rate:.0} calls/s: {:.2}x",
            http_rate / stdio_rate
        );
        ratios.push(http_rate / stdio_rate);
        took.extend(t);
        failed += f;
    }
    took.sort();
    ratios.sort_by(f64::total_cmp);
    let pct = |p: f64| took[((took.len() as f64 * p) as usize).min(took.len() - 1)];
    println!(
        "{CLIENTS} clients x {CALLS} calls over HTTP ({}), {ROUNDS} rounds: {failed} failed; p50 {:.2?}, p90 {:.2?}, p99 {:.2?}; throughput vs one stdio serve: median {:.2}x",
        if per_token {
            "a token each"
        } else {
            "one shared token"
        },
        pct(0.5),
        pct(0.9),
        pct(0.99),
        ratios[ratios.len() / 2]
    );
}
