//! The `claude-memory` binary, run as a user would (feature `cli`).
#![cfg(feature = "cli")]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use claude_memory::store::MemoryStoreExt as _;
use proptest::prelude::*;

const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

/// A command with no store in its environment, run in `cwd`.
fn command(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .current_dir(cwd)
        .env_remove("CLAUDE_MEMORY_DIR")
        .env_remove("CLAUDE_MEMORY_STORE")
        .stdin(Stdio::null());
    c
}

fn run_in(cwd: &Path, args: &[&str]) -> Output {
    command(cwd, args).output().expect("run claude-memory")
}

fn cli(args: &[&str]) -> Output {
    run_in(&std::env::temp_dir(), args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit status `code`, and never a panic.
#[track_caller]
fn assert_exit(o: &Output, code: i32) {
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
}

fn backdate(file: &Path, days: u64) {
    std::fs::File::options()
        .write(true)
        .open(file)
        .expect("open")
        .set_modified(SystemTime::now() - Duration::from_secs(days * 86_400))
        .expect("backdate");
}

/// A directory store with /memories/a.md and /memories/old/b.md.
fn store_with_two_files() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    std::fs::create_dir_all(root.join("old")).expect("mkdir");
    std::fs::write(root.join("a.md"), "alpha\n").expect("write");
    std::fs::write(root.join("old/b.md"), "beta beta\n").expect("write");
    (dir, root)
}

/// Names below `dir` with their modification times, to show nothing changed.
fn tree_state(dir: &Path) -> Vec<(String, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        out.push((
            d.display().to_string(),
            std::fs::metadata(&d)
                .and_then(|m| m.modified())
                .expect("mtime"),
        ));
        for e in std::fs::read_dir(&d).expect("list") {
            let e = e.expect("entry");
            let m = e.metadata().expect("stat");
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path().display().to_string(), m.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn version_help_and_usage_errors() {
    let o = cli(&["--version"]);
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        format!("claude-memory {}\n", env!("CARGO_PKG_VERSION"))
    );
    let o = cli(&["--help"]);
    assert_exit(&o, 0);
    assert!(
        stdout(&o).starts_with("claude-memory: operate a Claude memory store"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("Exit status: 0 success, 1 the operation failed, 2 usage error."));
    for c in ["serve", "view", "export", "import", "prune", "stats"] {
        let o = cli(&[c, "--help"]);
        assert_exit(&o, 0);
        assert!(
            stdout(&o).contains(&format!("Usage: claude-memory {c}")),
            "{c}: {}",
            stdout(&o)
        );
        assert_eq!(stdout(&cli(&["help", c])), stdout(&o));
    }
    // Usage errors: status 2, on stderr, nothing on stdout.
    for args in [
        &["frobnicate"][..],
        &[],
        &["--root", "/tmp/x", "prune", "--older-than", "soon"],
        &["--root", "/tmp/x", "prune"],
        &["--view-limit", "lots", "stats"],
        &["--store", "a", "--root", "b", "stats"],
        &["view"],
        &["view", "/memories", "--range", "1-2"],
        &["stats", "extra"],
        &["--root=/tmp/x", "prune", "--older-than=30é"],
        &["--root", "m", "prune", "--older-than", "30é"],
        &["--root", "m", "prune", "--older-than", "é"],
    ] {
        let o = cli(args);
        assert_exit(&o, 2);
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!stderr(&o).is_empty(), "{args:?}");
    }
    let o = cli(&["frobnicate"]);
    assert!(
        stderr(&o).contains("unrecognized subcommand 'frobnicate'"),
        "{}",
        stderr(&o)
    );
    let o = cli(&["stats"]);
    assert_exit(&o, 2);
    assert_eq!(
        stderr(&o),
        "claude-memory: no store given: use --store STORE (or --root DIR, CLAUDE_MEMORY_STORE, CLAUDE_MEMORY_DIR)\nRun `claude-memory --help` for usage.\n"
    );
    let o = cli(&["--root", "/tmp/x", "prune", "--older-than", "soon"]);
    assert!(
        stderr(&o).contains("invalid value 'soon' for '--older-than <AGE>'")
            && stderr(&o).contains("30d, 12h, 1d12h"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn serve_view_stats_export_import() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    let root_s = root.to_str().expect("utf8 path");

    let mut child = command(dir.path(), &["--root", root_s, "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("serve");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(concat!(
            "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"alpha\\n\"}\n",
            "\n",
            "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"memory\",\"input\":{\"command\":\"create\",\"path\":\"/memories/old/b.md\",\"file_text\":\"beta beta\\n\"}}\n",
        ).as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out),
        "{\"type\":\"tool_result\",\"content\":\"File created successfully at: /memories/a.md\"}\n{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"File created successfully at: /memories/old/b.md\"}\n"
    );

    let o = run_in(dir.path(), &["--store", root_s, "view", "/memories"]);
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n16B\t/memories\n6B\t/memories/a.md\n10B\t/memories/old/\n10B\t/memories/old/b.md\n"
    );
    // `--flag=value` forms, options after the command, a negative END.
    let o = run_in(
        dir.path(),
        &["view", "/memories/old/b.md", "--range=1:-1", "--root=mem"],
    );
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        "Here's the content of /memories/old/b.md with line numbers:\n     1\tbeta beta\n"
    );
    let o = run_in(dir.path(), &["--root=./mem", "view", "/memories/nope"]);
    assert_exit(&o, 1);
    assert_eq!(
        stderr(&o),
        "The path /memories/nope does not exist. Please provide a valid path.\n"
    );

    let o = run_in(dir.path(), &["--root", "mem", "stats"]);
    assert_exit(&o, 0);
    let s = stdout(&o);
    assert!(
        s.starts_with("files: 2\nbytes: 16 (16B)\nlargest: /memories/old/b.md (10B)\noldest: "),
        "{s}"
    );

    std::fs::create_dir(root.join("empty")).expect("mkdir");
    let o = run_in(
        dir.path(),
        &["--root=mem", "export", "--output=backup.json"],
    );
    assert_exit(&o, 0);
    assert_eq!(
        stderr(&o),
        "exported 2 files and 1 empty directory to backup.json\n"
    );
    let text = std::fs::read_to_string(dir.path().join("backup.json")).expect("backup");
    assert!(
        text.contains("\"version\": 2") && text.contains("\"modified\": \""),
        "{text}"
    );
    // To stdout, the same document.
    let o = run_in(dir.path(), &["--root=mem", "export"]);
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), text);

    let o = run_in(dir.path(), &["--root", "copy", "import", "backup.json"]);
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "imported 2 files and 1 empty directory\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("copy/old/b.md")).expect("copied"),
        "beta beta\n"
    );
    assert!(dir.path().join("copy/empty").is_dir());
    let o = run_in(dir.path(), &["--root", "copy", "import", "backup.json"]);
    assert_exit(&o, 1);
    assert_eq!(
        stderr(&o),
        "claude-memory: backup.json: nothing was imported: 2 problems found\n  /memories/a.md already exists (allow overwriting to replace it: --overwrite on the command line, ImportOptions::overwrite(true) in code)\n  /memories/old/b.md already exists (allow overwriting to replace it: --overwrite on the command line, ImportOptions::overwrite(true) in code)\n"
    );
    let o = run_in(
        dir.path(),
        &["--root", "copy", "import", "--overwrite", "backup.json"],
    );
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "imported 2 files (2 replaced)\n");
    // From stdin, into a store named by CLAUDE_MEMORY_STORE.
    let mut child = command(dir.path(), &["import", "-"])
        .env("CLAUDE_MEMORY_STORE", "from-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_exit(&o, 0);
    assert!(dir.path().join("from-stdin/a.md").is_file());
}

#[test]
fn prune_with_human_ages_dry_run_and_plurals() {
    let (_dir, root) = store_with_two_files();
    backdate(&root.join("old/b.md"), 40);
    let root_s = root.to_str().expect("utf8");
    // Not old enough under any spelling of 45 days: nothing goes.
    for age in ["45d", "45 days", "1month 15d", "1080h"] {
        let o = cli(&["--root", root_s, "prune", "--older-than", age]);
        assert_exit(&o, 0);
        assert_eq!(
            stdout(&o),
            "removed 0 files (0B) and 0 directories; kept 2 files\n",
            "{age}"
        );
    }
    let before = tree_state(&root);
    let o = cli(&["--root", root_s, "prune", "--older-than=30d", "--dry-run"]);
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        "would remove /memories/old/b.md (10B)\nwould remove empty directory /memories/old\nwould remove 1 file (10B) and 1 directory; would keep 1 file\n"
    );
    assert_eq!(tree_state(&root), before, "a dry run changes nothing");

    let o = cli(&["prune", "--older-than", "1d12h", "--root", root_s]);
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o),
        "removed /memories/old/b.md (10B)\nremoved empty directory /memories/old\nremoved 1 file (10B) and 1 directory; kept 1 file\n"
    );
    assert!(root.join("a.md").exists() && !root.join("old").exists());
}

#[test]
fn reading_commands_never_create_or_change_a_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    // A mistyped directory: a clear error, status 1, nothing created.
    for args in [
        &["--root", "memroy", "export"][..],
        &["--root", "memroy", "export", "--output", "out.json"],
        &["--root", "memroy", "stats"],
        &["--root", "memroy", "view", "/memories"],
        &[
            "--root",
            "memroy",
            "prune",
            "--older-than",
            "30d",
            "--dry-run",
        ],
        &["--root", "memroy", "prune", "--older-than", "30d"],
        &["--store", "sqlite:memroy.db", "stats"],
        &["--store", "sqlite:memroy.db", "export"],
    ] {
        let o = run_in(dir.path(), args);
        assert_exit(&o, 1);
        assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains("memroy"), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("exported"), "{args:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("list").count(),
            0,
            "{args:?} created something"
        );
    }
    let o = run_in(dir.path(), &["--root", "memroy", "export"]);
    assert_eq!(
        stderr(&o),
        "claude-memory: no memory store at memroy: the directory does not exist (mistyped? `serve`, `mcp` or `import` create one)\n"
    );
    // A missing `mem.db` is most likely a SQLite file named without `sqlite:`.
    let o = run_in(dir.path(), &["--store", "mem.db", "view", "/memories"]);
    assert_exit(&o, 1);
    assert_eq!(
        stderr(&o),
        "claude-memory: no memory store at mem.db: the directory does not exist (for a SQLite file, write --store sqlite:mem.db)\n"
    );

    // An existing store that was never opened for writing: reading it
    // creates nothing (no lock file) and changes no time.
    let (_keep, root) = store_with_two_files();
    let root_s = root.to_str().expect("utf8");
    let before = tree_state(&root);
    for args in [
        &["stats"][..],
        &["export"],
        &["view", "/memories/a.md"],
        &["prune", "--older-than", "1s", "--dry-run"],
    ] {
        let mut all = vec!["--root", root_s];
        all.extend_from_slice(args);
        assert_exit(&cli(&all), 0);
    }
    assert_eq!(tree_state(&root), before);

    // And a store this process may not write to. Root ignores permissions
    // (as in CI), so there this part cannot show anything: it is skipped.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let probe = root.join("probe");
        if std::fs::write(&probe, "").is_ok() {
            std::fs::remove_file(&probe).expect("cleanup");
            eprintln!("running as root: permissions do not bite, read-only part skipped");
        } else {
            let o = cli(&["--root", root_s, "stats"]);
            assert_exit(&o, 0);
            assert!(stdout(&o).starts_with("files: 2\n"));
            let o = cli(&["--root", root_s, "export"]);
            assert_exit(&o, 0);
            // Writing still fails, cleanly.
            let o = cli(&["--root", root_s, "prune", "--older-than", "1s"]);
            assert_exit(&o, 1);
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .expect("chmod back");
    }
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let (_dir, root) = store_with_two_files();
    // Bigger than a pipe's buffer, so the writer must meet the closed end.
    std::fs::write(root.join("big.txt"), "x".repeat(1 << 20)).expect("write");
    for args in [&["export"][..], &["stats"], &["view", "/memories/big.txt"]] {
        let mut all = vec!["--root", root.to_str().expect("utf8")];
        all.extend_from_slice(args);
        let mut child = command(Path::new("/"), &all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        drop(child.stdout.take()); // like `claude-memory … | true`
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("read");
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
    // Through a shell, as a user would type it.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("'{BIN}' --root '{}' export | true", root.display()))
        .output()
        .expect("sh");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), "");
}

#[test]
fn imports_obey_the_limits_and_are_all_or_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("b.md"), "mine").expect("write");
    let big = serde_json::json!({"format": "claude-memory-export", "version": 2, "files": [
        {"path": "/memories/a.md", "text": "small"},
        {"path": "/memories/big.txt", "text": "x".repeat(5 * 1024 * 1024)},
    ]});
    std::fs::write(dir.path().join("big.json"), big.to_string()).expect("write");
    let o = run_in(
        dir.path(),
        &["--root=mem", "--max-file-size=1000", "import", "big.json"],
    );
    assert_exit(&o, 1);
    assert!(
        stderr(&o).contains("/memories/big.txt is 5242880 bytes, over the file size limit of 1000"),
        "{}",
        stderr(&o)
    );
    // The default limit is the handler's: 1 MiB.
    let o = run_in(dir.path(), &["--root=mem", "import", "big.json"]);
    assert_exit(&o, 1);
    let o = run_in(
        dir.path(),
        &[
            "--root=mem",
            "--max-store-size",
            "10",
            "import",
            "big.json",
            "--max-file-size",
            "10000000",
        ],
    );
    assert_exit(&o, 1);
    assert!(
        stderr(&o).contains("over its size limit of 10"),
        "{}",
        stderr(&o)
    );

    // A conflict in the second entry: the first is not written either.
    let conflict = serde_json::json!({"format": "claude-memory-export", "version": 2, "files": [
        {"path": "/memories/a.md", "text": "would be written"},
        {"path": "/memories/b.md", "text": "theirs"},
    ]});
    std::fs::write(dir.path().join("conflict.json"), conflict.to_string()).expect("write");
    let o = run_in(dir.path(), &["--root=mem", "import", "conflict.json"]);
    assert_exit(&o, 1);
    assert!(!root.join("a.md").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("b.md")).expect("read"),
        "mine"
    );

    let newer = r#"{"format": "claude-memory-export", "version": 3, "files": []}"#;
    std::fs::write(dir.path().join("newer.json"), newer).expect("write");
    let o = run_in(dir.path(), &["--root=mem", "import", "newer.json"]);
    assert_exit(&o, 1);
    assert_eq!(
        stderr(&o),
        "claude-memory: newer.json: this export is version 3, from a newer claude-memory; this one reads versions 1 to 2: upgrade claude-memory to import it\n"
    );
    // A mistyped backup file: refused before any store is made.
    let o = run_in(dir.path(), &["--root=new", "import", "mising.json"]);
    assert_exit(&o, 1);
    assert!(stderr(&o).starts_with("claude-memory: cannot read mising.json: "));
    assert!(!dir.path().join("new").exists());
}

#[test]
fn sqlite_stores() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (_keep, root) = store_with_two_files();
    let o = cli(&[
        "--root",
        root.to_str().expect("utf8"),
        "export",
        "--output",
        dir.path().join("b.json").to_str().expect("utf8"),
    ]);
    assert_exit(&o, 0);
    let o = run_in(dir.path(), &["--store", "sqlite:m.db", "import", "b.json"]);
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "imported 2 files\n");
    let o = run_in(
        dir.path(),
        &["--store=sqlite:m.db", "view", "/memories/old/b.md"],
    );
    assert_exit(&o, 0);
    assert!(stdout(&o).ends_with("     1\tbeta beta\n"));
    let o = run_in(dir.path(), &["stats"]);
    assert_exit(&o, 2);
    let o = command(dir.path(), &["stats"])
        .env("CLAUDE_MEMORY_STORE", "sqlite:m.db")
        .output()
        .expect("run");
    assert_exit(&o, 0);
    assert!(
        stdout(&o).starts_with("files: 2\nbytes: 16 (16B)\n"),
        "{}",
        stdout(&o)
    );
    let o = run_in(dir.path(), &["--store", "sqlite:", "stats"]);
    assert_exit(&o, 2);
}

/// With CLAUDE_MEMORY_TEST_POSTGRES_URL set (and the postgres feature), a
/// round trip through a PostgreSQL store; otherwise, without the feature,
/// a clear refusal.
#[test]
fn postgres_stores() {
    if cfg!(not(feature = "postgres")) {
        let o = cli(&["--store", "postgres://nobody@127.0.0.1:1/x", "stats"]);
        assert_exit(&o, 2);
        assert!(stderr(&o).contains("this claude-memory was built without the postgres feature"));
        return;
    }
    let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        eprintln!("CLAUDE_MEMORY_TEST_POSTGRES_URL not set: skipped");
        return;
    };
    let o = cli(&["--store", "postgres://nobody@127.0.0.1:1/x", "stats"]);
    assert_exit(&o, 1);
    assert!(stderr(&o).starts_with("claude-memory: cannot connect to the PostgreSQL store"));
    // The database is shared (and the CLI has no tenants): only touch a
    // directory of our own, and remove it afterwards.
    let own = format!("/memories/cli-test-{}", std::process::id());
    let dir = tempfile::tempdir().expect("temporary directory");
    let b = dir.path().join("b.json");
    let doc = serde_json::json!({"format": "claude-memory-export", "version": 2, "files": [
        {"path": format!("{own}/b.md"), "text": "beta beta\n"},
        {"path": format!("{own}/empty"), "directory": true},
    ]});
    std::fs::write(&b, doc.to_string()).expect("write");
    let o = cli(&["--store", &url, "import", b.to_str().expect("utf8")]);
    let o2 = cli(&["--store", &url, "view", &format!("{own}/b.md")]);
    let o3 = cli(&["--store", &url, "export"]);
    #[cfg(feature = "postgres")]
    {
        let store = claude_memory::PostgresStore::connect(&url, 1).expect("connect");
        let own = claude_memory::MemoryPath::parse(&own).expect("path");
        claude_memory::store::MemoryStoreExt::delete(&store, &own).expect("clean up");
    }
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "imported 1 file and 1 empty directory\n");
    assert_exit(&o2, 0);
    assert!(stdout(&o2).ends_with("     1\tbeta beta\n"));
    assert_exit(&o3, 0);
    let exported = claude_memory::backup::Backup::from_json(&stdout(&o3)).expect("a backup");
    assert!(
        exported
            .files
            .iter()
            .any(|e| e.path == format!("{own}/empty") && e.directory)
    );
}

/// Argument words a user (or a fuzzer) might type.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "serve",
            "view",
            "export",
            "import",
            "prune",
            "stats",
            "help",
            "--help",
            "-h",
            "--version",
            "-V",
            "--root",
            "--store",
            "--view-limit",
            "--max-file-size",
            "--max-store-size",
            "--older-than",
            "--dry-run",
            "--range",
            "--output",
            "-o",
            "--overwrite",
            "/memories",
            "/memories/a.md",
            "30d",
            "1d12h",
            "30 days",
            "30é",
            "é",
            "-1",
            "1:-1",
            ":",
            "sqlite:",
            "sqlite:x.db",
            "postgres://nobody@127.0.0.1:1/x",
            "--root=m",
            "--older-than=30é",
            "--range=1:é",
            "--",
            "-",
            "",
            "m",
            "18446744073709551616",
            "99999999999999999999d",
        ])
        .prop_map(str::to_owned),
        "[^/\\p{Cc}]{0,12}",
        "--[a-z-]{1,12}(=[^/\\p{Cc}]{0,6})?",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// No argument list makes it panic: it ends 0, 1 or 2. It runs in a
    /// temporary directory, and every path it could write to is relative
    /// (random words have no '/', and a path after a store or output flag
    /// is made relative), so a random `serve` or `export -o` stays inside.
    #[test]
    fn no_argument_list_panics(words in prop::collection::vec(word(), 0..6)) {
        let cwd = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(cwd.path().join("m")).expect("store");
        let mut args: Vec<String> = Vec::new();
        for w in words {
            let after_path_flag = args
                .last()
                .is_some_and(|a| ["--root", "--store", "--output", "-o"].contains(&a.as_str()));
            args.push(if after_path_flag && w.starts_with('/') { format!(".{w}") } else { w });
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = command(cwd.path(), &args)
            .env("CLAUDE_MEMORY_DIR", cwd.path().join("m"))
            .output()
            .expect("run");
        prop_assert!(!stderr(&o).contains("panicked"), "{:?}: {}", args, stderr(&o));
        prop_assert!(matches!(o.status.code(), Some(0..=2)), "{:?}: {:?}", args, o.status);
    }
}

/// The store option behind the reading commands:
/// `FilesystemStore::builder(dir).read_only(true)` (and `create(false)`).
#[test]
fn read_only_filesystem_stores_refuse_writes_and_create_nothing() {
    use claude_memory::store::WriteMode;
    use claude_memory::{FilesystemStore, MemoryPath, MemoryStore, StoreError};

    let dir = tempfile::tempdir().expect("temporary directory");
    let missing = dir.path().join("missing");
    for builder in [
        FilesystemStore::builder(&missing).read_only(true),
        FilesystemStore::builder(&missing).create(false),
    ] {
        let e = builder.open().expect_err("no such store");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(!missing.exists());
    }
    let (_keep, root) = store_with_two_files();
    let before = tree_state(&root);
    let store = FilesystemStore::builder(&root)
        .read_only(true)
        .open()
        .expect("open");
    let a = MemoryPath::parse("/memories/a.md").expect("path");
    assert_eq!(store.read(&a, 100).expect("read").data, b"alpha\n");
    let refused = |r: Result<(), StoreError>| match r {
        Err(StoreError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::ReadOnlyFilesystem)
        }
        other => panic!("{other:?}"),
    };
    refused(store.write(&a, b"x", WriteMode::Overwrite).map(|_| ()));
    refused(store.delete(&a));
    refused(store.rename(&a, &MemoryPath::parse("/memories/b").expect("path")));
    drop(store);
    assert_eq!(tree_state(&root), before);
}

/// A store named like a URL must be one the tool knows: a typo never
/// becomes a directory that `import` creates and fills.
#[test]
fn a_mistyped_store_url_is_a_usage_error_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let backup = dir.path().join("b.json");
    std::fs::write(
        &backup,
        r#"{"format":"claude-memory-export","version":2,"files":[{"path":"/memories/a.md","text":"a"}]}"#,
    )
    .expect("write backup");
    let backup = backup.to_str().expect("utf8");
    for store in [
        "postgress://postgres@127.0.0.1:1/x",
        "postgres:/127.0.0.1:1/x",
        "sqlit:m.db",
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
            .current_dir(dir.path())
            .args(["--store", store, "import", backup])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{store}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("claude-memory: "), "{}", stderr(&o));
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["b.json"], "nothing but the backup");
}

#[test]
fn a_refused_import_creates_no_store_and_export_dash_is_stdout() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let backup = dir.path().join("newer.json");
    std::fs::write(
        &backup,
        r#"{"format":"claude-memory-export","version":99,"files":[]}"#,
    )
    .expect("write backup");
    let root = dir.path().join("m");
    let root_s = root.to_str().expect("utf8");
    let o = cli(&["--root", root_s, "import", backup.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("from a newer claude-memory"),
        "{}",
        stderr(&o)
    );
    assert!(!root.exists(), "a refused import must not create the store");

    let o = cli(&["--root", root_s, "serve"]);
    assert!(o.status.success());
    let o = cli(&["--root", root_s, "export", "--output", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(r#""format": "claude-memory-export""#),
        "{}",
        stdout(&o)
    );
    assert!(!dir.path().join("-").exists() && !root.join("-").exists());
}
