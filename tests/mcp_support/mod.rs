//! Raw HTTP/1.1 for the MCP tests: requests the official clients would
//! never send (malformed JSON-RPC, no token, a foreign Origin), and a
//! session opened by hand.
#![allow(dead_code)] // not every test binary uses every helper

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A response: status, headers (lowercase names), body.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message in the body: plain JSON, or the SSE `data:`
    /// line that holds an `id`.
    pub fn message(&self) -> Value {
        if let Ok(v) = serde_json::from_str::<Value>(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or(Value::Null)
    }
}

/// POSTs `body` to `/mcp` with `headers`, `Connection: close`, and reads
/// the whole response.
pub fn post(port: u16, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // The server may answer (413, 401) before reading all of a big body.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v == "chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `Authorization: Bearer …`
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Opens a session (initialize, then the initialized notification) and
/// returns its id.
pub fn session(port: u16, token: &str) -> String {
    let auth = bearer(token);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-http-test", "version": "1"}}});
    let r = post(
        port,
        &[("Authorization", &auth)],
        init.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.header("mcp-session-id").expect("session id").to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = post(
        port,
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &id),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        note.to_string().as_bytes(),
    );
    assert!(
        r.status == 202 || r.status == 200,
        "{} {}",
        r.status,
        r.body
    );
    id
}

/// A JSON-RPC request on a session; the whole HTTP response.
pub fn request(port: u16, token: &str, session: &str, message: &Value) -> Resp {
    let auth = bearer(token);
    post(
        port,
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        message.to_string().as_bytes(),
    )
}

/// `tools/call` of `name` with `arguments`; the JSON-RPC answer.
pub fn call(port: u16, token: &str, session: &str, id: u64, name: &str, arguments: Value) -> Value {
    let m = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}});
    request(port, token, session, &m).message()
}

/// The text and isError of a tools/call answer.
pub fn text_of(answer: &Value) -> (String, bool) {
    let result = &answer["result"];
    (
        result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        result["isError"].as_bool().unwrap_or(false),
    )
}

/// Serves `server` on `port` on a runtime of its own thread; the returned
/// guard stops it (and says how long the stop took) when asked.
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Running {
    /// Binds a port the system picks (no clash with anything else on the
    /// machine) and serves; returns the guard and the port.
    pub fn start(
        server: claude_memory::mcp::MemoryServer,
        options: claude_memory::mcp::HttpOptions,
    ) -> (Running, u16) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let http = claude_memory::mcp::HttpServer::bind(
                    ([127, 0, 0, 1], 0).into(),
                    server,
                    options,
                )
                .await
                .expect("bind");
                let port = http.local_addr().expect("address").port();
                ready_tx.send(port).expect("ready");
                http.serve(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
            });
            let _ = done_tx.send(());
        });
        let port = ready.recv().expect("server started");
        (
            Running {
                stop: Some(stop),
                done,
            },
            port,
        )
    }

    /// Stops the server; how long until `serve` returned (None: not
    /// within `limit`).
    pub fn stop_within(mut self, limit: Duration) -> Option<Duration> {
        let t = Instant::now();
        let _ = self.stop.take().map(|s| s.send(()));
        self.done.recv_timeout(limit).ok().map(|()| t.elapsed())
    }
}
