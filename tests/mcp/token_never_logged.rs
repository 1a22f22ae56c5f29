//! The bearer token never reaches a log line: every `tracing` event and
//! span the server, rmcp, hyper and the store emit at any level, with
//! every field, is captured while clients use good, wrong and other
//! tenants' tokens and sessions, and none holds a token (issue 22's
//! attacker review: credentials in logs).
#![cfg(all(feature = "mcp", feature = "tracing"))]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use claude_memory::mcp::{HttpOptions, HttpServer, MemoryServer, Tokens};
use claude_memory::{InMemoryStore, MemoryTool, TenantStore};
use mcp_support::{bearer, call, post, session};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

const ALICE: &str = "alice-log-token-0123456789";
const BOB: &str = "bob-log-token-0123456789";

/// Every event's and span's fields, as text.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl Capture {
    fn push(&self, line: String) {
        match self.0.lock() {
            Ok(mut lines) => lines.push(line),
            Err(poisoned) => poisoned.into_inner().push(line),
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = span.metadata().name().to_owned();
        span.record(&mut Fields(&mut line));
        self.push(line);
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut line = String::new();
        values.record(&mut Fields(&mut line));
        self.push(line);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = event.metadata().target().to_owned();
        event.record(&mut Fields(&mut line));
        self.push(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_line_holds_a_token() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber");
    let base = Arc::new(InMemoryStore::new());
    let b = Arc::clone(&base);
    let server = MemoryServer::new(MemoryTool::new(base))
        .with_tenants(move |t| MemoryTool::new(TenantStore::new(Arc::clone(&b), t.clone())));
    let tokens = Tokens::parse(&format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    let http = HttpServer::bind(
        ([127, 0, 0, 1], 0).into(),
        server,
        HttpOptions::default().with_tokens(tokens),
    )
    .await
    .unwrap();
    let port = http.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(http.serve(async move {
        let _ = stopped.await;
    }));
    tokio::task::spawn_blocking(move || {
        let sa = session(port, ALICE);
        for (i, command) in [
            json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
            json!({"command": "view", "path": "/memories/a.md"}),
            json!({"command": "view", "path": "/memories/../x"}),
        ]
        .into_iter()
        .enumerate()
        {
            let _ = call(port, ALICE, &sa, i as u64, "memory", command);
        }
        // Bob on Alice's session, a wrong token, a token in the URL's
        // place of a header value, a malformed header.
        let _ = call(
            port,
            BOB,
            &sa,
            9,
            "memory",
            json!({"command": "view", "path": "/memories"}),
        );
        let wrong = format!("{ALICE}-wrong");
        let _ = post(port, &[("Authorization", &bearer(&wrong))], b"{}");
        let _ = post(port, &[("Authorization", ALICE)], b"{}");
        let _ = post(port, &[("Authorization", &format!("Basic {BOB}"))], b"{}");
    })
    .await
    .unwrap();
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    let lines = capture.0.lock().unwrap().clone();
    assert!(
        !lines.is_empty(),
        "nothing was logged: the capture is not working"
    );
    for line in &lines {
        assert!(
            !line.contains("log-token-0123456789"),
            "a token in a log line: {line}"
        );
    }
    println!("{} log lines, none with a token", lines.len());
}
