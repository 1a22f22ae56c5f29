//! Backups (`claude_memory::backup`): the typed format and its versions,
//! import's checks, all-or-nothing writes with undo, times and empty
//! directories, and the atomic, private backup file.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use claude_memory::backup::{
    Backup, Entry, FormatError, ImportError, ImportOptions, Problem, VERSION,
};
use claude_memory::path::MemoryPath;
use claude_memory::store::{
    DirEntry, EntryKind, FileContent, MemoryStoreExt as _, Metadata, StoreResult, Version,
    WriteMode,
};
use claude_memory::{Config, FilesystemStore, InMemoryStore, MemoryStore, StoreError};
use serde_json::json;

fn p(s: &str) -> MemoryPath {
    MemoryPath::parse(s).expect("valid path")
}

fn write(store: &impl MemoryStore, path: &str, data: &[u8]) {
    store
        .write(&p(path), data, WriteMode::Create)
        .expect("write");
}

/// Every file and empty directory with its content, without times: what
/// "the store is as it was" compares.
fn snapshot(store: &(impl MemoryStore + ?Sized)) -> Vec<Entry> {
    let mut files = Backup::of_store(store).expect("export").files;
    for f in &mut files {
        f.modified = None;
    }
    files
}

fn backup(files: serde_json::Value) -> Backup {
    Backup::from_value(&json!({"format": "claude-memory-export", "version": 2, "files": files}))
        .expect("a valid document")
}

fn refused(e: ImportError) -> Vec<Problem> {
    match e {
        ImportError::Refused(problems) => problems,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn round_trip_keeps_times_hidden_binary_files_and_empty_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FilesystemStore::open(dir.path()).expect("open");
    write(&fs, "/memories/a.md", b"alpha\n");
    write(&fs, "/memories/d/.hidden", b"h");
    write(&fs, "/memories/d/bin.dat", &[0xff, 0x00, 0x10]);
    std::fs::create_dir_all(dir.path().join("empty/inner")).expect("mkdir");
    std::fs::create_dir(dir.path().join("d/nothing")).expect("mkdir");
    let when = SystemTime::UNIX_EPOCH + Duration::from_millis(1_600_000_000_123);
    std::fs::File::options()
        .write(true)
        .open(dir.path().join("a.md"))
        .expect("open")
        .set_modified(when)
        .expect("set time");

    let b = Backup::of_store(&fs).expect("export");
    assert_eq!(b.version, VERSION);
    let doc: serde_json::Value = serde_json::from_str(&b.to_json()).expect("json");
    assert_eq!(
        doc["files"][0],
        json!({"path": "/memories/a.md", "text": "alpha\n", "modified": "2020-09-13T12:26:40.123Z"})
    );
    let paths: Vec<(&str, bool)> = b
        .files
        .iter()
        .map(|e| (e.path.as_str(), e.directory))
        .collect();
    assert_eq!(
        paths,
        [
            ("/memories/a.md", false),
            ("/memories/d/.hidden", false),
            ("/memories/d/bin.dat", false),
            ("/memories/d/nothing", true),
            ("/memories/empty/inner", true),
        ]
    );
    assert_eq!(b.files[2].base64.as_deref(), Some("/wAQ"));
    assert_eq!(b.files[0].modified_time(), Ok(Some(when)));

    // Through JSON, into another backend, and back out: the same tree.
    let again = Backup::from_json(&b.to_json()).expect("parse");
    assert_eq!(again, b);
    let mem = InMemoryStore::new();
    let report = again.restore(&mem, &ImportOptions::new()).expect("import");
    assert_eq!(
        (report.created, report.replaced, report.directories),
        (3, 0, 2)
    );
    assert_eq!(snapshot(&mem), snapshot(&fs));
    // Restored files carry the import's time, not the backup's (documented).
    let restored = mem
        .stat(&p("/memories/a.md"))
        .expect("stat")
        .expect("there");
    assert!(restored.modified.is_none_or(|m| m > when));
}

#[cfg(feature = "sqlite")]
#[test]
fn empty_directories_round_trip_through_sqlite() {
    let fs_dir = tempfile::tempdir().expect("tempdir");
    let fs = FilesystemStore::open(fs_dir.path()).expect("open");
    write(&fs, "/memories/x/y.md", b"y");
    std::fs::create_dir_all(fs_dir.path().join("e/f")).expect("mkdir");
    let db = tempfile::tempdir().expect("tempdir");
    let sqlite = claude_memory::SqliteStore::open(db.path().join("m.db")).expect("sqlite");
    Backup::of_store(&fs)
        .expect("export")
        .restore(&sqlite, &ImportOptions::new())
        .expect("import");
    assert_eq!(snapshot(&sqlite), snapshot(&fs));
}

#[test]
fn version_one_documents_are_still_read() {
    let v1 = json!({"format": "claude-memory-export", "version": 1, "files": [
        {"path": "/memories/a.md", "text": "alpha\n"},
        {"path": "/memories/b.bin", "base64": "/wAQ"},
    ]});
    let mem = InMemoryStore::new();
    let b = Backup::from_value(&v1).expect("version 1");
    assert_eq!(
        b.restore(&mem, &ImportOptions::new())
            .expect("import")
            .files(),
        2
    );
    assert_eq!(
        mem.read(&p("/memories/b.bin"), 10).expect("read").data,
        [0xff, 0, 0x10]
    );
    // The first API still writes version 1 and reads any version.
    assert_eq!(claude_memory::backup::export(&mem).expect("export"), v1);
    // Version 1 had no directories or times: a document claiming both is malformed.
    let mixed = json!({"format": "claude-memory-export", "version": 1, "files": [
        {"path": "/memories/e", "directory": true},
    ]});
    assert!(matches!(
        Backup::from_value(&mixed),
        Err(FormatError::Malformed { version: 1, .. })
    ));
}

#[test]
fn newer_and_unknown_versions_are_refused_by_their_header() {
    let with = |version: serde_json::Value| {
        // A future version may change the files' shape: only the header counts.
        Backup::from_value(
            &json!({"format": "claude-memory-export", "version": version, "files": {"new": "shape"}}),
        )
    };
    let e = with(json!(3)).expect_err("newer");
    assert_eq!(e, FormatError::Newer(3));
    assert_eq!(
        e.to_string(),
        "this export is version 3, from a newer claude-memory; this one reads versions 1 to 2: upgrade claude-memory to import it"
    );
    for v in [json!(0), json!("2"), json!(1.5), json!(-1), json!(null)] {
        assert!(
            matches!(with(v.clone()), Err(FormatError::UnknownVersion(_))),
            "{v}"
        );
    }
    let no_version = Backup::from_value(&json!({"format": "claude-memory-export", "files": []}));
    assert!(matches!(no_version, Err(FormatError::UnknownVersion(_))));
    assert_eq!(
        Backup::from_value(&json!({"format": "something else", "version": 2, "files": []})),
        Err(FormatError::NotABackup)
    );
    assert!(matches!(
        Backup::from_json("{not json"),
        Err(FormatError::NotJson(_))
    ));
    // The legacy entry point refuses the same way.
    let mem = InMemoryStore::new();
    let doc = json!({"format": "claude-memory-export", "version": 9, "files": []});
    assert!(matches!(
        claude_memory::backup::import(&mem, &doc, false),
        Err(ImportError::Format(FormatError::Newer(9)))
    ));
}

#[test]
fn a_conflict_in_the_second_entry_writes_nothing_not_even_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FilesystemStore::open(dir.path()).expect("open");
    write(&fs, "/memories/b.md", b"mine");
    let before = Backup::of_store(&fs).expect("export");
    let b = backup(json!([
        {"path": "/memories/a/new.md", "text": "would be written"},
        {"path": "/memories/b.md", "text": "theirs"},
    ]));
    let problems = refused(b.restore(&fs, &ImportOptions::new()).expect_err("conflict"));
    assert_eq!(
        problems,
        [Problem::Exists {
            path: "/memories/b.md".into()
        }]
    );
    // Exactly as before, times included; not even a directory was made.
    assert_eq!(Backup::of_store(&fs).expect("export"), before);
    assert!(!dir.path().join("a").exists());
    // With overwrite it goes in.
    let report = b
        .restore(&fs, &ImportOptions::new().overwrite(true))
        .expect("overwrite");
    assert_eq!((report.created, report.replaced), (1, 1));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.md")).expect("read"),
        "theirs"
    );
}

#[test]
fn every_problem_is_found_before_anything_is_written() {
    let mem = InMemoryStore::new();
    write(&mem, "/memories/file", b"x");
    write(&mem, "/memories/dir/keep", b"x");
    let before = snapshot(&mem);
    let b = backup(json!([
        {"path": "/memories/ok.md", "text": "fine"},
        {"path": "/memories/../escape", "text": "x"},
        {"path": "/memories/ok.md", "text": "again"},
        {"path": "/memories/bad.bin", "base64": "not base64!"},
        {"path": "/memories/both", "text": "a", "base64": "YQ=="},
        {"path": "/memories/when", "text": "a", "modified": "yesterday"},
        {"path": "/memories/file/under", "text": "x"},
        {"path": "/memories/ok.md/under", "text": "x"},
        {"path": "/memories/dir", "text": "x"},
        {"path": "/memories/file", "directory": true},
        {"path": "/memories", "text": "root"},
    ]));
    let problems = refused(
        b.restore(&mem, &ImportOptions::new().overwrite(true))
            .expect_err("refused"),
    );
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "entry 1: /memories/../escape is not a valid memory path: '..' is not allowed",
            "entry 2: /memories/ok.md is already entry 0",
            "entry 3 (/memories/bad.bin): its base64 is not valid",
            "entry 4 (/memories/both): it needs exactly one of text, base64 or \"directory\": true",
            "entry 5 (/memories/when): its modified time `yesterday` is not RFC 3339 UTC: timestamp format is invalid",
            "entry 10 (/memories): the root is a directory, not a file",
            "/memories/ok.md/under: /memories/ok.md is a file in the backup",
            "/memories/file/under: /memories/file is a file in the store",
            "/memories/dir is a directory in the store, a file in the backup",
            "/memories/file is a file in the store, a directory in the backup",
        ]
    );
    assert_eq!(snapshot(&mem), before);
}

#[test]
fn the_handlers_size_limits_hold_for_imports() {
    let mem = InMemoryStore::new();
    let mut config = Config::default();
    config.max_file_size = 1_000;
    config.max_store_size = Some(2_000);
    let options = ImportOptions::new().limits_of(&config);
    let big = "x".repeat(5 * 1024 * 1024);
    let b = backup(json!([{"path": "/memories/big.txt", "text": big}]));
    assert_eq!(
        refused(b.restore(&mem, &options).expect_err("too large")),
        [
            Problem::FileTooLarge {
                path: "/memories/big.txt".into(),
                len: 5 * 1024 * 1024,
                limit: 1_000
            },
            Problem::StoreTooLarge {
                after: 5 * 1024 * 1024,
                limit: 2_000
            },
        ]
    );
    assert!(snapshot(&mem).is_empty());
    // The store total counts what is there, minus what is replaced.
    write(&mem, "/memories/a", &[b'a'; 900]);
    write(&mem, "/memories/b", &[b'b'; 900]);
    let grow = backup(json!([{"path": "/memories/c", "text": "c".repeat(300)}]));
    assert_eq!(
        refused(grow.restore(&mem, &options).expect_err("store full")),
        [Problem::StoreTooLarge {
            after: 2_100,
            limit: 2_000
        }]
    );
    let replace = backup(json!([{"path": "/memories/a", "text": "a".repeat(1_000)}]));
    replace
        .restore(&mem, &options.clone().overwrite(true))
        .expect("900 bytes replaced by 1000 fits");
    // Without limits (the library default), anything goes.
    b.restore(&InMemoryStore::new(), &ImportOptions::new())
        .expect("no limits");
}

/// An in-memory store whose `n`th write (counting from 1) fails.
struct FailingStore {
    inner: InMemoryStore,
    writes: AtomicUsize,
    fail_at: usize,
}

impl MemoryStore for FailingStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        self.inner.stat(path)
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        self.inner.list(dir)
    }
    fn write_opts(
        &self,
        path: &MemoryPath,
        data: &[u8],
        options: claude_memory::store::WriteOptions<'_>,
    ) -> StoreResult<Version> {
        if self.writes.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            return Err(StoreError::io(
                claude_memory::store::Op::Write,
                path,
                std::io::Error::other("disk full"),
            ));
        }
        self.inner.write_opts(path, data, options)
    }
    fn delete_opts(
        &self,
        path: &MemoryPath,
        options: claude_memory::store::DeleteOptions<'_>,
    ) -> StoreResult<bool> {
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

#[test]
fn a_write_failing_half_way_is_undone() {
    let b = backup(json!([
        {"path": "/memories/keep.md", "text": "replaced"},
        {"path": "/memories/new/deep/one.md", "text": "1"},
        {"path": "/memories/new/empty", "directory": true},
        {"path": "/memories/old/two.md", "text": "2"},
        {"path": "/memories/zz.md", "text": "last"},
    ]));
    // Fail each write in turn (the setup makes 2): every time, the store
    // ends as it was.
    for fail_at in 3..=7 {
        let store = FailingStore {
            inner: InMemoryStore::new(),
            writes: AtomicUsize::new(0),
            fail_at,
        };
        write(&store, "/memories/keep.md", b"original");
        write(&store, "/memories/old/other.md", b"o");
        let before = snapshot(&store);
        let e = b
            .restore(&store, &ImportOptions::new().overwrite(true))
            .expect_err("a write fails");
        assert!(
            matches!(&e, ImportError::Store(StoreError::Io { .. })),
            "{fail_at}: {e:?}"
        );
        assert!(
            e.to_string().contains("what had been written was undone"),
            "{e}"
        );
        assert_eq!(snapshot(&store), before, "fail at write {fail_at}");
        assert_eq!(store.stat(&p("/memories/new")).expect("stat"), None);
    }
}

#[test]
fn a_file_changed_between_the_check_and_the_write_is_not_overwritten() {
    // A store that changes keep.md behind the import's back just before its
    // first write: the compare-and-swap write refuses, and the import is
    // undone instead of clobbering the other writer.
    struct Racing {
        inner: InMemoryStore,
        raced: AtomicUsize,
    }
    impl MemoryStore for Racing {
        fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
            self.inner.stat(path)
        }
        fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
            self.inner.read(path, limit)
        }
        fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
            self.inner.list(dir)
        }
        fn write_opts(
            &self,
            path: &MemoryPath,
            data: &[u8],
            options: claude_memory::store::WriteOptions<'_>,
        ) -> StoreResult<Version> {
            if self.raced.fetch_add(1, Ordering::SeqCst) == 1 {
                self.inner
                    .write(&p("/memories/z.md"), b"someone else", WriteMode::Overwrite)?;
            }
            self.inner.write_opts(path, data, options)
        }
        fn delete_opts(
            &self,
            path: &MemoryPath,
            options: claude_memory::store::DeleteOptions<'_>,
        ) -> StoreResult<bool> {
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
    let store = Racing {
        inner: InMemoryStore::new(),
        raced: AtomicUsize::new(0),
    };
    write(&store, "/memories/z.md", b"mine");
    let b = backup(json!([
        {"path": "/memories/a.md", "text": "a"},
        {"path": "/memories/z.md", "text": "theirs"},
    ]));
    let e = b
        .restore(&store, &ImportOptions::new().overwrite(true))
        .expect_err("conflict");
    assert!(
        matches!(e, ImportError::Store(StoreError::Conflict { .. })),
        "{e:?}"
    );
    assert_eq!(
        store.read(&p("/memories/z.md"), 100).expect("read").data,
        b"someone else"
    );
    assert_eq!(store.stat(&p("/memories/a.md")).expect("stat"), None);
}

#[test]
fn the_backup_file_is_written_atomically_and_privately() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("backup.json");
    std::fs::write(&target, "old").expect("old file");
    let mem = InMemoryStore::new();
    write(&mem, "/memories/a.md", b"alpha");
    let b = Backup::of_store(&mem).expect("export");
    b.write_to_file(&target).expect("write");
    assert_eq!(
        Backup::from_json(&std::fs::read_to_string(&target).expect("read")),
        Ok(b)
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["backup.json"], "no temporary file is left");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // A directory that does not exist: an error, and nothing is left.
    assert!(
        Backup::new(Vec::new())
            .write_to_file(dir.path().join("no/such/x.json"))
            .is_err()
    );
}

#[test]
fn directory_entries_below_files_of_the_backup_are_implied() {
    // A directory entry that other entries lie below is made by them; an
    // existing directory entry is nothing to do.
    let mem = InMemoryStore::new();
    write(&mem, "/memories/there/f", b"f");
    let b = backup(json!([
        {"path": "/memories/a", "directory": true},
        {"path": "/memories/a/.import-placeholder", "text": "a file named like the placeholder"},
        {"path": "/memories/there", "directory": true},
    ]));
    let report = b.restore(&mem, &ImportOptions::new()).expect("import");
    assert_eq!((report.created, report.directories), (1, 0));
    assert_eq!(
        mem.stat(&p("/memories/a")).expect("stat").map(|m| m.kind),
        Some(EntryKind::Directory)
    );
}

/// Names no memory path can spell (here: not in NFC, as an earlier release
/// accepted) are named, never silently left out of a backup.
#[cfg(unix)]
#[test]
fn entries_no_path_can_spell_are_reported_not_dropped() {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("ok.md"), "ok").expect("write");
    std::fs::write(dir.path().join("cafe\u{301}.md"), "nfd").expect("write");
    std::fs::create_dir(dir.path().join("a\u{200b}b")).expect("mkdir");
    let store = claude_memory::FilesystemStore::open(dir.path()).expect("open");
    let backup = Backup::of_store(&store).expect("export");
    assert_eq!(backup.files.len(), 1);
    let mut missing = backup.unspellable.clone();
    missing.sort();
    assert_eq!(
        missing,
        ["/memories/a\u{200b}b/", "/memories/cafe\u{301}.md"]
    );
}

/// A path of `len` bytes made of valid components.
fn long_path(len: usize) -> String {
    let mut path = String::from("/memories");
    while path.len() < len {
        let room = len - path.len() - 1;
        path.push('/');
        path.push_str(&"a".repeat(room.clamp(1, 200)));
    }
    assert_eq!(path.len(), len);
    path
}

/// Issue 18: a backup with a 10,264-byte memory path was imported into a
/// directory store and a SQLite store (`MemoryPath::from_stored` checked no
/// length), making a path no command can name. SPEC §7: the limits hold for
/// every stored entry, whoever wrote it.
#[test]
fn an_import_of_a_path_no_command_can_name_is_refused_with_its_reason() {
    let huge = long_path(10_264);
    assert!(MemoryPath::from_stored(&huge).is_none());
    let b = backup(json!([
        {"path": "/memories/ok.md", "text": "fine"},
        {"path": huge, "text": "x"},
    ]));
    let expected =
        format!("entry 1: {huge} is not a valid memory path: it is longer than 1024 bytes");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FilesystemStore::open(dir.path()).expect("open");
    #[allow(unused_mut)]
    let mut stores: Vec<Box<dyn MemoryStore>> = vec![Box::new(fs), Box::new(InMemoryStore::new())];
    #[cfg(feature = "sqlite")]
    let db = tempfile::tempdir().expect("tempdir");
    #[cfg(feature = "sqlite")]
    stores.push(Box::new(
        claude_memory::SqliteStore::open(db.path().join("m.db")).expect("sqlite"),
    ));
    for store in &stores {
        let problems = refused(
            b.restore(&**store, &ImportOptions::new())
                .expect_err("refused"),
        );
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text, std::slice::from_ref(&expected));
        assert_eq!(snapshot(&**store), Vec::<Entry>::new());
    }
    // A shared base store's export still comes back: a tenant prefix (at
    // most 64 bytes and a '/') on top of a tenant's 1,024 bytes.
    let tenant_path = format!(
        "/memories/{}{}",
        "t".repeat(64),
        &long_path(1024)["/memories".len()..]
    );
    assert_eq!(tenant_path.len(), 1024 + 65);
    assert!(MemoryPath::from_stored(&tenant_path).is_some());
    assert!(MemoryPath::from_stored(&format!("{tenant_path}b")).is_none());
}

/// An in-memory store that reports the modification time `when(name)`
/// for each file, as a filesystem holding such times would.
struct TimedStore {
    inner: InMemoryStore,
    when: fn(&str) -> Option<SystemTime>,
}

impl MemoryStore for TimedStore {
    fn stat(&self, path: &MemoryPath) -> StoreResult<Option<Metadata>> {
        Ok(self.inner.stat(path)?.map(|mut m| {
            m.modified = path.name().and_then(self.when);
            m
        }))
    }
    fn read(&self, path: &MemoryPath, limit: u64) -> StoreResult<FileContent> {
        self.inner.read(path, limit)
    }
    fn list(&self, dir: &MemoryPath) -> StoreResult<Vec<DirEntry>> {
        let mut entries = self.inner.list(dir)?;
        for e in &mut entries {
            e.modified = (self.when)(&e.name);
        }
        Ok(entries)
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

/// Issue 18: a file whose modification time is after year 9999 made
/// `Backup::of_store` panic (RFC 3339 formatting; `claude-memory export`
/// exited 101). No store state may panic: such a time (and one before
/// 1970) is left out of the entry, which keeps its content.
#[test]
fn export_of_a_time_rfc_3339_cannot_spell_does_not_panic() {
    let store = TimedStore {
        inner: InMemoryStore::new(),
        when: |name| match name {
            // 10000-01-02T00:00:00Z
            "future.md" => Some(SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_387_200)),
            "past.md" => Some(SystemTime::UNIX_EPOCH - Duration::from_secs(86_400)),
            // 9999-12-31T23:59:59Z, the last second RFC 3339 can spell.
            "last.md" => Some(SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799)),
            _ => None,
        },
    };
    for name in ["future.md", "past.md", "last.md"] {
        write(&store, &format!("/memories/{name}"), name.as_bytes());
    }
    let backup = Backup::of_store(&store).expect("export");
    let by_path = |p: &str| {
        backup
            .files
            .iter()
            .find(|e| e.path == p)
            .unwrap_or_else(|| panic!("{p} not exported"))
    };
    assert_eq!(by_path("/memories/future.md").modified, None);
    assert_eq!(by_path("/memories/past.md").modified, None);
    assert_eq!(
        by_path("/memories/last.md").modified.as_deref(),
        Some("9999-12-31T23:59:59.000Z")
    );
    assert_eq!(
        by_path("/memories/future.md").content(),
        Ok(claude_memory::backup::Content::File(b"future.md".to_vec()))
    );
}
