//! The MCP server driven by clients nobody here wrote: the official MCP
//! Python SDK (`mcp` on PyPI) and TypeScript SDK (`@modelcontextprotocol/sdk`
//! on npm), installed by `.ci/mcp.sh` under `target/mcp-clients` (or
//! `CLAUDE_MEMORY_MCP_CLIENTS`). Each test prints a "skipped: …" line when
//! its client is absent, and fails then if `CLAUDE_MEMORY_REQUIRE_MCP=1`.
//!
//! - the six commands, bad arguments, an image and an unknown tool, over
//!   stdio and streamable HTTP, every answer compared with the in-process
//!   `MemoryTool` on an identical store, and the key strings literally;
//! - shared memory: an MCP client and an API-side `MemoryTool` on one
//!   SQLite file see each other's writes; history names the client;
//! - load: 8 HTTP clients x 200 mixed calls, 0 lost updates, p50/p99 and
//!   the server's peak RSS printed.
#![cfg(all(feature = "mcp", feature = "cli"))]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claude_memory::{FilesystemStore, MemoryTool, SqliteStore};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");
const TOKEN: &str = "client-token-0123456789";
/// A PNG signature and a few bytes: enough for the image check.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR-not-a-real-image";

fn clients_dir() -> PathBuf {
    std::env::var_os("CLAUDE_MEMORY_MCP_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-clients"))
}

fn skip(what: &str) {
    let msg = format!(
        "skipped: {what} is not installed (run `bash .ci/mcp.sh`, or set CLAUDE_MEMORY_MCP_CLIENTS)"
    );
    assert!(
        std::env::var("CLAUDE_MEMORY_REQUIRE_MCP").as_deref() != Ok("1"),
        "{msg}"
    );
    println!("{msg}");
}

fn python() -> Option<PathBuf> {
    let py = clients_dir().join("py/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        skip("the MCP Python SDK");
        None
    }
}

/// The node script, copied beside its node_modules (ES modules resolve
/// packages from the script's own folder).
fn node_script() -> Option<PathBuf> {
    let dir = clients_dir().join("node");
    let ok = dir.join("node_modules/@modelcontextprotocol/sdk").is_dir()
        && Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        skip("the MCP TypeScript SDK (or node)");
        return None;
    }
    let script = dir.join("client.mjs");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp_clients/client.mjs"),
        &script,
    )
    .expect("copy client.mjs");
    Some(script)
}

fn py_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp_clients/client.py")
}

fn run_json(mut cmd: Command) -> Value {
    let out = cmd.output().expect("run client");
    assert!(
        out.status.success(),
        "client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// A server process; killed (SIGTERM first) when dropped.
struct Server {
    child: Child,
    /// The port it listens on (each test asks for port 0: any free one,
    /// as the server reports it; fixed ports in the ephemeral range were
    /// taken by other processes' connections on a busy machine).
    port: u16,
}

impl Server {
    /// Starts the server, again if its port is taken for a moment (the
    /// fixed test ports lie in the system's ephemeral range).
    fn start(args: &[&str]) -> Server {
        for _ in 0..100 {
            if let Some(server) = Server::try_start(args) {
                return server;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server did not start: {args:?}");
    }

    fn try_start(args: &[&str]) -> Option<Server> {
        let mut child = Command::new(BIN)
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start server");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let _ = err.read_line(&mut line);
        if !line.contains("serving http://") {
            assert!(line.contains("cannot listen"), "server said: {line}");
            let _ = child.wait();
            return None;
        }
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in: {line}"));
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while err.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        Some(Server { child, port })
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token_file(dir: &Path) -> PathBuf {
    let f = dir.join("tokens");
    std::fs::write(&f, format!("# tokens for the test\n{TOKEN}\n")).unwrap();
    f
}

/// The six commands, an image, bad arguments and an unknown tool.
fn script() -> Vec<Value> {
    let m = |a: Value| json!({"name": "memory", "arguments": a});
    vec![
        m(json!({"command": "view", "path": "/memories"})),
        m(
            json!({"command": "create", "path": "/memories/notes.md", "file_text": "Acme prefers email\nfollow up friday\n"}),
        ),
        m(json!({"command": "view", "path": "/memories/notes.md"})),
        m(
            json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "email", "new_str": "phone"}),
        ),
        m(
            json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": "call at 9"}),
        ),
        m(json!({"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]})),
        m(
            json!({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/acme/notes.md"}),
        ),
        m(json!({"command": "view", "path": "/memories"})),
        m(json!({"command": "view", "path": "/memories/logo.png"})),
        m(json!({"command": "create", "path": "/memories/acme/notes.md", "file_text": "again"})),
        m(
            json!({"command": "str_replace", "path": "/memories/acme/notes.md", "old_str": "nowhere", "new_str": "x"}),
        ),
        m(
            json!({"command": "insert", "path": "/memories/acme/notes.md", "insert_line": "2", "insert_text": "x"}),
        ),
        m(json!({"command": "view", "path": "/memories/../etc/passwd"})),
        m(json!({"command": "View", "path": "/memories"})),
        m(json!({"path": "/memories"})),
        m(json!({"command": "delete", "path": "/memories/acme"})),
        m(json!({"command": "view", "path": "/memories/acme/notes.md"})),
        json!({"name": "not_memory", "arguments": {}}),
    ]
}

/// What the in-process handler answers to the same script on an
/// identical store, as MCP results.
fn expected(calls: &[Value]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("logo.png"), PNG).unwrap();
    let tool = MemoryTool::new(FilesystemStore::open(dir.path()).unwrap());
    calls
        .iter()
        .filter(|c| c["name"] == "memory")
        .map(|c| {
            let r = tool.dispatch(&c["arguments"]);
            let content: Vec<Value> = r
                .content
                .iter()
                .map(|block| match block {
                    claude_memory::Content::Text(t) => json!({"type": "text", "text": t}),
                    claude_memory::Content::Image { .. } => {
                        let j = r.to_json();
                        let s = &j["content"][0]["source"];
                        json!({"type": "image", "mimeType": s["media_type"], "data": s["data"]})
                    }
                })
                .collect();
            json!({"content": content, "isError": r.is_error})
        })
        .collect()
}

/// Checks a client's output for [`script`].
fn check(client: &str, out: &Value) {
    assert!(
        out["instructions"]
            .as_str()
            .is_some_and(|i| i.contains("ASSUME INTERRUPTION")),
        "{client}"
    );
    let tool = &out["tools"][0];
    assert_eq!(tool["name"], "memory", "{client}");
    assert_eq!(
        tool["inputSchema"]["properties"]["command"]["enum"],
        json!([
            "view",
            "create",
            "str_replace",
            "insert",
            "delete",
            "rename"
        ])
    );
    assert!(
        tool["description"]
            .as_str()
            .is_some_and(|d| d.contains("ALWAYS VIEW YOUR MEMORY DIRECTORY"))
    );
    assert_eq!(tool["annotations"]["destructiveHint"], true);
    assert_eq!(tool["annotations"]["readOnlyHint"], false);
    let calls = script();
    let want = expected(&calls);
    let got = out["results"].as_array().expect("results");
    assert_eq!(got.len(), calls.len(), "{client}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g_content: Vec<Value> = g["content"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| match b["type"].as_str() {
                Some("image") => {
                    json!({"type": "image", "mimeType": b["mimeType"], "data": b["data"]})
                }
                _ => json!({"type": b["type"], "text": b["text"]}),
            })
            .collect();
        assert_eq!(
            json!(g_content),
            w["content"],
            "{client}: call {i} {}",
            calls[i]
        );
        assert_eq!(
            g["isError"].as_bool().unwrap_or(false),
            w["isError"],
            "{client}: call {i}"
        );
    }
    // The key strings, literally (SPEC §3, §4).
    let text = |i: usize| {
        got[i]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(text(1), "File created successfully at: /memories/notes.md");
    assert_eq!(
        text(2),
        "Here's the content of /memories/notes.md with line numbers:\n     1\tAcme prefers email\n     2\tfollow up friday"
    );
    assert_eq!(
        text(3),
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tAcme prefers phone\n     2\tfollow up friday"
    );
    assert_eq!(text(4), "The file /memories/notes.md has been edited.");
    assert_eq!(
        text(6),
        "Successfully renamed /memories/notes.md to /memories/acme/notes.md"
    );
    assert_eq!(got[8]["content"][0]["type"], "image");
    assert_eq!(got[8]["content"][0]["mimeType"], "image/png");
    assert_eq!(
        text(9),
        "Error: File /memories/acme/notes.md already exists"
    );
    assert_eq!(got[9]["isError"], true);
    assert_eq!(
        text(11),
        "Error: Parameter `insert_line` must be an integer"
    );
    assert_eq!(text(14), "Error: Missing required parameter `command`");
    assert_eq!(text(15), "Successfully deleted /memories/acme");
    assert_eq!(
        text(16),
        "The path /memories/acme/notes.md does not exist. Please provide a valid path."
    );
    assert_eq!(
        got[17]["protocol_error"]["code"], -32602,
        "{client}: unknown tool"
    );
}

fn fresh_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    std::fs::write(dir.path().join("store/logo.png"), PNG).unwrap();
    dir
}

fn write_calls(dir: &Path) -> PathBuf {
    let f = dir.join("calls.json");
    std::fs::write(&f, serde_json::to_vec(&script()).unwrap()).unwrap();
    f
}

#[test]
fn python_sdk_over_stdio_and_streamable_http() {
    let Some(py) = python() else { return };
    // A port per mode (tests/mcp/in_process.rs, whose ports these are, runs
    // in another test binary, never at the same time), so a server still
    // shutting down never holds the next one's port.
    for mode in ["legacy", "auto"] {
        let dir = fresh_store();
        let store = dir.path().join("store");
        let mut cmd = Command::new(&py);
        cmd.arg(py_script())
            .arg("calls")
            .arg(write_calls(dir.path()))
            .args(["--mode", mode, "--stdio", BIN, "--store"])
            .arg(&store)
            .arg("mcp");
        check(&format!("python stdio {mode}"), &run_json(cmd));

        let dir = fresh_store();
        let store = dir.path().join("store");
        let tokens = token_file(dir.path());
        let server = Server::start(&[
            "--store",
            store.to_str().unwrap(),
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            tokens.to_str().unwrap(),
        ]);
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        let mut cmd = Command::new(&py);
        cmd.arg(py_script())
            .arg("calls")
            .arg(write_calls(dir.path()))
            .args(["--mode", mode, "--http", url.as_str(), "--token", TOKEN]);
        check(&format!("python http {mode}"), &run_json(cmd));
    }
}

#[test]
fn typescript_sdk_over_stdio_and_streamable_http() {
    let Some(script) = node_script() else { return };
    let dir = fresh_store();
    let store = dir.path().join("store");
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .arg(write_calls(dir.path()))
        .args(["--stdio", BIN, "--store"])
        .arg(&store)
        .arg("mcp");
    check("typescript stdio", &run_json(cmd));

    let dir = fresh_store();
    let store = dir.path().join("store");
    let tokens = token_file(dir.path());
    let server = Server::start(&[
        "--store",
        store.to_str().unwrap(),
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .arg(write_calls(dir.path()))
        .args(["--http", url.as_str(), "--token", TOKEN]);
    check("typescript http", &run_json(cmd));
}

fn py_calls(py: &Path, dir: &Path, calls: &[Value], port: u16) -> Vec<Value> {
    let f = dir.join("shared-calls.json");
    std::fs::write(&f, serde_json::to_vec(calls).unwrap()).unwrap();
    let mut cmd = Command::new(py);
    cmd.arg(py_script()).arg("calls").arg(&f).args([
        "--mode",
        "legacy",
        "--http",
        &format!("http://127.0.0.1:{port}/mcp"),
        "--token",
        TOKEN,
    ]);
    run_json(cmd)["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn an_mcp_client_and_an_api_agent_share_one_sqlite_store() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.db");
    let spec = format!("sqlite:{}", db.display());
    let tokens = token_file(dir.path());
    let server = Server::start(&[
        "--store",
        &spec,
        "--history",
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let m = |a: Value| json!({"name": "memory", "arguments": a});

    // MCP writes, the API side reads.
    let r = py_calls(
        &py,
        dir.path(),
        &[m(
            json!({"command": "create", "path": "/memories/from-mcp.md", "file_text": "written over MCP\n"}),
        )],
        server.port,
    );
    assert_eq!(
        r[0]["content"][0]["text"],
        "File created successfully at: /memories/from-mcp.md"
    );
    let api = MemoryTool::new(SqliteStore::open(&db).unwrap());
    let v = api.dispatch(&json!({"command": "view", "path": "/memories/from-mcp.md"}));
    assert_eq!(
        v.text(),
        Some(
            "Here's the content of /memories/from-mcp.md with line numbers:\n     1\twritten over MCP"
        )
    );

    // The API side writes and edits, MCP reads.
    let c = api.dispatch(&json!({"command": "create", "path": "/memories/from-api.md", "file_text": "written by an API agent\n"}));
    assert!(!c.is_error);
    let e = api.dispatch(&json!({"command": "str_replace", "path": "/memories/from-mcp.md", "old_str": "over MCP", "new_str": "over MCP, edited by the API"}));
    assert!(!e.is_error, "{e:?}");
    let r = py_calls(
        &py,
        dir.path(),
        &[
            m(json!({"command": "view", "path": "/memories/from-api.md"})),
            m(json!({"command": "view", "path": "/memories/from-mcp.md"})),
        ],
        server.port,
    );
    assert_eq!(
        r[0]["content"][0]["text"],
        "Here's the content of /memories/from-api.md with line numbers:\n     1\twritten by an API agent"
    );
    assert_eq!(
        r[1]["content"][0]["text"],
        "Here's the content of /memories/from-mcp.md with line numbers:\n     1\twritten over MCP, edited by the API"
    );

    let r = py_calls(
        &py,
        dir.path(),
        &[m(
            json!({"command": "view", "path": "/memories/from-api.md"}),
        )],
        server.port,
    );
    assert_eq!(r[0]["isError"], false);

    // The history names the MCP client and its session.
    let out = Command::new(BIN)
        .args(["--store", &spec, "history", "/memories/from-mcp.md"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("claude-memory-mcp/python-sdk-test@"),
        "{listing}"
    );
}

#[test]
fn load_eight_http_clients_two_hundred_calls_each_lose_no_update() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("load.db").display());
    let tokens = token_file(dir.path());
    let server = Server::start(&[
        "--store",
        &spec,
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let mut cmd = Command::new(&py);
    cmd.arg(py_script()).arg("load").args([
        "--http",
        url.as_str(),
        "--token",
        TOKEN,
        "--clients",
        "8",
        "--calls-per-client",
        "200",
    ]);
    let report = run_json(cmd);
    let rss = server.peak_rss_kib();
    println!(
        "mcp load (8 clients x 200 calls, SQLite): {report}; server peak RSS {} KiB",
        rss.map_or("?".into(), |r| r.to_string())
    );
    assert_eq!(report["calls"], 1600, "{report}");
    assert_eq!(report["error_count"], 0, "{report}");
    assert_eq!(report["inserted"], 800, "{report}");
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["extra"], 0, "{report}");
}
