//! PostgreSQL-specific: many connections (as many nodes would have) editing
//! one file. Needs CLAUDE_MEMORY_TEST_POSTGRES_URL (set up by .ci/run);
//! skipped with a printed reason without it, unless
//! CLAUDE_MEMORY_REQUIRE_POSTGRES is set.
#![cfg(feature = "postgres")]

use std::collections::BTreeSet;

use claude_memory::{MemoryTool, PostgresStore, TenantId};
use serde_json::json;

fn url() -> Option<String> {
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

#[test]
fn edits_from_many_connections_are_never_lost() {
    let Some(url) = url() else { return };
    let tenant = TenantId::parse(&format!("concurrency-{}", std::process::id())).expect("id");
    let tool = MemoryTool::new(
        PostgresStore::connect(&url, 1)
            .expect("connect")
            .for_tenant(&tenant),
    );
    let _ = tool.dispatch(&json!({"command": "delete", "path": "/memories/log.md"}));
    assert!(
        !tool
            .dispatch(&json!({"command": "create", "path": "/memories/log.md", "file_text": ""}))
            .is_error
    );
    let (nodes, per_node) = (6, 30);
    let results: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..nodes)
            .map(|n| {
                let (url, tenant) = (&url, &tenant);
                s.spawn(move || {
                    // Each "node" has its own pool of connections.
                    let tool = MemoryTool::new(PostgresStore::connect(url, 2).expect("connect").for_tenant(tenant));
                    (0..per_node)
                        .map(|k| {
                            let token = format!("n{n}_{k}");
                            let r = tool.dispatch(&json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": token}));
                            (token, !r.is_error)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("node"))
            .collect()
    });
    let succeeded: BTreeSet<String> = results
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(t, _)| t.clone())
        .collect();
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories/log.md"}));
    let lines: BTreeSet<String> = view
        .text()
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('\t'))
        .map(|(_, t)| t.to_owned())
        .collect();
    println!(
        "postgres: {} edits from {nodes} pools, {} reported success, {} failed, {} in the file",
        nodes * per_node,
        succeeded.len(),
        results.len() - succeeded.len(),
        lines.len()
    );
    assert_eq!(
        lines, succeeded,
        "every reported success is in the file, and nothing else"
    );
    assert!(!succeeded.is_empty());
}

#[test]
fn a_directory_rename_is_one_transaction_and_tenants_do_not_mix() {
    let Some(url) = url() else { return };
    let db = PostgresStore::connect(&url, 2).expect("connect");
    let a = MemoryTool::new(
        db.for_tenant(&TenantId::parse(&format!("tx-a-{}", std::process::id())).expect("id")),
    );
    let b = MemoryTool::new(
        db.for_tenant(&TenantId::parse(&format!("tx-b-{}", std::process::id())).expect("id")),
    );
    for t in [&a, &b] {
        let _ = t.dispatch(&json!({"command": "delete", "path": "/memories/project"}));
        let _ = t.dispatch(&json!({"command": "delete", "path": "/memories/archive"}));
    }
    for i in 0..50 {
        let p = format!("/memories/project/notes/n{i:02}.md");
        assert!(
            !a.dispatch(&json!({"command": "create", "path": p, "file_text": "x\n"}))
                .is_error
        );
    }
    assert!(
        !b.dispatch(
            &json!({"command": "create", "path": "/memories/project/b.md", "file_text": "b\n"})
        )
        .is_error
    );
    let r = a.dispatch(&json!({"command": "rename", "old_path": "/memories/project", "new_path": "/memories/archive/2026"}));
    assert_eq!(
        r.text(),
        Some("Successfully renamed /memories/project to /memories/archive/2026")
    );
    let listing = a.dispatch(&json!({"command": "view", "path": "/memories/archive/2026/notes"}));
    assert!(
        listing
            .text()
            .unwrap_or_default()
            .contains("100B\t/memories/archive/2026/notes\n"),
        "{listing:?}"
    );
    let other = b.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert_eq!(
        other.text(),
        Some(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n2B\t/memories\n2B\t/memories/project/\n2B\t/memories/project/b.md"
        )
    );
}
