//! Attacks through the `Mcp-Session-Id` header and the listening stream:
//! a session id that is not visible ASCII (which rmcp reads as no id at
//! all) opened sessions no slot was reserved for and no token was bound
//! to, and listening streams on those sessions held every connection.
//! Each server binds a port the system picks.
#![cfg(feature = "mcp")]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_memory::mcp::{HttpOptions, MemoryServer, Tokens};
use claude_memory::{InMemoryStore, MemoryTool, TenantStore};
use mcp_support::{Running, bearer, session};
use serde_json::json;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const ROOT: &str = "root-token-0123456789";

fn server() -> MemoryServer {
    let base = Arc::new(InMemoryStore::new());
    let b = Arc::clone(&base);
    MemoryServer::new(MemoryTool::new(base))
        .with_tenants(move |t| MemoryTool::new(TenantStore::new(Arc::clone(&b), t.clone())))
}

/// Alice, Bob (tenants) and a token without a tenant, `max_sessions`
/// sessions in all.
fn three_tokens(max_sessions: usize) -> HttpOptions {
    let mut options = HttpOptions::default().with_tokens(
        Tokens::parse(&format!("{ALICE} alice\n{BOB} bob\n{ROOT}\n")).expect("tokens"),
    );
    options.max_sessions = max_sessions;
    options
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}"#;

/// Sends a POST whose `Mcp-Session-Id` is the raw bytes `session`; the
/// status and the session id the answer gives, if any.
fn post_with_raw_session(
    port: u16,
    token: &str,
    session: &[u8],
    body: &str,
) -> (u16, Option<String>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: {}\r\nMcp-Session-Id: ",
        body.len(),
        bearer(token)
    )
    .into_bytes();
    req.extend_from_slice(session);
    req.extend_from_slice(b"\r\n\r\n");
    req.extend_from_slice(body.as_bytes());
    s.write_all(&req).expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let id = text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    (status, id)
}

#[test]
fn a_session_id_that_is_not_visible_ascii_opens_no_session() {
    let (run, port) = Running::start(server(), three_tokens(2));
    for bad in [&b"\x80"[..], b"\xff\xfe", b"abc\x80", b"a b", b"\t"] {
        for _ in 0..20 {
            let (status, id) = post_with_raw_session(port, ALICE, bad, INIT);
            assert_eq!(status, 400, "{bad:?}");
            assert_eq!(id, None, "{bad:?}");
        }
    }
    // Nothing was opened: the two slots are free for the other tokens.
    let bob = session(port, BOB);
    let root = session(port, ROOT);
    assert_ne!(bob, root);
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

#[test]
fn a_flood_of_bad_session_ids_leaves_the_other_tokens_their_sessions() {
    let (run, port) = Running::start(server(), three_tokens(2));
    let t = Instant::now();
    let mut refused = 0;
    for _ in 0..2000 {
        let (status, id) = post_with_raw_session(port, ALICE, b"\x80", INIT);
        assert_eq!(id, None);
        refused += usize::from(status == 400);
    }
    eprintln!(
        "2000 initializes with Mcp-Session-Id \\x80: {refused} refused in {:?}",
        t.elapsed()
    );
    assert_eq!(refused, 2000);
    // Bob still opens a session, and it is his: Alice's token gets 404.
    let bob = session(port, BOB);
    let view = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "memory", "arguments": {"command": "view", "path": "/memories"}}});
    let r = mcp_support::request(port, ALICE, &bob, &view);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}

/// A listening stream (GET) opened on `session` with `token`: the stream
/// and the status line.
fn listen(port: u16, token: &str, session: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let req = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nAuthorization: {}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n",
        bearer(token)
    );
    s.write_all(req.as_bytes()).expect("send");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap_or(0);
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    (s, head.lines().next().unwrap_or("").to_owned())
}

#[test]
fn listening_streams_count_against_their_tokens_sessions_and_never_lock_out_another_token() {
    let mut options = three_tokens(6); // two sessions a token
    options.max_connections = 1; // raised to the floor the bounds need
    let (run, port) = Running::start(server(), options);
    // Alice opens streams on her own sessions, on ids she made up, and on
    // ids sent as bytes rmcp cannot read.
    let mut held = Vec::new();
    let alice_first = session(port, ALICE);
    for _ in 0..4 {
        let id = session(port, ALICE);
        let (s, status) = listen(port, ALICE, &id);
        assert!(status.contains(" 200"), "{status}");
        held.push(s);
    }
    for i in 0..40 {
        let (s, status) = listen(port, ALICE, &format!("made-up-{i}"));
        assert!(status.contains(" 404"), "{status}");
        held.push(s);
    }
    // Bob's initialize is answered at once.
    let t = Instant::now();
    let bob = session(port, BOB);
    let took = t.elapsed();
    eprintln!("Bob's session beside Alice's streams: {took:?}");
    assert!(!bob.is_empty());
    // Bob cannot listen on Alice's session.
    let (_s, status) = listen(port, BOB, &alice_first);
    assert!(status.contains(" 404"), "{status}");
    drop(held);
    assert!(run.stop_within(Duration::from_secs(10)).is_some());
}
