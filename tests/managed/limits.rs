//! The service's limits under the managed profile: those a request can
//! be checked against are refused before any request, with SPEC's
//! answers; those only the service knows (its caps of 2,000 memories and
//! 250,000 versions, an archived store) are the service's refusals,
//! answered in SPEC's words and losing nothing.
#![cfg(feature = "managed")]

use claude_memory::{Config, ManagedStore, MemoryTool};
use serde_json::{Value, json};

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{cap, fill, http, memories, new_store, open, requests};

fn tool(id: &str) -> MemoryTool<ManagedStore> {
    MemoryTool::with_config(open(id), Config::managed_memory_stores())
}

/// `input`'s answer, which must be an error and cost no request.
fn refused_at_once(id: &str, input: Value) -> String {
    let tool = tool(id);
    let before = requests(id);
    let r = tool.dispatch(&input);
    assert!(r.is_error, "{input}: {r:?}");
    assert_eq!(requests(id), before, "{input}: no request");
    r.text().unwrap_or_default().to_owned()
}

#[test]
fn a_memory_over_102400_bytes_is_refused_before_any_request() {
    let Some(id) = new_store() else { return };
    let text = refused_at_once(
        &id,
        json!({"command": "create", "path": "/memories/a.md", "file_text": "é".repeat(51_201)}),
    );
    assert_eq!(
        text,
        "Error: File /memories/a.md would be 102402 bytes, over the limit of 102400 bytes"
    );
}

#[test]
fn a_path_over_1024_bytes_is_refused_before_any_request() {
    let Some(id) = new_store() else { return };
    let long = format!("/memories/{}", "a".repeat(1_020));
    let text = refused_at_once(
        &id,
        json!({"command": "create", "path": long, "file_text": "x"}),
    );
    assert!(
        text.starts_with(&format!(
            "Error: The path {long} is not a valid memory path"
        )),
        "{text}"
    );
}

#[test]
fn a_path_with_a_line_or_paragraph_separator_is_refused_before_any_request() {
    let Some(id) = new_store() else { return };
    for sep in ['\u{2028}', '\u{2029}'] {
        let path = format!("/memories/a{sep}b.md");
        let text = refused_at_once(
            &id,
            json!({"command": "create", "path": path, "file_text": "x"}),
        );
        assert!(
            text.starts_with(&format!(
                "Error: The path {path} is not a valid memory path"
            )),
            "{text}"
        );
    }
}

#[test]
fn a_path_not_in_nfc_is_refused_before_any_request() {
    let Some(id) = new_store() else { return };
    let text = refused_at_once(
        &id,
        json!({"command": "create", "path": "/memories/cafe\u{301}.md", "file_text": "x"}),
    );
    assert_eq!(
        text,
        "Error: The path /memories/cafe\u{301}.md is not a valid memory path: it must be in Unicode Normalization Form C"
    );
}

#[test]
fn a_path_over_20_segments_is_refused_before_any_request() {
    let Some(id) = new_store() else { return };
    let deep = format!("/memories/{}x.md", "d/".repeat(20));
    let text = refused_at_once(
        &id,
        json!({"command": "create", "path": deep, "file_text": "x"}),
    );
    assert!(
        text.starts_with(&format!("Error: Cannot create {deep}")),
        "{text}"
    );
}

/// The 2,000-memory cap is the service's to keep, atomically: a create in
/// a full store gets SPEC's file-limit answer, and writes nothing.
#[test]
fn a_create_in_a_store_at_2000_memories_gets_specs_file_limit() {
    let Some(id) = new_store() else { return };
    fill(&id, 1_999);
    let tool = tool(&id);
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/d00/last.md", "file_text": "x"}));
    assert!(!r.is_error, "the 2,000th fits: {r:?}");
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/d00/over.md", "file_text": "x"}));
    assert_eq!(
        r.text(),
        Some(
            "Error: Cannot create /memories/d00/over.md: the memory store is at its limit of 2000 files. Delete or merge memories first"
        )
    );
    assert!(r.is_error);
    let all = memories(&id);
    assert_eq!(all.len(), 2_000);
    assert!(all.iter().all(|(p, _)| p != "/d00/over.md"));
    // Room again after a delete.
    let r = tool.dispatch(&json!({"command": "delete", "path": "/memories/d01/f000.md"}));
    assert!(!r.is_error, "{r:?}");
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/d00/over.md", "file_text": "x"}));
    assert!(!r.is_error, "{r:?}");
}

/// A store at its version cap refuses every change; the model reads that
/// the store refused it, and nothing changes.
#[test]
fn a_write_in_a_store_at_its_version_cap_is_an_error_that_loses_nothing() {
    let Some(id) = new_store() else { return };
    fill(&id, 3);
    cap(&id, "versions", 3);
    let tool = tool(&id);
    let r = tool.dispatch(
        &json!({"command": "str_replace", "path": "/memories/d00/f000.md",
                                  "old_str": "one", "new_str": "1"}),
    );
    assert_eq!(
        r.text(),
        Some(
            "Error: The storage operation failed (the memory store refused it) for /memories/d00/f000.md"
        )
    );
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/d00/new.md", "file_text": "x"}));
    assert_eq!(
        r.text(),
        Some(
            "Error: The storage operation failed (the memory store refused it) for /memories/d00/new.md"
        )
    );
    let all = memories(&id);
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|(_, c)| c == "line one\nline two\n"));
}

fn archived_at(id: &str) -> Value {
    let (code, body) = http("GET", &format!("/v1/memory_stores/{id}"), None);
    assert_eq!(code, 200, "{body}");
    body["archived_at"].clone()
}

/// An archived store can be read, never changed: a store opened before the
/// archive learns it from the service's refusal; one opened after refuses
/// every write before its request is sent (after the reads its own checks
/// need, so SPEC's answers come first). Each answer says why.
#[test]
fn an_archived_store_answers_every_write_with_an_error_that_says_so() {
    let Some(id) = new_store() else { return };
    fill(&id, 3);
    let before = tool(&id);
    before.store().archive().expect("archive");
    assert!(archived_at(&id).is_string());
    before
        .store()
        .archive()
        .expect("archiving again changes nothing");
    let r = before
        .dispatch(&json!({"command": "create", "path": "/memories/d00/new.md", "file_text": "x"}));
    assert_eq!(
        r.text(),
        Some(
            "Error: The storage operation failed (the memory store is archived: it can be read, not changed) for /memories/d00/new.md"
        )
    );
    let after = tool(&id);
    let writes = [
        (
            json!({"command": "create", "path": "/memories/d00/new.md", "file_text": "x"}),
            "/memories/d00/new.md",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/d00/f000.md", "old_str": "one", "new_str": "1"}),
            "/memories/d00/f000.md",
        ),
        (
            json!({"command": "insert", "path": "/memories/d00/f001.md", "insert_line": 0, "insert_text": "x"}),
            "/memories/d00/f001.md",
        ),
        (
            json!({"command": "delete", "path": "/memories/d00/f002.md"}),
            "/memories/d00/f002.md",
        ),
        (
            json!({"command": "delete", "path": "/memories/d00"}),
            "/memories/d00",
        ),
        (
            json!({"command": "rename", "old_path": "/memories/d00/f000.md", "new_path": "/memories/g.md"}),
            "/memories/d00/f000.md",
        ),
    ];
    for (input, shown) in writes {
        let n = requests(&id);
        let r = after.dispatch(&input);
        assert_eq!(
            r.text().map(str::to_owned),
            Some(format!(
                "Error: The storage operation failed (the memory store is archived: it can be read, not changed) for {shown}"
            )),
            "{input}"
        );
        assert!(
            requests(&id) - n <= 2,
            "{input}: only the reads its own checks need"
        );
    }
    let view = after.dispatch(&json!({"command": "view", "path": "/memories/d00/f000.md"}));
    assert!(!view.is_error, "{view:?}");
    let all = memories(&id);
    assert_eq!(all.len(), 3);
    assert!(
        all.iter().all(|(_, c)| c == "line one\nline two\n"),
        "{all:?}"
    );
}

/// `archive` archives only with --yes, and only a managed store.
#[cfg(feature = "cli")]
#[test]
fn the_cli_archives_only_with_yes() {
    use managed_support::cli;
    let Some(id) = new_store() else { return };
    let store = format!("managed:{id}");
    let out = cli(&store, &["archive"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be undone") && err.contains("--yes"),
        "{err}"
    );
    assert!(archived_at(&id).is_null(), "nothing sent without --yes");
    let out = cli(&store, &["archive", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("archived {id}: its memories can be read, not changed\n")
    );
    assert!(archived_at(&id).is_string());
    let dir = tempfile::tempdir().expect("tempdir");
    let out = cli(dir.path(), &["archive", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("archive is for a managed memory store"),
        "{out:?}"
    );
}
