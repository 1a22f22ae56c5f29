//! `view` cases: directory listings and file views, golden strings in full.

use serde_json::{Value, json};

use super::helpers::{
    EMPTY_ROOT, create, err, ok, put, put_unless_refused, text_of, tool, tool_with, view,
    view_range,
};
use crate::result::{Content, ImageFormat};
use crate::store::MemoryStore;

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
    if !put_unless_refused(store, "/memories/big.txt", &vec![b'\n'; 1_000_000]) {
        return;
    }
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
    if !put_unless_refused(store, "/memories/bin.dat", &[0x66, 0xff, 0xfe]) {
        return;
    }
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
    if !put_unless_refused(store, "/memories/pic.PNG", png) {
        return;
    }
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
