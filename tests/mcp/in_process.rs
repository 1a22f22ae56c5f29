//! The MCP server in process: created, used and dropped inside both Tokio
//! runtime flavours and on a plain thread; every kind of bad HTTP input
//! answered with the protocol's error or the SPEC §4 string while the
//! server keeps serving; a graceful shutdown finishing a call in flight.
//! (tests/mcp/official_clients.rs runs the official Python and TypeScript SDKs.)
#![cfg(feature = "mcp")]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::sync::Arc;
use std::time::Duration;

use claude_memory::mcp::{HttpOptions, HttpServer, MemoryServer, Tokens};
use claude_memory::policy::{Decision, from_fn};
use claude_memory::{InMemoryStore, MemoryTool};
use mcp_support::{call, post, session, text_of};
use serde_json::json;

const TOKEN: &str = "test-token-0123456789";

fn options() -> HttpOptions {
    HttpOptions::default().with_tokens(Tokens::single(TOKEN).unwrap())
}

/// Binds `port`, retrying for a while: the fixed test ports lie in the
/// system's ephemeral range, so an outgoing connection may hold one for a
/// moment.
async fn bind(
    port: u16,
    server: MemoryServer,
    options: HttpOptions,
) -> Result<HttpServer, claude_memory::mcp::HttpError> {
    let mut tries = 0;
    loop {
        match HttpServer::bind(
            ([127, 0, 0, 1], port).into(),
            server.clone(),
            options.clone(),
        )
        .await
        {
            Err(claude_memory::mcp::HttpError::Bind { .. }) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// Binds a port the system picks (fixed ports collided with other
/// processes on a shared machine), serves on the current runtime, returns
/// the port and the stop.
async fn start(
    server: MemoryServer,
    options: HttpOptions,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let http = bind(0, server, options).await.expect("bind");
    let port = http.local_addr().expect("bound address").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(http.serve(async move {
        let _ = stopped.await;
    }));
    (port, stop, task)
}

/// One create and one view through raw HTTP, from a blocking thread.
async fn round_trip(port: u16) {
    tokio::task::spawn_blocking(move || {
        let s = session(port, TOKEN);
        let a = call(
            port,
            TOKEN,
            &s,
            1,
            "memory",
            json!({"command": "create", "path": "/memories/rt.md", "file_text": "hi\n"}),
        );
        assert_eq!(
            text_of(&a),
            (
                "File created successfully at: /memories/rt.md".into(),
                false
            )
        );
        let a = call(
            port,
            TOKEN,
            &s,
            2,
            "memory",
            json!({"command": "view", "path": "/memories/rt.md"}),
        );
        assert_eq!(
            text_of(&a).0,
            "Here's the content of /memories/rt.md with line numbers:\n     1\thi"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn serves_inside_a_current_thread_runtime() {
    let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    let (port, stop, task) = start(server.clone(), options()).await;
    round_trip(port).await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_inside_a_multi_thread_runtime() {
    let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    let (port, stop, task) = start(server.clone(), options()).await;
    round_trip(port).await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    drop(server);
}

#[test]
fn created_and_dropped_on_a_plain_thread_and_served_over_any_pipe() {
    let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    assert_eq!(server.calls_in_flight(), 0);
    let clone = server.clone();
    drop(server);
    // serve_io over an in-memory pipe: a client that says nothing and
    // hangs up ends the server without a panic.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (client, server_end) = tokio::io::duplex(1024);
        let (r, w) = tokio::io::split(server_end);
        drop(client);
        let outcome = claude_memory::mcp::serve_io(
            clone,
            r,
            w,
            std::future::pending(),
            Duration::from_secs(1),
        )
        .await;
        assert!(outcome.is_err(), "no handshake happened");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_protocols_error_or_the_spec_string_and_the_server_keeps_serving() {
    let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    let mut opts = options();
    opts.max_body_bytes = 64 * 1024;
    let (port, stop, task) = start(server, opts).await;
    tokio::task::spawn_blocking(move || {
                let auth = format!("Bearer {TOKEN}");
        let s = session(port, TOKEN);
        let sh = [("Authorization", auth.as_str()), ("Mcp-Session-Id", s.as_str()), ("MCP-Protocol-Version", "2025-06-18")];
        // Malformed JSON-RPC: not JSON, then JSON that is no JSON-RPC message.
        let r = post(port, &sh, b"{not json");
        assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
        let r = post(port, &sh, br#"{"jsonrpc":"2.0","id":5}"#);
        assert!((400..500).contains(&r.status) || r.message()["error"].is_object(), "{} {}", r.status, r.body);
        // An oversized body: 413 before the handler sees it.
        let big = format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"memory","arguments":{{"command":"create","path":"/memories/big.md","file_text":"{}"}}}}}}"#, "x".repeat(100_000));
        let r = post(port, &sh, big.as_bytes());
        assert_eq!(r.status, 413, "{}", r.body);
        // An unknown tool: the protocol's invalid-params error.
        let a = call(port, TOKEN, &s, 7, "memory_v2", json!({}));
        assert_eq!(a["error"]["code"], -32602, "{a}");
        // Wrong argument types and shapes: SPEC §4 strings, isError.
        let cases = [
            (json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}),
             "Error: Parameter `insert_line` must be an integer"),
            (json!({"command": "create", "path": "/memories/a", "file_text": 5}),
             "Error: Parameter `file_text` must be a string"),
            (json!({"command": 7}), "Error: Parameter `command` must be a string"),
            (json!({}), "Error: Missing required parameter `command`"),
            (json!({"command": "View", "path": "/memories"}),
             "Error: Unknown command `View`. Expected one of: view, create, str_replace, insert, delete, rename"),
            (json!({"command": "view", "path": "/memories/../etc/passwd"}),
             "Error: The path /memories/../etc/passwd is not a valid memory path: '..' is not allowed"),
            (json!({"command": "view", "path": "/memories", "view_range": "all"}),
             "Error: Invalid `view_range` parameter: \"all\". It should be a list of two integers."),
            (json!({"type": "tool_use", "input": 3}), "Error: Missing required parameter `command`"),
        ];
        for (i, (arguments, expected)) in cases.into_iter().enumerate() {
            let a = call(port, TOKEN, &s, 100 + i as u64, "memory", arguments.clone());
            let (text, is_error) = text_of(&a);
            assert!(is_error, "{arguments}: {a}");
            assert!(text.starts_with(expected), "{arguments}: {text}");
        }
        // Arguments missing altogether.
        let m = json!({"jsonrpc": "2.0", "id": 200, "method": "tools/call", "params": {"name": "memory"}});
        let a = mcp_support::request(port, TOKEN, &s, &m).message();
        assert_eq!(text_of(&a), ("Error: Missing required parameter `command`".into(), true));
        // No token, a wrong token, a token in the wrong scheme: 401.
        for auth in [None, Some("Bearer wrong-token-0123456789"), Some(&*format!("Basic {TOKEN}"))] {
            let mut h = vec![("Mcp-Session-Id", s.as_str())];
            if let Some(a) = auth {
                h.push(("Authorization", a));
            }
            let r = post(port, &h, br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
            assert_eq!(r.status, 401, "{auth:?}");
            assert!(r.header("www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
        }
        // A foreign Origin (DNS rebinding) and a foreign Host: refused.
        let mut h = sh.to_vec();
        h.push(("Origin", "http://evil.example"));
        assert_eq!(post(port, &h, br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).status, 403);
        // A loopback Origin (a local browser tool) passes.
        let mut h = sh.to_vec();
        h.push(("Origin", "http://localhost:6274"));
        let r = post(port, &h, br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        assert_eq!(r.message()["result"]["tools"][0]["name"], "memory", "{}", r.body);
        // Still serving: a good call succeeds.
        let a = call(port, TOKEN, &s, 300, "memory", json!({"command": "create", "path": "/memories/ok.md", "file_text": "ok"}));
        assert_eq!(text_of(&a), ("File created successfully at: /memories/ok.md".into(), false));
    })
    .await
    .unwrap();
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_to_serve_without_tokens_unless_asked_and_only_on_loopback() {
    let server = || MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
    let e = HttpServer::bind(([127, 0, 0, 1], 0).into(), server(), HttpOptions::default()).await;
    assert!(matches!(e, Err(claude_memory::mcp::HttpError::NoTokens)));
    let e = HttpServer::bind(
        ([0, 0, 0, 0], 0).into(),
        server(),
        HttpOptions::default().allow_unauthenticated(),
    )
    .await;
    assert!(matches!(
        e,
        Err(claude_memory::mcp::HttpError::UnauthenticatedNotLoopback(_))
    ));
    let ok = bind(0, server(), HttpOptions::default().allow_unauthenticated()).await;
    if let Err(e) = ok {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_the_call_in_flight_and_sends_its_answer() {
    // A policy that takes 800 ms makes the create a call in flight.
    let slow = from_fn(|_path: &claude_memory::MemoryPath, _text: &str| {
        std::thread::sleep(Duration::from_millis(800));
        Decision::Allow
    });
    let store = Arc::new(InMemoryStore::new());
    let server = MemoryServer::new(MemoryTool::new(Arc::clone(&store)).with_policy(slow));
    let (port, stop, task) = start(server.clone(), options()).await;
    let caller = tokio::task::spawn_blocking(move || {
        let s = session(port, TOKEN);
        call(
            port,
            TOKEN,
            &s,
            1,
            "memory",
            json!({"command": "create", "path": "/memories/late.md", "file_text": "kept\n"}),
        )
    });
    while server.calls_in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.send(()).unwrap();
    let answer = caller.await.unwrap();
    assert_eq!(
        text_of(&answer),
        (
            "File created successfully at: /memories/late.md".into(),
            false
        )
    );
    task.await.unwrap().unwrap();
    let check = MemoryTool::new(store);
    let view = check.dispatch(&json!({"command": "view", "path": "/memories/late.md"}));
    assert_eq!(
        view.text(),
        Some("Here's the content of /memories/late.md with line numbers:\n     1\tkept")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_call_loses_nothing() {
    use std::io::Write;
    let slow = from_fn(|_path: &claude_memory::MemoryPath, _text: &str| {
        std::thread::sleep(Duration::from_millis(500));
        Decision::Allow
    });
    let store = Arc::new(InMemoryStore::new());
    let server = MemoryServer::new(MemoryTool::new(Arc::clone(&store)).with_policy(slow));
    let (port, stop, task) = start(server.clone(), options()).await;
    let s = tokio::task::spawn_blocking(move || session(port, TOKEN))
        .await
        .unwrap();
    let text = "line\n".repeat(50_000);
    let body =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "create", "path": "/memories/hung-up.md", "file_text": text}}})
        .to_string();
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nMcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    conn.flush().unwrap();
    // Hang up once the call is running, before its answer.
    while server.calls_in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(conn);
    server.calls_finished().await;
    let check = MemoryTool::new(Arc::clone(&store));
    let v = check.dispatch(
        &json!({"command": "view", "path": "/memories/hung-up.md", "view_range": [49_999, -1]}),
    );
    assert_eq!(
        v.text(),
        Some(
            "Here's the content of /memories/hung-up.md with line numbers:\n 49999\tline\n 50000\tline"
        )
    );
    // The server goes on.
    let a = tokio::task::spawn_blocking(move || {
        let s = session(port, TOKEN);
        call(
            port,
            TOKEN,
            &s,
            1,
            "memory",
            json!({"command": "view", "path": "/memories/hung-up.md", "view_range": [1, 1]}),
        )
    })
    .await
    .unwrap();
    assert!(!text_of(&a).1, "{a}");
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_mapped_to_a_tenant_sees_only_that_tenants_memories() {
    let base = Arc::new(InMemoryStore::new());
    let tenant_base = Arc::clone(&base);
    let server = MemoryServer::new(MemoryTool::new(Arc::clone(&base))).with_tenants(move |t| {
        MemoryTool::new(claude_memory::TenantStore::new(
            Arc::clone(&tenant_base),
            t.clone(),
        ))
    });
    let tokens = Tokens::parse(
        "alice-token-0123456789 alice\nbob-token-0123456789 bob\nadmin-token-0123456789\n",
    )
    .unwrap();
    let (port, stop, task) = start(server, HttpOptions::default().with_tokens(tokens)).await;
    tokio::task::spawn_blocking(move || {
        let (alice, bob, admin) = (
            "alice-token-0123456789",
            "bob-token-0123456789",
            "admin-token-0123456789",
        );
        let sa = session(port, alice);
        let a = call(
            port,
            alice,
            &sa,
            1,
            "memory",
            json!({"command": "create", "path": "/memories/secret.md", "file_text": "alice's"}),
        );
        assert!(!text_of(&a).1, "{a}");
        // Bob on Alice's session id: not found (tests/mcp/http_attacks.rs
        // tries every method); on his own session, his own /memories.
        let view = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory", "arguments": {"command": "view", "path": "/memories/secret.md"}}});
        assert_eq!(mcp_support::request(port, bob, &sa, &view).status, 404);
        let sb = session(port, bob);
        let a = mcp_support::request(port, bob, &sb, &view).message();
        assert_eq!(
            text_of(&a),
            (
                "The path /memories/secret.md does not exist. Please provide a valid path.".into(),
                true
            )
        );
        // A token without a tenant sees the whole store.
        let sd = session(port, admin);
        let a = call(
            port,
            admin,
            &sd,
            3,
            "memory",
            json!({"command": "view", "path": "/memories/alice/secret.md"}),
        );
        assert_eq!(
            text_of(&a).0,
            "Here's the content of /memories/alice/secret.md with line numbers:\n     1\talice's"
        );
    })
    .await
    .unwrap();
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}
