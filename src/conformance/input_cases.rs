//! What the tool refuses, and how: size limits that change nothing,
//! malformed input, `tool_use` envelopes and hostile paths, golden strings
//! in full.

use serde_json::json;

use super::helpers::{
    EDITED, EMPTY_ROOT, bytes, create, err, exists, insert, ok, rename, replace, tool, tool_with,
    view,
};
use crate::config::CreatePolicy;
use crate::store::MemoryStore;

// ---- limits -------------------------------------------------------------------

/// A create or edit whose result is over the file limit fails and changes
/// nothing.
pub fn file_size_limit_changes_nothing(store: &dyn MemoryStore) {
    let t = tool_with(store, |c| c.max_file_size = 10);
    err(
        &t,
        json!({"command": "create", "path": "/memories/big.txt", "file_text": "01234567890"}),
        "Error: File /memories/big.txt would be 11 bytes, over the limit of 10 bytes",
    );
    assert!(!exists(store, "/memories/big.txt"));
    create(&t, "/memories/ten.txt", "0123456789");
    err(
        &t,
        replace("/memories/ten.txt", "0", Some("ab")),
        "Error: File /memories/ten.txt would be 11 bytes, over the limit of 10 bytes",
    );
    err(
        &t,
        insert("/memories/ten.txt", 0, ""),
        "Error: File /memories/ten.txt would be 12 bytes, over the limit of 10 bytes",
    );
    assert_eq!(bytes(store, "/memories/ten.txt"), b"0123456789");
}

/// A write that would take the store over its limit fails and changes
/// nothing; replaced bytes are not counted twice.
pub fn store_size_limit_changes_nothing(store: &dyn MemoryStore) {
    let t = tool_with(store, |c| c.max_store_size = Some(20));
    create(&t, "/memories/a.txt", "abcdefghijklmno");
    err(
        &t,
        json!({"command": "create", "path": "/memories/b.txt", "file_text": "abcdef"}),
        "Error: The memory store would hold 21 bytes, over the limit of 20 bytes",
    );
    assert!(!exists(store, "/memories/b.txt"));
    err(
        &t,
        json!({"command": "create", "path": "/memories/a.txt", "file_text": "abcdefgh"}),
        "Error: File /memories/a.txt already exists",
    );
    err(
        &t,
        replace("/memories/a.txt", "a", Some("a123456")),
        "Error: The memory store would hold 21 bytes, over the limit of 20 bytes",
    );
    ok(
        &t,
        replace("/memories/a.txt", "a", Some("a12345")),
        &format!("{EDITED}\n     1\ta12345bcdefghijklmno"),
    );
    let t = tool_with(store, |c| {
        c.max_store_size = Some(20);
        c.create_policy = CreatePolicy::Overwrite;
    });
    create(&t, "/memories/a.txt", "abcdefghijklmnopqrst");
    assert_eq!(bytes(store, "/memories/a.txt"), b"abcdefghijklmnopqrst");
}

// ---- bad input ----------------------------------------------------------------

/// Every §4 input problem gets its exact message, and `is_error`.
pub fn bad_input_gets_exact_errors(store: &dyn MemoryStore) {
    let t = tool(store);
    err(
        &t,
        json!("view"),
        "Error: Invalid input: expected a JSON object",
    );
    err(
        &t,
        json!([1, 2]),
        "Error: Invalid input: expected a JSON object",
    );
    let bad = t.dispatch_json("{not json");
    assert!(bad.is_error);
    assert_eq!(
        bad.text(),
        Some("Error: Invalid input: key must be a string at line 1 column 2")
    );
    err(
        &t,
        json!({"path": "/memories"}),
        "Error: Missing required parameter `command`",
    );
    err(
        &t,
        json!({"command": null}),
        "Error: Missing required parameter `command`",
    );
    err(
        &t,
        json!({"command": 5}),
        "Error: Parameter `command` must be a string",
    );
    err(
        &t,
        json!({"command": "View", "path": "/memories"}),
        "Error: Unknown command `View`. Expected one of: view, create, str_replace, insert, delete, rename",
    );
    err(
        &t,
        json!({"command": "list"}),
        "Error: Unknown command `list`. Expected one of: view, create, str_replace, insert, delete, rename",
    );
    err(
        &t,
        json!({"command": "view"}),
        "Error: Missing required parameter `path` for command `view`",
    );
    err(
        &t,
        json!({"command": "create", "file_text": "x"}),
        "Error: Missing required parameter `path` for command `create`",
    );
    err(
        &t,
        json!({"command": "create", "path": null, "file_text": "x"}),
        "Error: Missing required parameter `path` for command `create`",
    );
    err(
        &t,
        json!({"command": "create", "path": "/etc/x"}),
        "Error: Missing required parameter `file_text` for command `create`",
    );
    err(
        &t,
        json!({"command": "str_replace", "path": "/memories/a"}),
        "Error: Missing required parameter `old_str` for command `str_replace`",
    );
    err(
        &t,
        json!({"command": "insert", "path": "/memories/a", "insert_text": "x"}),
        "Error: Missing required parameter `insert_line` for command `insert`",
    );
    err(
        &t,
        json!({"command": "insert", "path": "/memories/a", "insert_line": 1}),
        "Error: Missing required parameter `insert_text` for command `insert`",
    );
    err(
        &t,
        json!({"command": "delete"}),
        "Error: Missing required parameter `path` for command `delete`",
    );
    err(
        &t,
        json!({"command": "rename", "new_path": "/memories/b"}),
        "Error: Missing required parameter `old_path` for command `rename`",
    );
    err(
        &t,
        json!({"command": "rename", "old_path": "/memories/a"}),
        "Error: Missing required parameter `new_path` for command `rename`",
    );
    err(
        &t,
        json!({"command": "view", "path": 5}),
        "Error: Parameter `path` must be a string",
    );
    err(
        &t,
        json!({"command": "create", "path": "/memories/a", "file_text": 5}),
        "Error: Parameter `file_text` must be a string",
    );
    err(
        &t,
        json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}),
        "Error: Parameter `insert_line` must be an integer",
    );
    err(
        &t,
        json!({"command": "insert", "path": "/memories/a", "insert_line": 2.0, "insert_text": "x"}),
        "Error: Parameter `insert_line` must be an integer",
    );
    err(
        &t,
        json!({"command": "insert", "path": "/memories/a", "insert_line": 1, "insert_text": ["x"]}),
        "Error: Parameter `insert_text` must be a string",
    );
    err(
        &t,
        json!({"command": "str_replace", "path": "/memories/a", "old_str": "a", "new_str": 5}),
        "Error: Parameter `new_str` must be a string",
    );
    err(
        &t,
        json!({"command": "rename", "old_path": "/memories/a", "new_path": true}),
        "Error: Parameter `new_path` must be a string",
    );
    // Unknown extra fields are ignored.
    ok(
        &t,
        json!({"command": "view", "path": "/memories", "extra": {"x": 1}}),
        EMPTY_ROOT,
    );
    // Nothing was written by any of it.
    ok(&t, view("/memories"), EMPTY_ROOT);
}

/// A `tool_use` block's id comes back as `tool_use_id`, even when its
/// input is broken; `name` is not checked.
pub fn tool_use_blocks_echo_their_id(store: &dyn MemoryStore) {
    let t = tool(store);
    let block = json!({"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "view", "path": "/memories"}});
    assert_eq!(
        t.dispatch(&block).to_json(),
        json!({"type": "tool_result", "tool_use_id": "toolu_01", "content": EMPTY_ROOT})
    );
    let broken = json!({"type": "tool_use", "id": "toolu_02", "name": "memory", "input": "oops"});
    assert_eq!(
        t.dispatch(&broken).to_json(),
        json!({"type": "tool_result", "tool_use_id": "toolu_02", "content": "Error: Invalid input: the tool_use block's `input` must be a JSON object", "is_error": true})
    );
    let no_input = json!({"type": "tool_use", "id": "toolu_03", "name": "memory"});
    assert_eq!(
        t.dispatch(&no_input).tool_use_id.as_deref(),
        Some("toolu_03")
    );
    assert!(t.dispatch(&no_input).is_error);
    let other_name = json!({"type": "tool_use", "id": "toolu_04", "name": "notes", "input": {"command": "delete", "path": "/memories/x"}});
    assert_eq!(
        t.dispatch(&other_name).to_json(),
        json!({"type": "tool_result", "tool_use_id": "toolu_04", "content": "Error: The path /memories/x does not exist", "is_error": true})
    );
    let bare = t.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        bare.to_json(),
        json!({"type": "tool_result", "content": EMPTY_ROOT})
    );
}

// ---- paths --------------------------------------------------------------------

/// Every SPEC §2 attack is refused with its reason, for every command, and
/// the store stays empty.
pub fn hostile_paths_are_rejected_and_touch_nothing(store: &dyn MemoryStore) {
    let t = tool(store);
    let long_path = format!("/memories/{}", "a/".repeat(510));
    let long_name = format!("/memories/{}", "n".repeat(256));
    let cases: Vec<(&str, &str)> = vec![
        ("/etc/passwd", "it must start with /memories"),
        ("/memories/../etc/passwd", "'..' is not allowed"),
        ("/memories/a/../../etc", "'..' is not allowed"),
        ("../memories/a", "it must start with /memories"),
        ("memories/a", "it must start with /memories"),
        ("/memoriesX", "it must start with /memories"),
        ("/memories_backup/a", "it must start with /memories"),
        ("/Memories/a", "it must start with /memories"),
        ("//memories/a", "it must start with /memories"),
        ("", "it is empty"),
        ("/memories/a\\..\\b", "'\\' is not allowed"),
        ("/memories/a\u{0}b", "control characters are not allowed"),
        ("/memories/a\nb", "control characters are not allowed"),
        ("/memories/a\tb", "control characters are not allowed"),
        ("/memories/a\rb", "control characters are not allowed"),
        ("/memories/a\u{7f}b", "control characters are not allowed"),
        ("/memories/a\u{9f}b", "control characters are not allowed"),
        (&long_path, "it is longer than 1024 bytes"),
        (&long_name, "a component is longer than 255 bytes"),
        (
            "/memories/.claude-memory.lock",
            "names starting with .claude-memory are reserved",
        ),
        (
            "/memories/x/.claude-memory-tmp",
            "names starting with .claude-memory are reserved",
        ),
        (
            "/memories/%2e%2e/etc",
            "'..' is not allowed once percent-decoded",
        ),
        (
            "/memories/%2E%2E/etc",
            "'..' is not allowed once percent-decoded",
        ),
        (
            "/memories/%252e%252e/etc",
            "'..' is not allowed once percent-decoded",
        ),
        (
            "/memories/..%2fetc",
            "'..' is not allowed once percent-decoded",
        ),
        ("/memories/a%2fb", "an encoded '/' is not allowed"),
        (
            "/memories/a%5cb",
            "'\\' is not allowed once percent-decoded",
        ),
        (
            "/memories/a%00",
            "control characters are not allowed once percent-decoded",
        ),
        ("%2fmemories/a", "it must start with /memories"),
        (
            "/memories/%2eclaude-memory.lock",
            "names starting with .claude-memory are reserved once percent-decoded",
        ),
    ];
    for (p, reason) in &cases {
        let expected = format!("Error: The path {p} is not a valid memory path: {reason}");
        err(&t, view(p), &expected);
        err(
            &t,
            json!({"command": "create", "path": p, "file_text": "x"}),
            &expected,
        );
        err(&t, replace(p, "a", Some("b")), &expected);
        err(&t, insert(p, 0, "x"), &expected);
        err(&t, json!({"command": "delete", "path": p}), &expected);
        err(&t, rename(p, "/memories/ok"), &expected);
        err(&t, rename("/memories/ok", p), &expected);
    }
    ok(&t, view("/memories"), EMPTY_ROOT);
}
