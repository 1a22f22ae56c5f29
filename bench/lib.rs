//! What the benchmarks under `benches/` share (see `Cargo.toml`).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use serde_json::Value;

/// One request to the memory stores emulator (`tests/managed/emulator.py`),
/// its API or its `/_emulator/` controls, on a connection of its own: the
/// answer's JSON body, or `Null`.
pub fn emulator(base: &str, key: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut stream) = TcpStream::connect(host) else {
        return Value::Null;
    };
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
         anthropic-version: 2023-06-01\r\nanthropic-beta: agent-memory-2026-07-22\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut answer = Vec::new();
    if stream.write_all(request.as_bytes()).is_err() || stream.read_to_end(&mut answer).is_err() {
        return Value::Null;
    }
    let text = String::from_utf8_lossy(&answer);
    text.split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null)
}

/// The requests the emulator has counted for memory store `id`.
pub fn emulator_requests(base: &str, key: &str, id: &str) -> u64 {
    let path = format!("/_emulator/requests?memory_store_id={id}");
    emulator(base, key, "GET", &path, None)["count"]
        .as_u64()
        .unwrap_or(0)
}
