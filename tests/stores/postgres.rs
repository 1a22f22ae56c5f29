//! PostgreSQL-specific: many pools (as many nodes would have) editing one
//! file; the store in Tokio programs; recovery after the server ends its
//! sessions; bounded lock waits. Needs CLAUDE_MEMORY_TEST_POSTGRES_URL (set
//! up by .ci/run); skipped with a printed reason without it, unless
//! CLAUDE_MEMORY_REQUIRE_POSTGRES is set.
#![cfg(feature = "postgres")]

use std::error::Error as _;
use std::time::{Duration, Instant};

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{MemoryPath, MemoryTool, PostgresError, PostgresStore, StoreError, TenantId};
use serde_json::json;

#[path = "../common/mod.rs"]
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
    assert_eq!(
        (race.succeeded.len(), race.failed),
        (180, 0),
        "no edit is refused"
    );
}

/// A tenant of its own for one test.
fn tenant(name: &str) -> TenantId {
    TenantId::parse(&format!("{name}-{}", std::process::id())).expect("id")
}

/// Creates, reads and deletes a file through `tool`.
fn round_trip(tool: &MemoryTool<PostgresStore>) {
    let _ = tool.dispatch(&json!({"command": "delete", "path": "/memories/t.md"}));
    let r =
        tool.dispatch(&json!({"command": "create", "path": "/memories/t.md", "file_text": "hi\n"}));
    assert!(!r.is_error, "{r:?}");
    let r = tool.dispatch(&json!({"command": "view", "path": "/memories/t.md"}));
    assert_eq!(
        r.text(),
        Some("Here's the content of /memories/t.md with line numbers:\n     1\thi")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn connect_use_and_drop_in_a_current_thread_runtime() {
    let Some(url) = url() else { return };
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&tenant("rt-current"));
    let tool = MemoryTool::new(store);
    round_trip(&tool);
    drop(tool);
    tokio::task::yield_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_use_and_drop_in_a_multi_thread_runtime_and_spawn_blocking() {
    let Some(url) = url() else { return };
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&tenant("rt-multi"));
    round_trip(&MemoryTool::new(store.clone()));
    // Made in spawn_blocking, dropped in async code, and the other way round.
    let u = url.clone();
    let made = tokio::task::spawn_blocking(move || PostgresStore::connect(&u, 1))
        .await
        .expect("join")
        .expect("connect");
    round_trip(&MemoryTool::new(made.for_tenant(&tenant("rt-blocking"))));
    drop(made);
    tokio::task::spawn_blocking(move || {
        round_trip(&MemoryTool::new(store.clone()));
        drop(store);
    })
    .await
    .expect("join");
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn an_async_tool_holding_the_store_is_used_and_dropped_in_async_code() {
    let Some(url) = url() else { return };
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&tenant("rt-async-tool"));
    let tool = claude_memory::AsyncMemoryTool::new(MemoryTool::new(store));
    let _ = tool
        .dispatch(&json!({"command": "delete", "path": "/memories/a.md"}))
        .await;
    let r = tool
        .dispatch(&json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}))
        .await;
    assert!(!r.is_error, "{r:?}");
    drop(tool);
}

#[test]
fn a_plain_thread_connects_uses_and_drops() {
    let Some(url) = url() else { return };
    std::thread::spawn(move || {
        let store = PostgresStore::connect(&url, 1).expect("connect");
        round_trip(&MemoryTool::new(store.for_tenant(&tenant("plain"))));
    })
    .join()
    .expect("thread");
}

/// Runs `sql` on a connection of its own (the test's, not the store's).
fn admin(url: &str, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("admin connection");
        tokio::spawn(conn);
        client.batch_execute(sql).await.expect("admin statement");
    });
}

#[test]
fn the_pool_recovers_after_its_backends_are_terminated() {
    let Some(url) = url() else { return };
    let app = format!("cm-terminate-{}", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PostgresStore::connect(&format!("{url}{sep}application_name={app}"), 3)
        .expect("connect")
        .for_tenant(&tenant("terminate"));
    let tool = MemoryTool::new(store);
    round_trip(&tool);
    for _ in 0..3 {
        // Only this test's own sessions, found by their application name.
        admin(
            &url,
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{app}'"
            ),
        );
        let start = Instant::now();
        round_trip(&tool);
        assert!(start.elapsed() < Duration::from_secs(20), "no hang");
    }
}

#[test]
fn a_held_tenant_lock_ends_in_a_clear_timeout() {
    let Some(url) = url() else { return };
    let t = tenant("locked");
    let store = PostgresStore::builder(&url)
        .max_connections(2)
        .lock_timeout(Duration::from_millis(300))
        .connect()
        .expect("connect")
        .for_tenant(&t);
    let holder = std::thread::spawn({
        let url = url.clone();
        let t = t.clone();
        move || {
            admin(
                &url,
                &format!(
                    "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('claude-memory:{}', 0)); SELECT pg_sleep(3); COMMIT",
                    t.as_str()
                ),
            )
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    let path = MemoryPath::parse("/memories/blocked.md").expect("path");
    let err = store
        .write(&path, b"x", claude_memory::store::WriteMode::Overwrite)
        .expect_err("the lock is held");
    let waited = start.elapsed();
    holder.join().expect("holder");
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
    // SPEC §4: the server cancelled the wait, nothing was done.
    let StoreError::Unreachable {
        source: Some(source),
        cause,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        *cause,
        claude_memory::store::RemoteCause::TimedOut {
            after: Duration::from_millis(300)
        }
    );
    let pg = source
        .downcast_ref::<PostgresError>()
        .expect("a PostgresError");
    assert!(matches!(pg, PostgresError::LockTimeout(_)), "{pg:?}");
    assert_eq!(
        pg.to_string(),
        "gave up after waiting 300ms for another session's write lock on these memories (lock timeout)"
    );
    assert!(pg.source().is_none());
    // Once the lock is free, writes go through.
    store
        .write(&path, b"x", claude_memory::store::WriteMode::Overwrite)
        .expect("write");
}

#[test]
fn connecting_to_nothing_is_a_clear_bounded_error() {
    let start = Instant::now();
    let err = PostgresStore::builder("postgres://nobody@127.0.0.1:1/none?sslmode=disable")
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .expect_err("nothing listens on port 1");
    assert!(start.elapsed() < Duration::from_secs(10));
    // The cause is in the message itself (issue 18), not only a source.
    assert!(
        err.to_string()
            .starts_with("could not connect to PostgreSQL: "),
        "{err}"
    );
    assert!(err.source().is_some(), "the driver's error is the source");
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
