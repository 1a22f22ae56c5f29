//! `claude-memory dream` against a scripted Messages API server on
//! loopback, started by each test: the result on a copy (the input never
//! written), in place (undone by `revert --actor dream:ID`), a dry run,
//! retries, refusals before any request, and a kill at each step.
#![cfg(all(feature = "cli", feature = "dream", unix))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CLI: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

/// A scripted Messages API: each request gets the next reply (status,
/// body); at request `hang` (1-based) it answers nothing.
struct Fake {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
}

fn fake(replies: Vec<(u16, Value)>, hang: Option<usize>) -> Fake {
    fake_before(replies, hang, None)
}

/// [`fake`], passing every request but `POST /v1/messages` on to
/// `upstream` (the memory stores emulator), as the API's one host does.
fn fake_before(replies: Vec<(u16, Value)>, hang: Option<usize>, upstream: Option<String>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&requests);
    std::thread::spawn(move || {
        let mut replies = replies.into_iter();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
                if !line.to_ascii_lowercase().starts_with("connection:") {
                    head.push_str(&line);
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            if let Some(up) = &upstream
                && !head.starts_with("POST /v1/messages ")
            {
                let Ok(mut to) = std::net::TcpStream::connect(up.as_str()) else {
                    continue;
                };
                let _ = to.write_all(head.as_bytes());
                let _ = to.write_all(b"connection: close\r\n\r\n");
                let _ = to.write_all(&body);
                let mut answer = Vec::new();
                let _ = to.read_to_end(&mut answer);
                // This connection ends here: say so, or the client sends
                // its next request on it.
                if let Some(end) = answer.windows(2).position(|w| w == b"\r\n") {
                    answer.splice(end + 2..end + 2, b"connection: close\r\n".iter().copied());
                }
                let _ = reader.into_inner().write_all(&answer);
                continue;
            }
            let n = {
                let mut log = log.lock().expect("log");
                log.push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                log.len()
            };
            if hang == Some(n) {
                std::thread::sleep(Duration::from_secs(120));
                continue;
            }
            let (status, reply) = replies.next().unwrap_or((
                500,
                json!({"type": "error", "error": {"message": "no reply left"}}),
            ));
            let text = reply.to_string();
            let extra = if status == 429 {
                "retry-after: 0\r\n"
            } else {
                ""
            };
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    Fake { addr, requests }
}

impl Fake {
    fn count(&self) -> usize {
        self.requests.lock().expect("log").len()
    }
}

fn calls(calls: &[Value]) -> (u16, Value) {
    let content: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, input)| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "memory", "input": input}))
        .collect();
    (
        200,
        json!({"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": content,
               "usage": {"input_tokens": 500, "output_tokens": 20}}),
    )
}

fn end() -> (u16, Value) {
    (
        200,
        json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
               "content": [{"type": "text", "text": "Merged."}],
               "usage": {"input_tokens": 600, "output_tokens": 30}}),
    )
}

/// The script of a small consolidation.
fn script() -> Vec<(u16, Value)> {
    vec![
        calls(&[json!({"command": "view", "path": "/memories"})]),
        calls(&[
            json!({"command": "delete", "path": "/memories/contacts-old.md"}),
            json!({"command": "str_replace", "path": "/memories/plans.md",
                   "old_str": "March", "new_str": "May"}),
        ]),
        end(),
    ]
}

const FILES: [(&str, &str); 3] = [
    ("contacts.md", "Alice: sales\n"),
    ("contacts-old.md", "Alice: sales\n"),
    ("plans.md", "Launch is in March.\n"),
];

/// A directory store holding [`FILES`], with a history if `history`.
fn store(dir: &Path, history: bool) -> String {
    let root = dir.join("memory");
    let store = root.to_str().expect("utf-8").to_owned();
    let mut c = Command::new(CLI);
    c.args(["--store", &store]);
    if history {
        c.arg("--history");
    }
    let mut child = c
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("serve");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for (name, text) in FILES {
            let call = json!({"command": "create", "path": format!("/memories/{name}"), "file_text": text});
            writeln!(stdin, "{call}").expect("write");
        }
    }
    assert!(child.wait().expect("serve").success());
    store
}

fn unchanged(store: &str) {
    for (name, text) in FILES {
        let now = std::fs::read_to_string(Path::new(store).join(name)).expect("a file");
        assert_eq!(now, text, "{name}");
    }
}

fn dream(fake: &Fake, args: &[&str]) -> Command {
    let mut c = Command::new(CLI);
    c.args(args)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", format!("http://{}", fake.addr));
    c
}

fn run(mut c: impl std::borrow::BorrowMut<Command>) -> (Output, String, String) {
    let out = c.borrow_mut().output().expect("run the CLI");
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    (out, o, e)
}

#[test]
fn a_dream_to_an_output_changes_the_copy_and_never_the_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = store(dir.path(), false);
    let session = dir.path().join("s1.json");
    std::fs::write(
        &session,
        json!([{"role": "user", "content": "Launch moved to May."}]).to_string(),
    )
    .expect("write");
    let output = dir.path().join("out");
    let fake = fake(script(), None);
    let (out, stdout, stderr) = run(dream(
        &fake,
        &[
            "--store",
            &input,
            "dream",
            "--model",
            "claude-sonnet-4-5",
            "--output",
            output.to_str().expect("utf-8"),
            "--sessions",
            session.to_str().expect("utf-8"),
        ],
    ));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("done: 0 created, 1 changed, 1 deleted;"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1600 input and 70 output tokens"),
        "{stdout}"
    );
    assert!(stderr.contains("dream: copied 3 files into"), "{stderr}");
    assert!(stderr.contains("dream: view /memories\n"), "{stderr}");
    assert!(
        stderr.contains("dream: delete /memories/contacts-old.md\n"),
        "{stderr}"
    );
    unchanged(&input);
    assert!(!output.join("contacts-old.md").exists());
    assert_eq!(
        std::fs::read_to_string(output.join("plans.md")).expect("plans"),
        "Launch is in May.\n"
    );
    let first = fake.requests.lock().expect("log")[0].clone();
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("Launch moved to May.")
    );
    // An output that already holds files is refused before any request.
    let again = fake_count_after(&fake, || {
        let (out, _, stderr) = run(dream(
            &fake,
            &[
                "--store",
                &input,
                "dream",
                "--model",
                "m",
                "--output",
                output.to_str().expect("utf-8"),
            ],
        ));
        assert!(!out.status.success());
        assert!(stderr.contains("already holds files"), "{stderr}");
    });
    assert_eq!(again, 0);
}

fn fake_count_after(fake: &Fake, f: impl FnOnce()) -> usize {
    let before = fake.count();
    f();
    fake.count() - before
}

/// The id in "every change is dream:ID's".
fn id_of(stdout: &str) -> String {
    stdout
        .split("dream:")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("the dream's id")
        .to_owned()
}

#[test]
fn a_dream_in_place_is_undone_by_one_revert_of_its_actor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = store(dir.path(), true);
    let fake = fake(script(), None);
    let (out, stdout, stderr) = run(dream(
        &fake,
        &["--store", &input, "dream", "--model", "m", "--in-place"],
    ));
    assert!(out.status.success(), "{stderr}");
    assert!(!Path::new(&input).join("contacts-old.md").exists());
    let id = id_of(&stdout);
    assert!(
        stdout.contains(&format!("revert --actor dream:{id}")),
        "{stdout}"
    );
    let undo = Command::new(CLI)
        .args([
            "--store",
            &input,
            "revert",
            "--actor",
            &format!("dream:{id}"),
        ])
        .output()
        .expect("revert");
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    unchanged(&input);
}

#[test]
fn in_place_without_a_history_and_a_broken_session_are_refused_before_any_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = store(dir.path(), false);
    let fake = fake(script(), None);
    let (out, _, stderr) = run(dream(
        &fake,
        &["--store", &input, "dream", "--model", "m", "--in-place"],
    ));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--in-place needs a store that keeps a history"),
        "{stderr}"
    );
    let broken = dir.path().join("s.jsonl");
    std::fs::write(
        &broken,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n\n{oops\n",
    )
    .expect("write");
    let (out, _, stderr) = run(dream(
        &fake,
        &[
            "--store",
            &input,
            "dream",
            "--model",
            "m",
            "--dry-run",
            "--sessions",
            broken.to_str().expect("utf-8"),
        ],
    ));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("s.jsonl, line 3: not JSON"), "{stderr}");
    let (out, _, stderr) = run(dream(
        &fake,
        &["--store", &input, "dream", "--model", "m", "--dry-run"],
    )
    .env_remove("ANTHROPIC_API_KEY"));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert_eq!(fake.count(), 0);
    unchanged(&input);
}

#[test]
fn a_dry_run_prints_the_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = store(dir.path(), false);
    let fake = fake(script(), None);
    let (out, stdout, stderr) = run(dream(
        &fake,
        &["--store", &input, "dream", "--model", "m", "--dry-run"],
    ));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("-Launch is in March.\n+Launch is in May."),
        "{stdout}"
    );
    assert!(stdout.contains("-Alice: sales"), "{stdout}");
    assert!(stdout.contains("dry run: nothing was written"), "{stdout}");
    unchanged(&input);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        1,
        "no output directory"
    );
}

#[test]
fn a_throttled_request_is_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = store(dir.path(), false);
    let mut replies = vec![(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
    )];
    replies.extend(script());
    let fake = fake(replies, None);
    let (out, stdout, stderr) = run(dream(
        &fake,
        &["--store", &input, "dream", "--model", "m", "--dry-run"],
    ));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("done: 0 created, 1 changed, 1 deleted"),
        "{stdout}"
    );
    assert_eq!(fake.count(), 4);
}

/// A dream killed while each of its requests is in flight: a copy's input
/// is as it was; in place, one revert of the actor undoes what it did.
#[test]
fn a_killed_dream_leaves_its_input_or_one_revert_away() {
    for hang in 1..=3 {
        for in_place in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let input = store(dir.path(), in_place);
            let fake = fake(script(), Some(hang));
            let output = dir.path().join("out");
            let mut c = dream(&fake, &["--store", &input, "dream", "--model", "m"]);
            match in_place {
                true => c.arg("--in-place"),
                false => c.args(["--output", output.to_str().expect("utf-8")]),
            };
            let mut child = c
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dream");
            let started = Instant::now();
            while fake.count() < hang {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "request {hang} never came"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            child.kill().expect("kill");
            let _ = child.wait();
            if in_place {
                let actors = Command::new(CLI)
                    .args(["--store", &input, "history"])
                    .output()
                    .expect("history");
                let listing = String::from_utf8_lossy(&actors.stdout).into_owned();
                if let Some(id) = listing.split("dream:").nth(1).map(|r| {
                    r.split(|c: char| c.is_whitespace() || c == '/')
                        .next()
                        .unwrap_or("")
                        .to_owned()
                }) {
                    let undo = Command::new(CLI)
                        .args([
                            "--store",
                            &input,
                            "revert",
                            "--actor",
                            &format!("dream:{id}"),
                        ])
                        .output()
                        .expect("revert");
                    assert!(
                        undo.status.success(),
                        "{}",
                        String::from_utf8_lossy(&undo.stderr)
                    );
                }
            }
            unchanged(&input);
        }
    }
}

/// A dream of a managed memory store (the emulator) written into a SQLite
/// store: the memory store is only read.
#[cfg(all(feature = "managed", feature = "sqlite"))]
#[test]
fn a_managed_store_dreams_into_a_sqlite_store_and_is_only_read() {
    #[path = "../managed_support/mod.rs"]
    mod managed_support;
    let Some(id) = managed_support::new_store() else {
        return;
    };
    for (name, text) in FILES {
        managed_support::put(&id, &format!("/{name}"), text);
    }
    let (emulator, _) = managed_support::endpoint().expect("an emulator");
    let upstream = emulator
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let fake = fake_before(script(), None, Some(upstream));
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite:{}", dir.path().join("out.db").display());
    let (out, stdout, stderr) = run(dream(
        &fake,
        &[
            "--store",
            &format!("managed:{id}"),
            "dream",
            "--model",
            "m",
            "--output",
            &db,
        ],
    )
    .env(
        "ANTHROPIC_API_KEY",
        managed_support::endpoint().expect("emulator").1,
    ));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("done: 0 created, 1 changed, 1 deleted;"),
        "{stdout}"
    );
    let before: Vec<(String, String)> = FILES
        .iter()
        .map(|(n, t)| (format!("/{n}"), t.to_string()))
        .collect();
    let mut sorted = before.clone();
    sorted.sort();
    assert_eq!(
        managed_support::memories(&id),
        sorted,
        "the memory store was only read"
    );
    let view = Command::new(CLI)
        .args(["--store", &db, "view", "/memories/plans.md"])
        .output()
        .expect("view");
    assert!(String::from_utf8_lossy(&view.stdout).contains("Launch is in May."));
}
