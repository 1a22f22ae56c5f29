//! Editing-command cases: `create`, `str_replace`, `insert`, `delete` and
//! `rename`, golden strings in full.

use serde_json::json;

use super::helpers::{
    EDITED, EMPTY_ROOT, bytes, create, err, exists, insert, ok, rename, replace, tool, tool_with,
    view,
};
use crate::config::CreatePolicy;
use crate::store::MemoryStore;

const GREEK: &str = "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\n";

// ---- create -------------------------------------------------------------------

/// Content is stored byte for byte; missing parents are created.
pub fn create_stores_exact_bytes_and_parents(store: &dyn MemoryStore) {
    let t = tool(store);
    let text = "tab\there\r\nunicode é ✓\nno final newline";
    create(&t, "/memories/exact.txt", text);
    assert_eq!(bytes(store, "/memories/exact.txt"), text.as_bytes());
    create(&t, "/memories/p/q/r.txt", "deep");
    assert!(exists(store, "/memories/p/q"));
    assert_eq!(bytes(store, "/memories/p/q/r.txt"), b"deep");
    create(&t, "/memories//echo.txt", "");
    assert_eq!(bytes(store, "/memories/echo.txt"), b"");
    create(&t, "/memories/100%.md", "percent");
    assert_eq!(bytes(store, "/memories/100%.md"), b"percent");
}

/// Existing files and directories, the root, a trailing `/` and a parent
/// that is a file are refused, and nothing changes.
pub fn create_refuses_existing_and_invalid_targets(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a.txt", "original");
    let c = |p: &str| json!({"command": "create", "path": p, "file_text": "new"});
    err(
        &t,
        c("/memories/a.txt"),
        "Error: File /memories/a.txt already exists",
    );
    assert_eq!(bytes(store, "/memories/a.txt"), b"original");
    create(&t, "/memories/dir/b.txt", "b");
    err(
        &t,
        c("/memories/dir"),
        "Error: File /memories/dir already exists",
    );
    err(&t, c("/memories"), "Error: File /memories already exists");
    err(&t, c("/memories/"), "Error: File /memories already exists");
    err(
        &t,
        c("/memories/new.txt/"),
        "Error: The path /memories/new.txt/ ends in /, which cannot name a file",
    );
    err(
        &t,
        c("/memories/a.txt/child.txt"),
        "Error: Cannot create /memories/a.txt/child.txt: /memories/a.txt is a file, not a directory",
    );
    err(
        &t,
        c("/memories//a.txt/x/y.txt"),
        "Error: Cannot create /memories//a.txt/x/y.txt: /memories/a.txt is a file, not a directory",
    );
    assert!(!exists(store, "/memories/new.txt"));
    ok(
        &t,
        view("/memories"),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         9B\t/memories\n\
         8B\t/memories/a.txt\n\
         1B\t/memories/dir/\n\
         1B\t/memories/dir/b.txt",
    );
}

/// `CreatePolicy::Overwrite` replaces files but never a directory.
pub fn create_policy_overwrite_replaces_files_only(store: &dyn MemoryStore) {
    let t = tool_with(store, |c| c.create_policy = CreatePolicy::Overwrite);
    create(&t, "/memories/a.txt", "one");
    create(&t, "/memories/a.txt", "two");
    assert_eq!(bytes(store, "/memories/a.txt"), b"two");
    create(&t, "/memories/d/x.txt", "x");
    err(
        &t,
        json!({"command": "create", "path": "/memories/d", "file_text": "y"}),
        "Error: File /memories/d already exists",
    );
    assert_eq!(bytes(store, "/memories/d/x.txt"), b"x");
}

// ---- str_replace --------------------------------------------------------------

/// The snippet runs from two lines before the change to two lines after
/// the inserted text, clipped to the file.
pub fn str_replace_shows_a_snippet(store: &dyn MemoryStore) {
    let t = tool(store);
    let g = "/memories/greek.txt";
    create(&t, g, GREEK);
    ok(
        &t,
        replace(g, "delta", Some("DELTA")),
        &format!(
            "{EDITED}\n     2\tbeta\n     3\tgamma\n     4\tDELTA\n     5\tepsilon\n     6\tzeta"
        ),
    );
    assert_eq!(
        bytes(store, g),
        b"alpha\nbeta\ngamma\nDELTA\nepsilon\nzeta\neta\n"
    );
    // A multi-line new_str: its final newline ends line 5, not a new one.
    ok(
        &t,
        replace(g, "gamma", Some("g1\ng2\ng3\n")),
        &format!(
            "{EDITED}\n     1\talpha\n     2\tbeta\n     3\tg1\n     4\tg2\n     5\tg3\n     6\t\n     7\tDELTA"
        ),
    );
    // new_str absent deletes old_str; the snippet ends on the first changed line.
    ok(
        &t,
        replace(g, "alpha\n", None),
        &format!("{EDITED}\n     1\tbeta\n     2\tg1\n     3\tg2"),
    );
    // Clipped at the end of the file.
    ok(
        &t,
        replace(g, "zeta\neta", Some("Z")),
        &format!("{EDITED}\n     6\tDELTA\n     7\tepsilon\n     8\tZ"),
    );
    assert_eq!(bytes(store, g), b"beta\ng1\ng2\ng3\n\nDELTA\nepsilon\nZ\n");
}

/// No match, several matches, an empty `old_str` and a missing file.
pub fn str_replace_refuses_missing_and_ambiguous_text(store: &dyn MemoryStore) {
    let t = tool(store);
    let g = "/memories/greek.txt";
    create(&t, g, GREEK);
    err(
        &t,
        replace(g, "omega", Some("x")),
        "No replacement was performed, old_str `omega` did not appear verbatim in /memories/greek.txt.",
    );
    err(
        &t,
        replace(g, "eta", Some("x")),
        "No replacement was performed. Multiple occurrences of old_str `eta` in lines: 2, 6, 7. Please ensure it is unique",
    );
    err(
        &t,
        replace(g, "", Some("x")),
        "Error: old_str must not be empty.",
    );
    err(
        &t,
        replace("/memories/nope.txt", "a", Some("b")),
        "Error: The path /memories/nope.txt does not exist. Please provide a valid path.",
    );
    create(&t, "/memories/dir/f.txt", "f");
    err(
        &t,
        replace("/memories/dir", "f", Some("g")),
        "Error: The path /memories/dir does not exist. Please provide a valid path.",
    );
    let long = "x".repeat(250);
    err(
        &t,
        replace(g, &long, Some("y")),
        &format!(
            "No replacement was performed, old_str `{}…` did not appear verbatim in /memories/greek.txt.",
            "x".repeat(200)
        ),
    );
    assert_eq!(bytes(store, g), GREEK.as_bytes());
    create(&t, "/memories/same.txt", "aa aa\nb\n");
    err(
        &t,
        replace("/memories/same.txt", "aa", Some("c")),
        "No replacement was performed. Multiple occurrences of old_str `aa` in lines: 1. Please ensure it is unique",
    );
    // SPEC §3: at most 100 line numbers, then how many were left out. 100
    // lines exactly are all listed; 250 lines list 100 and count 150.
    let hundred = "k\n".repeat(100);
    create(&t, "/memories/hundred.txt", &hundred);
    let all: Vec<String> = (1..=100).map(|n| n.to_string()).collect();
    err(
        &t,
        replace("/memories/hundred.txt", "k", Some("c")),
        &format!(
            "No replacement was performed. Multiple occurrences of old_str `k` in lines: {}. Please ensure it is unique",
            all.join(", ")
        ),
    );
    let many = "k k\n".repeat(250);
    create(&t, "/memories/many.txt", &many);
    err(
        &t,
        replace("/memories/many.txt", "k", Some("c")),
        &format!(
            "No replacement was performed. Multiple occurrences of old_str `k` in lines: {}, … (150 more). Please ensure it is unique",
            all.join(", ")
        ),
    );
    assert_eq!(bytes(store, "/memories/many.txt"), many.as_bytes());
}

/// Overlaps, literal `$`, CRLF kept byte for byte, emptied files.
pub fn str_replace_edge_cases(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a.txt", "aaa\n");
    ok(
        &t,
        replace("/memories/a.txt", "aa", Some("b")),
        &format!("{EDITED}\n     1\tba"),
    );
    create(&t, "/memories/dollar.txt", "x\n");
    ok(
        &t,
        replace("/memories/dollar.txt", "x", Some("$1 $0 \\1 ${x}")),
        &format!("{EDITED}\n     1\t$1 $0 \\1 ${{x}}"),
    );
    create(&t, "/memories/crlf.txt", "a\r\nb\r\nc");
    ok(
        &t,
        replace("/memories/crlf.txt", "b", Some("B")),
        &format!("{EDITED}\n     1\ta\n     2\tB\n     3\tc"),
    );
    assert_eq!(bytes(store, "/memories/crlf.txt"), b"a\r\nB\r\nc");
    create(&t, "/memories/only.txt", "only");
    ok(
        &t,
        replace("/memories/only.txt", "only", Some("")),
        // An empty file has no lines to show: the header alone (SPEC §3).
        EDITED,
    );
    assert_eq!(bytes(store, "/memories/only.txt"), b"");
    create(&t, "/memories/null-new-str.txt", "a\nb\n");
    ok(
        &t,
        json!({"command": "str_replace", "path": "/memories/null-new-str.txt", "old_str": "b", "new_str": null}),
        &format!("{EDITED}\n     1\ta\n     2\t"),
    );
}

// ---- insert -------------------------------------------------------------------

/// Lines go in after `insert_line`; the file ends with a newline after.
pub fn insert_adds_lines(store: &dyn MemoryStore) {
    let t = tool(store);
    let f = "/memories/ins.txt";
    let edited = "The file /memories/ins.txt has been edited.";
    create(&t, f, "one\ntwo\n");
    ok(&t, insert(f, 0, "zero"), edited);
    assert_eq!(bytes(store, f), b"zero\none\ntwo\n");
    ok(&t, insert(f, 3, "three\n"), edited);
    assert_eq!(bytes(store, f), b"zero\none\ntwo\nthree\n");
    ok(&t, insert(f, 1, "a\nb"), edited);
    assert_eq!(bytes(store, f), b"zero\na\nb\none\ntwo\nthree\n");
    ok(&t, insert(f, 1, ""), edited);
    assert_eq!(bytes(store, f), b"zero\n\na\nb\none\ntwo\nthree\n");
    create(&t, "/memories/open.txt", "x");
    ok(
        &t,
        insert("/memories/open.txt", 1, "y"),
        "The file /memories/open.txt has been edited.",
    );
    assert_eq!(bytes(store, "/memories/open.txt"), b"x\ny\n");
    create(&t, "/memories/open2.txt", "x");
    ok(
        &t,
        insert("/memories/open2.txt", 0, "y"),
        "The file /memories/open2.txt has been edited.",
    );
    assert_eq!(bytes(store, "/memories/open2.txt"), b"y\nx\n");
    create(&t, "/memories/empty.txt", "");
    ok(
        &t,
        insert("/memories/empty.txt", 0, "a"),
        "The file /memories/empty.txt has been edited.",
    );
    assert_eq!(bytes(store, "/memories/empty.txt"), b"a\n");
    create(&t, "/memories/crlf.txt", "a\r\nb\r\n");
    ok(
        &t,
        insert("/memories/crlf.txt", 1, "x"),
        "The file /memories/crlf.txt has been edited.",
    );
    assert_eq!(bytes(store, "/memories/crlf.txt"), b"a\r\nx\nb\r\n");
}

/// Out-of-range lines and missing files, exactly; nothing changes.
pub fn insert_errors(store: &dyn MemoryStore) {
    let t = tool(store);
    let f = "/memories/ins.txt";
    create(&t, f, "one\ntwo\n");
    err(
        &t,
        insert(f, 3, "x"),
        "Error: Invalid `insert_line` parameter: 3. It should be within the range of lines of the file: [0, 2]",
    );
    err(
        &t,
        insert(f, -1, "x"),
        "Error: Invalid `insert_line` parameter: -1. It should be within the range of lines of the file: [0, 2]",
    );
    err(
        &t,
        insert("/memories/none.txt", 0, "x"),
        "Error: The path /memories/none.txt does not exist",
    );
    create(&t, "/memories/d/x.txt", "x");
    err(
        &t,
        insert("/memories/d", 0, "x"),
        "Error: The path /memories/d does not exist",
    );
    assert_eq!(bytes(store, f), b"one\ntwo\n");
    assert!(!exists(store, "/memories/none.txt"));
}

// ---- delete -------------------------------------------------------------------

/// Files, and directories with everything below them.
pub fn delete_files_and_directories(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a.txt", "a");
    ok(
        &t,
        json!({"command": "delete", "path": "/memories/a.txt"}),
        "Successfully deleted /memories/a.txt",
    );
    assert!(!exists(store, "/memories/a.txt"));
    create(&t, "/memories/d/e/f.txt", "f");
    create(&t, "/memories/d/.hidden", "h");
    ok(
        &t,
        json!({"command": "delete", "path": "/memories/d/"}),
        "Successfully deleted /memories/d/",
    );
    assert!(!exists(store, "/memories/d"));
    ok(&t, view("/memories"), EMPTY_ROOT);
}

/// Missing paths and the root, by any spelling.
pub fn delete_errors(store: &dyn MemoryStore) {
    let t = tool(store);
    let d = |p: &str| json!({"command": "delete", "path": p});
    err(
        &t,
        d("/memories/a.txt"),
        "Error: The path /memories/a.txt does not exist",
    );
    create(&t, "/memories/f.txt", "f");
    err(
        &t,
        d("/memories/f.txt/x"),
        "Error: The path /memories/f.txt/x does not exist",
    );
    for root in ["/memories", "/memories/", "/memories/.", "/memories//"] {
        err(
            &t,
            d(root),
            "Error: Cannot delete the /memories directory itself",
        );
    }
    assert_eq!(bytes(store, "/memories/f.txt"), b"f");
}

// ---- rename -------------------------------------------------------------------

/// Files and directories move; missing parents are made.
pub fn rename_files_and_directories(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a.txt", "a");
    ok(
        &t,
        rename("/memories/a.txt", "/memories/x/y/b.txt"),
        "Successfully renamed /memories/a.txt to /memories/x/y/b.txt",
    );
    assert!(!exists(store, "/memories/a.txt"));
    assert_eq!(bytes(store, "/memories/x/y/b.txt"), b"a");
    create(&t, "/memories/d/e.txt", "e");
    ok(
        &t,
        rename("/memories/d", "/memories/moved"),
        "Successfully renamed /memories/d to /memories/moved",
    );
    assert_eq!(bytes(store, "/memories/moved/e.txt"), b"e");
    assert!(!exists(store, "/memories/d"));
    ok(
        &t,
        rename("/memories/moved/", "/memories/x/moved"),
        "Successfully renamed /memories/moved/ to /memories/x/moved",
    );
    assert_eq!(bytes(store, "/memories/x/moved/e.txt"), b"e");
}

/// Checks run in SPEC's order and refuse without changing anything.
pub fn rename_errors_in_order(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a.txt", "a");
    create(&t, "/memories/b.txt", "b");
    create(&t, "/memories/d/e.txt", "e");
    err(
        &t,
        rename("/etc/x", "/memories"),
        "Error: The path /etc/x is not a valid memory path: it must start with /memories",
    );
    err(
        &t,
        rename("/memories/a.txt", "/memories/../x"),
        "Error: The path /memories/../x is not a valid memory path: '..' is not allowed",
    );
    err(
        &t,
        rename("/memories", "/memories/x"),
        "Error: Cannot rename the /memories directory itself",
    );
    err(
        &t,
        rename("/memories/.", "/memories/x"),
        "Error: Cannot rename the /memories directory itself",
    );
    err(
        &t,
        rename("/memories/nope", "/memories/nope/x"),
        "Error: The path /memories/nope does not exist",
    );
    err(
        &t,
        rename("/memories/nope", "/memories/b.txt"),
        "Error: The path /memories/nope does not exist",
    );
    err(
        &t,
        rename("/memories/d", "/memories/d/sub"),
        "Error: Cannot move /memories/d into itself",
    );
    err(
        &t,
        rename("/memories/a.txt", "/memories/b.txt"),
        "Error: The destination /memories/b.txt already exists",
    );
    err(
        &t,
        rename("/memories/a.txt", "/memories/a.txt"),
        "Error: The destination /memories/a.txt already exists",
    );
    err(
        &t,
        rename("/memories/a.txt", "/memories"),
        "Error: The destination /memories already exists",
    );
    err(
        &t,
        rename("/memories/d", "/memories/a.txt/d"),
        "Error: Cannot move /memories/d to /memories/a.txt/d: /memories/a.txt is a file, not a directory",
    );
    assert_eq!(bytes(store, "/memories/a.txt"), b"a");
    assert_eq!(bytes(store, "/memories/b.txt"), b"b");
    assert_eq!(bytes(store, "/memories/d/e.txt"), b"e");
    assert!(!exists(store, "/memories/x"));
}
