//! PostgreSQL-specific: many connections (as many nodes would have) editing
//! one file. Needs CLAUDE_MEMORY_TEST_POSTGRES_URL (set up by .ci/run);
//! skipped with a printed reason without it, unless
//! CLAUDE_MEMORY_REQUIRE_POSTGRES is set.
#![cfg(feature = "postgres")]

use claude_memory::{MemoryTool, PostgresStore, TenantId};
use serde_json::json;

mod common;

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
    // Each "node" has its own pool of connections.
    let open = || {
        MemoryTool::new(
            PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&tenant),
        )
    };
    let race = common::insert_race(open, "/memories/log.md", 6, 30);
    println!(
        "postgres: 180 edits from 6 pools, {} reported success, {} failed, {} in the file",
        race.succeeded.len(),
        race.failed,
        race.in_file.len()
    );
    assert_eq!(
        race.in_file, race.succeeded,
        "every reported success is in the file, and nothing else"
    );
    assert!(!race.succeeded.is_empty());
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
