//! Attacks on the `claude-memory mcp` process (issue 22's attacker
//! review): raw stdio a client would never send (calls before initialize,
//! garbage, batches), a store with planted links, FIFOs, hard links and a
//! huge sparse file served through MCP, second writers (two HTTP servers
//! and the stdio bridge on one store), a server killed mid-write, and the
//! token never appearing in anything the server prints. HTTP servers
//! bind a port the system picks.
#![cfg(all(feature = "mcp", feature = "cli", unix))]

#[path = "../mcp_support/mod.rs"]
mod mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_support::{call, session, text_of};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");
const TOKEN: &str = "cli-attack-token-0123456789";

/// `claude-memory --store DIR mcp` on stdio, spoken to line by line.
struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    out: std::sync::mpsc::Receiver<String>,
}

impl Stdio_ {
    fn start(dir: &Path) -> Stdio_ {
        let mut child = Command::new(BIN)
            .arg("--store")
            .arg(dir)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Stdio_ { child, stdin, out }
    }

    fn send(&mut self, line: &str) {
        let _ = writeln!(self.stdin, "{line}");
        let _ = self.stdin.flush();
    }

    /// The next message with `id`, skipping others (None: none in 10 s).
    fn answer(&mut self, id: u64) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let line = self.out.recv_timeout(left).ok()?;
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v["id"] == id {
                return Some(v);
            }
        }
        None
    }

    fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "stdio-attack", "version": "1"}}})
            .to_string(),
        );
        let init = self.answer(0).expect("initialize answered");
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn call(&mut self, id: u64, arguments: Value) -> (String, bool) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "memory", "arguments": arguments}})
            .to_string(),
        );
        let a = self
            .answer(id)
            .unwrap_or_else(|| panic!("call {id} unanswered"));
        text_of(&a)
    }
}

impl Drop for Stdio_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn stdio_garbage_and_calls_before_initialize_do_not_kill_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Stdio_::start(dir.path());
    // Garbage, a batch, a call before initialize, a notification.
    s.send("{not json");
    s.send(r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#);
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#);
    s.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "create", "path": "/memories/early.md", "file_text": "x"}}})
        .to_string(),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the server exited on a message before initialize"
    );
    s.initialize();
    assert!(!s.call(3, json!({"command": "view", "path": "/memories"})).1);
    // Wrong types and a huge path: SPEC strings, isError.
    let (t, e) = s.call(
        4,
        json!({"command": "view", "path": format!("/memories/{}", "a".repeat(2_000_000))}),
    );
    assert!(
        e && t.starts_with("Error: The path /memories/aaa"),
        "{}",
        &t[..80.min(t.len())]
    );
    assert_eq!(s.call(5, json!({"command": "insert", "path": "/memories/x", "insert_line": 1.5, "insert_text": "x"})),
        ("Error: Parameter `insert_line` must be an integer".into(), true));
    assert_eq!(
        s.call(6, json!({"command": ["view"]})),
        ("Error: Parameter `command` must be a string".into(), true)
    );
}

/// `tools/call` with `arguments` an array or a string: rmcp took it for a
/// method it does not know (-32601). It is the protocol's invalid params
/// (-32602), with SPEC §4's text.
#[test]
fn tools_call_with_arguments_that_are_no_object_is_invalid_params() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Stdio_::start(dir.path());
    s.initialize();
    for (id, arguments) in [
        (1, json!(["view", "/memories"])),
        (2, json!("view /memories")),
    ] {
        s.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "memory", "arguments": arguments}})
            .to_string(),
        );
        let a = s.answer(id).expect("answered");
        assert_eq!(a["error"]["code"], -32602, "{a}");
        assert_eq!(
            a["error"]["message"], "Error: Invalid input: `arguments` must be a JSON object",
            "{a}"
        );
    }
    assert!(!s.call(3, json!({"command": "view", "path": "/memories"})).1);
}

/// A line over rmcp's 16 MiB bound is dropped unanswered (rmcp gives no
/// way to answer it: the README says so); the server stays up and
/// answers the next message.
#[test]
fn a_stdio_line_over_sixteen_mib_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Stdio_::start(dir.path());
    s.initialize();
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory",
        "arguments": {"command": "create", "path": "/memories/big.md", "file_text": "x".repeat(17 << 20)}}});
    s.send(&huge.to_string());
    let (text, is_error) = s.call(2, json!({"command": "view", "path": "/memories"}));
    assert!(!is_error, "{text}");
    assert!(!text.contains("big.md"), "{text}");
}

#[test]
fn planted_links_fifos_hard_links_and_sparse_files_hold_through_mcp() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "outside secret\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    // FilesystemStore's root holds what /memories names.
    let root = dir.path();
    symlink(outside.path().join("secret"), root.join("link.md")).unwrap();
    symlink(outside.path(), root.join("dirlink")).unwrap();
    std::fs::hard_link(outside.path().join("secret"), root.join("hard.md")).unwrap();
    let fifo = root.join("fifo.md");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let sparse = std::fs::File::create(root.join("sparse.md")).unwrap();
    sparse.set_len(8 << 30).unwrap();
    drop(sparse);
    let mut s = Stdio_::start(root);
    s.initialize();
    let t0 = Instant::now();
    let cases = [
        (
            json!({"command": "view", "path": "/memories/link.md"}),
            "Error: Refusing to follow a symbolic link for /memories/link.md",
        ),
        (
            json!({"command": "view", "path": "/memories/dirlink/secret"}),
            "Error: Refusing to follow a symbolic link for /memories/dirlink/secret",
        ),
        (
            json!({"command": "create", "path": "/memories/dirlink/new.md", "file_text": "x"}),
            "Error: Refusing to follow a symbolic link for /memories/dirlink/new.md",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/hard.md", "old_str": "outside", "new_str": "x"}),
            "Error:",
        ),
        // A FIFO is never opened: it answers as no file (never a hang).
        (
            json!({"command": "view", "path": "/memories/fifo.md"}),
            "The path /memories/fifo.md does not exist",
        ),
        (
            json!({"command": "insert", "path": "/memories/sparse.md", "insert_line": 0, "insert_text": "x"}),
            "Error: File /memories/sparse.md is 8589934592 bytes, over the limit of 1048576 bytes",
        ),
    ];
    for (i, (args, want)) in cases.into_iter().enumerate() {
        let (text, is_error) = s.call(10 + i as u64, args.clone());
        assert!(is_error && text.starts_with(want), "{args}: {text}");
        assert!(
            !text.contains("outside secret") && !text.contains(&*root.to_string_lossy()),
            "{text}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    // Deleting the links removes the links only.
    assert!(
        !s.call(
            30,
            json!({"command": "delete", "path": "/memories/dirlink"})
        )
        .1
    );
    assert!(
        !s.call(
            31,
            json!({"command": "delete", "path": "/memories/link.md"})
        )
        .1
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "outside secret\n"
    );
}

/// An HTTP server process on `store`, on a port the system picks (read
/// from its "serving" line); killed when dropped.
struct Http(Child, u16);

impl Http {
    fn start(store: &str, tokens: &Path) -> Http {
        let mut child = Command::new(BIN)
            .args(["--store", store, "mcp", "--http", "127.0.0.1:0"])
            .arg("--token-file")
            .arg(tokens)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let _ = err.read_line(&mut line);
        assert!(!line.contains(TOKEN), "{line}");
        let port = line
            .trim()
            .strip_prefix("claude-memory mcp: serving http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the server said: {line}"));
        std::thread::spawn(move || {
            let mut rest = String::new();
            while err.read_line(&mut rest).is_ok_and(|n| n > 0) {
                assert!(
                    !rest.contains(TOKEN),
                    "the token in the server's output: {rest}"
                );
            }
        });
        Http(child, port)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_http_servers_and_the_bridge_on_one_store_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let store = dir.path().join("store");
    let store_s = store.to_string_lossy().into_owned();
    let servers = [
        Http::start(&store_s, &tokens),
        Http::start(&store_s, &tokens),
    ];
    let (p0, p1) = (servers[0].1, servers[1].1);
    let s0 = session(p0, TOKEN);
    let a = call(
        p0,
        TOKEN,
        &s0,
        1,
        "memory",
        json!({"command": "create", "path": "/memories/log.md", "file_text": ""}),
    );
    assert!(!text_of(&a).1, "{a}");
    let per = 30;
    std::thread::scope(|sc| {
        for (k, port) in [p0, p1, p0, p1].into_iter().enumerate() {
            sc.spawn(move || {
                let s = session(port, TOKEN);
                for i in 0..per {
                    let a = call(
                        port,
                        TOKEN,
                        &s,
                        10 + i,
                        "memory",
                        json!({"command": "insert", "path": "/memories/log.md",
                        "insert_line": 0, "insert_text": format!("http {k} {i}")}),
                    );
                    assert!(!text_of(&a).1, "{a}");
                }
            });
        }
        // The stdio bridge (`serve`), a third writer.
        let store = &store;
        sc.spawn(move || {
            let mut bridge = Command::new(BIN)
                .arg("--store").arg(store).arg("serve")
                .stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
            let mut input = bridge.stdin.take().unwrap();
            for i in 0..per {
                writeln!(input, "{}", json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": format!("bridge {i}")})).unwrap();
            }
            drop(input);
            let out = bridge.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text.lines().filter(|l| l.contains("has been edited")).count(), per as usize, "{text}");
        });
    });
    let v = std::fs::read_to_string(store.join("log.md")).unwrap();
    assert_eq!(v.lines().count(), 5 * per as usize, "lost updates:\n{v}");
    drop(servers);
}

#[test]
fn a_server_killed_mid_write_leaves_old_or_new_content_and_no_token_in_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let store = dir.path().join("store");
    let store_s = store.to_string_lossy().into_owned();
    let text = "0123456789abcdef\n".repeat(50_000);
    for round in 0..5u16 {
        let mut server = Http::start(&store_s, &tokens);
        let port = server.1;
        let s = session(port, TOKEN);
        let path = format!("/memories/big{round}.md");
        let t = text.clone();
        // The create, sent by hand: the kill may come before it connects.
        let writer = std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory",
                "arguments": {"command": "create", "path": path, "file_text": t}}})
            .to_string();
            let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            let _ = write!(
                c,
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nMcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = std::io::Read::read_to_end(&mut c, &mut Vec::new());
        });
        std::thread::sleep(Duration::from_millis(5 + 15 * u64::from(round)));
        let _ = server.0.kill();
        let _ = server.0.wait();
        let _ = writer.join();
        if let Ok(got) = std::fs::read_to_string(store.join(format!("big{round}.md"))) {
            assert_eq!(got.len(), text.len(), "a torn file after a kill");
        }
    }
    // A listing by a writing handle clears what the killed writers left in
    // that directory (the CLI's `view` opens read-only and removes
    // nothing: with it, the test failed whenever the last round's kill
    // landed mid-write, as it did here under load).
    let mut serve = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    serve
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"command\":\"view\",\"path\":\"/memories\"}\n")
        .unwrap();
    assert!(serve.wait().unwrap().success());
    let leftovers: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".claude-memory.tmp")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_full_disk_answers_with_the_spec_string_and_keeps_the_old_content() {
    // A 256 KiB tmpfs as the store (needs root; skipped elsewhere).
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(dir.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        println!("skipped: cannot mount a small tmpfs here (run as root on Linux)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(dir.path());
    let mut s = Stdio_::start(dir.path());
    s.initialize();
    let first = "x".repeat(100_000);
    let created = s.call(
        1,
        json!({"command": "create", "path": "/memories/a.md", "file_text": first}),
    );
    assert_eq!(
        created,
        ("File created successfully at: /memories/a.md".into(), false)
    );
    let cases = [
        (
            json!({"command": "create", "path": "/memories/b.md", "file_text": "y".repeat(200_000)}),
            "/memories/b.md",
        ),
        (
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "q".repeat(190_000)}),
            "/memories/a.md",
        ),
    ];
    for (i, (args, path)) in cases.into_iter().enumerate() {
        assert_eq!(
            s.call(2 + i as u64, args),
            (
                format!("Error: Could not write (no space left on the storage) for {path}"),
                true
            )
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.md")).unwrap(),
        first
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".claude-memory.lock")
        .collect();
    assert_eq!(names, ["a.md"], "a failed write left a file behind");
}

#[test]
fn the_forms_a_new_user_types_for_http_are_understood_or_explained() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let store = dir.path().join("store");
    // `localhost:PORT` and a bare port mean loopback.
    for addr in ["localhost:0", "0"] {
        let mut child = Command::new(BIN)
            .arg("--store")
            .arg(&store)
            .args(["mcp", "--http", addr, "--token-file"])
            .arg(&tokens)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let _ = BufReader::new(child.stderr.take().unwrap()).read_line(&mut line);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            line.starts_with("claude-memory mcp: serving http://127.0.0.1:"),
            "{addr}: {line}"
        );
    }
    // Typos are refused with what would work; zero bounds are refused.
    for (args, want) in [
        (vec!["--http", "localhst:8765"], "expected IP:PORT"),
        (
            vec!["--htp", "127.0.0.1:8765"],
            "a similar argument exists: '--http'",
        ),
        (
            vec!["--http", "127.0.0.1:0", "--max-sessions", "0"],
            "--max-sessions",
        ),
    ] {
        let out = Command::new(BIN)
            .arg("--store")
            .arg(&store)
            .arg("mcp")
            .args(&args)
            .arg("--token-file")
            .arg(&tokens)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }
    // A client pointed at the server's root is told where the endpoint is.
    let server = Http::start(&store.to_string_lossy(), &tokens);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.1)).unwrap();
    write!(s, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
    let mut got = String::new();
    let _ = std::io::Read::read_to_string(&mut s, &mut got);
    assert!(
        got.starts_with("HTTP/1.1 404") && got.contains("the MCP endpoint is /mcp"),
        "{got}"
    );
}
