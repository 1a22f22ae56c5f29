//! Issue 14: no model call may crash the process, brick a store or hide a
//! file. Each reproduction is written as the attack: JSON lines through the
//! bridge (in-process, or the `stdio` example for the process abort), on
//! every backend it applies to (in-memory, filesystem, TenantStore over
//! each, and SQLite and PostgreSQL where the attack reaches a store
//! primitive: the rename invariant and rmdir-semantics expiry).

#[cfg(unix)]
use std::fs;
#[cfg(unix)]
use std::os::fd::{AsFd, OwnedFd};
#[cfg(unix)]
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use claude_memory::store::{
    DirEntry, FileContent, MemoryStore, MemoryStoreExt as _, Metadata, Op, StoreError, StoreResult,
    Version, WriteMode,
};
use claude_memory::{
    Config, FilesystemStore, InMemoryStore, MemoryPath, MemoryTool, TenantId, TenantStore,
};
use serde_json::{Value, json};

#[path = "../common/mod.rs"]
mod common;
use common::stdio_binary;

/// The SQL stores this build and environment can reach: SQLite in memory
/// (feature `sqlite`) and a fresh tenant of the test PostgreSQL database
/// (feature `postgres` and CLAUDE_MEMORY_TEST_POSTGRES_URL; required when
/// CLAUDE_MEMORY_REQUIRE_POSTGRES is set, as in CI).
#[allow(
    unused_mut,
    clippy::vec_init_then_push,
    reason = "which stores are pushed depends on the features"
)]
fn sql_stores() -> Vec<Box<dyn MemoryStore>> {
    let mut stores: Vec<Box<dyn MemoryStore>> = Vec::new();
    #[cfg(feature = "sqlite")]
    stores.push(Box::new(
        claude_memory::SqliteStore::open_in_memory().expect("sqlite"),
    ));
    #[cfg(feature = "postgres")]
    match std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        Ok(url) => {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let db = claude_memory::PostgresStore::connect(&url, 2).expect("postgres");
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let id = format!(
                "i14-{}-{}-{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            stores.push(Box::new(
                db.for_tenant(&TenantId::parse(&id).expect("tenant id")),
            ));
        }
        Err(_) => assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        ),
    }
    stores
}

/// Runs JSON lines through the bridge; one answer per line.
fn attack<S: MemoryStore>(tool: &MemoryTool<S>, lines: &[Value]) -> Vec<Value> {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut out = Vec::new();
    claude_memory::bridge::serve(tool, input.as_bytes(), &mut out).expect("serve");
    String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn text(v: &Value) -> &str {
    v["content"].as_str().unwrap_or_default()
}

/// The deepest legal chain: `/memories/{top}/x/x/…/x/{name}`, exactly
/// `len` bytes.
fn chain(top: &str, name: &str, len: usize) -> String {
    let head = format!("/memories/{top}/");
    let levels = (len - head.len() - name.len()) / 2;
    let mut p = head + &"x/".repeat(levels) + name;
    while p.len() < len {
        p.insert(format!("/memories/{top}/").len(), 'y');
    }
    p
}

/// Reproduction 1's lines: one create, then renames that each move the
/// top directory ~505 levels deeper, then a delete.
fn deepening_renames() -> Vec<Value> {
    let mut lines = vec![json!({"command":"create","path":"/memories/t0/f.md","file_text":"x"})];
    for i in 0..160 {
        let to = chain(&format!("t{}", i + 1), &format!("t{i}"), 1024);
        assert!(to.len() <= 1024);
        lines.push(json!({"command":"rename","old_path":format!("/memories/t{i}"),"new_path":to}));
    }
    lines.push(json!({"command":"delete","path":"/memories/t0"}));
    lines
}

fn check_deepening_refused(answers: &[Value]) {
    let first = chain("t1", "t0", 1024);
    assert_eq!(
        text(&answers[1]),
        format!(
            "Error: Cannot move /memories/t0 to {first}: the path of an entry below it would be longer than 1024 bytes"
        )
    );
    assert_eq!(answers[1]["is_error"], true);
    assert_eq!(
        text(&answers[2]),
        "Error: The path /memories/t1 does not exist"
    );
    assert_eq!(
        text(answers.last().expect("answers")),
        "Successfully deleted /memories/t0"
    );
}

#[test]
fn repro1_deepening_renames_are_refused_on_every_backend() {
    let tool = MemoryTool::new(InMemoryStore::new());
    check_deepening_refused(&attack(&tool, &deepening_renames()));

    let tenant = MemoryTool::new(TenantStore::new(
        InMemoryStore::new(),
        TenantId::parse("alice").expect("id"),
    ));
    check_deepening_refused(&attack(&tenant, &deepening_renames()));

    let dir = tempfile::tempdir().expect("tempdir");
    let fs_tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("open"));
    check_deepening_refused(&attack(&fs_tool, &deepening_renames()));

    let dir = tempfile::tempdir().expect("tempdir");
    let fs_tenant = MemoryTool::new(TenantStore::new(
        FilesystemStore::open(dir.path()).expect("open"),
        TenantId::parse("alice").expect("id"),
    ));
    check_deepening_refused(&attack(&fs_tenant, &deepening_renames()));

    for store in sql_stores() {
        check_deepening_refused(&attack(&MemoryTool::new(store), &deepening_renames()));
    }
}

#[test]
fn repro1_the_stdio_process_survives_the_attack() {
    let input: String = deepening_renames()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let mut child = Command::new(stdio_binary())
        .arg("--in-memory")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{:?}", out.status);
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    check_deepening_refused(&answers);
}

#[test]
fn a_move_to_exactly_the_limit_is_allowed_and_one_byte_more_is_not() {
    let mut stores: Vec<Box<dyn MemoryStore>> = vec![
        Box::new(InMemoryStore::new()),
        Box::new(TenantStore::new(
            InMemoryStore::new(),
            TenantId::parse("bob").expect("id"),
        )),
    ];
    stores.extend(sql_stores());
    for tool in stores.into_iter().map(MemoryTool::new) {
        // "/memories/d/f.md": the file is 5 bytes below the directory.
        let lines = [
            json!({"command":"create","path":"/memories/d/f.md","file_text":"x"}),
            json!({"command":"rename","old_path":"/memories/d","new_path":chain("a", "d", 1020)}),
            json!({"command":"rename","old_path":chain("a", "d", 1020),"new_path":chain("b", "d", 1019)}),
            json!({"command":"rename","old_path":"/memories/d","new_path":chain("c", "d", 1019)}),
        ];
        let answers = attack(&tool, &lines);
        assert!(text(&answers[1]).starts_with("Error: Cannot move /memories/d to "));
        assert_eq!(
            text(&answers[2]),
            format!("Error: The path {} does not exist", chain("a", "d", 1020))
        );
        assert_eq!(
            text(&answers[3]),
            format!(
                "Successfully renamed /memories/d to {}",
                chain("c", "d", 1019)
            )
        );
    }
}

#[test]
fn repro2_a_deep_file_cannot_brick_the_filesystem_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deep = chain("a", "f.md", 1024);
    {
        let tool = MemoryTool::new(FilesystemStore::open(dir.path()).expect("open"));
        let answers = attack(
            &tool,
            &[
                json!({"command":"create","path":deep,"file_text":"x"}),
                json!({"command":"rename","old_path":"/memories/a","new_path":chain("b", "a", 1024)}),
                json!({"command":"rename","old_path":"/memories/b","new_path":chain("c", "b", 1024)}),
            ],
        );
        assert_eq!(
            text(&answers[0]),
            format!("File created successfully at: {deep}")
        );
        assert!(text(&answers[1]).starts_with("Error: Cannot move /memories/a to "));
    }
    let store = FilesystemStore::open(dir.path()).expect("reopen");
    assert_eq!(store.total_size().expect("total"), 1);
}

#[test]
fn repro3_renames_cannot_bypass_the_store_size_limit() {
    let mut config = Config::default();
    config.max_store_size = Some(20_000);
    let mut lines = Vec::new();
    for i in 0..10 {
        lines.push(json!({"command":"create","path":format!("/memories/s{i}/f.md"),"file_text":"z".repeat(15_000)}));
        lines.push(json!({"command":"rename","old_path":format!("/memories/s{i}"),"new_path":chain(&format!("h{i}"), &format!("s{i}"), 1024)}));
    }
    let check = |answers: Vec<Value>| {
        assert_eq!(
            text(&answers[0]),
            "File created successfully at: /memories/s0/f.md"
        );
        assert!(text(&answers[1]).starts_with("Error: Cannot move /memories/s0 to "));
        for i in 1..10 {
            assert_eq!(
                text(&answers[2 * i]),
                "Error: The memory store would hold 30000 bytes, over the limit of 20000 bytes"
            );
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FilesystemStore::open(dir.path()).expect("open");
    check(attack(
        &MemoryTool::with_config(&store, config.clone()),
        &lines,
    ));
    assert_eq!(store.total_size().expect("total"), 15_000);

    let base = InMemoryStore::new();
    let tenant = TenantStore::new(&base, TenantId::parse("t").expect("id"));
    check(attack(
        &MemoryTool::with_config(&tenant, config.clone()),
        &lines,
    ));
    assert_eq!(base.total_size().expect("total"), 15_000);
}

#[test]
fn repro4_a_shared_base_sees_backs_up_and_expires_every_tenant_file() {
    let base = Arc::new(InMemoryStore::new());
    let id = TenantId::parse("tenant-with-a-long-name").expect("id");
    let tenant = MemoryTool::new(TenantStore::new(Arc::clone(&base), id));
    // 1,018 bytes for the tenant; over 1,024 in the base.
    let path = chain("a", "f.md", 1018);
    let answers = attack(
        &tenant,
        &[json!({"command":"create","path":path,"file_text":"hello"})],
    );
    assert_eq!(
        text(&answers[0]),
        format!("File created successfully at: {path}")
    );
    assert_eq!(base.total_size().expect("total"), 5);

    let exported = claude_memory::backup::export(&*base).expect("export");
    let files = exported["files"].as_array().expect("files");
    assert_eq!(files.len(), 1);
    assert!(files[0]["path"].as_str().expect("path").len() > 1024);
    let restored = InMemoryStore::new();
    claude_memory::backup::import(&restored, &exported, false).expect("import");
    assert_eq!(
        claude_memory::backup::export(&restored).expect("export"),
        exported
    );

    let later = SystemTime::now() + Duration::from_secs(3600);
    let report =
        claude_memory::expiry::expire(&*base, Duration::from_secs(1), later).expect("expire");
    assert_eq!(report.removed_files.len(), 1);
    assert_eq!(base.total_size().expect("total"), 0);
}

#[test]
fn repro5_expiry_never_removes_a_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs_store = FilesystemStore::open(dir.path()).expect("open");
    let mut stores: Vec<Box<dyn MemoryStore>> = vec![
        Box::new(InMemoryStore::new()),
        Box::new(fs_store),
        Box::new(TenantStore::new(
            InMemoryStore::new(),
            TenantId::parse("x").expect("id"),
        )),
    ];
    stores.extend(sql_stores());
    for store in stores {
        let tool = MemoryTool::new(&*store);
        attack(
            &tool,
            &[
                json!({"command":"create","path":"/memories/d/new.md","file_text":"just written"}),
                json!({"command":"create","path":"/memories/e/old.md","file_text":"old"}),
                json!({"command":"delete","path":"/memories/e/old.md"}),
            ],
        );
        let d = MemoryPath::parse("/memories/d").expect("path");
        let e = MemoryPath::parse("/memories/e").expect("path");
        // What expiry does once a directory's sweep is over: the file
        // another agent created meanwhile stays.
        assert!(!store.remove_empty_dir(&d).expect("rmdir"));
        assert!(
            store
                .stat(&d.join("new.md").expect("join"))
                .expect("stat")
                .is_some()
        );
        assert!(store.remove_empty_dir(&e).expect("rmdir"));
        assert!(store.stat(&e).expect("stat").is_none());
    }
}

/// Builds `depth` nested directories named `d` below `root` directly on
/// disk (beneath the API, one handle at a time), with `leaf` at the bottom.
#[cfg(unix)]
fn deep_tree_on_disk(root: &Path, depth: usize, leaf: &str) {
    use rustix::fs::{Mode, OFlags, mkdirat, openat};
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let mut cur: OwnedFd = openat(rustix::fs::CWD, root, flags, Mode::empty()).expect("root");
    for _ in 0..depth {
        mkdirat(&cur, "d", Mode::from_raw_mode(0o700)).expect("mkdir");
        cur = openat(&cur, "d", flags, Mode::empty()).expect("open");
    }
    let file = openat(
        cur.as_fd(),
        leaf,
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .expect("leaf");
    drop(file);
}

/// Runs the stdio example on `root` with at most `nofile` open files.
#[cfg(unix)]
fn stdio_low_ulimit(root: &Path, nofile: u32, lines: &[Value]) -> (bool, Vec<Value>) {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let script = format!("ulimit -n {nofile} && exec \"$0\" --root \"$1\"");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(stdio_binary())
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    let answers = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    (out.status.success(), answers)
}

#[test]
#[cfg(unix)]
fn repro2_and_6_trees_deeper_than_any_limit_open_and_delete_under_a_low_ulimit() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Deeper than the old 4,096-level cap, with a crashed writer's
    // temporary file at the bottom for the delete to take with the tree.
    deep_tree_on_disk(dir.path(), 6000, ".claude-memory.tmp.1.1");
    let (ok, answers) = stdio_low_ulimit(
        dir.path(),
        24,
        &[
            json!({"command":"view","path":"/memories"}),
            json!({"command":"delete","path":"/memories/d"}),
            json!({"command":"view","path":"/memories/d"}),
        ],
    );
    assert!(ok, "{answers:?}");
    assert_eq!(text(&answers[1]), "Successfully deleted /memories/d");
    assert_eq!(
        text(&answers[2]),
        "The path /memories/d does not exist. Please provide a valid path."
    );
    assert_eq!(fs::read_dir(dir.path()).expect("read_dir").count(), 1); // the lock file
}

#[test]
#[cfg(unix)]
fn deep_trees_are_totalled_exported_and_expired_under_a_low_ulimit() {
    let dir = tempfile::tempdir().expect("tempdir");
    // "/d" per level: 2,100 levels is past PATH_MAX (4,096 bytes).
    deep_tree_on_disk(dir.path(), 2100, "leaf.md");
    let (ok, answers) = stdio_low_ulimit(
        dir.path(),
        24,
        &[json!({"command":"create","path":"/memories/top.md","file_text":"x"})],
    );
    assert!(ok, "{answers:?}");
    let store = FilesystemStore::open(dir.path()).expect("open");
    assert_eq!(store.total_size().expect("total"), 1);
    let exported = claude_memory::backup::export(&store).expect("export");
    assert_eq!(exported["files"].as_array().map(Vec::len), Some(2));
    drop(store);

    // Expiry on the deep tree, in a child process limited to 24 handles:
    // both files and all 2,100 directories go, nothing else.
    let exe = std::env::current_exe().expect("this test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 24 && exec \"$0\" deep_tree_expiry_child --exact --nocapture --test-threads=1")
        .arg(exe)
        .env(EXPIRY_CHILD_ROOT, dir.path())
        .output()
        .expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("EXPIRED files=2 dirs=2100 kept=0"),
        "{stdout}"
    );
    assert_eq!(fs::read_dir(dir.path()).expect("read_dir").count(), 1); // the lock file
}

const EXPIRY_CHILD_ROOT: &str = "CLAUDE_MEMORY_ISSUE14_EXPIRY_ROOT";

/// Not a test on its own: the body of the child process above (does
/// nothing unless started by it).
#[test]
fn deep_tree_expiry_child() {
    let Ok(root) = std::env::var(EXPIRY_CHILD_ROOT) else {
        return;
    };
    let store = FilesystemStore::open(root).expect("open");
    let later = SystemTime::now() + Duration::from_secs(3600);
    let report =
        claude_memory::expiry::expire(&store, Duration::from_secs(1), later).expect("expire");
    println!(
        "EXPIRED files={} dirs={} kept={}",
        report.removed_files.len(),
        report.removed_dirs.len(),
        report.kept_files
    );
}

#[test]
fn repro7_an_ignored_huge_field_costs_nothing() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let big: Vec<u8> = vec![0; 100_000];
    let answers = attack(
        &tool,
        &[
            json!({"command":"view","path":"/memories","junk":big}),
            json!({"type":"tool_use","id":"toolu_1","input":{"command":"view","path":"/memories","junk":{"a":[1,2,3]}}}),
            json!({"command":"view","path":[1,2,3]}),
            json!({"command":"view","path":"/memories","view_range":[1,2,3]}),
        ],
    );
    assert!(text(&answers[0]).starts_with("Here're the files"));
    assert_eq!(answers[1]["tool_use_id"], "toolu_1");
    assert_eq!(
        text(&answers[2]),
        "Error: Parameter `path` must be a string"
    );
    assert_eq!(answers[3]["is_error"], true);
}

#[test]
fn repro8_look_alike_and_invisible_names_are_refused() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let cases = [
        (
            "/memories/cafe\u{301}.md",
            "it must be in Unicode Normalization Form C",
        ),
        (
            "/memories/a\u{202E}gpj.md",
            "invisible or format characters are not allowed",
        ),
        (
            "/memories/a\u{200B}b.md",
            "invisible or format characters are not allowed",
        ),
        (
            "/memories/a\u{FEFF}b.md",
            "invisible or format characters are not allowed",
        ),
        (
            "/memories/a\u{2028}b.md",
            "invisible or format characters are not allowed",
        ),
        (
            "/memories/a\u{2029}b.md",
            "invisible or format characters are not allowed",
        ),
        (
            "/memories/.CLAUDE-MEMORY.lock",
            "names starting with .claude-memory are reserved",
        ),
        (
            "/memories/.Claude-Memory.tmp.1",
            "names starting with .claude-memory are reserved",
        ),
    ];
    let lines: Vec<Value> = cases
        .iter()
        .map(|(p, _)| json!({"command":"create","path":p,"file_text":"x"}))
        .collect();
    let answers = attack(&tool, &lines);
    for ((path, reason), answer) in cases.iter().zip(&answers) {
        assert_eq!(
            text(answer),
            format!("Error: The path {path} is not a valid memory path: {reason}")
        );
    }
    let ok = attack(
        &tool,
        &[json!({"command":"create","path":"/memories/caf\u{e9}.md","file_text":"x"})],
    );
    assert_eq!(
        text(&ok[0]),
        "File created successfully at: /memories/caf\u{e9}.md"
    );
    assert!(TenantId::parse("Alice").is_err());
    assert!(TenantId::parse("alice").is_ok());
}

/// A store in front of another, with hooks for the tests below: a file
/// rewritten (as by another agent) just before `delete_file_if` runs, and
/// one directory whose `list` fails.
struct Hooked<S> {
    inner: S,
    rewrite_before_delete: Option<(MemoryPath, &'static [u8])>,
    unlistable: Option<MemoryPath>,
}

impl<S: MemoryStore> Hooked<S> {
    fn new(inner: S) -> Self {
        Hooked {
            inner,
            rewrite_before_delete: None,
            unlistable: None,
        }
    }
}

impl<S: MemoryStore> MemoryStore for Hooked<S> {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        if self.unlistable.as_ref() == Some(dir) {
            let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
            return Err(StoreError::io(Op::List, dir, denied));
        }
        self.inner.list(dir)
    }
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        self.inner.write_opts(path, data, options)
    }
    fn delete_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::DeleteOptions<'_>,
    ) -> StoreResult<bool> {
        // Between expiry's decision (made on the walk's listing) and its
        // delete, another agent rewrites the file.
        if let (Some((target, data)), claude_memory::store::DeleteIf::FileWhere(_)) =
            (&self.rewrite_before_delete, &options.condition)
            && target == path
        {
            self.inner.write(path, data, WriteMode::Overwrite)?;
        }
        self.inner.delete_opts(path, options)
    }
    fn rename_opts(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        options: claude_memory::store::RenameOptions<'_>,
    ) -> StoreResult<()> {
        self.inner.rename_opts(from, to, options)
    }
}

/// A store under test and its name.
type Named = (&'static str, Box<dyn MemoryStore>);

/// Every backend of this crate as a boxed store: in-memory, filesystem
/// and a tenant over each (the directories live as long as the stores).
fn every_store() -> (Vec<tempfile::TempDir>, Vec<Named>) {
    let dirs = vec![
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let fs = |i: usize| FilesystemStore::open(dirs[i].path()).expect("open");
    let id = || TenantId::parse("t").expect("id");
    let stores: Vec<Named> = vec![
        ("in-memory", Box::new(InMemoryStore::new())),
        ("filesystem", Box::new(fs(0))),
        (
            "tenant over in-memory",
            Box::new(TenantStore::new(InMemoryStore::new(), id())),
        ),
        (
            "tenant over filesystem",
            Box::new(TenantStore::new(fs(1), id())),
        ),
    ];
    (dirs, stores)
}

#[test]
fn expiry_keeps_a_file_rewritten_between_its_decision_and_its_delete() {
    let (_dirs, stores) = every_store();
    for (name, store) in stores {
        let p = |s: &str| MemoryPath::parse(s).expect("path");
        store
            .write(&p("/memories/notes/old.md"), b"old", WriteMode::Create)
            .expect("write");
        store
            .write(&p("/memories/stale.md"), b"stale", WriteMode::Create)
            .expect("write");
        let mut hooked = Hooked::new(&*store);
        hooked.rewrite_before_delete = Some((p("/memories/notes/old.md"), b"fresh content"));
        // Both files are older than the cutoff when the walk lists them.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let report =
            claude_memory::expiry::expire(&hooked, Duration::from_secs(1), later).expect("expire");
        assert_eq!(
            report.removed_files,
            vec![(p("/memories/stale.md"), 5)],
            "{name}"
        );
        assert_eq!(report.kept_files, 1, "{name}");
        assert!(report.removed_dirs.is_empty(), "{name}");
        let kept = store
            .read(&p("/memories/notes/old.md"), u64::MAX)
            .expect("the rewritten file is still there");
        assert_eq!(kept.data, b"fresh content", "{name}");
        assert!(
            store
                .stat(&p("/memories/stale.md"))
                .expect("stat")
                .is_none()
        );
    }
}

#[test]
fn an_unlistable_subdirectory_does_not_hide_the_rest_of_a_view() {
    let (_dirs, stores) = every_store();
    for (name, store) in stores {
        let tool = MemoryTool::new(&*store);
        attack(
            &tool,
            &[
                json!({"command":"create","path":"/memories/a.md","file_text":"hello"}),
                json!({"command":"create","path":"/memories/locked/secret.md","file_text":"1234567"}),
                json!({"command":"create","path":"/memories/locked/deeper/x.md","file_text":"12"}),
                json!({"command":"create","path":"/memories/z/b.md","file_text":"abc"}),
            ],
        );
        let mut hooked = Hooked::new(&*store);
        hooked.unlistable = Some(MemoryPath::parse("/memories/locked").expect("path"));
        let tool = MemoryTool::new(&hooked);
        let answers = attack(
            &tool,
            &[
                json!({"command":"view","path":"/memories"}),
                json!({"command":"view","path":"/memories/locked"}),
                json!({"command":"view","path":"/memories/locked/secret.md"}),
            ],
        );
        assert_ne!(answers[0]["is_error"], true, "{name}");
        assert_eq!(
            text(&answers[0]),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
             8B\t/memories\n\
             5B\t/memories/a.md\n\
             0B\t/memories/locked/ (Error: could not be listed)\n\
             3B\t/memories/z/\n\
             3B\t/memories/z/b.md",
            "{name}"
        );
        assert_eq!(
            text(&answers[1]),
            "Error: Could not list (permission denied) for /memories/locked",
            "{name}"
        );
        assert!(text(&answers[2]).contains("1\t1234567"), "{name}");
    }
}

#[cfg(unix)]
#[test]
fn sockets_and_fifos_in_the_store_root_are_missing_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _listener =
        std::os::unix::net::UnixListener::bind(dir.path().join("sock.md")).expect("bind");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("fifo.md"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let store = FilesystemStore::open(dir.path()).expect("open");
    let tool = MemoryTool::new(&store);
    for special in ["/memories/sock.md", "/memories/fifo.md"] {
        let answers = attack(
            &tool,
            &[
                json!({"command":"create","path":"/memories/real.md","file_text":"abc"}),
                json!({"command":"view","path":special}),
                json!({"command":"view","path":special,"view_range":[1,2]}),
                json!({"command":"str_replace","path":special,"old_str":"a","new_str":"b"}),
                json!({"command":"insert","path":special,"insert_line":0,"insert_text":"x"}),
                json!({"command":"view","path":"/memories"}),
                json!({"command":"delete","path":special}),
                json!({"command":"rename","old_path":special,"new_path":"/memories/moved.md"}),
                json!({"command":"delete","path":"/memories/real.md"}),
            ],
        );
        let missing = format!("The path {special} does not exist. Please provide a valid path.");
        assert_eq!(text(&answers[1]), missing);
        assert_eq!(text(&answers[2]), missing);
        assert_eq!(
            text(&answers[3]),
            format!("Error: The path {special} does not exist. Please provide a valid path.")
        );
        assert_eq!(
            text(&answers[4]),
            format!("Error: The path {special} does not exist")
        );
        assert_eq!(
            text(&answers[5]),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n3B\t/memories\n3B\t/memories/real.md"
        );
        assert_eq!(
            text(&answers[6]),
            format!("Error: The path {special} does not exist")
        );
        assert_eq!(
            text(&answers[7]),
            format!("Error: The path {special} does not exist")
        );
        assert_eq!(store.total_size().expect("total"), 0);
    }
    // Nothing above touched them.
    let kind = |name: &str| {
        fs::symlink_metadata(dir.path().join(name))
            .expect("still there")
            .file_type()
    };
    use std::os::unix::fs::FileTypeExt;
    assert!(kind("sock.md").is_socket());
    assert!(kind("fifo.md").is_fifo());
    // A create or a move to their names replaces them: to the store they
    // were never there.
    let answers = attack(
        &tool,
        &[
            json!({"command":"create","path":"/memories/sock.md","file_text":"now a file"}),
            json!({"command":"create","path":"/memories/other.md","file_text":"moved"}),
            json!({"command":"rename","old_path":"/memories/other.md","new_path":"/memories/fifo.md"}),
            json!({"command":"view","path":"/memories/sock.md"}),
            json!({"command":"view","path":"/memories/fifo.md"}),
        ],
    );
    assert_eq!(
        text(&answers[0]),
        "File created successfully at: /memories/sock.md"
    );
    assert_eq!(
        text(&answers[2]),
        "Successfully renamed /memories/other.md to /memories/fifo.md"
    );
    assert!(text(&answers[3]).ends_with("1\tnow a file"));
    assert!(text(&answers[4]).ends_with("1\tmoved"));
    assert!(kind("sock.md").is_file());
    assert!(kind("fifo.md").is_file());
}

#[test]
fn secret_detector_refuses_secrets_in_created_names() {
    use claude_memory::policy::SecretDetector;
    for tool in [
        MemoryTool::new(InMemoryStore::new()).with_policy(SecretDetector::reject()),
        MemoryTool::new(InMemoryStore::new()).with_policy(SecretDetector::redact()),
    ] {
        let answers = attack(
            &tool,
            &[
                json!({"command":"create","path":"/memories/AKIAIOSFODNN7EXAMPLE.txt","file_text":"x"}),
                json!({"command":"create","path":"/memories/ok.txt","file_text":"x"}),
                json!({"command":"rename","old_path":"/memories/ok.txt","new_path":"/memories/keys/ghp_abcdefghijklmnopqrstuvwxyz0123456789/k.md"}),
                json!({"command":"rename","old_path":"/memories/ok.txt","new_path":"/memories/fine.txt"}),
                json!({"command":"view","path":"/memories"}),
            ],
        );
        assert_eq!(
            text(&answers[0]),
            "Error: Nothing was written to /memories/AKIAIOSFODNN7EXAMPLE.txt: its name contains what looks like a secret (AWS access key id); name memory files without secrets"
        );
        assert_eq!(
            text(&answers[1]),
            "File created successfully at: /memories/ok.txt"
        );
        assert_eq!(
            text(&answers[2]),
            "Error: Cannot move /memories/ok.txt to /memories/keys/ghp_abcdefghijklmnopqrstuvwxyz0123456789/k.md: its name contains what looks like a secret (GitHub token); name memory files without secrets"
        );
        assert_eq!(
            text(&answers[3]),
            "Successfully renamed /memories/ok.txt to /memories/fine.txt"
        );
        assert!(text(&answers[4]).ends_with("\n1B\t/memories\n1B\t/memories/fine.txt"));
    }
}

#[test]
fn a_huge_view_range_is_echoed_cut_and_never_built() {
    let tool = MemoryTool::new(InMemoryStore::new());
    let msg = |shown: &str| {
        format!(
            "Error: Invalid `view_range` parameter: {shown}. It should be a list of two integers."
        )
    };
    // Short ones: exactly as a whole parse echoes them (compact JSON).
    let answers = attack(
        &tool,
        &[
            json!({"command":"view","path":"/memories","view_range":[1,2,3]}),
            json!({"command":"view","path":"/memories","view_range":[1.0,2]}),
            json!({"command":"view","path":"/memories","view_range":{"b":[1],"a":"x\"y"}}),
            json!({"command":"view","path":"/memories","view_range":"1-2"}),
            json!({"command":"view","path":"/memories","view_range":[1,[2,{"c":null}]]}),
        ],
    );
    assert_eq!(text(&answers[0]), msg("[1,2,3]"));
    assert_eq!(text(&answers[1]), msg("[1.0,2]"));
    assert_eq!(text(&answers[2]), msg(r#"{"a":"x\"y","b":[1]}"#));
    assert_eq!(text(&answers[3]), msg(r#""1-2""#));
    assert_eq!(text(&answers[4]), msg(r#"[1,[2,{"c":null}]]"#));

    // Long ones: the first 1,024 bytes of the compact JSON, then "…", by
    // the bridge (which never builds the value) and by `dispatch` alike.
    let long: Vec<u32> = (0..200_000).collect();
    let full = serde_json::to_string(&long).expect("json");
    let expected = msg(&format!("{}…", &full[..1024]));
    let call = json!({"command":"view","path":"/memories","view_range":long});
    assert_eq!(
        text(&attack(&tool, std::slice::from_ref(&call))[0]),
        expected
    );
    assert_eq!(tool.dispatch(&call).text(), Some(expected.as_str()));
    // Exactly 1,024 bytes is whole; a cut never splits a character.
    let exact = format!("\"{}\"", "a".repeat(1022));
    let call = json!({"command":"view","path":"/memories","view_range":"a".repeat(1022)});
    assert_eq!(
        text(&attack(&tool, std::slice::from_ref(&call))[0]),
        msg(&exact)
    );
    let wide = "é".repeat(2000);
    let call = json!({"command":"view","path":"/memories","view_range":[wide]});
    let cut = format!("[\"{}…", "é".repeat(511));
    assert_eq!(
        text(&attack(&tool, std::slice::from_ref(&call))[0]),
        msg(&cut)
    );
    assert_eq!(tool.dispatch(&call).text(), Some(msg(&cut).as_str()));
    // A valid range still works.
    let answers = attack(
        &tool,
        &[
            json!({"command":"create","path":"/memories/f.md","file_text":"a\nb\nc\n"}),
            json!({"command":"view","path":"/memories/f.md","view_range":[2,-1]}),
        ],
    );
    assert_eq!(
        text(&answers[1]),
        "Here's the content of /memories/f.md with line numbers:\n     2\tb\n     3\tc"
    );
}

/// Every file below the root of `store`, by path, with its bytes.
fn all_files(store: &dyn MemoryStore) -> std::collections::BTreeMap<String, Vec<u8>> {
    use claude_memory::store::{Flow, Order, Step, walk};
    let mut files = std::collections::BTreeMap::new();
    walk(store, &MemoryPath::root(), Order::ByName, &mut |step| {
        if let Step::File { dir, entry, .. } = step {
            let path = dir.join(&entry.name).expect("a memory path");
            let data = store.read(&path, u64::MAX)?.data;
            files.insert(path.normalized(), data);
        }
        Ok(Flow::Continue)
    })
    .expect("walk");
    files
}

#[test]
fn a_backup_restores_every_file_of_a_maximal_depth_tenant_tree() {
    use claude_memory::backup::{Backup, ImportOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let bases: Vec<Box<dyn MemoryStore>> = vec![
        Box::new(InMemoryStore::new()),
        Box::new(FilesystemStore::open(dir.path()).expect("open")),
    ];
    for base in bases {
        let id = TenantId::parse("a-tenant-with-a-long-name").expect("id");
        let tenant = MemoryTool::new(TenantStore::new(&*base, id));
        // At the tenant's limit (1,024 bytes), so over it in the base, at
        // several depths, with content that is not text too.
        let mut lines = vec![
            json!({"command":"create","path":chain("a", "f.md", 1024),"file_text":"deepest"}),
            json!({"command":"create","path":chain("b", "g.md", 1023),"file_text":"one less"}),
            json!({"command":"create","path":chain("c", "h.md", 600),"file_text":"half way\n"}),
            json!({"command":"create","path":"/memories/top.md","file_text":"top"}),
        ];
        for i in 0..5 {
            lines.push(json!({"command":"create","path":chain("d", &format!("{i}.md"), 1020 + i),"file_text":format!("sibling {i}")}));
        }
        for answer in attack(&tenant, &lines) {
            assert!(
                text(&answer).starts_with("File created successfully"),
                "{answer}"
            );
        }
        base.write(
            &MemoryPath::parse("/memories/other/bin.dat").expect("path"),
            &[0, 159, 146, 150, 255],
            claude_memory::store::WriteMode::Create,
        )
        .expect("write");
        let before = all_files(&*base);
        assert_eq!(before.len(), 10);
        assert!(before.keys().any(|p| p.len() > 1024));

        let json = Backup::of_store(&*base).expect("export").to_json();
        let backup = Backup::from_json(&json).expect("parse");
        let restored_dir = tempfile::tempdir().expect("tempdir");
        let targets: Vec<Box<dyn MemoryStore>> = vec![
            Box::new(InMemoryStore::new()),
            Box::new(FilesystemStore::open(restored_dir.path()).expect("open")),
        ];
        for target in targets {
            backup
                .restore(&*target, &ImportOptions::new())
                .expect("restore");
            assert_eq!(all_files(&*target), before);
            // And the tenant sees its deepest file again.
            let id = TenantId::parse("a-tenant-with-a-long-name").expect("id");
            let again = MemoryTool::new(TenantStore::new(&*target, id));
            let view = attack(
                &again,
                &[json!({"command":"view","path":chain("a", "f.md", 1024)})],
            );
            assert!(text(&view[0]).ends_with("1\tdeepest"), "{}", text(&view[0]));
        }
    }
}
