//! Attacks on `ManagedStore`, each a reproduction from a review: planted
//! lease records, moves that stop half-way, answers lost after a write,
//! races between a directory's delete and its move. Against the emulator
//! of the memory stores API (see `tests/managed/store.rs`).
#![cfg(feature = "managed")]

use claude_memory::{MemoryPath, MemoryStore, MemoryTool};
use serde_json::json;

#[path = "../managed_support/mod.rs"]
mod managed_support;

use managed_support::{fault_with, fresh, memories, memories_with_ids, open, overwrite, put};

fn call(tool: &MemoryTool<impl MemoryStore>, input: serde_json::Value) -> String {
    tool.dispatch(&input).text().unwrap_or_default().to_owned()
}

fn paths(id: &str) -> Vec<String> {
    memories(id).into_iter().map(|(p, _)| p).collect()
}

/// Leases another client planted (stale, far in the future, or naming a
/// move no rename could make) neither stop the store opening nor move
/// anything, and never hold a directory move up.
#[test]
fn attack_planted_lease_records_never_lock_or_scramble_the_store() {
    let records = [
        r#"{"until_ms":0,"from":"","to":"b"}"#,
        r#"{"until_ms":0,"from":"/","to":"/z/"}"#,
        r#"{"until_ms":0,"from":"/a/","to":"/a/a/"}"#,
        r#"{"until_ms":0,"from":"/a/","to":"/.claude-memory-x/"}"#,
        r#"{"until_ms":1000000000000000,"from":"/a/","to":"/q/"}"#,
        "not json at all",
    ];
    for record in records {
        let Some((_, id)) = fresh() else { return };
        put(&id, "/a/x.md", "x");
        put(&id, "/.claude-memory-lease", record);
        let store = open(&id);
        let tool = MemoryTool::new(&store);
        let r = call(
            &tool,
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
        );
        assert_eq!(
            r, "Successfully renamed /memories/a to /memories/b",
            "{record}"
        );
        assert_eq!(paths(&id), vec!["/b/x.md"], "{record}");
    }
}

/// A stale lease records a move whose destination another writer has
/// taken since: the next open moves the rest, leaves that one at its old
/// path (never at both, never at neither), frees the lease and opens.
#[test]
fn attack_recovery_onto_a_taken_destination_leaves_that_memory_and_opens() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/a/f1.md", "one");
    put(&id, "/a/f2.md", "two");
    put(&id, "/b/f1.md", "taken");
    let ids: Vec<String> = memories_with_ids(&id)
        .into_iter()
        .filter(|(p, _, _)| p.starts_with("/a/"))
        .map(|(_, i, _)| i)
        .collect();
    let record = json!({"until_ms": 0, "from": "/a/", "to": "/b/", "ids": ids});
    put(&id, "/.claude-memory-lease", &record.to_string());
    let store = open(&id);
    assert_eq!(paths(&id), vec!["/a/f1.md", "/b/f1.md", "/b/f2.md"]);
    let tool = MemoryTool::new(&store);
    let view = call(
        &tool,
        json!({"command": "view", "path": "/memories/b/f1.md"}),
    );
    assert!(view.ends_with("1\ttaken"), "{view}");
}

/// Recovery moves only the memories the move carried: one created at the
/// old path after the move began stays where the model put it.
#[test]
fn attack_recovery_moves_only_the_recorded_memories() {
    let Some((_, id)) = fresh() else { return };
    put(&id, "/a/old.md", "old");
    let old = memories_with_ids(&id)[0].1.clone();
    put(&id, "/a/new.md", "made after the move began");
    let record = json!({"until_ms": 0, "from": "/a/", "to": "/b/", "ids": [old]});
    put(&id, "/.claude-memory-lease", &record.to_string());
    let _store = open(&id);
    assert_eq!(paths(&id), vec!["/a/new.md", "/b/old.md"]);
}

/// A directory move the service fails half-way (a 503 storm after five
/// memories moved): the model is told to look before trying again, the
/// lease keeps the move, and once it is stale the next open finishes it.
#[test]
fn attack_a_move_failed_half_way_is_finished_by_the_next_open() {
    let Some((store, id)) = fresh() else { return };
    for i in 0..10 {
        put(&id, &format!("/a/f{i}.md"), "x");
    }
    // POSTs: the lease's create, its record, then one update a memory.
    // The failing update's four tries (the test stores repeat a request
    // three times).
    fault_with(json!({"memory_store_id": id, "status": 503, "count": 4,
        "method": "POST", "skip": 7}));
    let tool = MemoryTool::new(&store);
    let r = call(
        &tool,
        json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
    );
    assert_eq!(
        r,
        "Error: Could not confirm the write (service unavailable) for /memories/a; view it before trying again"
    );
    let split = paths(&id);
    assert_eq!(
        split.iter().filter(|p| p.starts_with("/b/")).count(),
        5,
        "{split:?}"
    );
    // Make the kept lease stale, as time would.
    let lease = memories_with_ids(&id)
        .into_iter()
        .find(|(p, _, _)| p == "/.claude-memory-lease")
        .expect("the lease is kept");
    let mut record: serde_json::Value = serde_json::from_str(&lease.2).expect("a record");
    record["until_ms"] = json!(0);
    overwrite(&id, &lease.1, &record.to_string());
    let _reopened = open(&id);
    let after = paths(&id);
    assert_eq!(after.len(), 10, "{after:?}");
    assert!(after.iter().all(|p| p.starts_with("/b/")), "{after:?}");
}

/// A create or delete whose answer is lost after it happened (a 502 on
/// the way back) is reported as unconfirmed, never as `already exists`
/// or `does not exist` for the call's own change.
#[test]
fn attack_lost_answers_to_writes_read_as_unconfirmed() {
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::new(&store);
    fault_with(json!({"memory_store_id": id, "status": 500, "count": 1,
        "method": "POST", "after": true}));
    let r = call(
        &tool,
        json!({"command": "create", "path": "/memories/c.md", "file_text": "c"}),
    );
    assert_eq!(
        r,
        "Error: Could not confirm the write (service unavailable) for /memories/c.md; view it before trying again"
    );
    assert_eq!(paths(&id), vec!["/c.md"]);
    fault_with(json!({"memory_store_id": id, "status": 500, "count": 1,
        "method": "DELETE", "after": true}));
    let r = call(
        &tool,
        json!({"command": "delete", "path": "/memories/c.md"}),
    );
    assert_eq!(
        r,
        "Error: Could not confirm the write (service unavailable) for /memories/c.md; view it before trying again"
    );
    assert!(paths(&id).is_empty());
}

/// A directory delete takes the lease, so it never interleaves with a
/// move of the same directory: one of the two wins whole.
#[test]
fn attack_delete_racing_a_directory_move_never_splits_it() {
    let Some((store, id)) = fresh() else { return };
    for i in 0..20 {
        put(&id, &format!("/a/f{i:02}.md"), "x");
    }
    let other = open(&id);
    let mover = std::thread::spawn(move || {
        MemoryTool::new(&other).dispatch(
            &json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
        )
    });
    let deleted =
        MemoryTool::new(&store).dispatch(&json!({"command": "delete", "path": "/memories/a"}));
    let moved = mover.join().expect("the mover");
    let left = paths(&id);
    let b = left.iter().filter(|p| p.starts_with("/b/")).count();
    match (deleted.is_error, moved.is_error) {
        (false, true) => assert!(left.is_empty(), "{left:?}"),
        (true, false) => assert_eq!(b, 20, "{left:?}"),
        both => panic!("both {both:?}: {deleted:?} {moved:?}; left {left:?}"),
    }
}

/// A memory at a path and memories below it (another client's): deleting
/// the directory takes both, so the path never turns back into a file.
#[test]
fn attack_deleting_a_directory_takes_the_file_it_hid() {
    let Some((store, id)) = fresh() else { return };
    put(&id, "/a", "file");
    put(&id, "/a/b.md", "below");
    let tool = MemoryTool::new(&store);
    let r = call(&tool, json!({"command": "delete", "path": "/memories/a"}));
    assert_eq!(r, "Successfully deleted /memories/a");
    assert!(paths(&id).is_empty());
    assert!(
        store
            .stat(&MemoryPath::parse("/memories/a").expect("path"))
            .expect("stat")
            .is_none()
    );
}

/// A directory view and a create cost the same few requests however many
/// directories the store holds (one paged listing, not one per directory).
#[test]
fn attack_a_calls_cost_does_not_grow_with_the_directories() {
    let Some((store, id)) = fresh() else { return };
    let tool = MemoryTool::with_config(&store, claude_memory::Config::managed_memory_stores());
    let cost = |input: serde_json::Value| {
        let before = managed_support::requests(&id);
        let r = tool.dispatch(&input);
        assert!(!r.is_error, "{r:?}");
        managed_support::requests(&id) - before
    };
    let small = cost(json!({"command": "create", "path": "/memories/d0/x.md", "file_text": "x"}));
    for i in 1..60 {
        put(&id, &format!("/d{i}/x.md"), "x");
    }
    let large = cost(json!({"command": "create", "path": "/memories/d0/y.md", "file_text": "y"}));
    assert!(
        large <= small,
        "{small} requests, then {large} with 60 directories"
    );
    assert_eq!(cost(json!({"command": "view", "path": "/memories"})), 1);
}
