//! The emulator of the memory stores API (`tests/managed/emulator.py`,
//! started by `.ci/managed.sh`): a fresh memory store per test, and the
//! emulator's test controls (injected faults, races, request counts).
//! Without CLAUDE_MEMORY_TEST_MANAGED_URL a test prints "skipped: …" and
//! passes, unless CLAUDE_MEMORY_REQUIRE_MANAGED=1.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use claude_memory::ManagedStore;
use serde_json::{Value, json};

/// The emulator's base URL and key, if one is up.
pub fn endpoint() -> Option<(String, String)> {
    match std::env::var("CLAUDE_MEMORY_TEST_MANAGED_URL") {
        Ok(url) if !url.is_empty() => {
            let key = std::env::var("CLAUDE_MEMORY_TEST_MANAGED_KEY")
                .unwrap_or_else(|_| "test-key".into());
            Some((url, key))
        }
        _ => {
            assert!(
                std::env::var("CLAUDE_MEMORY_REQUIRE_MANAGED").as_deref() != Ok("1"),
                "CLAUDE_MEMORY_REQUIRE_MANAGED=1 but CLAUDE_MEMORY_TEST_MANAGED_URL is not set (source .ci/managed.sh)"
            );
            eprintln!("skipped: no memory stores emulator (source .ci/managed.sh)");
            None
        }
    }
}

/// One HTTP/1.1 request to the emulator (plain HTTP on loopback): the
/// status and the JSON body.
pub fn http(method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let (url, key) = endpoint().expect("an emulator");
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).expect("connect to the emulator");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
         anthropic-version: 2023-06-01\r\nanthropic-beta: agent-memory-2026-07-22\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("answer");
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// A new, empty memory store on the emulator: its id.
pub fn new_store() -> Option<String> {
    endpoint()?;
    let (status, body) = http(
        "POST",
        "/v1/memory_stores",
        Some(&json!({"name": "claude-memory test"})),
    );
    assert_eq!(status, 200, "create a memory store: {body}");
    Some(body["id"].as_str().expect("an id").to_owned())
}

/// A [`ManagedStore`] over a new memory store, with short retries.
pub fn fresh() -> Option<(ManagedStore, String)> {
    let id = new_store()?;
    Some((open(&id), id))
}

/// Opens memory store `id` on the emulator.
pub fn open(id: &str) -> ManagedStore {
    let (url, key) = endpoint().expect("an emulator");
    ManagedStore::builder(id)
        .base_url(url)
        .api_key(key)
        .retries(3, Duration::from_millis(200))
        .open()
        .expect("open the managed store")
}

/// The next `count` requests on store `id` answer `status`.
pub fn fault(id: &str, status: u16, count: u32, retry_after: Option<&str>) {
    let mut body = json!({"memory_store_id": id, "status": status, "count": count});
    if let Some(after) = retry_after {
        body["retry_after"] = Value::from(after);
    }
    let (code, answer) = http("POST", "/_emulator/faults", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// Any fault (see the emulator's `/_emulator/faults`).
pub fn fault_with(body: Value) {
    let (code, answer) = http("POST", "/_emulator/faults", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// The memories of store `id` with their ids: (path, id, content).
pub fn memories_with_ids(id: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let (code, body) = http(
        "GET",
        &format!("/v1/memory_stores/{id}/memories?limit=20&view=full"),
        None,
    );
    assert_eq!(code, 200, "{body}");
    for m in body["data"].as_array().expect("data") {
        let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
        out.push((s("path"), s("id"), s("content")));
    }
    out.sort();
    out
}

/// Rewrites memory `mem` of store `id` (another client), unconditionally.
pub fn overwrite(id: &str, mem: &str, content: &str) {
    let (code, body) = http(
        "POST",
        &format!("/v1/memory_stores/{id}/memories/{mem}"),
        Some(&json!({"content": content})),
    );
    assert_eq!(code, 200, "{body}");
}

/// Before each of the next `count` preconditioned updates or deletes on
/// store `id`, the emulator changes the memory itself (another writer).
pub fn race(id: &str, count: u32) {
    let body = json!({"memory_store_id": id, "count": count});
    let (code, answer) = http("POST", "/_emulator/race", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// Requests the emulator has seen on store `id`.
pub fn requests(id: &str) -> u64 {
    let (code, answer) = http(
        "GET",
        &format!("/_emulator/requests?memory_store_id={id}"),
        None,
    );
    assert_eq!(code, 200, "{answer}");
    answer["count"].as_u64().expect("a count")
}

/// Every memory of store `id`: (path, content), sorted by path.
pub fn memories(id: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut page = String::new();
    loop {
        let (code, body) = http(
            "GET",
            &format!("/v1/memory_stores/{id}/memories?limit=20&view=full{page}"),
            None,
        );
        assert_eq!(code, 200, "{body}");
        for m in body["data"].as_array().expect("data") {
            out.push((
                m["path"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        match body["next_page"].as_str() {
            Some(next) if !next.is_empty() => page = format!("&page={next}"),
            _ => break,
        }
    }
    out.sort();
    out
}

/// Creates a memory through the API directly (another client).
pub fn put(id: &str, path: &str, content: &str) -> Value {
    let (code, body) = http(
        "POST",
        &format!("/v1/memory_stores/{id}/memories"),
        Some(&json!({"path": path, "content": content})),
    );
    assert_eq!(code, 200, "create {path}: {body}");
    body
}

/// The CLI (`claude-memory`, built by the suite) on `--store STORE` with
/// `args`, the emulator's URL and key in its environment.
#[cfg(feature = "cli")]
pub fn cli(store: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> std::process::Output {
    let (url, key) = endpoint().expect("an emulator");
    std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", url)
        .output()
        .expect("run the CLI")
}

/// Fills store `id` with `count` memories `/dNN/fKKK.md` (50 a directory,
/// "line one\nline two\n"), as the API would write them, in one request.
pub fn fill(id: &str, count: usize) {
    let body = json!({"memory_store_id": id, "count": count});
    let (code, answer) = http("POST", "/_emulator/fill", Some(&body));
    assert_eq!(code, 200, "{answer}");
}

/// Sets store `id`'s caps (the emulator's `caps` control): `what` is
/// "memories" or "versions".
pub fn cap(id: &str, what: &str, n: u64) {
    let body = json!({"memory_store_id": id, what: n});
    let (code, answer) = http("POST", "/_emulator/caps", Some(&body));
    assert_eq!(code, 200, "{answer}");
}
