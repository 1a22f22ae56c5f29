//! `MemoryStore::exclusive` on the SQL stores: one transaction holding
//! the write lock (SQLite's database lock, PostgreSQL's tenant lock) for
//! the whole change, which the change's own calls join. Each test is an
//! attack on that promise: a change whole or not at all, every other
//! writer kept out until it is done, and a failed call inside it undoing
//! only itself. PostgreSQL cases need CLAUDE_MEMORY_TEST_POSTGRES_URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use claude_memory::store::{Lock, MemoryStoreExt as _, WriteMode};
use claude_memory::{MemoryPath, MemoryStore, StoreError};

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("path")
}

fn exists(store: &dyn MemoryStore, path: &str) -> bool {
    store.stat(&p(path)).expect("stat").is_some()
}

/// Two handles on one store that share no process state: what two
/// processes would hold. `None` skips (no server).
type Pair = (Arc<dyn MemoryStore>, Arc<dyn MemoryStore>);

#[cfg(feature = "sqlite")]
fn sqlite_pair(dir: &std::path::Path) -> Pair {
    let file = dir.join("memory.db");
    (
        Arc::new(claude_memory::SqliteStore::open(&file).expect("open")),
        Arc::new(claude_memory::SqliteStore::open(&file).expect("open")),
    )
}

/// The pair, and the `application_name` their sessions carry.
#[cfg(feature = "postgres")]
fn postgres_pair(pool: usize) -> Option<(Pair, String)> {
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
        return None;
    };
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = format!(
        "exclusive-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let tenant = claude_memory::TenantId::parse(&id).expect("tenant");
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}application_name={id}");
    let open = || {
        claude_memory::PostgresStore::connect(&url, pool)
            .expect("connect")
            .for_tenant(&tenant)
    };
    Some(((Arc::new(open()), Arc::new(open())), id))
}

/// Runs `attack` on SQLite and (with a server) PostgreSQL.
fn on_each(attack: impl Fn(&str, Pair)) {
    #[cfg(feature = "sqlite")]
    {
        let dir = tempfile::tempdir().expect("dir");
        attack("sqlite", sqlite_pair(dir.path()));
    }
    #[cfg(feature = "postgres")]
    if let Some((pair, _)) = postgres_pair(2) {
        attack("postgres", pair);
    }
}

/// The lock [`MemoryStore::exclusive`] holds on `store`: `None` if it
/// refuses to run a change at all.
fn lock_of(store: &dyn MemoryStore) -> Option<Lock> {
    let mut seen = None;
    let _ = store.exclusive(&MemoryPath::root(), &mut |lock| {
        seen = Some(lock);
        Ok(())
    });
    seen
}

/// Attack: a change that fails after some of its writes. Promised: none
/// of them stays (before, each write committed on its own).
#[test]
fn a_change_that_fails_half_way_leaves_nothing() {
    on_each(|db, (store, _)| {
        assert_eq!(lock_of(&store), Some(Lock::Held), "{db}");
        let out = store.exclusive(&p("/memories"), &mut |_| {
            store.write(&p("/memories/d/a.md"), b"a\n", WriteMode::Create)?;
            store.write(&p("/memories/b.md"), b"b\n", WriteMode::Create)?;
            Err(StoreError::Conflict {
                path: p("/memories/b.md"),
            })
        });
        assert!(out.is_err(), "{db}");
        for path in ["/memories/d/a.md", "/memories/d", "/memories/b.md"] {
            assert!(!exists(&*store, path), "{db}: {path} stayed");
        }
    });
}

/// Attack: a call inside the change that the store refuses (a create of
/// a path that exists). Promised: it undoes only itself; the change's
/// other writes, before and after it, commit.
#[test]
fn a_refused_call_inside_a_change_undoes_only_itself() {
    on_each(|db, (store, _)| {
        store
            .exclusive(&p("/memories"), &mut |_| {
                store.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)?;
                let again = store.write(&p("/memories/a.md"), b"x\n", WriteMode::Create);
                assert!(
                    matches!(again, Err(StoreError::AlreadyExists { .. })),
                    "{db}: {again:?}"
                );
                let moved = store.rename(&p("/memories/missing.md"), &p("/memories/m.md"));
                assert!(
                    matches!(moved, Err(StoreError::NotFound { .. })),
                    "{db}: {moved:?}"
                );
                store.write(&p("/memories/c.md"), b"c\n", WriteMode::Create)?;
                Ok(())
            })
            .expect("exclusive");
        let a = store.read(&p("/memories/a.md"), 1024).expect("a");
        assert_eq!(a.data, b"a\n", "{db}");
        assert!(exists(&*store, "/memories/c.md"), "{db}");
    });
}

/// Attack: an exclusive change inside another (the encrypted store's
/// rename inside a history's change). Promised: the inner one's writes
/// go with the outer one's fate.
#[test]
fn a_nested_change_goes_with_the_outer_one() {
    on_each(|db, (store, _)| {
        let out = store.exclusive(&p("/memories"), &mut |_| {
            store.exclusive(&p("/memories"), &mut |_| {
                store.write(&p("/memories/inner.md"), b"i\n", WriteMode::Create)?;
                Ok(())
            })?;
            assert!(exists(&*store, "/memories/inner.md"), "{db}: seen inside");
            Err(StoreError::Conflict {
                path: p("/memories/inner.md"),
            })
        });
        assert!(out.is_err(), "{db}");
        assert!(!exists(&*store, "/memories/inner.md"), "{db}: inner stayed");
        // The handle is usable afterwards (no transaction left open).
        store
            .write(&p("/memories/after.md"), b"z\n", WriteMode::Create)
            .expect("after");
    });
}

/// Attack: a second writer (another handle, as another process) creating
/// the path the change is about to write, while the change sleeps between
/// two writes. Promised: it waits for the whole change, then finds the
/// path taken; the change itself never meets the second writer's file.
#[test]
fn a_second_writer_waits_for_the_whole_change() {
    on_each(|db, (holder, other)| {
        let started = Arc::new(AtomicBool::new(false));
        let mut waiter = None;
        holder
            .exclusive(&p("/memories"), &mut |_| {
                holder.write(&p("/memories/first.md"), b"1\n", WriteMode::Create)?;
                let (other, flag) = (Arc::clone(&other), Arc::clone(&started));
                waiter = Some(std::thread::spawn(move || {
                    flag.store(true, Ordering::SeqCst);
                    let t = Instant::now();
                    let out = other.write(&p("/memories/second.md"), b"2\n", WriteMode::Create);
                    (out, t.elapsed())
                }));
                while !started.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(400));
                holder.write(&p("/memories/second.md"), b"mine\n", WriteMode::Create)?;
                Ok(())
            })
            .expect("the change is never met by the other writer's file");
        let (out, waited) = waiter.expect("spawned").join().expect("join");
        assert!(
            matches!(out, Err(StoreError::AlreadyExists { .. })),
            "{db}: {out:?}"
        );
        assert!(
            waited >= Duration::from_millis(300),
            "{db}: the other writer went ahead after {waited:?}"
        );
        let second = holder.read(&p("/memories/second.md"), 1024).expect("read");
        assert_eq!(second.data, b"mine\n", "{db}");
    });
}

/// Attack: a pool of one connection, whose change holds it: the change's
/// own reads and writes must go through it, not wait for a second one
/// (until the checkout timeout).
#[cfg(feature = "postgres")]
#[test]
fn a_pool_of_one_connection_runs_a_whole_change() {
    let Some(((store, _), _)) = postgres_pair(1) else {
        return;
    };
    let t = Instant::now();
    store
        .exclusive(&p("/memories"), &mut |_| {
            store.write(&p("/memories/d/a.md"), b"a\n", WriteMode::Create)?;
            assert_eq!(store.list(&p("/memories/d"))?.len(), 1);
            store.rename(&p("/memories/d"), &p("/memories/e"))?;
            store.update(&p("/memories/e/a.md"), 1024, &mut |old| {
                Ok([old, b"b\n"].concat())
            })?;
            store.delete(&p("/memories/e/a.md"))
        })
        .expect("exclusive");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(exists(&*store, "/memories/e"));
    assert!(!exists(&*store, "/memories/e/a.md"));
}

/// Attack: the server ends the change's session half way (a failover, an
/// operator's `pg_terminate_backend`). Promised: nothing of the change
/// stays, the call fails, and the handle works again at its next call.
#[cfg(feature = "postgres")]
#[test]
fn a_session_ended_half_way_leaves_nothing_and_the_handle_recovers() {
    let Some(((store, other), app)) = postgres_pair(2) else {
        return;
    };
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").expect("url");
    let out = store.exclusive(&p("/memories"), &mut |_| {
        store.write(&p("/memories/a.md"), b"a\n", WriteMode::Create)?;
        // This test's sessions holding a transaction open: the change's.
        kill_sessions_in_transaction(&url, &app);
        store.write(&p("/memories/b.md"), b"b\n", WriteMode::Create)?;
        Ok(())
    });
    assert!(out.is_err(), "the change reported success: {out:?}");
    assert!(!exists(&*other, "/memories/a.md"), "a.md stayed");
    assert!(!exists(&*other, "/memories/b.md"), "b.md stayed");
    store
        .write(&p("/memories/c.md"), b"c\n", WriteMode::Create)
        .expect("the next call works");
}

#[cfg(feature = "postgres")]
fn kill_sessions_in_transaction(url: &str, app: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("control connection");
        let task = tokio::spawn(conn);
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
                &[&app],
            )
            .await
            .expect("terminate");
        drop(client);
        let _ = task.await;
    });
}
