//! The conformance suite: one set of behaviour checks that every
//! [`MemoryStore`] must pass, built-in or your own.
//!
//! Each case takes a fresh, empty store and panics (like `assert!`) on the
//! first difference from SPEC. Expected strings are written out in full
//! here, never rebuilt with the crate's own rendering.
//!
//! Run every case as its own `#[test]` with [`conformance_tests!`](crate::conformance_tests):
//!
//! ```
//! mod in_memory {
//!     claude_memory::conformance_tests!(|run| run(&claude_memory::InMemoryStore::new()));
//! }
//! ```
//!
//! The closure receives `run` and calls it with a fresh store, so it can
//! set up and tear down whatever the store needs (a temporary directory, a
//! database schema) around the call.

use serde_json::{Value, json};

use crate::config::{Config, CreatePolicy};
use crate::path::MemoryPath;
use crate::result::{Content, ImageFormat, ToolResult};
use crate::store::{EntryKind, MemoryStore, StoreError, WriteMode};
use crate::tool::MemoryTool;

/// A conformance case: checks one behaviour on a fresh, empty store.
pub type Case = fn(&dyn MemoryStore);

/// Runs `case` on a store provided by `with`, which calls its argument once
/// with a fresh, empty store.
pub fn run_case(case: Case, with: impl FnOnce(&dyn Fn(&dyn MemoryStore))) {
    with(&|store| case(store));
}

/// Runs every case in [`CASES`], each on its own fresh store.
pub fn run_all(with: impl Fn(&dyn Fn(&dyn MemoryStore))) {
    for (_, case) in CASES {
        run_case(*case, &with);
    }
}

/// Generates one `#[test]` per conformance case, in the current module.
///
/// The argument is a closure `|run| …` that calls `run(&store)` with a
/// fresh, empty store (see [`conformance`](crate::conformance)).
#[macro_export]
macro_rules! conformance_tests {
    ($with:expr) => {
        $crate::__conformance_tests!($with;
            view_of_an_empty_store_lists_the_root,
            directory_view_lists_two_levels_with_sizes,
            directory_view_prints_the_normalised_path,
            directory_view_is_truncated_at_the_limit,
            file_view_numbers_lines,
            file_view_handles_empty_crlf_and_unicode,
            file_view_range_selects_and_clamps,
            file_view_range_errors,
            file_view_is_truncated_at_whole_lines,
            file_view_refuses_too_many_lines,
            view_of_a_missing_path,
            view_of_non_utf8_text,
            view_returns_real_images_only,
            create_stores_exact_bytes_and_parents,
            create_refuses_existing_and_invalid_targets,
            create_policy_overwrite_replaces_files_only,
            str_replace_shows_a_snippet,
            str_replace_refuses_missing_and_ambiguous_text,
            str_replace_edge_cases,
            insert_adds_lines,
            insert_errors,
            delete_files_and_directories,
            delete_errors,
            rename_files_and_directories,
            rename_errors_in_order,
            file_size_limit_changes_nothing,
            store_size_limit_changes_nothing,
            bad_input_gets_exact_errors,
            tool_use_blocks_echo_their_id,
            hostile_paths_are_rejected_and_touch_nothing,
            store_write_modes,
            store_rename_and_delete,
            store_list_and_stat,
            concurrent_edits_are_never_lost,
            oversized_files_are_viewed_but_never_read_whole_for_edits,
            store_update_writes_or_aborts,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($with:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::run_case($crate::conformance::$case, $with);
        }
    )*};
}

/// Every case, by name, for runners that do not use the macro.
pub const CASES: &[(&str, Case)] = &[
    (
        "view_of_an_empty_store_lists_the_root",
        view_of_an_empty_store_lists_the_root,
    ),
    (
        "directory_view_lists_two_levels_with_sizes",
        directory_view_lists_two_levels_with_sizes,
    ),
    (
        "directory_view_prints_the_normalised_path",
        directory_view_prints_the_normalised_path,
    ),
    (
        "directory_view_is_truncated_at_the_limit",
        directory_view_is_truncated_at_the_limit,
    ),
    ("file_view_numbers_lines", file_view_numbers_lines),
    (
        "file_view_handles_empty_crlf_and_unicode",
        file_view_handles_empty_crlf_and_unicode,
    ),
    (
        "file_view_range_selects_and_clamps",
        file_view_range_selects_and_clamps,
    ),
    ("file_view_range_errors", file_view_range_errors),
    (
        "file_view_is_truncated_at_whole_lines",
        file_view_is_truncated_at_whole_lines,
    ),
    (
        "file_view_refuses_too_many_lines",
        file_view_refuses_too_many_lines,
    ),
    ("view_of_a_missing_path", view_of_a_missing_path),
    ("view_of_non_utf8_text", view_of_non_utf8_text),
    (
        "view_returns_real_images_only",
        view_returns_real_images_only,
    ),
    (
        "create_stores_exact_bytes_and_parents",
        create_stores_exact_bytes_and_parents,
    ),
    (
        "create_refuses_existing_and_invalid_targets",
        create_refuses_existing_and_invalid_targets,
    ),
    (
        "create_policy_overwrite_replaces_files_only",
        create_policy_overwrite_replaces_files_only,
    ),
    ("str_replace_shows_a_snippet", str_replace_shows_a_snippet),
    (
        "str_replace_refuses_missing_and_ambiguous_text",
        str_replace_refuses_missing_and_ambiguous_text,
    ),
    ("str_replace_edge_cases", str_replace_edge_cases),
    ("insert_adds_lines", insert_adds_lines),
    ("insert_errors", insert_errors),
    ("delete_files_and_directories", delete_files_and_directories),
    ("delete_errors", delete_errors),
    ("rename_files_and_directories", rename_files_and_directories),
    ("rename_errors_in_order", rename_errors_in_order),
    (
        "file_size_limit_changes_nothing",
        file_size_limit_changes_nothing,
    ),
    (
        "store_size_limit_changes_nothing",
        store_size_limit_changes_nothing,
    ),
    ("bad_input_gets_exact_errors", bad_input_gets_exact_errors),
    (
        "tool_use_blocks_echo_their_id",
        tool_use_blocks_echo_their_id,
    ),
    (
        "hostile_paths_are_rejected_and_touch_nothing",
        hostile_paths_are_rejected_and_touch_nothing,
    ),
    ("store_write_modes", store_write_modes),
    ("store_rename_and_delete", store_rename_and_delete),
    ("store_list_and_stat", store_list_and_stat),
    (
        "concurrent_edits_are_never_lost",
        concurrent_edits_are_never_lost,
    ),
];

// ---- helpers ----------------------------------------------------------------

type Tool<'a> = MemoryTool<&'a dyn MemoryStore>;

fn tool(store: &dyn MemoryStore) -> Tool<'_> {
    MemoryTool::new(store)
}

fn tool_with(store: &dyn MemoryStore, change: impl FnOnce(&mut Config)) -> Tool<'_> {
    let mut config = Config::default();
    change(&mut config);
    MemoryTool::with_config(store, config)
}

fn text_of(result: &ToolResult) -> &str {
    match result.text() {
        Some(t) => t,
        None => panic!("expected a text result, got {result:?}"),
    }
}

/// Asserts a successful call with exactly this text.
#[track_caller]
fn ok(tool: &Tool<'_>, input: Value, expected: &str) {
    let result = tool.dispatch(&input);
    assert_eq!(text_of(&result), expected, "input: {input}");
    assert!(!result.is_error, "unexpected is_error for {input}");
}

/// Asserts a failed call (`is_error`) with exactly this text.
#[track_caller]
fn err(tool: &Tool<'_>, input: Value, expected: &str) {
    let result = tool.dispatch(&input);
    assert_eq!(text_of(&result), expected, "input: {input}");
    assert!(result.is_error, "missing is_error for {input}");
}

fn path(p: &str) -> MemoryPath {
    match MemoryPath::parse(p) {
        Ok(p) => p,
        Err(e) => panic!("test path {p} rejected: {e}"),
    }
}

/// Writes a file directly through the store (bypassing dispatch limits).
fn put(store: &dyn MemoryStore, p: &str, data: &[u8]) {
    if let Err(e) = store.write(&path(p), data, WriteMode::Overwrite) {
        panic!("setup write of {p} failed: {e}");
    }
}

/// The bytes of a file, read through the store.
fn bytes(store: &dyn MemoryStore, p: &str) -> Vec<u8> {
    match store.read(&path(p), u64::MAX) {
        Ok(f) => f.data,
        Err(e) => panic!("read of {p} failed: {e}"),
    }
}

fn exists(store: &dyn MemoryStore, p: &str) -> bool {
    match store.stat(&path(p)) {
        Ok(m) => m.is_some(),
        Err(e) => panic!("stat of {p} failed: {e}"),
    }
}

fn create(tool: &Tool<'_>, p: &str, text: &str) {
    ok(
        tool,
        json!({"command": "create", "path": p, "file_text": text}),
        &format!("File created successfully at: {p}"),
    );
}

fn view(p: &str) -> Value {
    json!({"command": "view", "path": p})
}

fn view_range(p: &str, range: Value) -> Value {
    json!({"command": "view", "path": p, "view_range": range})
}

const EMPTY_ROOT: &str = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories";

const GREEK: &str = "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\n";

const EDITED: &str =
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):";

// ---- view: directories --------------------------------------------------------

/// The first view of an empty store is the header and the root line.
pub fn view_of_an_empty_store_lists_the_root(store: &dyn MemoryStore) {
    let t = tool(store);
    ok(&t, view("/memories"), EMPTY_ROOT);
    ok(
        &t,
        json!({"command": "view", "path": "/memories", "view_range": [1, 2]}),
        EMPTY_ROOT,
    );
}

/// Two levels, depth first, byte order, sizes of whole visible subtrees;
/// hidden names and node_modules left out.
pub fn directory_view_lists_two_levels_with_sizes(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/notes.md", "hello\n");
    create(&t, "/memories/projects/alpha/spec.md", &"x".repeat(1536));
    create(&t, "/memories/projects/readme.txt", "abc");
    create(&t, "/memories/projects/alpha/deep/z.txt", "12345");
    create(&t, "/memories/.hidden/secret.txt", "s");
    create(&t, "/memories/node_modules/pkg.json", "{}");
    create(&t, "/memories/projects/.cache", "cc");
    create(&t, "/memories/Zeta.md", "");
    ok(
        &t,
        view("/memories"),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         1.5K\t/memories\n\
         0B\t/memories/Zeta.md\n\
         6B\t/memories/notes.md\n\
         1.5K\t/memories/projects/\n\
         1.5K\t/memories/projects/alpha/\n\
         3B\t/memories/projects/readme.txt",
    );
    ok(
        &t,
        view("/memories/projects"),
        "Here're the files and directories up to 2 levels deep in /memories/projects, excluding hidden items and node_modules:\n\
         1.5K\t/memories/projects\n\
         1.5K\t/memories/projects/alpha/\n\
         5B\t/memories/projects/alpha/deep/\n\
         1.5K\t/memories/projects/alpha/spec.md\n\
         3B\t/memories/projects/readme.txt",
    );
    // Hidden files are left out of listings but usable directly.
    ok(
        &t,
        view("/memories/.hidden/secret.txt"),
        "Here's the content of /memories/.hidden/secret.txt with line numbers:\n     1\ts",
    );
}

/// A directory view prints the normalised path in the header and lines.
pub fn directory_view_prints_the_normalised_path(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/a/b.txt", "b");
    for spelling in ["/memories/", "/memories//", "/memories/."] {
        ok(
            &t,
            view(spelling),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
             1B\t/memories\n\
             1B\t/memories/a/\n\
             1B\t/memories/a/b.txt",
        );
    }
    ok(
        &t,
        view("/memories//a/./"),
        "Here're the files and directories up to 2 levels deep in /memories/a, excluding hidden items and node_modules:\n\
         1B\t/memories/a\n\
         1B\t/memories/a/b.txt",
    );
}

/// A listing over the output limit is cut at a line and says how many
/// entries were left out.
pub fn directory_view_is_truncated_at_the_limit(store: &dyn MemoryStore) {
    let t = tool(store);
    for (name, text) in [("a.txt", "x"), ("b.txt", "y"), ("c.txt", "z")] {
        create(&t, &format!("/memories/{name}"), text);
    }
    // "3B\t/memories" is 12 characters, "1B\t/memories/a.txt" 18: 12+1+18 = 31.
    let t = tool_with(store, |c| c.view_output_limit = 31);
    ok(
        &t,
        view("/memories"),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         3B\t/memories\n\
         1B\t/memories/a.txt\n\
         [Output truncated: 2 more entries not shown.]",
    );
    let t = tool_with(store, |c| c.view_output_limit = 1);
    ok(
        &t,
        view("/memories"),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         3B\t/memories\n\
         [Output truncated: 3 more entries not shown.]",
    );
    // Many entries: the count of those left out stays exact. The lines are
    // 14, 18 (x3), 21 and 22 characters: 14+3*19+22+4*23 = 185; a fifth
    // file line would make 208 > 200.
    for i in 0..300 {
        put(store, &format!("/memories/many/f{i:03}"), b"x");
    }
    let t = tool_with(store, |c| c.view_output_limit = 200);
    ok(
        &t,
        view("/memories"),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         303B\t/memories\n\
         1B\t/memories/a.txt\n\
         1B\t/memories/b.txt\n\
         1B\t/memories/c.txt\n\
         300B\t/memories/many/\n\
         1B\t/memories/many/f000\n\
         1B\t/memories/many/f001\n\
         1B\t/memories/many/f002\n\
         1B\t/memories/many/f003\n\
         [Output truncated: 296 more entries not shown.]",
    );
}

// ---- view: files --------------------------------------------------------------

/// Lines are numbered `{:>6}\t{line}`; the path is echoed as sent.
pub fn file_view_numbers_lines(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/notes.md", "line one\nline two\n");
    ok(
        &t,
        view("/memories/notes.md"),
        "Here's the content of /memories/notes.md with line numbers:\n     1\tline one\n     2\tline two",
    );
    ok(
        &t,
        view("/memories//notes.md/"),
        "Here's the content of /memories//notes.md/ with line numbers:\n     1\tline one\n     2\tline two",
    );
    let many: String = (1..=12).map(|i| format!("l{i}\n")).collect();
    create(&t, "/memories/many.txt", &many);
    ok(
        &t,
        view_range("/memories/many.txt", json!([9, 11])),
        "Here's the content of /memories/many.txt with line numbers:\n     9\tl9\n    10\tl10\n    11\tl11",
    );
}

/// Empty files show the header alone; `\r\n` shows as a line end; text is
/// shown as it is.
pub fn file_view_handles_empty_crlf_and_unicode(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/empty.txt", "");
    ok(
        &t,
        view("/memories/empty.txt"),
        "Here's the content of /memories/empty.txt with line numbers:",
    );
    create(&t, "/memories/crlf.txt", "one\r\ntwo\r\n");
    ok(
        &t,
        view("/memories/crlf.txt"),
        "Here's the content of /memories/crlf.txt with line numbers:\n     1\tone\n     2\ttwo",
    );
    create(&t, "/memories/blank.txt", "\n\nx");
    ok(
        &t,
        view("/memories/blank.txt"),
        "Here's the content of /memories/blank.txt with line numbers:\n     1\t\n     2\t\n     3\tx",
    );
    create(&t, "/memories/日本.md", "こんにちは\ttab");
    ok(
        &t,
        view("/memories/日本.md"),
        "Here's the content of /memories/日本.md with line numbers:\n     1\tこんにちは\ttab",
    );
}

/// `view_range` picks lines, `-1` means the end, a large end is clamped,
/// and it is ignored for directories.
pub fn file_view_range_selects_and_clamps(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/five.txt", "a\nb\nc\nd\ne\n");
    let header = "Here's the content of /memories/five.txt with line numbers:";
    ok(
        &t,
        view_range("/memories/five.txt", json!([2, 3])),
        &format!("{header}\n     2\tb\n     3\tc"),
    );
    ok(
        &t,
        view_range("/memories/five.txt", json!([4, -1])),
        &format!("{header}\n     4\td\n     5\te"),
    );
    ok(
        &t,
        view_range("/memories/five.txt", json!([4, 100])),
        &format!("{header}\n     4\td\n     5\te"),
    );
    ok(
        &t,
        view_range("/memories/five.txt", json!([5, 5])),
        &format!("{header}\n     5\te"),
    );
    ok(
        &t,
        view_range("/memories/five.txt", Value::Null),
        &format!("{header}\n     1\ta\n     2\tb\n     3\tc\n     4\td\n     5\te"),
    );
}

/// Every `view_range` error, exactly.
pub fn file_view_range_errors(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/five.txt", "a\nb\nc\nd\ne\n");
    let f = "/memories/five.txt";
    err(
        &t,
        view_range(f, json!([0, 2])),
        "Error: Invalid `view_range` parameter: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 5]",
    );
    err(
        &t,
        view_range(f, json!([6, 6])),
        "Error: Invalid `view_range` parameter: [6, 6]. Its first element `6` should be within the range of lines of the file: [1, 5]",
    );
    err(
        &t,
        view_range(f, json!([-1, -1])),
        "Error: Invalid `view_range` parameter: [-1, -1]. Its first element `-1` should be within the range of lines of the file: [1, 5]",
    );
    err(
        &t,
        view_range(f, json!([3, 2])),
        "Error: Invalid `view_range` parameter: [3, 2]. Its second element `2` should be larger or equal than its first `3`.",
    );
    err(
        &t,
        view_range(f, json!([3, -2])),
        "Error: Invalid `view_range` parameter: [3, -2]. Its second element `-2` should be larger or equal than its first `3`.",
    );
    err(
        &t,
        view_range(f, json!([1])),
        "Error: Invalid `view_range` parameter: [1]. It should be a list of two integers.",
    );
    err(
        &t,
        view_range(f, json!([1, 2, 3])),
        "Error: Invalid `view_range` parameter: [1,2,3]. It should be a list of two integers.",
    );
    err(
        &t,
        view_range(f, json!([1, 2.0])),
        "Error: Invalid `view_range` parameter: [1,2.0]. It should be a list of two integers.",
    );
    err(
        &t,
        view_range(f, json!([1, "2"])),
        "Error: Invalid `view_range` parameter: [1,\"2\"]. It should be a list of two integers.",
    );
    err(
        &t,
        view_range(f, json!("1-2")),
        "Error: Invalid `view_range` parameter: \"1-2\". It should be a list of two integers.",
    );
    create(&t, "/memories/empty.txt", "");
    err(
        &t,
        view_range("/memories/empty.txt", json!([1, 1])),
        "Error: Invalid `view_range` parameter: [1, 1]. Its first element `1` should be within the range of lines of the file: [1, 0]",
    );
    err(
        &t,
        view_range("/memories/empty.txt", json!([1, -1])),
        "Error: Invalid `view_range` parameter: [1, -1]. Its first element `1` should be within the range of lines of the file: [1, 0]",
    );
    // Parameter types are checked before the path.
    err(
        &t,
        view_range("/etc/passwd", json!([1])),
        "Error: Invalid `view_range` parameter: [1]. It should be a list of two integers.",
    );
}

/// Views over the output limit show whole lines (at least one) and say
/// which lines were shown; characters, not bytes, are counted.
pub fn file_view_is_truncated_at_whole_lines(store: &dyn MemoryStore) {
    create(
        &tool(store),
        "/memories/four.txt",
        "aaaa\nbbbb\ncccc\ndddd\n",
    );
    // Each numbered line is 11 characters: two lines and a newline are 23.
    let t = tool_with(store, |c| c.view_output_limit = 30);
    ok(
        &t,
        view("/memories/four.txt"),
        "Here's the content of /memories/four.txt with line numbers:\n     1\taaaa\n     2\tbbbb\n[Output truncated: showing lines 1-2 of 4. Use view_range to see the rest.]",
    );
    ok(
        &t,
        view_range("/memories/four.txt", json!([2, -1])),
        "Here's the content of /memories/four.txt with line numbers:\n     2\tbbbb\n     3\tcccc\n[Output truncated: showing lines 2-3 of 4. Use view_range to see the rest.]",
    );
    let t = tool_with(store, |c| c.view_output_limit = 5);
    ok(
        &t,
        view("/memories/four.txt"),
        "Here's the content of /memories/four.txt with line numbers:\n     1\taaaa\n[Output truncated: showing lines 1-1 of 4. Use view_range to see the rest.]",
    );
    // 23 characters fit exactly, though the lines are 31 bytes.
    create(&tool(store), "/memories/accents.txt", "éééé\néééé\néééé\n");
    let t = tool_with(store, |c| c.view_output_limit = 23);
    ok(
        &t,
        view("/memories/accents.txt"),
        "Here's the content of /memories/accents.txt with line numbers:\n     1\téééé\n     2\téééé\n[Output truncated: showing lines 1-2 of 3. Use view_range to see the rest.]",
    );
    let t = tool_with(store, |c| c.view_output_limit = 35);
    ok(
        &t,
        view("/memories/accents.txt"),
        "Here's the content of /memories/accents.txt with line numbers:\n     1\téééé\n     2\téééé\n     3\téééé",
    );
}

/// More than 999,999 lines is an error; 999,999 is not.
pub fn file_view_refuses_too_many_lines(store: &dyn MemoryStore) {
    let t = tool(store);
    put(store, "/memories/big.txt", &vec![b'\n'; 1_000_000]);
    err(
        &t,
        view("/memories/big.txt"),
        "File /memories/big.txt exceeds maximum line limit of 999,999 lines.",
    );
    put(store, "/memories/ok.txt", &vec![b'\n'; 999_999]);
    let result = t.dispatch(&view_range("/memories/ok.txt", json!([999_999, -1])));
    assert_eq!(
        text_of(&result),
        "Here's the content of /memories/ok.txt with line numbers:\n999999\t"
    );
    assert!(!result.is_error);
}

/// A missing path, or one below a file, does not exist.
pub fn view_of_a_missing_path(store: &dyn MemoryStore) {
    let t = tool(store);
    err(
        &t,
        view("/memories/nope.txt"),
        "The path /memories/nope.txt does not exist. Please provide a valid path.",
    );
    create(&t, "/memories/file.txt", "x");
    err(
        &t,
        view("/memories/file.txt/below"),
        "The path /memories/file.txt/below does not exist. Please provide a valid path.",
    );
}

/// Bytes that are not UTF-8 (and not an image) are refused.
pub fn view_of_non_utf8_text(store: &dyn MemoryStore) {
    let t = tool(store);
    put(store, "/memories/bin.dat", &[0x66, 0xff, 0xfe]);
    err(
        &t,
        view("/memories/bin.dat"),
        "Error: The file /memories/bin.dat is not a valid UTF-8 text file.",
    );
}

/// `.png`/`.jpg`/`.jpeg` files whose bytes really are images come back as
/// image blocks, within the image size limit.
pub fn view_returns_real_images_only(store: &dyn MemoryStore) {
    let t = tool(store);
    let png = b"\x89PNG\r\n\x1a\n";
    put(store, "/memories/pic.PNG", png);
    let result = t.dispatch(&view("/memories/pic.PNG"));
    assert!(!result.is_error);
    assert_eq!(
        result.content,
        vec![Content::Image {
            format: ImageFormat::Png,
            data: png.to_vec()
        }]
    );
    assert_eq!(
        result.to_json(),
        json!({"type": "tool_result", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]})
    );
    put(store, "/memories/photo.jpeg", &[0xFF, 0xD8, 0xFF, 0xE0]);
    let result = t.dispatch(&view("/memories/photo.jpeg"));
    assert_eq!(
        result.to_json(),
        json!({"type": "tool_result", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4A=="}}]})
    );
    // The extension alone does not make an image.
    create(&t, "/memories/fake.png", "not a png");
    ok(
        &t,
        view("/memories/fake.png"),
        "Here's the content of /memories/fake.png with line numbers:\n     1\tnot a png",
    );
    let small = tool_with(store, |c| c.max_image_size = 4);
    err(
        &small,
        view("/memories/pic.PNG"),
        "Error: Image /memories/pic.PNG is 8 bytes, over the limit of 4 bytes",
    );
}

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

fn replace(p: &str, old: &str, new: Option<&str>) -> Value {
    match new {
        Some(new) => json!({"command": "str_replace", "path": p, "old_str": old, "new_str": new}),
        None => json!({"command": "str_replace", "path": p, "old_str": old}),
    }
}

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
    create(&t, "/memories/nul.txt", "a\nb\n");
    ok(
        &t,
        json!({"command": "str_replace", "path": "/memories/nul.txt", "old_str": "b", "new_str": null}),
        &format!("{EDITED}\n     1\ta\n     2\t"),
    );
}

// ---- insert -------------------------------------------------------------------

fn insert(p: &str, line: i64, text: &str) -> Value {
    json!({"command": "insert", "path": p, "insert_line": line, "insert_text": text})
}

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

fn rename(from: &str, to: &str) -> Value {
    json!({"command": "rename", "old_path": from, "new_path": to})
}

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

// ---- store primitives ---------------------------------------------------------

fn store_err<T: std::fmt::Debug>(result: Result<T, StoreError>) -> StoreError {
    match result {
        Ok(v) => panic!("expected a store error, got {v:?}"),
        Err(e) => e,
    }
}

/// `Create` is create-if-absent, `Overwrite` never replaces a directory,
/// `Update` is a compare-and-swap on the version read.
pub fn store_write_modes(store: &dyn MemoryStore) {
    let a = path("/memories/a.txt");
    assert!(store.write(&a, b"one", WriteMode::Create).is_ok());
    assert!(matches!(
        store_err(store.write(&a, b"two", WriteMode::Create)),
        StoreError::AlreadyExists { .. }
    ));
    let first = store.read(&a, u64::MAX).map(|f| f.version).ok();
    let again = store.read(&a, u64::MAX).map(|f| f.version).ok();
    assert!(
        first.is_some() && first == again,
        "an unchanged file keeps its version"
    );
    assert!(store.write(&a, b"two", WriteMode::Overwrite).is_ok());
    let second = store.read(&a, u64::MAX).map(|f| f.version).ok();
    assert_ne!(first, second, "a write changes the version");
    if let Some(stale) = first {
        assert!(matches!(
            store_err(store.write(&a, b"lost", WriteMode::Update(stale))),
            StoreError::Conflict { .. }
        ));
    }
    assert_eq!(bytes(store, "/memories/a.txt"), b"two");
    if let Some(current) = second {
        assert!(
            store
                .write(&a, b"three", WriteMode::Update(current))
                .is_ok()
        );
    }
    assert_eq!(bytes(store, "/memories/a.txt"), b"three");
    let missing = path("/memories/missing.txt");
    if let Some(v) = second {
        assert!(matches!(
            store_err(store.write(&missing, b"x", WriteMode::Update(v))),
            StoreError::NotFound { .. }
        ));
    }
    assert!(!exists(store, "/memories/missing.txt"));
    match store_err(store.write(&path("/memories/a.txt/b/c"), b"x", WriteMode::Create)) {
        StoreError::ParentNotDirectory { parent, .. } => {
            assert_eq!(parent.normalized(), "/memories/a.txt")
        }
        other => panic!("expected ParentNotDirectory, got {other:?}"),
    }
    put(store, "/memories/d/x", b"x");
    assert!(matches!(
        store_err(store.write(&path("/memories/d"), b"x", WriteMode::Overwrite)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.write(&path("/memories/d"), b"x", WriteMode::Create)),
        StoreError::AlreadyExists { .. }
    ));
    assert!(matches!(
        store_err(store.read(&path("/memories/d"), u64::MAX)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.read(&path("/memories/zzz"), u64::MAX)),
        StoreError::NotFound { .. }
    ));
}

/// `rename` never overwrites; `delete` is recursive; misses are `NotFound`.
pub fn store_rename_and_delete(store: &dyn MemoryStore) {
    put(store, "/memories/a", b"a");
    put(store, "/memories/b", b"b");
    assert!(matches!(
        store_err(store.rename(&path("/memories/a"), &path("/memories/b"))),
        StoreError::AlreadyExists { .. }
    ));
    assert!(matches!(
        store_err(store.rename(&path("/memories/zz"), &path("/memories/c"))),
        StoreError::NotFound { .. }
    ));
    assert_eq!(bytes(store, "/memories/a"), b"a");
    assert_eq!(bytes(store, "/memories/b"), b"b");
    assert!(
        store
            .rename(&path("/memories/a"), &path("/memories/n/c"))
            .is_ok()
    );
    assert_eq!(bytes(store, "/memories/n/c"), b"a");
    assert!(store.delete(&path("/memories/n")).is_ok());
    assert!(!exists(store, "/memories/n/c"));
    assert!(matches!(
        store_err(store.delete(&path("/memories/n"))),
        StoreError::NotFound { .. }
    ));
}

/// `list` shows direct children with hidden names; `stat` reports kinds,
/// sizes and `None` below a file; `total_size` counts every file.
pub fn store_list_and_stat(store: &dyn MemoryStore) {
    put(store, "/memories/.h", b"hh");
    put(store, "/memories/d/f", b"fff");
    put(store, "/memories/g", b"g");
    let before = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
    let listed = store.list(&MemoryPath::root());
    if let Ok(entries) = &listed {
        for e in entries.iter().filter(|e| e.kind == EntryKind::File) {
            assert!(
                e.modified.is_some_and(|m| m >= before),
                "{} has no recent modification time",
                e.name
            );
        }
    }
    let mut names: Vec<(String, EntryKind, u64)> = match listed {
        Ok(entries) => entries
            .into_iter()
            .map(|e| (e.name, e.kind, e.len))
            .collect(),
        Err(e) => panic!("list failed: {e}"),
    };
    names.sort();
    assert_eq!(
        names,
        vec![
            (".h".to_owned(), EntryKind::File, 2),
            ("d".to_owned(), EntryKind::Directory, 0),
            ("g".to_owned(), EntryKind::File, 1),
        ]
    );
    assert!(matches!(
        store_err(store.list(&path("/memories/g"))),
        StoreError::NotADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.list(&path("/memories/none"))),
        StoreError::NotFound { .. }
    ));
    let stat = |p: &str| store.stat(&path(p)).ok().flatten().map(|m| (m.kind, m.len));
    let written = store
        .stat(&path("/memories/g"))
        .ok()
        .flatten()
        .and_then(|m| m.modified);
    assert!(
        written.is_some_and(|m| m >= before),
        "stat reports when a file was written"
    );
    assert_eq!(stat("/memories"), Some((EntryKind::Directory, 0)));
    assert_eq!(stat("/memories/d/f"), Some((EntryKind::File, 3)));
    assert_eq!(stat("/memories/g/x"), None);
    assert_eq!(store.total_size().ok(), Some(6));
}

/// Concurrent edits of one file: every edit reported as a success is in
/// the final file, and nothing else is.
pub fn concurrent_edits_are_never_lost(store: &dyn MemoryStore) {
    let t = tool(store);
    create(&t, "/memories/log.txt", "");
    let threads = 4;
    let per_thread = 25;
    let succeeded: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let t = &t;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for j in 0..per_thread {
                        let line = format!("t{i}-{j}");
                        if !t.dispatch(&insert("/memories/log.txt", 0, &line)).is_error {
                            mine.push(line);
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let text = String::from_utf8(bytes(store, "/memories/log.txt")).unwrap_or_default();
    let mut got: Vec<&str> = text.lines().collect();
    let mut want: Vec<&str> = succeeded.iter().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(
        got, want,
        "the file holds exactly the edits reported as successful"
    );
    assert!(!want.is_empty(), "some edits succeed");
}

/// A file over the size limit (placed by someone else) can be viewed in
/// ranges, but edits refuse it before reading it whole; `read` with a limit
/// reports [`StoreError::TooLarge`].
pub fn oversized_files_are_viewed_but_never_read_whole_for_edits(store: &dyn MemoryStore) {
    // 17 bytes a line; numbered, 23 characters (24 with the newline), so
    // 16,000 characters hold 666 lines.
    let line = "0123456789abcdef\n";
    let big: String = line.repeat(70_000); // 1,190,000 bytes, 70,000 lines
    put(store, "/memories/big.txt", big.as_bytes());
    let t = tool(store);
    ok(
        &t,
        view_range("/memories/big.txt", json!([69_999, -1])),
        "Here's the content of /memories/big.txt with line numbers:\n 69999\t0123456789abcdef\n 70000\t0123456789abcdef",
    );
    let view = t.dispatch(&view("/memories/big.txt"));
    assert!(!view.is_error);
    assert!(
        text_of(&view).ends_with(
            "[Output truncated: showing lines 1-666 of 70000. Use view_range to see the rest.]"
        ),
        "{}",
        &text_of(&view)[text_of(&view).len().saturating_sub(200)..]
    );
    err(
        &t,
        replace("/memories/big.txt", "0123", Some("x")),
        "Error: File /memories/big.txt is 1190000 bytes, over the limit of 1048576 bytes, so it cannot be edited",
    );
    err(
        &t,
        insert("/memories/big.txt", 0, "x"),
        "Error: File /memories/big.txt is 1190000 bytes, over the limit of 1048576 bytes, so it cannot be edited",
    );
    match store.read(&path("/memories/big.txt"), 1000) {
        Err(StoreError::TooLarge { len, .. }) => assert_eq!(len, 1_190_000),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(bytes(store, "/memories/big.txt").len(), 1_190_000);
}

/// `update` hands the change the current bytes and writes what it returns,
/// or nothing on [`Abort`](crate::store::Abort); it refuses missing files,
/// directories and files over the limit without calling the change.
pub fn store_update_writes_or_aborts(store: &dyn MemoryStore) {
    use crate::store::{Abort, Updated};
    put(store, "/memories/u.md", b"one");
    let p = path("/memories/u.md");
    let mut seen = Vec::new();
    let done = store.update(&p, 100, &mut |old: &[u8]| {
        seen.push(old.to_vec());
        Ok([old, b" two"].concat())
    });
    assert_eq!(done.ok(), Some(Updated::Written(b"one two".to_vec())));
    assert_eq!(seen.last().map(Vec::as_slice), Some(&b"one"[..]));
    assert_eq!(bytes(store, "/memories/u.md"), b"one two");
    let aborted = store.update(&p, 100, &mut |_: &[u8]| Err(Abort));
    assert_eq!(aborted.ok(), Some(Updated::Aborted));
    assert_eq!(bytes(store, "/memories/u.md"), b"one two");
    let mut called = false;
    let mut never = |_: &[u8]| {
        called = true;
        Err(Abort)
    };
    assert!(matches!(
        store_err(store.update(&path("/memories/none"), 100, &mut never)),
        StoreError::NotFound { .. }
    ));
    put(store, "/memories/d/x", b"x");
    assert!(matches!(
        store_err(store.update(&path("/memories/d"), 100, &mut never)),
        StoreError::IsADirectory { .. }
    ));
    assert!(matches!(
        store_err(store.update(&p, 3, &mut never)),
        StoreError::TooLarge { .. }
    ));
    assert!(
        !called,
        "the change is not called when there is nothing to change"
    );
}
