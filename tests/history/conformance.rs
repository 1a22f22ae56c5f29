//! The history conformance cases on every backend: in memory, filesystem,
//! tenants over both, SQLite (whole database and a tenant) and PostgreSQL
//! (a tenant of the test database, when CLAUDE_MEMORY_TEST_POSTGRES_URL is
//! set).

use std::collections::BTreeMap;
use std::sync::Arc;

use claude_memory::history::{FileLog, HistoryLog, MemoryLog};
use claude_memory::store::MemoryStoreExt as _;

/// Every module's generated tests are exactly `HISTORY_CASES`.
#[test]
fn generated_tests_are_exactly_the_history_cases() {
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("list this binary's tests");
    let listing = String::from_utf8(out.stdout).expect("UTF-8 listing");
    let mut modules: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for test in listing.lines().filter_map(|l| l.strip_suffix(": test")) {
        if let Some((module, name)) = test.rsplit_once("::") {
            modules.entry(module).or_default().push(name);
        }
    }
    let mut cases: Vec<&str> = claude_memory::conformance::HISTORY_CASES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    cases.sort_unstable();
    assert!(modules.len() >= 4, "listing: {listing}");
    for (module, mut tests) in modules {
        tests.sort_unstable();
        assert_eq!(tests, cases, "module {module}");
    }
}

fn file_log(dir: std::path::PathBuf) -> impl Fn() -> Arc<dyn HistoryLog> {
    move || Arc::new(FileLog::for_store(&dir).expect("file log")) as Arc<dyn HistoryLog>
}

mod in_memory {
    use super::*;
    claude_memory::history_conformance_tests!(|run| {
        let log: Arc<dyn HistoryLog> = Arc::new(MemoryLog::new());
        run(&claude_memory::InMemoryStore::new(), &|| Arc::clone(&log));
    });
}

mod filesystem {
    use super::*;
    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = claude_memory::FilesystemStore::open(dir.path()).expect("open store");
        run(&store, &file_log(dir.path().to_owned()));
    });
}

mod tenant_over_in_memory {
    use super::*;
    use claude_memory::{InMemoryStore, TenantId, TenantStore};
    claude_memory::history_conformance_tests!(|run| {
        let base = Arc::new(InMemoryStore::new());
        let log: Arc<dyn HistoryLog> = Arc::new(MemoryLog::new());
        run(
            &TenantStore::new(base, TenantId::parse("alice").expect("id")),
            &|| Arc::clone(&log),
        );
    });
}

mod tenant_over_filesystem {
    use super::*;
    use claude_memory::{FilesystemStore, TenantId, TenantStore};
    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = FilesystemStore::open(dir.path()).expect("open");
        std::fs::create_dir_all(dir.path().join("bob")).expect("bob");
        std::fs::write(dir.path().join("bob/secret.md"), "bob's").expect("bob's file");
        run(
            &TenantStore::new(base, TenantId::parse("alice").expect("id")),
            &file_log(dir.path().join("alice")),
        );
    });
}

#[cfg(feature = "sqlite")]
mod sqlite_file {
    use super::*;
    use claude_memory::SqliteStore;
    use claude_memory::history::SqliteLog;
    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("memory.db");
        let store = SqliteStore::open(&db).expect("sqlite");
        let log: Arc<dyn HistoryLog> = Arc::new(SqliteLog::for_store(&store, "").expect("log"));
        run(&store, &|| Arc::clone(&log));
    });
}

#[cfg(feature = "sqlite")]
mod sqlite_tenant {
    use super::*;
    use claude_memory::history::SqliteLog;
    use claude_memory::store::WriteMode;
    use claude_memory::{MemoryPath, SqliteStore, TenantId};
    claude_memory::history_conformance_tests!(|run| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("memory.db");
        let base = SqliteStore::open(&db).expect("sqlite");
        let bob = base.for_tenant(&TenantId::parse("bob").expect("id"));
        let p = MemoryPath::parse("/memories/secret.md").expect("path");
        bob.write(&p, b"bob's", WriteMode::Create)
            .expect("bob's file");
        // Bob has a history of his own, with a version of his own.
        let bob_log = SqliteLog::for_store(&bob, "bob").expect("log");
        let bob_history = claude_memory::history::HistoryStore::open(bob, bob_log).expect("bob");
        assert_eq!(bob_history.repair_report().recorded.len(), 1);
        let alice = base.for_tenant(&TenantId::parse("alice").expect("id"));
        let log: Arc<dyn HistoryLog> =
            Arc::new(SqliteLog::for_store(&alice, "alice").expect("log"));
        run(&alice, &|| Arc::clone(&log));
    });
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use claude_memory::history::PostgresLog;
    use claude_memory::{PostgresStore, TenantId};
    use std::sync::atomic::{AtomicU64, Ordering};

    static N: AtomicU64 = AtomicU64::new(0);

    claude_memory::history_conformance_tests!(|run| {
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
            eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
            return;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "h{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let store = PostgresStore::connect(&url, 2)
            .expect("connect")
            .for_tenant(&TenantId::parse(&id).expect("tenant id"));
        let log: Arc<dyn HistoryLog> = Arc::new(PostgresLog::connect(&url, &id).expect("log"));
        run(&store, &|| Arc::clone(&log));
    });
}

/// The log on the store's own pool (`PostgresLog::for_store`, the CLI's):
/// each change and its version in one transaction. A pool of one
/// connection: the change's transaction holds it, and everything the
/// change reads and writes (the store, the log) goes through it.
#[cfg(feature = "postgres")]
mod postgres_shared_pool {
    use super::*;
    use claude_memory::history::PostgresLog;
    use claude_memory::{PostgresStore, TenantId};
    use std::sync::atomic::{AtomicU64, Ordering};

    static N: AtomicU64 = AtomicU64::new(0);

    claude_memory::history_conformance_tests!(|run| {
        let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
                "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
            );
            eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
            return;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!(
            "hh{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let store = PostgresStore::connect(&url, 1)
            .expect("connect")
            .for_tenant(&TenantId::parse(&id).expect("tenant id"));
        let log: Arc<dyn HistoryLog> = Arc::new(PostgresLog::for_store(&store, &id).expect("log"));
        run(&store, &|| Arc::clone(&log));
    });
}

/// Times humantime cannot print never panic (a restore to 1926, a
/// corrupt log's far-future time).
#[test]
fn any_time_formats() {
    use claude_memory::history::format_time;
    use std::time::{Duration, UNIX_EPOCH};
    assert_eq!(format_time(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        format_time(UNIX_EPOCH - Duration::from_secs(5)),
        "5s before the epoch"
    );
    let far = UNIX_EPOCH + Duration::from_secs(300_000_000_000);
    assert_eq!(format_time(far), "300000000000s after the epoch");
}

/// Files that were there before history was turned on have only a
/// baseline version, recorded then: a restore to an earlier time cannot
/// know whether they existed, so it keeps them (it used to delete them).
#[test]
fn a_restore_before_the_baseline_keeps_the_files_it_cannot_date() {
    use claude_memory::history::HistoryStore;
    use claude_memory::store::WriteMode;
    use claude_memory::{InMemoryStore, MemoryPath, MemoryStore};
    use std::time::{Duration, SystemTime};

    let store = InMemoryStore::new();
    let old = MemoryPath::parse("/memories/old.md").expect("path");
    store
        .write(&old, b"kept from before\n", WriteMode::Create)
        .expect("write");
    let history = HistoryStore::open(&store, MemoryLog::new()).expect("history");
    // A file made with history on, after the restore point: it goes.
    let new = MemoryPath::parse("/memories/new.md").expect("path");
    let before = SystemTime::now() - Duration::from_secs(3600);
    history
        .write(&new, b"new\n", WriteMode::Create)
        .expect("write");
    let report = history.restore(before, None).expect("restore");
    assert_eq!(
        report.skipped,
        [(
            "/memories/old.md".to_owned(),
            claude_memory::history::SkipReason::Undated
        )]
    );
    assert_eq!(report.deleted, ["/memories/new.md"]);
    assert_eq!(
        store.read(&old, 100).expect("still there").data,
        b"kept from before\n"
    );
}

/// Redacting a leaked secret erases it everywhere the history keeps it:
/// the delete that removed it holds the same content.
#[test]
fn redacting_a_version_erases_the_same_content_in_every_version() {
    use claude_memory::history::{HistoryStore, Query};
    use claude_memory::store::WriteMode;
    use claude_memory::{InMemoryStore, MemoryPath};

    let history = HistoryStore::open(InMemoryStore::new(), MemoryLog::new()).expect("history");
    let p = MemoryPath::parse("/memories/leak.md").expect("path");
    history
        .write(&p, b"sk-secret\n", WriteMode::Create)
        .expect("write");
    history.delete(&p).expect("delete");
    let all = history.versions(&Query::default()).expect("versions");
    assert_eq!(all.len(), 2);
    let ids = history.redact(all[0].id).expect("redact");
    assert_eq!(ids, [all[0].id, all[1].id]);
    for v in history.versions(&Query::default()).expect("versions") {
        assert!(v.redacted && v.content.is_none(), "{v:?}");
    }
}

/// Attack (a new user's review, on PostgreSQL; SQLite's log has the same
/// rule): two tenants' logs given one scope took each other's versions
/// for changes that never happened at every open. Refused now.
#[cfg(feature = "sqlite")]
#[test]
fn a_sqlite_log_for_another_tenants_scope_is_refused() {
    use claude_memory::history::SqliteLog;
    use claude_memory::{SqliteStore, TenantId};
    let dir = tempfile::tempdir().expect("temporary directory");
    let base = SqliteStore::open(dir.path().join("m.db")).expect("sqlite");
    let bob = base.for_tenant(&TenantId::parse("bob").expect("id"));
    let err = SqliteLog::for_store(&bob, "").expect_err("refused");
    assert!(
        err.to_string().contains("is not the store's tenant"),
        "{err}"
    );
    assert!(SqliteLog::for_store(&bob, "bob").is_ok());
    assert!(SqliteLog::for_store(&base, "").is_ok());
}
