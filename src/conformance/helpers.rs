//! Shared helpers of the cases: a tool over the store under test, exact
//! assertions on results, and setup and inspection through the store.

use serde_json::{Value, json};

use crate::config::Config;
use crate::path::MemoryPath;
use crate::result::ToolResult;
use crate::store::{MemoryStore, MemoryStoreExt as _, WriteMode};
use crate::tool::MemoryTool;

pub(super) type Tool<'a> = MemoryTool<&'a dyn MemoryStore>;

pub(super) fn tool(store: &dyn MemoryStore) -> Tool<'_> {
    MemoryTool::new(store)
}

pub(super) fn tool_with(store: &dyn MemoryStore, change: impl FnOnce(&mut Config)) -> Tool<'_> {
    let mut config = Config::default();
    change(&mut config);
    MemoryTool::with_config(store, config)
}

pub(super) fn text_of(result: &ToolResult) -> &str {
    match result.text() {
        Some(t) => t,
        None => panic!("expected a text result, got {result:?}"),
    }
}

/// Asserts a successful call with exactly this text.
#[track_caller]
pub(super) fn ok(tool: &Tool<'_>, input: Value, expected: &str) {
    let result = tool.dispatch(&input);
    assert_eq!(text_of(&result), expected, "input: {input}");
    assert!(!result.is_error, "unexpected is_error for {input}");
}

/// Asserts a failed call (`is_error`) with exactly this text.
#[track_caller]
pub(super) fn err(tool: &Tool<'_>, input: Value, expected: &str) {
    let result = tool.dispatch(&input);
    assert_eq!(text_of(&result), expected, "input: {input}");
    assert!(result.is_error, "missing is_error for {input}");
}

pub(super) fn path(p: &str) -> MemoryPath {
    match MemoryPath::parse(p) {
        Ok(p) => p,
        Err(e) => panic!("test path {p} rejected: {e}"),
    }
}

/// Writes a file directly through the store (bypassing dispatch limits).
pub(super) fn put(store: &dyn MemoryStore, p: &str, data: &[u8]) {
    if let Err(e) = store.write(&path(p), data, WriteMode::Overwrite) {
        panic!("setup write of {p} failed: {e}");
    }
}

/// [`put`] for content a store may refuse to hold (binary, or larger
/// than a service allows: the managed memory stores hold UTF-8 text of
/// at most 102,400 bytes). Whether it holds it; a refusal must be
/// [`StoreError::Invalid`](crate::store::StoreError::Invalid) with
/// nothing written, and the case then has nothing more to check.
pub(super) fn put_unless_refused(store: &dyn MemoryStore, p: &str, data: &[u8]) -> bool {
    match store.write(&path(p), data, WriteMode::Overwrite) {
        Ok(_) => true,
        Err(crate::store::StoreError::Invalid { .. }) => {
            assert!(!exists(store, p), "a refused write of {p} left a file");
            false
        }
        Err(e) => panic!("setup write of {p} failed: {e}"),
    }
}

/// The bytes of a file, read through the store.
pub(super) fn bytes(store: &dyn MemoryStore, p: &str) -> Vec<u8> {
    match store.read(&path(p), u64::MAX) {
        Ok(f) => f.data,
        Err(e) => panic!("read of {p} failed: {e}"),
    }
}

pub(super) fn exists(store: &dyn MemoryStore, p: &str) -> bool {
    match store.stat(&path(p)) {
        Ok(m) => m.is_some(),
        Err(e) => panic!("stat of {p} failed: {e}"),
    }
}

pub(super) fn create(tool: &Tool<'_>, p: &str, text: &str) {
    ok(
        tool,
        json!({"command": "create", "path": p, "file_text": text}),
        &format!("File created successfully at: {p}"),
    );
}

pub(super) fn view(p: &str) -> Value {
    json!({"command": "view", "path": p})
}

pub(super) fn view_range(p: &str, range: Value) -> Value {
    json!({"command": "view", "path": p, "view_range": range})
}

pub(super) const EDITED: &str =
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):";

pub(super) const EMPTY_ROOT: &str = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories";

pub(super) fn replace(p: &str, old: &str, new: Option<&str>) -> Value {
    match new {
        Some(new) => json!({"command": "str_replace", "path": p, "old_str": old, "new_str": new}),
        None => json!({"command": "str_replace", "path": p, "old_str": old}),
    }
}

pub(super) fn insert(p: &str, line: i64, text: &str) -> Value {
    json!({"command": "insert", "path": p, "insert_line": line, "insert_text": text})
}

pub(super) fn rename(from: &str, to: &str) -> Value {
    json!({"command": "rename", "old_path": from, "new_path": to})
}
