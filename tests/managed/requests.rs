//! A managed store's commands cost the fewest requests that keep SPEC's
//! checks, whatever the store's size: counted by the emulator, at 10 and
//! at 1,990 memories (the service holds at most 2,000).
#![cfg(feature = "managed")]

use claude_memory::{Config, MemoryTool};
use serde_json::{Value, json};

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{fill, memories, new_store, open, requests};

/// Each command, and what it costs: two requests for a look and a write,
/// one more for a read (an edit), for a new directory's parent (which
/// must not be a memory), or to look again at a directory a file left (a
/// delete, a move out: another call may have emptied it at the same
/// time, and an emptied directory keeps a marker), one more for a move
/// to a longer path (the handler measures what a moved directory would
/// hold).
fn commands() -> Vec<(Value, u64)> {
    vec![
        (
            json!({"command": "view", "path": "/memories/d00/f000.md"}),
            2,
        ),
        (json!({"command": "view", "path": "/memories/d00"}), 2),
        (
            json!({"command": "create", "path": "/memories/d00/new.md", "file_text": "new\n"}),
            2,
        ),
        (
            json!({"command": "create", "path": "/memories/new/x.md", "file_text": "new\n"}),
            3,
        ),
        (
            json!({"command": "str_replace", "path": "/memories/d00/f001.md",
                   "old_str": "line one", "new_str": "line 1"}),
            3,
        ),
        (
            json!({"command": "insert", "path": "/memories/d00/f002.md",
                   "insert_line": 1, "insert_text": "inserted"}),
            3,
        ),
        (
            json!({"command": "rename", "old_path": "/memories/d00/f003.md",
                   "new_path": "/memories/d00/g003.md"}),
            2,
        ),
        (
            json!({"command": "rename", "old_path": "/memories/d00/f005.md",
                   "new_path": "/memories/new/f005.md"}),
            4,
        ),
        (
            json!({"command": "rename", "old_path": "/memories/d00/f006.md",
                   "new_path": "/memories/new/renamed-f006.md"}),
            5,
        ),
        (
            json!({"command": "delete", "path": "/memories/d00/f004.md"}),
            3,
        ),
    ]
}

#[test]
fn each_command_costs_the_same_few_requests_at_10_and_at_1990_memories() {
    for n in [10, 1_990] {
        let Some(id) = new_store() else { return };
        fill(&id, n);
        let tool = MemoryTool::with_config(open(&id), Config::managed_memory_stores());
        for (input, cost) in commands() {
            let before = requests(&id);
            let result = tool.dispatch(&input);
            assert!(!result.is_error, "{n}: {input}: {:?}", result.text());
            assert_eq!(requests(&id) - before, cost, "{n} memories: {input}");
        }
        // And each did what it says.
        let all = memories(&id);
        let content = |p: &str| all.iter().find(|(q, _)| q == p).map(|(_, c)| c.as_str());
        assert_eq!(content("/d00/new.md"), Some("new\n"));
        assert_eq!(content("/new/x.md"), Some("new\n"));
        assert_eq!(content("/d00/f001.md"), Some("line 1\nline two\n"));
        assert_eq!(
            content("/d00/f002.md"),
            Some("line one\ninserted\nline two\n")
        );
        assert_eq!(content("/d00/g003.md"), Some("line one\nline two\n"));
        assert_eq!(content("/new/f005.md"), Some("line one\nline two\n"));
        assert_eq!(
            content("/new/renamed-f006.md"),
            Some("line one\nline two\n")
        );
        for gone in [
            "/d00/f003.md",
            "/d00/f004.md",
            "/d00/f005.md",
            "/d00/f006.md",
        ] {
            assert_eq!(content(gone), None, "{gone}");
        }
        assert_eq!(all.len(), n + 1, "two created, one deleted");
    }
}

/// A delete or a move that empties a directory keeps it with a marker
/// (one request more), and the next create in it drops the marker.
#[test]
fn emptying_a_directory_keeps_it_for_one_request_more() {
    let Some(id) = new_store() else { return };
    fill(&id, 2);
    let tool = MemoryTool::with_config(open(&id), Config::managed_memory_stores());
    let before = requests(&id);
    let r = tool.dispatch(&json!({"command": "delete", "path": "/memories/d00/f000.md"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(requests(&id) - before, 3, "a sibling is left: no marker");
    let before = requests(&id);
    let r = tool.dispatch(
        &json!({"command": "rename", "old_path": "/memories/d00/f001.md",
                                  "new_path": "/memories/e/f001.md"}),
    );
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        requests(&id) - before,
        6,
        "list both parents, the new one's parent, move, look again, marker"
    );
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories/d00"}));
    assert!(
        !view.is_error,
        "the emptied directory is still there: {view:?}"
    );
    let before = requests(&id);
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/d00/back.md", "file_text": "x"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(requests(&id) - before, 3, "list, create, drop the marker");
    let paths: Vec<String> = memories(&id).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/d00/back.md", "/e/f001.md"]);
}
