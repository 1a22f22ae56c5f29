//! The `claude_loop` example, unchanged, against a local server that speaks
//! the Messages API and replays a recorded two-session conversation.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One recorded request: its headers (lower-cased names) and JSON body.
#[derive(Debug, Clone)]
struct Request {
    headers: Vec<(String, String)>,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `responses` in order to POST /v1/messages, recording requests.
fn serve(
    responses: Vec<Value>,
) -> (
    String,
    Arc<Mutex<Vec<Request>>>,
    std::thread::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let handle = std::thread::spawn(move || {
        for response in responses {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            reader.read_line(&mut request_line).expect("request line");
            assert!(
                request_line.starts_with("POST /v1/messages "),
                "{request_line}"
            );
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("header");
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                }
            }
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .expect("content-length");
            let mut body = vec![0; len];
            reader.read_exact(&mut body).expect("body");
            let body: Value = serde_json::from_slice(&body).expect("json body");
            log.lock().expect("log").push(Request { headers, body });
            let payload = response.to_string();
            let mut stream = reader.into_inner();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
                payload.len()
            )
            .expect("respond");
        }
    });
    (url, seen, handle)
}

fn message(id: &str, content: Value, stop_reason: &str) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    })
}

fn run_example(url: &str, dir: &std::path::Path, prompt: &str) -> String {
    let output = Command::new(example_binary("claude_loop"))
        .arg(prompt)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_MODEL", "claude-test")
        .env("CLAUDE_MEMORY_DIR", dir)
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("run claude_loop");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

const ACME: &str = "# Acme Corp\n- Prefers email follow-ups, not phone calls.\n";

#[test]
fn a_preference_stored_in_session_one_is_recalled_in_session_two() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let memories = dir.path().join("memory");

    // Session 1: three requests; the second response makes three calls.
    let (url, seen, server) = serve(vec![
        message(
            "msg_1",
            json!([
                {"type": "text", "text": "Let me check my memory first."},
                {"type": "tool_use", "id": "toolu_s1_01", "name": "memory", "input": {"command": "view", "path": "/memories"}},
            ]),
            "tool_use",
        ),
        message(
            "msg_2",
            json!([
                {"type": "tool_use", "id": "toolu_s1_02", "name": "memory", "input": {"command": "create", "path": "/memories/customers/acme_corp.md", "file_text": ACME}},
                {"type": "tool_use", "id": "toolu_s1_03", "name": "memory", "input": {"command": "create", "path": "/memories/index.md", "file_text": "- customers/acme_corp.md\n"}},
                {"type": "tool_use", "id": "toolu_s1_04", "name": "memory", "input": {"command": "view", "path": "/memories/../secrets"}},
            ]),
            "tool_use",
        ),
        message(
            "msg_3",
            json!([{"type": "text", "text": "Noted: Acme Corp prefers email follow-ups."}]),
            "end_turn",
        ),
    ]);
    let prompt1 = "Remember that Acme Corp prefers email follow-ups.";
    let out = run_example(&url, &memories, prompt1);
    server.join().expect("server");
    assert!(
        out.contains("Claude: Noted: Acme Corp prefers email follow-ups."),
        "{out}"
    );
    let requests = seen.lock().expect("log").clone();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.header("x-api-key"), Some("test-key"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.body["model"], "claude-test");
        assert_eq!(
            r.body["tools"],
            json!([{"type": "memory_20250818", "name": "memory"}])
        );
    }
    assert_eq!(
        requests[0].body["messages"],
        json!([{"role": "user", "content": prompt1}])
    );
    let m = &requests[1].body["messages"];
    assert_eq!(m.as_array().map(Vec::len), Some(3));
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(m[1]["content"][1]["id"], "toolu_s1_01");
    assert_eq!(
        m[2],
        json!({"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "toolu_s1_01",
            "content": "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories",
        }]})
    );
    let m = &requests[2].body["messages"];
    assert_eq!(m.as_array().map(Vec::len), Some(5));
    assert_eq!(
        m[4],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_s1_02", "content": "File created successfully at: /memories/customers/acme_corp.md"},
            {"type": "tool_result", "tool_use_id": "toolu_s1_03", "content": "File created successfully at: /memories/index.md"},
            {"type": "tool_result", "tool_use_id": "toolu_s1_04", "content": "Error: The path /memories/../secrets is not a valid memory path: '..' is not allowed", "is_error": true},
        ]})
    );

    // Session 2: a new process, no history, the same directory.
    let (url, seen, server) = serve(vec![
        message(
            "msg_4",
            json!([
                {"type": "tool_use", "id": "toolu_s2_01", "name": "memory", "input": {"command": "view", "path": "/memories"}},
            ]),
            "tool_use",
        ),
        message(
            "msg_5",
            json!([
                {"type": "tool_use", "id": "toolu_s2_02", "name": "memory", "input": {"command": "view", "path": "/memories/customers/acme_corp.md"}},
            ]),
            "tool_use",
        ),
        message(
            "msg_6",
            json!([{"type": "text", "text": "Acme Corp prefers email follow-ups."}]),
            "end_turn",
        ),
    ]);
    let prompt2 = "How should I follow up with Acme Corp?";
    let out = run_example(&url, &memories, prompt2);
    server.join().expect("server");
    assert!(
        out.contains("Claude: Acme Corp prefers email follow-ups."),
        "{out}"
    );
    let requests = seen.lock().expect("log").clone();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].body["messages"],
        json!([{"role": "user", "content": prompt2}])
    );
    assert_eq!(
        requests[1].body["messages"][2]["content"],
        json!([{
            "type": "tool_result", "tool_use_id": "toolu_s2_01",
            "content": "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n82B\t/memories\n57B\t/memories/customers/\n57B\t/memories/customers/acme_corp.md\n25B\t/memories/index.md",
        }])
    );
    assert_eq!(
        requests[2].body["messages"][4]["content"],
        json!([{
            "type": "tool_result", "tool_use_id": "toolu_s2_02",
            "content": "Here's the content of /memories/customers/acme_corp.md with line numbers:\n     1\t# Acme Corp\n     2\t- Prefers email follow-ups, not phone calls.",
        }])
    );
    assert_eq!(
        std::fs::read_to_string(memories.join("customers/acme_corp.md")).expect("memory file"),
        ACME
    );
    assert_eq!(
        std::fs::read_to_string(memories.join("index.md")).expect("index"),
        "- customers/acme_corp.md\n"
    );
}

/// The example's binary, which `cargo test` builds beside the test binaries.
fn example_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test`, which builds the examples",
        bin.display()
    );
    bin
}
