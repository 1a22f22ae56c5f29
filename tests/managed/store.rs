//! `ManagedStore` against the emulator of the memory stores API
//! (`tests/managed/emulator.py`, checked by the official Python SDK in
//! `tests/managed/sdk_check.py`; both started by `.ci/managed.sh`). Not
//! the live service: these machines cannot reach it.
#![cfg(feature = "managed")]

use std::io::Write as _;
use std::process::{Command, Stdio};

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{Config, MemoryPath, MemoryStore, MemoryTool, StoreError};
use serde_json::json;

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{fault, fresh, memories, put, race, requests};

mod conformance {
    claude_memory::conformance_tests!(|run| {
        if let Some((store, _)) = crate::fresh() {
            run(&store)
        }
    });
}

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).expect("path")
}

fn call(tool: &MemoryTool<impl MemoryStore>, input: serde_json::Value) -> String {
    let r = tool.dispatch(&input);
    r.text().unwrap_or_default().to_owned()
}

/// Four processes (the CLI's `serve`) insert into one memory at once:
/// every edit they were told succeeded is in the file, none twice.
#[test]
fn lost_update_four_processes_keep_every_answered_edit() {
    let Some((store, id)) = fresh() else { return };
    store
        .write(
            &path("/memories/shared.md"),
            b"start\n",
            claude_memory::store::WriteMode::Create,
        )
        .expect("create");
    let (url, key) = managed_support::endpoint().expect("emulator");
    let children: Vec<_> = (0..4)
        .map(|p| {
            let mut child = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
                .args(["--store", &format!("managed:{id}"), "serve"])
                .env("ANTHROPIC_API_KEY", &key)
                .env("ANTHROPIC_BASE_URL", &url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn the CLI");
            let mut input = String::new();
            for i in 0..8 {
                let line = json!({"command": "insert", "path": "/memories/shared.md",
                    "insert_line": 1, "insert_text": format!("p{p}-{i}")});
                input.push_str(&format!("{line}\n"));
            }
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write calls");
            child
        })
        .collect();
    let mut answered = Vec::new();
    for (p, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("CLI output");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            if v.get("is_error").is_none() {
                answered.push(format!("p{p}-{i}"));
            }
        }
    }
    let content = &memories(&id)[0].1;
    for edit in &answered {
        assert_eq!(
            content.lines().filter(|l| l == edit).count(),
            1,
            "{edit} answered but not kept once in:\n{content}"
        );
    }
    assert!(answered.len() >= 28, "most edits answered: {answered:?}");
    assert_eq!(content.lines().count(), answered.len() + 1);
}

/// Another writer changes the memory between the store's read and its
/// write (the emulator's race): the 409 makes the store read again and
/// redo the edit on what it finds, so both changes are kept.
#[test]
fn race_409_redoes_the_edit_on_the_other_writers_content() {
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::new(&store);
    call(
        &tool,
        json!({"command": "create", "path": "/memories/n.md", "file_text": "one\n"}),
    );
    race(&id, 2);
    let text = call(
        &tool,
        json!({"command": "str_replace", "path": "/memories/n.md", "old_str": "one", "new_str": "ONE"}),
    );
    assert!(
        text.starts_with("The memory file has been edited."),
        "{text}"
    );
    assert_eq!(
        memories(&id),
        vec![("/n.md".into(), "ONE\nrace\nrace\n".into())]
    );
}

/// A store that keeps answering 429 (or 5xx) is retried within the bound,
/// then the model reads SPEC §4's unreachable answer; a short storm is
/// ridden out.
#[test]
fn throttling_and_outages_are_retried_then_reported() {
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::new(&store);
    call(
        &tool,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}),
    );
    fault(&id, 429, 2, Some("0"));
    let view = call(&tool, json!({"command": "view", "path": "/memories/a.md"}));
    assert_eq!(
        view,
        "Here's the content of /memories/a.md with line numbers:\n     1\ta"
    );
    fault(&id, 429, 50, Some("0"));
    let view = call(&tool, json!({"command": "view", "path": "/memories/a.md"}));
    assert_eq!(
        view,
        "Error: Could not reach the memory store (too many requests) for /memories/a.md"
    );
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::new(&store);
    fault(&id, 503, 50, None);
    let made = call(
        &tool,
        json!({"command": "create", "path": "/memories/b.md", "file_text": "b"}),
    );
    assert_eq!(
        made,
        "Error: Could not reach the memory store (service unavailable) for /memories/b.md"
    );
}

/// A refused key reads as access denied, and the key appears in no
/// error, message or `Debug` output.
#[test]
fn the_key_never_shows() {
    let Some((store, id)) = fresh() else { return };
    let (url, _) = managed_support::endpoint().expect("emulator");
    let wrong = claude_memory::ManagedStore::builder(&id)
        .base_url(&url)
        .api_key("sk-ant-secret-123")
        .open();
    let e = wrong.expect_err("a wrong key is refused");
    assert!(
        matches!(e, claude_memory::ManagedError::AccessDenied),
        "{e}"
    );
    assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
    assert!(!format!("{e:?}").contains("secret"));
    assert!(!format!("{store:?}").contains("test-key"));
    fault(&id, 401, 1, None);
    let tool = MemoryTool::new(&store);
    let view = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        view,
        "Error: Could not reach the memory store (access denied) for /memories"
    );
}

/// What the service would refuse is refused before any request: binary
/// content and oversized memories at the store, and under the managed
/// profile the handler's SPEC answers.
#[test]
fn what_the_service_refuses_is_refused_before_any_request() {
    let Some((store, id)) = fresh() else { return };
    let before = requests(&id);
    let png = store.write(
        &path("/memories/p.png"),
        b"\x89PNG\r\n\x1a\n",
        claude_memory::store::WriteMode::Create,
    );
    assert!(matches!(png, Err(StoreError::Invalid { .. })), "{png:?}");
    let big = vec![b'a'; 102_401];
    let big = store.write(
        &path("/memories/big.md"),
        &big,
        claude_memory::store::WriteMode::Create,
    );
    assert!(matches!(big, Err(StoreError::Invalid { .. })), "{big:?}");
    let tool = MemoryTool::with_config(&store, Config::managed_memory_stores());
    let deep = format!("/memories/{}x.md", "d/".repeat(20));
    let r = tool.dispatch(&json!({"command": "create", "path": deep, "file_text": "x"}));
    assert!(r.is_error, "{r:?}");
    let r = tool.dispatch(
        &json!({"command": "create", "path": "/memories/big.md", "file_text": "x".repeat(102_401)}),
    );
    assert_eq!(
        r.text(),
        Some("Error: File /memories/big.md would be 102401 bytes, over the limit of 102400 bytes")
    );
    assert_eq!(requests(&id), before, "no request was sent");
}

/// A directory move killed half-way leaves its lease with the move
/// recorded; the next open finishes it and frees the lease.
#[test]
fn killed_directory_rename_is_finished_by_the_next_open() {
    let Some((_, id)) = fresh() else { return };
    for name in ["x.md", "y.md", "sub/z.md"] {
        put(&id, &format!("/a/{name}"), name);
    }
    // Killed after moving x.md: the lease is stale (until_ms 0).
    let x = memories(&id);
    assert_eq!(x.len(), 3);
    let (code, listing) = managed_support::http(
        "GET",
        &format!("/v1/memory_stores/{id}/memories?path_prefix=/a/&depth=1"),
        None,
    );
    assert_eq!(code, 200);
    let xm = listing["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|m| m["path"] == "/a/x.md")
        .expect("x")
        .clone();
    let (code, _) = managed_support::http(
        "POST",
        &format!(
            "/v1/memory_stores/{id}/memories/{}",
            xm["id"].as_str().expect("id")
        ),
        Some(&json!({"path": "/b/x.md"})),
    );
    assert_eq!(code, 200);
    put(
        &id,
        "/.claude-memory-lease",
        r#"{"until_ms":0,"from":"/a/","to":"/b/"}"#,
    );
    let store = managed_support::open(&id);
    assert_eq!(
        memories(&id),
        vec![
            ("/b/sub/z.md".into(), "sub/z.md".into()),
            ("/b/x.md".into(), "x.md".into()),
            ("/b/y.md".into(), "y.md".into()),
        ]
    );
    assert!(store.stat(&path("/memories/a")).expect("stat").is_none());
}

/// Directory moves and deletes keep the tree's shape: an emptied
/// directory stays (its marker), moved memories keep their content.
#[test]
fn directory_moves_keep_every_memory_and_the_emptied_parent() {
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::new(&store);
    for p in ["/memories/p/d/one.md", "/memories/p/d/two/three.md"] {
        call(
            &tool,
            json!({"command": "create", "path": p, "file_text": p}),
        );
    }
    let r = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/p/d", "new_path": "/memories/q/d"}),
    );
    assert_eq!(r, "Successfully renamed /memories/p/d to /memories/q/d");
    let view = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert!(
        view.contains("/memories/p\n") || view.contains("/memories/p"),
        "{view}"
    );
    let got: Vec<String> = memories(&id).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        got,
        vec!["/p/.claude-memory-dir", "/q/d/one.md", "/q/d/two/three.md"]
    );
}

/// An endpoint that is not a URL, or names no such memory store, says
/// so at open, with what to check.
#[test]
fn open_errors_say_what_to_check() {
    let Some(id) = managed_support::new_store() else {
        return;
    };
    let (url, key) = managed_support::endpoint().expect("emulator");
    let open = |base: &str, id: &str| {
        claude_memory::ManagedStore::builder(id)
            .base_url(base)
            .api_key(&key)
            .retries(0, std::time::Duration::ZERO)
            .open()
            .expect_err("refused")
            .to_string()
    };
    for bad in ["127.0.0.1:55540", "not a url", "ftp://x"] {
        assert!(
            open(bad, &id).contains("is not an http:// or https:// URL"),
            "{bad}"
        );
    }
    let v1 = open(&format!("{url}/v1"), &id);
    assert!(
        v1.contains("no such memory store") && v1.contains("/v1"),
        "{v1}"
    );
    let missing = open(&url, "memstore_doesnotexist");
    assert!(missing.contains("check the id"), "{missing}");
}

/// The store works inside a Tokio runtime: created, used and dropped on a
/// worker thread, and from `AsyncMemoryTool`.
#[test]
fn works_inside_tokio() {
    let Some(id) = managed_support::new_store() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let store = managed_support::open(&id);
        let tool = claude_memory::AsyncMemoryTool::new(MemoryTool::new(store));
        let r = tool
            .dispatch(
                &json!({"command": "create", "path": "/memories/t.md", "file_text": "tokio\n"}),
            )
            .await;
        assert!(!r.is_error, "{r:?}");
        let r = tool
            .dispatch(&json!({"command": "view", "path": "/memories/t.md"}))
            .await;
        assert_eq!(
            r.text(),
            Some("Here's the content of /memories/t.md with line numbers:\n     1\ttokio")
        );
        drop(tool);
    });
}

/// Another client holds a memory `/a` and memories below `/a/` at once
/// (the service allows it): the tool shows a tree, the directory winning,
/// and a create at `/memories/a` is refused as the directory's.
#[test]
fn planted_file_and_directory_at_one_path_show_the_directory() {
    let Some((store, id)) = fresh() else { return };
    put(&id, "/a", "file");
    put(&id, "/a/b.md", "below");
    let tool = MemoryTool::new(&store);
    let view = call(&tool, json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        view,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n5B\t/memories\n5B\t/memories/a/\n5B\t/memories/a/b.md"
    );
    let made = call(
        &tool,
        json!({"command": "create", "path": "/memories/a", "file_text": "x"}),
    );
    assert_eq!(made, "Error: File /memories/a already exists");
    assert_eq!(
        memories(&id)[0],
        ("/a".into(), "file".into()),
        "nothing overwritten"
    );
}
