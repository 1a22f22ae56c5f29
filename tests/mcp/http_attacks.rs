//! Attacks on the MCP server's HTTP transport, each written as the attack
//! (issue 22's attacker review): a token reaching another token's session
//! (a call, a resumption of its answers, its listening stream, a DELETE),
//! a tenant token on a server without tenant stores, one token opening
//! sessions until nobody else can, racing initializes, headers or bodies
//! that never end, connections left open through a shutdown, listening
//! streams eating the request slots, batches, header floods, calls before
//! initialize. Each server binds a port the system picks.
#![cfg(feature = "mcp")]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_memory::mcp::{HttpError, HttpOptions, HttpServer, MemoryServer, Tokens};
use claude_memory::{InMemoryStore, MemoryTool, TenantStore};
use mcp_support::{Running, bearer, call, post, session, text_of};
use serde_json::json;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

fn tenant_server() -> MemoryServer {
    let base = Arc::new(InMemoryStore::new());
    let b = Arc::clone(&base);
    MemoryServer::new(MemoryTool::new(base))
        .with_tenants(move |t| MemoryTool::new(TenantStore::new(Arc::clone(&b), t.clone())))
}

fn two_tokens() -> HttpOptions {
    HttpOptions::default()
        .with_tokens(Tokens::parse(&format!("{ALICE} alice\n{BOB} bob\n")).expect("tokens"))
}

/// A raw request's head, to send by hand.
fn head(port: u16, method: &str, token: &str, extra: &[(&str, &str)]) -> String {
    let mut h = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2025-06-18\r\n",
        bearer(token)
    );
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h
}

/// Reads what arrives within `wait` (the connection may stay open).
fn read_for(s: &mut TcpStream, wait: Duration) -> (String, bool) {
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), false)
}

fn status_of(text: &str) -> u16 {
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_session_opened_with_one_token_is_not_found_with_another() {
    let (run, port) = Running::start(tenant_server(), two_tokens());
    let sa = session(port, ALICE);
    let secret = "alice's secret plan";
    let create = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "create", "path": "/memories/plan.md", "file_text": secret}}});
    let r = mcp_support::request(port, ALICE, &sa, &create);
    assert!(!text_of(&r.message()).1, "{}", r.body);
    let view = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "view", "path": "/memories/plan.md"}}});
    let r = mcp_support::request(port, ALICE, &sa, &view);
    assert!(r.body.contains(secret), "{}", r.body);
    // The SSE event ids of Alice's answer: what a resumption names.
    let ids: Vec<String> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")))
        .map(|s| s.trim().to_owned())
        .collect();
    assert!(!ids.is_empty(), "no event ids in {}", r.body);
    // Bob replays Alice's answers with her session id and Last-Event-ID.
    for id in &ids {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let h = head(
            port,
            "GET",
            BOB,
            &[
                ("Mcp-Session-Id", &sa),
                ("Last-Event-ID", id),
                ("Connection", "close"),
            ],
        );
        s.write_all(format!("{h}\r\n").as_bytes()).unwrap();
        let (got, _) = read_for(&mut s, Duration::from_secs(2));
        assert!(
            !got.contains(secret),
            "Bob replayed Alice's answer with {id}: {got}"
        );
        assert_eq!(status_of(&got), 404, "{got}");
    }
    // Bob's call, listening stream and DELETE on Alice's session: 404.
    let a = call(
        port,
        BOB,
        &sa,
        3,
        "memory",
        json!({"command": "view", "path": "/memories"}),
    );
    assert!(a.is_null() || a.get("result").is_none(), "{a}");
    for method in ["GET", "DELETE"] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let h = head(
            port,
            method,
            BOB,
            &[("Mcp-Session-Id", &sa), ("Connection", "close")],
        );
        s.write_all(format!("{h}\r\n").as_bytes()).unwrap();
        let (got, _) = read_for(&mut s, Duration::from_secs(2));
        assert_eq!(status_of(&got), 404, "{method}: {got}");
    }
    // Alice's session survived Bob's DELETE, and still sees her file.
    let r = mcp_support::request(port, ALICE, &sa, &view);
    assert!(r.body.contains(secret), "{} {}", r.status, r.body);
    // Alice's own DELETE ends it.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let h = head(
        port,
        "DELETE",
        ALICE,
        &[("Mcp-Session-Id", &sa), ("Connection", "close")],
    );
    s.write_all(format!("{h}\r\n").as_bytes()).unwrap();
    let (got, _) = read_for(&mut s, Duration::from_secs(2));
    assert!(matches!(status_of(&got), 200 | 202 | 204), "{got}");
    assert_eq!(mcp_support::request(port, ALICE, &sa, &view).status, 404);
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_token_on_a_server_without_tenant_stores_is_refused() {
    // Built without with_tenants: Alice's token would see the whole store.
    let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    assert!(!server.serves_tenants());
    let e = HttpServer::bind(([127, 0, 0, 1], 0).into(), server, two_tokens()).await;
    assert!(matches!(e, Err(HttpError::TenantsNotServed)), "{e:?}");
    // With tenant stores it binds; a token without a tenant needs none.
    assert!(
        HttpServer::bind(([127, 0, 0, 1], 0).into(), tenant_server(), two_tokens())
            .await
            .is_ok()
    );
    let plain = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    let opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    assert!(
        HttpServer::bind(([127, 0, 0, 1], 0).into(), plain, opts)
            .await
            .is_ok()
    );
}

#[test]
fn one_token_opening_sessions_evicts_its_own_never_locks_out_another() {
    let mut opts = two_tokens();
    opts.max_sessions = 4; // two each
    let (run, port) = Running::start(tenant_server(), opts);
    let first = session(port, ALICE);
    let mut alice = Vec::new();
    for _ in 0..20 {
        alice.push(session(port, ALICE)); // each succeeds (asserted inside)
    }
    // Bob gets his share, and uses it.
    for i in 0..2 {
        let sb = session(port, BOB);
        let a = call(
            port,
            BOB,
            &sb,
            i,
            "memory",
            json!({"command": "view", "path": "/memories"}),
        );
        assert!(!text_of(&a).1, "{a}");
    }
    // Alice's oldest sessions were closed to make room for her newer ones;
    // her two newest work.
    let view = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "view", "path": "/memories"}}});
    assert_eq!(mcp_support::request(port, ALICE, &first, &view).status, 404);
    for s in &alice[alice.len() - 2..] {
        assert_eq!(mcp_support::request(port, ALICE, s, &view).status, 200);
    }
    // Requests without a session that are no initialize (a client's
    // `server/discover` probe, a stray call) take no slot: they evict
    // nothing.
    let auth = bearer(ALICE);
    for probe in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory", "arguments": {}}}),
    ] {
        for _ in 0..3 {
            let _ = post(
                port,
                &[("Authorization", &auth)],
                probe.to_string().as_bytes(),
            );
        }
    }
    for s in &alice[alice.len() - 2..] {
        assert_eq!(mcp_support::request(port, ALICE, s, &view).status, 200);
    }
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[test]
fn racing_initializes_never_open_more_sessions_than_the_bound() {
    let mut opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    opts.max_sessions = 3;
    let (run, port) = Running::start(
        MemoryServer::new(MemoryTool::new(InMemoryStore::new())),
        opts,
    );
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "race", "version": "1"}}})
    .to_string();
    let auth = bearer(ALICE);
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..24)
            .map(|_| s.spawn(|| post(port, &[("Authorization", &auth)], init.as_bytes())))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .filter_map(|r| r.header("mcp-session-id").map(str::to_owned))
            .collect()
    });
    let view = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let live = ids
        .iter()
        .filter(|s| mcp_support::request(port, ALICE, s, &view).status == 200)
        .count();
    assert!(
        live <= 3,
        "{live} of {} sessions opened by the race are live",
        ids.len()
    );
    assert!(live >= 1);
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[test]
fn headers_that_never_end_are_cut_and_do_not_hold_a_shutdown() {
    let mut opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    opts.header_timeout = Duration::from_secs(1);
    opts.max_connections = 4;
    opts.shutdown_grace = Duration::from_secs(1);
    let (run, port) = Running::start(
        MemoryServer::new(MemoryTool::new(InMemoryStore::new())),
        opts,
    );
    // Slowloris: four connections that send half a request head, then wait.
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .unwrap();
            s
        })
        .collect();
    // A real client still gets in once they are cut (after 1 s).
    let t = Instant::now();
    let s = session(port, ALICE);
    assert!(!s.is_empty());
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    for conn in &mut idle {
        let (_, closed) = read_for(conn, Duration::from_secs(3));
        assert!(closed, "a half-sent head kept its connection open");
    }
    // One more half head, left open through the shutdown.
    let mut late = TcpStream::connect(("127.0.0.1", port)).unwrap();
    late.write_all(b"POST /mcp HTTP/1.1\r\n").unwrap();
    let took = run.stop_within(Duration::from_secs(15));
    assert!(
        took.is_some_and(|d| d < Duration::from_secs(6)),
        "shutdown took {took:?}"
    );
}

#[test]
fn a_body_that_never_ends_gets_408_and_frees_its_slot() {
    let mut opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    opts.body_timeout = Duration::from_secs(1);
    opts.max_in_flight = 1;
    let (run, port) = Running::start(
        MemoryServer::new(MemoryTool::new(InMemoryStore::new())),
        opts,
    );
    let sa = session(port, ALICE);
    for framing in [
        ("Content-Length", "100000"),
        ("Transfer-Encoding", "chunked"),
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let h = head(port, "POST", ALICE, &[("Mcp-Session-Id", &sa), framing]);
        let part = if framing.0 == "Content-Length" {
            "{\"jsonrpc\"".to_owned()
        } else {
            "5\r\n{\"jso\r\n".to_owned()
        };
        s.write_all(format!("{h}\r\n{part}").as_bytes()).unwrap();
        let (got, _) = read_for(&mut s, Duration::from_secs(4));
        assert_eq!(status_of(&got), 408, "{framing:?}: {got}");
    }
    // The one slot is free again.
    let a = call(
        port,
        ALICE,
        &sa,
        1,
        "memory",
        json!({"command": "view", "path": "/memories"}),
    );
    assert!(!text_of(&a).1, "{a}");
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[test]
fn listening_streams_do_not_use_up_the_requests_in_flight() {
    let mut opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    opts.max_in_flight = 2;
    let (run, port) = Running::start(
        MemoryServer::new(MemoryTool::new(InMemoryStore::new())),
        opts,
    );
    let sa = session(port, ALICE);
    let mut streams = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let h = head(
            port,
            "GET",
            ALICE,
            &[("Mcp-Session-Id", &sa), ("Connection", "close")],
        );
        s.write_all(format!("{h}\r\n").as_bytes()).unwrap();
        let (got, _) = read_for(&mut s, Duration::from_millis(500));
        assert_eq!(status_of(&got), 200, "{got}");
        streams.push(s);
    }
    // Only the newest stream is still open: each newer one ended the older.
    let (_, closed) = read_for(&mut streams[0], Duration::from_secs(2));
    assert!(closed, "an older listening stream stayed open");
    let a = call(
        port,
        ALICE,
        &sa,
        1,
        "memory",
        json!({"command": "view", "path": "/memories"}),
    );
    assert!(!text_of(&a).1, "{a}");
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[test]
fn batches_floods_and_calls_before_initialize_leave_the_server_serving() {
    let opts = HttpOptions::default().with_tokens(Tokens::single(ALICE).unwrap());
    let (run, port) = Running::start(
        MemoryServer::new(MemoryTool::new(InMemoryStore::new())),
        opts,
    );
    let auth = bearer(ALICE);
    let call_body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "create", "path": "/memories/x.md", "file_text": "x"}}});
    // A batch of calls, before any initialize and within a session.
    let batch = serde_json::to_vec(&vec![call_body.clone(); 200]).unwrap();
    let r = post(port, &[("Authorization", &auth)], &batch);
    assert!(
        (400..500).contains(&r.status) || r.status == 503,
        "{} {}",
        r.status,
        r.body
    );
    let sa = session(port, ALICE);
    let r = post(
        port,
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &sa),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        &batch,
    );
    assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
    // A call with no session and no initialize: refused, nothing written.
    let r = post(
        port,
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        call_body.to_string().as_bytes(),
    );
    assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
    // 500 headers, and one 1 MiB header: refused by the HTTP layer.
    let many: Vec<(String, String)> = (0..500)
        .map(|i| (format!("X-Flood-{i}"), "y".repeat(50)))
        .collect();
    let many_ref: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = post(port, &many_ref, b"{}");
    assert!(
        r.status == 431 || r.status == 0 || r.status == 400,
        "{}",
        r.status
    );
    let huge = "z".repeat(1 << 20);
    let r = post(port, &[("X-Huge", &huge)], b"{}");
    assert!(
        r.status == 431 || r.status == 0 || r.status == 400,
        "{}",
        r.status
    );
    // Cancelled mid-call: the notification for a call in flight.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "x"}});
    let r = mcp_support::request(port, ALICE, &sa, &cancel);
    assert!(
        r.status == 202 || r.status == 200,
        "{} {}",
        r.status,
        r.body
    );
    // Many calls at once on one session: every insert lands.
    let a = call(
        port,
        ALICE,
        &sa,
        2,
        "memory",
        json!({"command": "create", "path": "/memories/n.md", "file_text": ""}),
    );
    assert!(!text_of(&a).1, "{a}");
    std::thread::scope(|s| {
        for i in 0..40u64 {
            let sa = &sa;
            s.spawn(move || {
                let a = call(port, ALICE, sa, 100 + i, "memory",
                    json!({"command": "insert", "path": "/memories/n.md", "insert_line": 0, "insert_text": format!("line {i}")}));
                assert_eq!(text_of(&a), ("The file /memories/n.md has been edited.".into(), false), "{a}");
            });
        }
    });
    let a = call(
        port,
        ALICE,
        &sa,
        3,
        "memory",
        json!({"command": "view", "path": "/memories/n.md"}),
    );
    let (text, _) = text_of(&a);
    assert_eq!(text.lines().count(), 41, "{text}");
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}
