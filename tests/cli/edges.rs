//! The command line at the edges issue 18 found: another program's SQLite
//! file, `--tenant` on every store, read-only stores, unreadable
//! subdirectories.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

fn run(cwd: &Path, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env_remove("CLAUDE_MEMORY_DIR")
        .env_remove("CLAUDE_MEMORY_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run claude-memory");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Issue 18, edge 4: `view`, `stats` and `export` on another program's
/// SQLite file added four `claude_memory_*` tables and switched it to WAL.
#[test]
fn reading_commands_refuse_another_programs_database_and_leave_it_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("theirs.db");
    let conn = rusqlite::Connection::open(&db).expect("raw");
    conn.execute_batch(
        "CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (7);",
    )
    .expect("their table");
    drop(conn);
    let before = std::fs::read(&db).expect("bytes");
    let store = format!("sqlite:{}", db.display());
    for args in [
        vec!["--store", &store, "view", "/memories"],
        vec!["--store", &store, "stats"],
        vec!["--store", &store, "export"],
        vec!["--store", &store, "serve"],
    ] {
        let out = run(dir.path(), &args, "");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(
            text(&out.stderr).contains("not a claude-memory store"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(std::fs::read(&db).expect("bytes"), before, "{args:?}");
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["theirs.db"]);
}

/// Issue 18, edge 7: rows written through `for_tenant` were invisible to
/// every subcommand. `--tenant ID` reaches them on every store: a
/// directory store's shared base (`TenantStore`), SQLite and PostgreSQL.
#[test]
fn tenant_reaches_one_tenants_memories_on_every_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut stores = vec![
        dir.path().join("base").display().to_string(),
        format!("sqlite:{}", dir.path().join("m.db").display()),
    ];
    if let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        if cfg!(feature = "postgres") {
            // A schema of its own per run is not needed: the tenant is fresh.
            stores.push(url);
        }
    } else {
        println!(
            "skipped: the PostgreSQL part (set CLAUDE_MEMORY_TEST_POSTGRES_URL and build the suite with its default features)"
        );
    }
    let tenant = format!("t{}", std::process::id());
    for store in &stores {
        let base = ["--store", store.as_str()];
        let with = |args: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            v.extend(["--tenant".to_owned(), tenant.clone()]);
            v.extend(args.iter().map(|s| s.to_string()));
            v
        };
        let call = |args: Vec<String>, input: &str| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(dir.path(), &args, input)
        };
        let served = call(
            with(&["serve"]),
            "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"alice's\\n\"}\n",
        );
        assert_eq!(served.status.code(), Some(0), "{store}: {served:?}");
        assert!(
            text(&served.stdout).contains("File created successfully"),
            "{store}: {served:?}"
        );
        let view = call(with(&["view", "/memories/a.md"]), "");
        assert_eq!(view.status.code(), Some(0), "{store}: {view:?}");
        assert!(text(&view.stdout).contains("alice's"), "{store}: {view:?}");
        // The base (or another tenant) does not see it at /memories/a.md.
        let mut other: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        other.extend([
            "--tenant".into(),
            format!("{tenant}-other"),
            "view".into(),
            "/memories/a.md".into(),
        ]);
        assert_eq!(call(other, "").status.code(), Some(1), "{store}");
        let stats = call(with(&["stats"]), "");
        assert_eq!(stats.status.code(), Some(0), "{store}: {stats:?}");
        let export = call(with(&["export"]), "");
        assert_eq!(export.status.code(), Some(0), "{store}: {export:?}");
        let backup = text(&export.stdout);
        assert!(backup.contains("\"/memories/a.md\""), "{store}: {backup}");
        let file = dir.path().join("backup.json");
        std::fs::write(&file, &backup).expect("backup file");
        let second = format!("{tenant}-copy");
        let mut import: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        import.extend([
            "--tenant".into(),
            second.clone(),
            "import".into(),
            file.display().to_string(),
        ]);
        let imported = call(import, "");
        assert_eq!(imported.status.code(), Some(0), "{store}: {imported:?}");
        let mut view2: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        view2.extend([
            "--tenant".into(),
            second,
            "view".into(),
            "/memories/a.md".into(),
        ]);
        assert!(text(&call(view2, "").stdout).contains("alice's"), "{store}");
    }
    // The shared base holds the tenant's directory.
    assert!(dir.path().join("base").join(&tenant).join("a.md").is_file());
    // A tenant id is checked.
    let bad = run(
        dir.path(),
        &[
            "--store",
            &stores[0],
            "--tenant",
            "con",
            "view",
            "/memories",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(text(&bad.stderr).contains("--tenant"), "{bad:?}");
}

#[test]
fn tenant_reaches_rows_written_through_for_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("m.db");
    let store = claude_memory::SqliteStore::open(&db).expect("open");
    let alice = store.for_tenant(&claude_memory::TenantId::parse("alice").expect("id"));
    claude_memory::store::MemoryStoreExt::write(
        &alice,
        &claude_memory::MemoryPath::parse("/memories/prefs.md").expect("path"),
        b"tea\n",
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    drop((alice, store));
    let spec = format!("sqlite:{}", db.display());
    let seen = run(
        dir.path(),
        &[
            "--store",
            &spec,
            "--tenant",
            "alice",
            "view",
            "/memories/prefs.md",
        ],
        "",
    );
    assert_eq!(seen.status.code(), Some(0), "{seen:?}");
    assert!(text(&seen.stdout).contains("tea"), "{seen:?}");
    // With --history, the tenant's changes are its own versions.
    let served = run(
        dir.path(),
        &["--store", &spec, "--tenant", "alice", "--history", "serve"],
        "{\"command\":\"str_replace\",\"path\":\"/memories/prefs.md\",\"old_str\":\"tea\",\"new_str\":\"coffee\"}\n",
    );
    assert_eq!(served.status.code(), Some(0), "{served:?}");
    let history = run(
        dir.path(),
        &["--store", &spec, "--tenant", "alice", "history"],
        "",
    );
    assert_eq!(history.status.code(), Some(0), "{history:?}");
    assert!(
        text(&history.stdout).contains("/memories/prefs.md"),
        "{history:?}"
    );
}

/// Runs the binary as an unprivileged user when this test runs as root
/// (root reads a directory of mode 000), else as is. `None` when neither
/// can make a directory unreadable.
#[cfg(unix)]
fn as_unprivileged(cwd: &Path, args: &[&str]) -> Option<Output> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .map(|o| text(&o.stdout).trim() == "0")?;
    let mut c = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--", BIN]);
        c
    } else {
        Command::new(BIN)
    };
    let out = c
        .args(args)
        .current_dir(cwd)
        .env_remove("CLAUDE_MEMORY_DIR")
        .env_remove("CLAUDE_MEMORY_STORE")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(out)
}

/// Issue 18, edge 10: `stats` stopped at one unreadable subdirectory,
/// where `view` copes; and writing commands on a store the user may only
/// read said "Permission denied" without saying what needs write access.
#[cfg(unix)]
#[test]
fn stats_copes_with_an_unreadable_subdirectory_and_writes_say_what_they_need() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir_in("/tmp").expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let store = dir.path().join("mem");
    std::fs::create_dir(&store).expect("store");
    std::fs::write(store.join("a.md"), "hello\n").expect("file");
    std::fs::create_dir(store.join("locked")).expect("locked");
    std::fs::write(store.join("locked/b.md"), "hidden\n").expect("file");
    for p in [&store, &dir.path().to_path_buf()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(store.join("a.md"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    std::fs::set_permissions(store.join("locked"), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");
    let spec = store.display().to_string();
    let Some(stats) = as_unprivileged(dir.path(), &["--store", &spec, "stats"]) else {
        println!("skipped: no way to run as an unprivileged user");
        return;
    };
    if text(&stats.stderr).contains("runuser") {
        println!("skipped: runuser failed: {}", text(&stats.stderr));
        return;
    }
    // The totals of what could be read, then the directory that could
    // not, named, and exit 1: never a count that silently leaves it out.
    assert_eq!(stats.status.code(), Some(1), "{stats:?}");
    assert!(
        text(&stats.stdout).contains("files: 1"),
        "{}",
        text(&stats.stdout)
    );
    assert!(
        text(&stats.stderr).contains("/memories/locked"),
        "{}",
        text(&stats.stderr)
    );
    let view = as_unprivileged(dir.path(), &["--store", &spec, "view", "/memories"]).expect("view");
    assert_eq!(view.status.code(), Some(0), "{view:?}");
    assert!(
        text(&view.stdout).contains("/memories/locked/ (Error: could not be listed)"),
        "{}",
        text(&view.stdout)
    );
    // A writing command on a store this user may only read.
    let serve = as_unprivileged(dir.path(), &["--store", &spec, "serve"]).expect("serve");
    assert_eq!(serve.status.code(), Some(1), "{serve:?}");
    let err = text(&serve.stderr);
    assert!(err.contains("write access"), "{err}");
    assert!(err.contains("view, stats and export only read"), "{err}");
    std::fs::set_permissions(store.join("locked"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
}

/// A new user's review: a mistyped store URL was echoed back whole,
/// password included (`postgress://u:hunter2@…`, `postgres:/u:hunter2@…`),
/// to the terminal and any log of it. The message still names what was
/// wrong, with the password masked.
#[test]
fn a_mistyped_store_url_is_echoed_without_its_password() {
    let dir = tempfile::tempdir().expect("dir");
    for store in [
        "postgress://u:hunter2@127.0.0.1:5432/mem",
        "postgres:/u:hunter2@127.0.0.1:5432/mem",
        "postgres:u:hun/ter2@127.0.0.1/mem",
    ] {
        let out = run(dir.path(), &["--store", store, "view", "/memories"], "");
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{store}");
        assert!(!err.contains("hunter2") && !err.contains("ter2"), "{err}");
        assert!(err.contains("u:***@127.0.0.1"), "{err}");
    }
}

/// A newcomer coming from sqlx writes `sqlite://mem.db`: it names the file
/// `mem.db`, as `sqlite:mem.db` does.
#[test]
fn sqlx_style_sqlite_urls_name_the_same_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let create = r#"{"command":"create","path":"/memories/a.md","file_text":"hi\n"}"#;
    let out = run(dir.path(), &["--store", "sqlite://mem.db", "serve"], create);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(dir.path().join("mem.db").is_file());
    let out = run(
        dir.path(),
        &["--store", "sqlite:mem.db", "view", "/memories/a.md"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stdout).contains("hi"), "{out:?}");
}

/// `--store mem.db` on a SQLite file: the error says to write `sqlite:`.
#[test]
fn a_sqlite_file_given_as_a_directory_store_suggests_the_sqlite_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let create = r#"{"command":"create","path":"/memories/a.md","file_text":"hi\n"}"#;
    let out = run(dir.path(), &["--store", "sqlite:mem.db", "serve"], create);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(dir.path(), &["--store", "mem.db", "view", "/memories"], "");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("--store sqlite:mem.db"),
        "{out:?}"
    );
}
