//! Attacks on the PostgreSQL history log on the store's pool
//! (`PostgresLog::for_store`). Each test is a reproduction: it states
//! what the README promises and fails if the promise breaks (another
//! writer appending before a first create; a second writer inside an
//! encrypted rename; an opener finishing a live encrypted move).
#![cfg(feature = "postgres")]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use claude_memory::history::{HistoryStore, PostgresLog, Query};
use claude_memory::{MemoryTool, PostgresStore, TenantId};
use serde_json::{Value, json};

/// Sets the flag when dropped (see its uses).
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A background loop's bound: 60 s, so a slow machine (or a side that
/// stopped) ends the loop instead of growing the store without end (CI,
/// loaded, saw one loop make 240,000 files while the other side waited).
fn too_long(started: std::time::Instant) -> bool {
    started.elapsed() > std::time::Duration::from_secs(60)
}

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

fn tenant() -> TenantId {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    TenantId::parse(&format!(
        "hatk{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
    .expect("tenant id")
}

type Tool = MemoryTool<HistoryStore<PostgresStore>>;

/// A writer as the CLI builds one: a store with its own pool of `size`,
/// the log on that pool.
fn writer_sized(url: &str, tenant: &TenantId, label: &str, size: usize) -> Tool {
    let store = PostgresStore::connect(url, size)
        .expect("connect")
        .for_tenant(tenant);
    let log = PostgresLog::for_store(&store, tenant.as_str()).expect("log");
    let history = HistoryStore::open(store, log).expect("history");
    MemoryTool::new(history.with_label(label))
}

fn writer(url: &str, tenant: &TenantId, label: &str) -> Tool {
    writer_sized(url, tenant, label, 2)
}

fn call(tool: &Tool, id: &str, input: Value) -> (bool, String) {
    let r = tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
    (r.is_error, r.text().unwrap_or_default().to_owned())
}

fn ok(tool: &Tool, id: &str, input: Value) {
    let (failed, text) = call(tool, id, input.clone());
    assert!(!failed, "{id} ({input}) failed: {text}");
}

/// Every version's (actor, call), each once, `expected` of them, and the
/// next open repairs nothing.
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
    calls
}

/// Attack: another writer appends just before a change whose statement
/// is also its last (a PostgreSQL delete is one statement, `COMMIT`
/// pipelined behind it) and is not prepared yet on the connection: the
/// change must still be made once, with its version, and the connection
/// must not go back to the pool in an aborted transaction.
#[test]
fn another_writers_append_before_a_one_statement_change_fails_no_change() {
    let Some(url) = url() else { return };
    let t = tenant();
    let a = writer(&url, &t, "a");
    let b = writer(&url, &t, "b");
    let mut changes = 0;
    for i in 0..4 {
        ok(
            &a,
            &format!("toolu_a_create_{i}"),
            json!({"command": "create", "path": format!("/memories/a{i}.md"), "file_text": "a\n"}),
        );
        changes += 1;
    }
    // b appends: a's last seen id is now behind.
    ok(
        &b,
        "toolu_b_create",
        json!({"command": "create", "path": "/memories/b.md", "file_text": "v0\n"}),
    );
    changes += 1;
    // a's first delete ever: its statement is prepared on no connection.
    for i in 0..4 {
        ok(
            &a,
            &format!("toolu_a_delete_{i}"),
            json!({"command": "delete", "path": format!("/memories/a{i}.md")}),
        );
        changes += 1;
        ok(
            &b,
            &format!("toolu_b_edit_{i}"),
            json!({"command": "str_replace", "path": "/memories/b.md", "old_str": format!("v{i}"), "new_str": format!("v{}", i + 1)}),
        );
        changes += 1;
    }
    for i in 0..4 {
        ok(
            &a,
            &format!("toolu_a_after_{i}"),
            json!({"command": "create", "path": format!("/memories/after{i}.md"), "file_text": "x\n"}),
        );
        changes += 1;
    }
    drop((a, b));
    check(&url, &t, changes);
}

/// Attack: as above, with the one change whose first statement is its
/// last: a create (no look first). The writer's only change so far was a
/// delete, so the create's statement is prepared on none of its
/// connections when the other writer's append comes first.
#[test]
fn another_writers_append_before_a_first_create_fails_no_change() {
    let Some(url) = url() else { return };
    let t = tenant();
    let a = writer(&url, &t, "a");
    let b = writer(&url, &t, "b");
    let mut changes = 0;
    for i in 0..3 {
        ok(
            &b,
            &format!("toolu_b_seed_{i}"),
            json!({"command": "create", "path": format!("/memories/seed{i}.md"), "file_text": "s\n"}),
        );
        changes += 1;
    }
    // a's first change: a delete.
    ok(
        &a,
        "toolu_a_delete",
        json!({"command": "delete", "path": "/memories/seed0.md"}),
    );
    changes += 1;
    for i in 0..6 {
        // b appends: a's last seen id is behind.
        ok(
            &b,
            &format!("toolu_b_{i}"),
            json!({"command": "create", "path": format!("/memories/b{i}.md"), "file_text": "b\n"}),
        );
        changes += 1;
        ok(
            &a,
            &format!("toolu_a_create_{i}"),
            json!({"command": "create", "path": format!("/memories/a{i}.md"), "file_text": "a\n"}),
        );
        changes += 1;
    }
    drop((a, b));
    check(&url, &t, changes);
}

mod encrypted {
    use super::*;
    use claude_memory::history::SealedLog;
    use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};

    type Enc = MemoryTool<HistoryStore<EncryptedStore<PostgresStore>>>;

    fn enc_history_on(
        url: &str,
        t: &TenantId,
        ring: &Keyring,
        shared_pool: bool,
    ) -> HistoryStore<EncryptedStore<PostgresStore>> {
        let store = PostgresStore::connect(url, 2)
            .expect("connect")
            .for_tenant(t);
        let log = if shared_pool {
            PostgresLog::for_store(&store, t.as_str()).expect("log")
        } else {
            PostgresLog::connect(url, t.as_str()).expect("log")
        };
        let enc = EncryptedStore::open(store, ring.clone()).expect("encrypted");
        let sealed = SealedLog::new(log, &enc);
        HistoryStore::open(enc, sealed).expect("history")
    }

    fn enc_call(tool: &Enc, id: &str, input: Value) {
        let r =
            tool.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
        assert!(
            !r.is_error,
            "{id} ({input}): {}",
            r.text().unwrap_or_default()
        );
    }

    /// Attack: an encrypted rename is several store mutations (journal,
    /// copies, deletes). If the first mutation committed the change's
    /// versions and let the writer lock go, a second writer would run
    /// its change in the middle of the move: its
    /// check of other writers' versions finds the rename's versions
    /// "never happened" (the source still there) and drops them, and the
    /// move then finishes without versions. Promise: a change whole or
    /// not at all, every change recorded once, the next open repairs
    /// nothing.
    #[test]
    fn a_second_writer_does_not_run_inside_an_encrypted_rename() {
        race(true);
    }

    /// The same race with the log on a pool of its own
    /// (`PostgresLog::connect`, before this change): it holds.
    #[test]
    fn control_a_second_writer_waits_for_an_encrypted_rename_with_a_log_of_its_own() {
        race(false);
    }

    fn race(shared_pool: bool) {
        let enc_history =
            |url: &str, t: &TenantId, ring: &Keyring| enc_history_on(url, t, ring, shared_pool);
        let Some(url) = url() else { return };
        let t = tenant();
        let ring = Keyring::new(Key::generate().expect("key"));
        let a = MemoryTool::new(enc_history(&url, &t, &ring).with_label("a"));
        for i in 0..20 {
            enc_call(
                &a,
                &format!("toolu_a_seed_{i}"),
                json!({"command": "create", "path": format!("/memories/d0/f{i}.md"), "file_text": format!("{i}\n")}),
            );
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let started = std::time::Instant::now();
        std::thread::scope(|s| {
            // A panic of the main side (a failed call) stops the loops too,
            // else the scope would wait for them forever (CI hung here).
            let _stop = StopOnDrop(&stop);
            let (url, t, ring, stop) = (&url, &t, &ring, &stop);
            s.spawn(move || {
                let b = MemoryTool::new(enc_history(url, t, ring).with_label("b"));
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) && !too_long(started) {
                    enc_call(&b, &format!("toolu_b_{i}"),
                        json!({"command": "create", "path": format!("/memories/b/{i}.md"), "file_text": "b\n"}));
                    i += 1;
                }
            });
            for r in 0..10 {
                enc_call(
                    &a,
                    &format!("toolu_a_rename_{r}"),
                    json!({"command": "rename", "old_path": format!("/memories/d{r}"), "new_path": format!("/memories/d{}", r + 1)}),
                );
            }
            stop.store(true, Ordering::Relaxed);
        });
        drop(a);
        let history = enc_history(&url, &t, &ring);
        let report = history.repair_report();
        assert!(
            report.dropped.is_empty() && report.recorded.is_empty(),
            "the reopen repaired: {report:?}"
        );
        let versions = history.versions(&Query::default()).expect("versions");
        for r in 0..10 {
            let id = format!("toolu_a_rename_{r}");
            let n = versions
                .iter()
                .filter(|v| v.call.as_deref() == Some(id.as_str()))
                .count();
            assert_eq!(n, 20, "{id} has {n} versions, not one per file moved");
        }
        let anonymous = versions.iter().filter(|v| v.actor.is_none()).count();
        assert_eq!(anonymous, 0, "versions without an actor");
    }
}

/// The opener half of the encrypted rename race: one writer renaming,
/// an opener (`--history` open: repair) in a loop. Found: the writer's
/// own rename fails ("The destination /memories/dN already exists"):
/// the opener's `EncryptedStore::open` finishes the live move from its
/// journal under the writer. It failed the same with `ATK_CONTROL=1`
/// (the log on a pool of its own, `PostgresLog::connect`), since the
/// PostgreSQL store's `exclusive` locked nothing. Holds now: `exclusive`
/// is one transaction holding the tenant's lock, so no opener sees the
/// move's journal before it is done. (With `ATK_CONTROL=1`, or on an
/// encrypted PostgreSQL store without history, the move still spans
/// several transactions: see the README's encrypted-store section.)
mod encrypted_opener {
    use super::*;
    use claude_memory::history::SealedLog;
    use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};

    static SHARED_POOL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    fn open(
        url: &str,
        t: &TenantId,
        ring: &Keyring,
    ) -> Result<HistoryStore<EncryptedStore<PostgresStore>>, String> {
        let store = PostgresStore::connect(url, 2)
            .expect("connect")
            .for_tenant(t);
        let log = if SHARED_POOL.load(Ordering::Relaxed) {
            PostgresLog::for_store(&store, t.as_str()).expect("log")
        } else {
            PostgresLog::connect(url, t.as_str()).expect("log")
        };
        let enc = EncryptedStore::open(store, ring.clone()).map_err(|e| e.to_string())?;
        let sealed = SealedLog::new(log, &enc);
        HistoryStore::open(enc, sealed).map_err(|e| e.to_string())
    }

    #[test]
    fn an_opener_does_not_repair_inside_an_encrypted_rename() {
        if std::env::var_os("ATK_CONTROL").is_some() {
            // The same with the log on a pool of its own (before the change).
            SHARED_POOL.store(false, Ordering::Relaxed);
        }
        let Some(url) = url() else { return };
        let t = tenant();
        let ring = Keyring::new(Key::generate().expect("key"));
        let a = MemoryTool::new(open(&url, &t, &ring).expect("open").with_label("a"));
        let run = |id: String, input: Value| {
            let r = a
                .dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
            assert!(!r.is_error, "{id}: {}", r.text().unwrap_or_default());
        };
        for i in 0..20 {
            run(
                format!("toolu_a_seed_{i}"),
                json!({"command": "create", "path": format!("/memories/d0/f{i}.md"), "file_text": format!("{i}\n")}),
            );
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let started = std::time::Instant::now();
        let (opens, bad) = std::thread::scope(|s| {
            // A panic of the main side (a failed call) stops the loops too,
            // else the scope would wait for them forever (CI hung here).
            let _stop = StopOnDrop(&stop);
            let (url, t, ring, stop) = (&url, &t, &ring, &stop);
            let opener = s.spawn(move || {
                let (mut n, mut bad) = (0, Vec::new());
                while !stop.load(Ordering::Relaxed) && !too_long(started) {
                    match open(url, t, ring) {
                        Ok(h) => {
                            let r = h.repair_report();
                            if !(r.dropped.is_empty() && r.recorded.is_empty()) {
                                bad.push(format!(
                                    "dropped {}, recorded {}",
                                    r.dropped.len(),
                                    r.recorded.len()
                                ));
                            }
                        }
                        Err(e) => bad.push(format!("open failed: {e}")),
                    }
                    n += 1;
                }
                (n, bad)
            });
            let mut failed = Vec::new();
            for r in 0..10 {
                let id = format!("toolu_a_rename_{r}");
                let res = a.dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input":
                    {"command": "rename", "old_path": format!("/memories/d{r}"), "new_path": format!("/memories/d{}", r + 1)}}));
                if res.is_error {
                    failed.push(format!("{id}: {}", res.text().unwrap_or_default()));
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            let out = opener.join().expect("opener");
            assert!(failed.is_empty(), "the writer's rename failed: {failed:?}");
            out
        });
        drop(a);
        let history = open(&url, &t, &ring).expect("reopen");
        let report = history.repair_report();
        assert!(
            bad.is_empty(),
            "{opens} opens, {} repaired or failed: {bad:?}",
            bad.len()
        );
        assert!(
            report.dropped.is_empty() && report.recorded.is_empty(),
            "the reopen repaired: {report:?}"
        );
    }
}

mod encrypted_refusals {
    use super::*;
    use claude_memory::history::SealedLog;
    use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};

    /// Attack: refused writes on an encrypted store (several store
    /// mutations per change): none may leave a version.
    #[test]
    fn refused_encrypted_writes_leave_no_version() {
        let Some(url) = url() else { return };
        let t = tenant();
        let ring = Keyring::new(Key::generate().expect("key"));
        let open = || {
            let store = PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&t);
            let log = PostgresLog::for_store(&store, t.as_str()).expect("log");
            let enc = EncryptedStore::open(store, ring.clone()).expect("encrypted");
            let sealed = SealedLog::new(log, &enc);
            HistoryStore::open(enc, sealed).expect("history")
        };
        let tool = MemoryTool::new(open().with_label("r"));
        let run = |id: &str, input: Value| {
            let r = tool
                .dispatch(&json!({"type": "tool_use", "id": id, "name": "memory", "input": input}));
            (r.is_error, r.text().unwrap_or_default().to_owned())
        };
        assert!(
            !run(
                "toolu_ok1",
                json!({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
            )
            .0
        );
        assert!(
            !run(
                "toolu_ok2",
                json!({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"})
            )
            .0
        );
        let refused = [
            json!({"command": "create", "path": "/memories/a.md", "file_text": "again\n"}),
            json!({"command": "create", "path": "/memories/a.md/x.md", "file_text": "under a file\n"}),
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"}),
            json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/a.md"}),
            json!({"command": "rename", "old_path": "/memories/none", "new_path": "/memories/n2"}),
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "zzz", "new_str": "y"}),
            json!({"command": "delete", "path": "/memories/none.md"}),
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 99, "insert_text": "x"}),
        ];
        for (i, input) in refused.iter().enumerate() {
            let (failed, text) = run(&format!("toolu_refused_{i}"), input.clone());
            assert!(failed, "refused_{i} was not refused: {text}");
        }
        drop(tool);
        let history = open();
        let report = history.repair_report();
        assert!(
            report.dropped.is_empty() && report.recorded.is_empty(),
            "{report:?}"
        );
        let calls: Vec<String> = history
            .versions(&Query::default())
            .expect("versions")
            .iter()
            .map(|v| v.call.clone().unwrap_or_default())
            .collect();
        assert_eq!(calls, ["toolu_ok1", "toolu_ok2"]);
    }
}

/// Attack: versions of about 1 MiB: a refused big create must leave no
/// version; a big create right after another writer's must still
/// succeed, once.
#[test]
fn big_versions_refused_and_stale() {
    let Some(url) = url() else { return };
    let t = tenant();
    let a = writer(&url, &t, "a");
    let b = writer(&url, &t, "b");
    let big = |c: char| std::iter::repeat_n(c, 1024 * 1024 - 1).collect::<String>() + "\n";
    ok(
        &a,
        "toolu_a_big",
        json!({"command": "create", "path": "/memories/big.md", "file_text": big('a')}),
    );
    let (failed, text) = call(
        &a,
        "toolu_a_big_again",
        json!({"command": "create", "path": "/memories/big.md", "file_text": big('b')}),
    );
    assert!(failed, "{text}");
    let mut changes = 1;
    for i in 0..3 {
        ok(
            &b,
            &format!("toolu_b_{i}"),
            json!({"command": "create", "path": format!("/memories/b{i}.md"), "file_text": "b\n"}),
        );
        ok(
            &a,
            &format!("toolu_a_big_{i}"),
            json!({"command": "create", "path": format!("/memories/big{i}.md"), "file_text": big('c')}),
        );
        let (failed, text) = call(
            &a,
            &format!("toolu_a_refused_{i}"),
            json!({"command": "create", "path": format!("/memories/big{i}.md"), "file_text": big('d')}),
        );
        assert!(failed, "{text}");
        changes += 2;
    }
    drop((a, b));
    check(&url, &t, changes);
}

/// Attack: pools of one connection (the change's transaction holds it
/// for the whole change): two writers taking turns, every kind of change, within the
/// checkout timeout.
#[test]
fn pools_of_one_connection_taking_turns() {
    let Some(url) = url() else { return };
    let t = tenant();
    let a = writer_sized(&url, &t, "a", 1);
    let b = writer_sized(&url, &t, "b", 1);
    let started = std::time::Instant::now();
    let mut changes = 0;
    for (tool, w) in [(&a, "a"), (&b, "b"), (&a, "a"), (&b, "b")] {
        let r = changes;
        let f = |k: &str| format!("/memories/{w}/{r}-{k}.md");
        for (i, input) in [
            json!({"command": "create", "path": f("x"), "file_text": "x1\n"}),
            json!({"command": "str_replace", "path": f("x"), "old_str": "x1", "new_str": "x2"}),
            json!({"command": "insert", "path": f("x"), "insert_line": 1, "insert_text": "x3\n"}),
            json!({"command": "rename", "old_path": f("x"), "new_path": f("y")}),
            json!({"command": "delete", "path": f("y")}),
        ]
        .into_iter()
        .enumerate()
        {
            ok(tool, &format!("toolu_{w}_{r}_{i}"), input);
            changes += 1;
        }
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    drop((a, b));
    check(&url, &t, changes);
}

/// Attack: the server drops the writers' connections
/// (`pg_terminate_backend`) every few milliseconds while two writers
/// write. A call that answered success has its version, once; the next
/// open repairs nothing; nothing panics.
#[test]
fn connections_terminated_under_two_writers() {
    let Some(base) = url() else { return };
    // A database of its own: the terminations must not hit other tests.
    let _ = std::process::Command::new("psql")
        .arg(&base)
        .args(["-qAtc", "CREATE DATABASE atk_terminate"])
        .output();
    let url = match base.rsplit_once('/') {
        Some((head, _)) => format!("{head}/atk_terminate"),
        None => base.clone(),
    };
    let t = tenant();
    let a = writer(&url, &t, "a");
    let b = writer(&url, &t, "b");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut succeeded: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        // A panic of the main side (a failed call) stops the loops too,
        // else the scope would wait for them forever (CI hung here).
        let _stop = StopOnDrop(&stop);
        let (url, stop) = (&url, &stop);
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) && !too_long(started) {
                let _ = std::process::Command::new("psql")
                    .arg(url)
                    .args(["-qAtc", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = 'atk_terminate' AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND application_name <> 'psql'"])
                    .output();
                std::thread::sleep(std::time::Duration::from_millis(15));
            }
        });
        for i in 0..150 {
            for (tool, w) in [(&a, "a"), (&b, "b")] {
                let id = format!("toolu_{w}_{i}");
                let (failed, text) = call(
                    tool,
                    &id,
                    json!({"command": "create", "path": format!("/memories/{w}/{i}.md"), "file_text": format!("{w} {i}\n")}),
                );
                if failed {
                    failures.push(format!("{id}: {text}"));
                } else {
                    succeeded.push(id);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    drop((a, b));
    eprintln!(
        "{} succeeded, {} failed; e.g. {:?}",
        succeeded.len(),
        failures.len(),
        failures.iter().take(3).collect::<Vec<_>>()
    );
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    let log = PostgresLog::for_store(&store, t.as_str()).expect("log");
    let history = HistoryStore::open(store, log).expect("history");
    let report = history.repair_report();
    assert!(
        report.dropped.is_empty() && report.recorded.is_empty(),
        "the reopen repaired: {report:?}"
    );
    let calls: Vec<String> = history
        .versions(&Query::default())
        .expect("versions")
        .iter()
        .map(|v| v.call.clone().unwrap_or_default())
        .collect();
    let unique: BTreeSet<&String> = calls.iter().collect();
    assert_eq!(unique.len(), calls.len(), "recorded twice");
    for id in &succeeded {
        assert!(unique.contains(id), "{id} succeeded without a version");
    }
}

/// Attack: directories of 200 files renamed and deleted (200 versions a
/// change) by a writer another writer appends before at every change,
/// while an opener opens (repair) in a loop.
#[test]
fn big_directories_two_writers_and_an_opener() {
    let Some(url) = url() else { return };
    let t = tenant();
    let a = writer(&url, &t, "a");
    let b = writer(&url, &t, "b");
    let mut changes = 0;
    for i in 0..200 {
        ok(
            &a,
            &format!("toolu_a_seed_{i}"),
            json!({"command": "create", "path": format!("/memories/d0/f{i}.md"), "file_text": format!("{i}\n")}),
        );
        changes += 1;
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::time::Instant::now();
    let opens = std::thread::scope(|s| {
        // A panic of the main side (a failed call) stops the loops too,
        // else the scope would wait for them forever (CI hung here).
        let _stop = StopOnDrop(&stop);
        let (url, t, stop) = (&url, &t, &stop);
        let opener = s.spawn(move || {
            let mut bad = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && !too_long(started) {
                let store = PostgresStore::connect(url, 2)
                    .expect("connect")
                    .for_tenant(t);
                let log = PostgresLog::for_store(&store, t.as_str()).expect("log");
                match HistoryStore::open(store, log) {
                    Ok(h) => {
                        let r = h.repair_report();
                        if !(r.dropped.is_empty() && r.recorded.is_empty()) {
                            bad.push(format!("{r:?}"));
                        }
                    }
                    Err(e) => bad.push(format!("open failed: {e}")),
                }
                n += 1;
            }
            (n, bad)
        });
        for r in 0..6 {
            ok(
                &b,
                &format!("toolu_b_{r}"),
                json!({"command": "create", "path": format!("/memories/b{r}.md"), "file_text": "b\n"}),
            );
            ok(
                &a,
                &format!("toolu_a_rename_{r}"),
                json!({"command": "rename", "old_path": format!("/memories/d{r}"), "new_path": format!("/memories/d{}", r + 1)}),
            );
            changes += 200 + 1;
        }
        ok(
            &b,
            "toolu_b_last",
            json!({"command": "create", "path": "/memories/blast.md", "file_text": "b\n"}),
        );
        ok(
            &a,
            "toolu_a_delete",
            json!({"command": "delete", "path": "/memories/d6"}),
        );
        changes += 200 + 1;
        stop.store(true, Ordering::Relaxed);
        opener.join().expect("opener")
    });
    assert!(opens.1.is_empty(), "{} opens, bad: {:?}", opens.0, opens.1);
    drop((a, b));
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    let log = PostgresLog::for_store(&store, t.as_str()).expect("log");
    let history = HistoryStore::open(store, log).expect("history");
    let report = history.repair_report();
    assert!(
        report.dropped.is_empty() && report.recorded.is_empty(),
        "the reopen repaired: {report:?}"
    );
    let all = Query {
        limit: Some(usize::MAX),
        ..Query::default()
    };
    let versions = history.versions(&all).expect("versions");
    assert_eq!(versions.len(), changes, "versions");
    let ids: BTreeSet<u64> = versions.iter().map(|v| v.id).collect();
    assert_eq!(ids.len(), versions.len());
}

/// Attack: another session holds the history's writer lock past the
/// writer's `lock_timeout` while the writer's create (its statement not
/// prepared yet on the connection) waits. That create fails (a timeout,
/// fair); the connection must not go back to the pool inside the
/// aborted transaction, so the writer's next calls, after the lock is
/// let go, succeed.
#[test]
fn a_lock_timeout_leaves_no_aborted_connection_in_the_pool() {
    let Some(url) = url() else { return };
    let t = tenant();
    let store = PostgresStore::builder(&url)
        .max_connections(1)
        .lock_timeout(std::time::Duration::from_millis(300))
        .connect()
        .expect("connect")
        .for_tenant(&t);
    let log = PostgresLog::for_store(&store, t.as_str()).expect("log");
    let a = MemoryTool::new(
        HistoryStore::open(store, log)
            .expect("history")
            .with_label("a"),
    );
    let b = writer(&url, &t, "b");
    ok(
        &b,
        "toolu_b_seed",
        json!({"command": "create", "path": "/memories/seed.md", "file_text": "s\n"}),
    );
    // a's first change: a delete (it joins; the create statement is not prepared).
    ok(
        &a,
        "toolu_a_delete",
        json!({"command": "delete", "path": "/memories/seed.md"}),
    );
    let holder = std::process::Command::new("psql")
        .arg(&url)
        .args(["-qAtc", &format!(
            "SELECT pg_advisory_lock(hashtextextended(E'claude-memory:\\001history-change:{}', 0)); SELECT pg_sleep(1.5)",
            t.as_str()
        )])
        .spawn()
        .expect("psql");
    std::thread::sleep(std::time::Duration::from_millis(400));
    let (failed, text) = call(
        &a,
        "toolu_a_timed_out",
        json!({"command": "create", "path": "/memories/t.md", "file_text": "t\n"}),
    );
    eprintln!("while the lock is held: failed={failed} {text}");
    let _ = holder.wait_with_output();
    for i in 0..3 {
        ok(
            &a,
            &format!("toolu_a_after_{i}"),
            json!({"command": "create", "path": format!("/memories/after{i}.md"), "file_text": "x\n"}),
        );
    }
}
