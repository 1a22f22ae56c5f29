//! The PostgreSQL history log on the store's own pool
//! (`PostgresLog::for_store`, what the CLI builds): each change and its
//! versions commit in one transaction holding the writer lock, which the
//! store's statements join. Each test is an attack on that promise:
//! - a rename's versions must not be lost (the next open dropping the
//!   renamed file's versions as "never happened");
//! - another writer appending between two changes must not fail the
//!   next one;
//! - a refused write must leave no version, with no moment where another
//!   process could see one;
//! - a log given another store than the one it records still records
//!   every change.
#![cfg(feature = "postgres")]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use claude_memory::history::{HistoryStore, PostgresLog, Query};
use claude_memory::{MemoryTool, PostgresStore, TenantId};
use serde_json::{Value, json};

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

static N: AtomicU64 = AtomicU64::new(0);

/// A tenant of its own for each test (its history scope too).
fn tenant() -> TenantId {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    TenantId::parse(&format!(
        "shared{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
    .expect("tenant id")
}

/// A writer as the CLI builds one: a store with its own pool, the log on
/// that pool.
fn writer(url: &str, tenant: &TenantId, label: &str) -> MemoryTool<HistoryStore<PostgresStore>> {
    let store = PostgresStore::connect(url, 2)
        .expect("connect")
        .for_tenant(tenant);
    let log = PostgresLog::for_store(&store, tenant.as_str()).expect("log");
    let history = HistoryStore::open(store, log).expect("history");
    assert!(history.repair_report().is_clean() || history.repair_report().baseline);
    MemoryTool::new(history.with_label(label))
}

fn call(tool: &MemoryTool<HistoryStore<PostgresStore>>, id: &str, input: Value) -> (bool, String) {
    let r = tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
    (r.is_error, r.text().unwrap_or_default().to_owned())
}

/// One round of the attack workload on `w`: create two files, edit one,
/// rename the other, edit again, delete the renamed one. Every call
/// succeeds; returns how many changed the store.
fn round(tool: &MemoryTool<HistoryStore<PostgresStore>>, w: &str, r: usize) -> usize {
    let f = |k: &str| format!("/memories/{w}/{r}-{k}.md");
    let calls = [
        json!({"command": "create", "path": f("a"), "file_text": format!("{w} {r} a\n")}),
        json!({"command": "create", "path": f("b"), "file_text": format!("{w} {r} b\n")}),
        json!({"command": "str_replace", "path": f("a"), "old_str": "a", "new_str": "a edited"}),
        json!({"command": "rename", "old_path": f("b"), "new_path": f("moved")}),
        json!({"command": "str_replace", "path": f("a"), "old_str": "edited", "new_str": "edited again"}),
        json!({"command": "delete", "path": f("moved")}),
    ];
    for (i, input) in calls.iter().enumerate() {
        let (failed, text) = call(tool, &format!("toolu_{w}_{r}_{i}"), input.clone());
        assert!(!failed, "{w} round {r} call {i} ({input}): {text}");
    }
    calls.len()
}

/// Every version's (actor, call) pairs, each once, and that the next open
/// repairs nothing.
fn check(url: &str, tenant: &TenantId, expected: usize) -> Vec<(String, String)> {
    let store = PostgresStore::connect(url, 2)
        .expect("connect")
        .for_tenant(tenant);
    let log = PostgresLog::for_store(&store, tenant.as_str()).expect("log");
    let history = HistoryStore::open(store, log).expect("history");
    let report = history.repair_report();
    assert!(
        report.dropped.is_empty() && report.recorded.is_empty(),
        "the reopen repaired: {report:?}"
    );
    let versions = history.versions(&Query::default()).expect("versions");
    let calls: Vec<(String, String)> = versions
        .iter()
        .map(|v| {
            (
                v.actor.clone().unwrap_or_default(),
                v.call.clone().unwrap_or_default(),
            )
        })
        .collect();
    let unique: BTreeSet<&(String, String)> = calls.iter().collect();
    assert_eq!(
        unique.len(),
        calls.len(),
        "a change recorded twice: {calls:?}"
    );
    assert_eq!(calls.len(), expected, "versions: {calls:?}");
    let ids: BTreeSet<u64> = versions.iter().map(|v| v.id).collect();
    assert_eq!(ids.len(), versions.len(), "an id given twice");
    calls
}

/// Attack: the rename's versions waited for the change's last statement,
/// but its first statement (the rename reads before it moves) took them
/// and dropped them: `rename` answered success with no version, and the
/// next open dropped the file's `created` version as a change that never
/// happened. Every call of three rounds now has its version, the rename
/// and the delete included.
#[test]
fn every_change_of_a_shared_pool_writer_has_its_version_renames_and_deletes_included() {
    let Some(url) = url() else { return };
    let t = tenant();
    let tool = writer(&url, &t, "solo");
    let mut changes = 0;
    for r in 0..3 {
        changes += round(&tool, "solo", r);
    }
    drop(tool);
    let calls = check(&url, &t, changes);
    let renamed = calls
        .iter()
        .filter(|(_, c)| c.starts_with("toolu_solo_") && c.ends_with("_3"))
        .count();
    assert_eq!(renamed, 3, "{calls:?}");
}

/// Attack: two writers on two pools (two processes) taking turns, so
/// the other appended before each change. Every call must succeed, once,
/// with its writer's actor, and the next open must repair nothing.
#[test]
fn two_writers_taking_turns_run_each_stale_change_again_and_record_it_once() {
    let Some(url) = url() else { return };
    let t = tenant();
    let one = writer(&url, &t, "one");
    let two = writer(&url, &t, "two");
    let mut changes = 0;
    for r in 0..3 {
        changes += round(&one, "one", r);
        changes += round(&two, "two", r);
    }
    // Interleaved call by call, too.
    for i in 0..10 {
        for (tool, w) in [(&one, "one"), (&two, "two")] {
            let (failed, text) = call(
                tool,
                &format!("toolu_{w}_turn_{i}"),
                json!({"command": "create", "path": format!("/memories/turns/{w}-{i}.md"),
                       "file_text": format!("{w} {i}\n")}),
            );
            assert!(!failed, "{w} {i}: {text}");
            changes += 1;
        }
    }
    drop((one, two));
    let calls = check(&url, &t, changes);
    for w in ["one", "two"] {
        let mine = calls
            .iter()
            .filter(|(a, c)| a == w && c.starts_with(&format!("toolu_{w}_")))
            .count();
        assert_eq!(mine, changes / 2, "{w}: {calls:?}");
    }
}

/// Attack: a refused write (create over an existing file, an edit of a
/// missing one). Its version goes out behind the store's statement with
/// the commit, so it must be inserted only if the store wrote: without
/// that rule, a refused create committed its version and dropped it in a
/// second transaction, after the lock was let go, where another
/// process's open could find it and report a repair (what
/// `history_attacks_r3`'s PostgreSQL loop caught, 7 repairs a run). Here,
/// one writer: no version of a refused call, and the writer goes on.
#[test]
fn a_refused_write_leaves_no_version() {
    let Some(url) = url() else { return };
    let t = tenant();
    let tool = writer(&url, &t, "refused");
    let (failed, _) = call(
        &tool,
        "toolu_ok",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "first\n"}),
    );
    assert!(!failed);
    for i in 0..5 {
        let (failed, text) = call(
            &tool,
            &format!("toolu_refused_{i}"),
            json!({"command": "create", "path": "/memories/a.md", "file_text": format!("again {i}\n")}),
        );
        assert!(failed, "a create over an existing file is refused: {text}");
        let (failed, _) = call(
            &tool,
            &format!("toolu_missing_{i}"),
            json!({"command": "str_replace", "path": "/memories/none.md", "old_str": "x", "new_str": "y"}),
        );
        assert!(failed);
    }
    // And the writer goes on recording after them.
    let (failed, _) = call(
        &tool,
        "toolu_after",
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "first", "new_str": "second"}),
    );
    assert!(!failed);
    drop(tool);
    let calls = check(&url, &t, 2);
    assert_eq!(
        calls.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>(),
        ["toolu_ok", "toolu_after"]
    );
}

/// Misuse: the log made for one store (its pool) but given a history of
/// another pool's store. No mutation ever joins the log's transaction;
/// every change is still recorded, once.
#[test]
fn a_log_given_another_pools_store_still_records_every_change() {
    let Some(url) = url() else { return };
    let t = tenant();
    let other = PostgresStore::connect(&url, 1)
        .expect("connect")
        .for_tenant(&t);
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    let log = PostgresLog::for_store(&other, t.as_str()).expect("log");
    let tool = MemoryTool::new(
        HistoryStore::open(store, log)
            .expect("history")
            .with_label("misused"),
    );
    let changes = round(&tool, "misused", 0);
    drop(tool);
    check(&url, &t, changes);
}

/// Most agent code runs on Tokio: a shared-pool log created, used and dropped
/// inside a runtime (its blocking calls park the worker, as the store's
/// do).
#[test]
fn a_shared_pool_log_is_made_used_and_dropped_inside_tokio() {
    let Some(url) = url() else { return };
    let t = tenant();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let changes = rt.block_on(async {
        let tool = writer(&url, &t, "tokio");
        let n = round(&tool, "tokio", 0);
        drop(tool);
        n
    });
    drop(rt);
    check(&url, &t, changes);
}

/// Attack (a new user's review): two tenants' logs given one scope (the
/// README's `""` copied for both). Each open then took the other
/// tenant's versions for changes that never happened, dropped them, and
/// recorded its own files again as anonymous repairs. A scope other than
/// the store's tenant is refused, with the reason.
#[test]
fn a_scope_other_than_the_stores_tenant_is_refused() {
    let Some(url) = url() else { return };
    let base = PostgresStore::connect(&url, 2).expect("connect");
    let alice = base.for_tenant(&tenant());
    let err = PostgresLog::for_store(&alice, "").expect_err("refused");
    assert!(
        err.to_string().contains("is not the store's tenant"),
        "{err}"
    );
    assert!(PostgresLog::for_store(&base, "").is_ok());
}
