//! `StoreUrl`: a store named by one string, parsed and opened with its
//! tenant and its history log.

use claude_memory::history::HistoryStore;
use claude_memory::store::MemoryStoreExt as _;
use claude_memory::url::{HistoryLogs, OpenError, OpenOptions, StoreUrl};
use claude_memory::{MemoryPath, MemoryStore, TenantId};

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

#[test]
fn each_kind_parses_and_a_mistyped_scheme_is_an_error() {
    use std::path::PathBuf;
    let ok = [
        ("memories", StoreUrl::Dir(PathBuf::from("memories"))),
        ("C:\\memories", StoreUrl::Dir(PathBuf::from("C:\\memories"))),
        ("./name:x", StoreUrl::Dir(PathBuf::from("./name:x"))),
        ("sqlite:mem.db", StoreUrl::Sqlite(PathBuf::from("mem.db"))),
        ("sqlite://mem.db", StoreUrl::Sqlite(PathBuf::from("mem.db"))),
        (
            "postgres://u@h/db",
            StoreUrl::Postgres("postgres://u@h/db".into()),
        ),
        ("s3://bucket/p", StoreUrl::Cloud("s3://bucket/p".into())),
        (
            "managed:memstore_01",
            StoreUrl::Managed("memstore_01".into()),
        ),
    ];
    for (text, want) in ok {
        assert_eq!(StoreUrl::parse(text).expect(text), want, "{text}");
        assert_eq!(text.parse::<StoreUrl>().expect(text), want, "{text}");
    }
    for bad in [
        "",
        "sqlite:",
        "postgres:/h/db",
        "postgress://u@h/db",
        "s3:bucket",
        "s3:///p",
        "managed:abc",
        "managed:memstore_1/x",
    ] {
        assert!(
            matches!(StoreUrl::parse(bad), Err(OpenError::Url(_))),
            "{bad:?} is refused"
        );
    }
}

#[test]
fn a_mistyped_url_is_echoed_without_its_password() {
    let e = StoreUrl::parse("postgress://user:hunter2@host/db").expect_err("typo");
    let text = e.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("user:***@host"), "{text}");
}

#[test]
fn a_missing_directory_is_created_only_when_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("memroy");
    let url = StoreUrl::Dir(root.clone());
    assert!(matches!(
        url.open(&OpenOptions::new()),
        Err(OpenError::NotFound(_))
    ));
    assert!(!root.exists(), "nothing made");
    let opened = url.open(&OpenOptions::new().create(true)).expect("created");
    opened
        .store
        .write(
            &p("/memories/a.md"),
            b"a\n",
            claude_memory::store::WriteMode::Create,
        )
        .expect("write");
    assert!(opened.log.is_none(), "no history was asked for");
}

#[test]
fn a_tenants_store_is_its_own_directory_and_keeps_its_own_history() {
    let dir = tempfile::tempdir().expect("dir");
    let url = StoreUrl::Dir(dir.path().to_path_buf());
    let tenant = TenantId::parse("alice").expect("tenant");
    let options = OpenOptions::new()
        .create(true)
        .tenant(Some(tenant.clone()))
        .history(HistoryLogs::Start);
    let opened = url.open(&options).expect("open");
    let log = opened.log.expect("a log was started");
    let h = HistoryStore::open(opened.store, log).expect("history");
    h.write(
        &p("/memories/a.md"),
        b"alice\n",
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    drop(h);
    assert!(
        walk_has(&tenant.dir_in(dir.path()), "a.md"),
        "the file is in the tenant's directory"
    );
    assert!(url.keeps_history(Some(&tenant)).expect("asked"));
    assert!(
        !url.keeps_history(None).expect("asked"),
        "the base keeps none"
    );
    // The history commands open a history that must exist.
    let required = OpenOptions::new().history(HistoryLogs::Required);
    assert!(matches!(url.open(&required), Err(OpenError::NoHistory)));
    let opened = url
        .open(&required.tenant(Some(tenant)))
        .expect("the tenant's history");
    assert!(opened.log.is_some());
}

fn walk_has(dir: &std::path::Path, name: &str) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name() == name || (e.path().is_dir() && walk_has(&e.path(), name)))
    })
}

#[test]
fn a_store_that_keeps_a_history_is_opened_with_it_unasked() {
    let dir = tempfile::tempdir().expect("dir");
    let url = StoreUrl::Dir(dir.path().to_path_buf());
    let opened = url.open(&OpenOptions::new().create(true)).expect("open");
    assert!(opened.log.is_none());
    drop(opened);
    let started = url
        .open(&OpenOptions::new().history(HistoryLogs::Start))
        .expect("start");
    drop(HistoryStore::open(started.store, started.log.expect("log")).expect("history"));
    let again = url.open(&OpenOptions::new()).expect("open");
    assert!(again.log.is_some(), "IfKept finds the journal");
    let never = url
        .open(&OpenOptions::new().history(HistoryLogs::Never))
        .expect("open");
    assert!(never.log.is_none());
}

#[test]
fn a_managed_store_has_no_history_log() {
    let url = StoreUrl::parse("managed:memstore_01").expect("url");
    for history in [HistoryLogs::Start, HistoryLogs::Required] {
        assert!(matches!(
            url.open(&OpenOptions::new().history(history)),
            Err(OpenError::ManagedHistory)
        ));
    }
}

#[test]
fn a_missing_sqlite_file_is_not_created_unasked() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("mem.db");
    let url = StoreUrl::Sqlite(file.clone());
    assert!(matches!(
        url.open(&OpenOptions::new()),
        Err(OpenError::NotFound(_))
    ));
    assert!(!file.exists());
    let opened = url
        .open(&OpenOptions::new().create(true).history(HistoryLogs::Start))
        .expect("created");
    assert!(opened.log.is_some());
    assert!(file.is_file());
}

#[test]
fn a_store_opens_and_works_inside_a_tokio_runtime() {
    let dir = tempfile::tempdir().expect("dir");
    let url = StoreUrl::Dir(dir.path().to_path_buf());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let read = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let opened = url.open(&OpenOptions::new().create(true)).expect("open");
            opened
                .store
                .write(
                    &p("/memories/t.md"),
                    b"t\n",
                    claude_memory::store::WriteMode::Create,
                )
                .expect("write");
            opened
                .store
                .read(&p("/memories/t.md"), 1024)
                .expect("read")
                .data
        })
        .await
        .expect("join")
    });
    assert_eq!(read, b"t\n");
}

#[test]
fn an_encrypted_store_opened_without_its_keys_is_refused() {
    use claude_memory::store::WriteMode;
    use claude_memory::{EncryptedStore, FilesystemStore, Key, Keyring};
    let dir = tempfile::tempdir().expect("dir");
    let keys = Keyring::new(Key::from_bytes([7; 32]));
    let sealed = EncryptedStore::open(FilesystemStore::open(dir.path()).expect("fs"), keys.clone())
        .expect("encrypted");
    sealed
        .write(&p("/memories/secret.md"), b"secret\n", WriteMode::Create)
        .expect("write");
    drop(sealed);
    let url = StoreUrl::Dir(dir.path().to_path_buf());
    for history in [HistoryLogs::Never, HistoryLogs::Start] {
        let refused = url.open(&OpenOptions::new().history(history));
        assert!(
            matches!(refused, Err(OpenError::Encrypted(_))),
            "{history:?}: {refused:?}"
        );
    }
    assert!(
        !dir.path()
            .join(claude_memory::history::HISTORY_DIR)
            .exists(),
        "a refused open started no history"
    );
    // With its keys: sealed, and its history log sealed with it.
    let opened = url
        .open(
            &OpenOptions::new()
                .keys(Some(keys))
                .history(HistoryLogs::Start),
        )
        .expect("with keys");
    let h = HistoryStore::open(opened.store, opened.log.expect("log")).expect("history");
    let read = h.read(&p("/memories/secret.md"), 1024).expect("read");
    assert_eq!(read.data, b"secret\n");
    h.write(&p("/memories/more.md"), b"sealed too\n", WriteMode::Create)
        .expect("write");
    drop(h);
    let journal = std::fs::read(
        dir.path()
            .join(claude_memory::history::HISTORY_DIR)
            .join("journal.jsonl"),
    )
    .expect("journal");
    assert!(
        !String::from_utf8_lossy(&journal).contains("sealed too"),
        "the journal holds no plaintext"
    );
    // Raw, as a re-key or a sealed backup reads it.
    let raw = url.open(&OpenOptions::new().raw(true)).expect("raw");
    assert!(raw.log.is_some(), "the history it keeps is found too");
    assert!(
        raw.store.read(&p("/memories/more.md"), 1024).is_err(),
        "a sealed file is not readable by its name without the keys"
    );
}

#[test]
fn a_mistyped_url_never_becomes_a_directory_nor_shows_its_password() {
    let dir = tempfile::tempdir().expect("dir");
    let _cwd = dir.path();
    for typo in [
        " postgres://u:secret@x/db",
        "postgres://u:secret@x/db ",
        "post_gres://u:secret@x/db",
        "postgrés://u:secret@x/db",
        "postgress://u:secret@x/db",
        "postgress://u@x/db?password=secret",
        "s3:u:secret@bucket",
        "managed:sk-ant-api03-secret",
    ] {
        let e = StoreUrl::parse(typo).expect_err(typo);
        assert!(matches!(e, OpenError::Url(_)), "{typo:?}: {e:?}");
        let text = format!("{e} {e:?}");
        assert!(
            !text.contains("secret"),
            "{typo:?} shows its secret: {text}"
        );
    }
    // A URL that parses keeps its password out of Debug and shown().
    for url in [
        "postgres://u:secret@x/db",
        "postgres://u@x/db?password=secret",
    ] {
        let parsed = StoreUrl::parse(url).expect(url);
        let text = format!("{parsed:?} {}", parsed.shown());
        assert!(!text.contains("secret"), "{text}");
    }
    // The scheme is given to the driver in lower case.
    assert_eq!(
        StoreUrl::parse("POSTGRES://u@x/db").expect("upper"),
        StoreUrl::Postgres("postgres://u@x/db".into())
    );
}

#[test]
fn sqlite_spellings_that_would_lose_or_misplace_data_are_refused() {
    for text in [
        "sqlite::memory:",
        "sqlite:mem.db?mode=ro",
        "sqlite: ",
        "sqlite://",
    ] {
        assert!(
            matches!(StoreUrl::parse(text), Err(OpenError::Url(_))),
            "{text:?}"
        );
    }
    assert_eq!(
        StoreUrl::parse("sqlite:///abs/mem.db").expect("sqlx's absolute spelling"),
        StoreUrl::Sqlite("/abs/mem.db".into())
    );
}

#[test]
fn a_database_that_cannot_be_asked_is_an_error_not_a_store_without_history() {
    // Nothing listens on port 1: the question fails, and says so.
    let url = StoreUrl::parse("postgres://u@127.0.0.1:1/db").expect("url");
    assert!(url.keeps_history(None).is_err());
    assert!(url.open(&OpenOptions::new()).is_err());
}

#[test]
fn a_mistyped_store_is_said_missing_before_its_history() {
    let dir = tempfile::tempdir().expect("dir");
    for url in [
        StoreUrl::Dir(dir.path().join("reall")),
        StoreUrl::Sqlite(dir.path().join("mem.db")),
    ] {
        let got = url.open(&OpenOptions::new().history(HistoryLogs::Required));
        assert!(
            matches!(got, Err(OpenError::NotFound(_))),
            "{url:?}: {got:?}"
        );
    }
}

/// A PostgreSQL store's tenant opened with a history keeps a history of
/// its own (its log's scope is the tenant): the open used to refuse it,
/// the log asked of the base store rather than the tenant's.
#[cfg(feature = "postgres")]
#[test]
fn a_postgresql_tenant_opens_with_a_history_of_its_own() {
    let Ok(db) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CLAUDE_MEMORY_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES=1 but CLAUDE_MEMORY_TEST_POSTGRES_URL is not set"
        );
        eprintln!("skipped: no PostgreSQL");
        return;
    };
    let url = StoreUrl::parse(&db).expect("url");
    let name = format!("url-{}-{}", std::process::id(), line!());
    let tenant = TenantId::parse(&name).expect("tenant");
    let options = OpenOptions::new()
        .create(true)
        .tenant(Some(tenant.clone()))
        .history(HistoryLogs::Start);
    let opened = url.open(&options).expect("a tenant with a history");
    let h = HistoryStore::open(opened.store, opened.log.expect("a log")).expect("history");
    h.write(
        &p("/memories/a.md"),
        b"tenant\n",
        claude_memory::store::WriteMode::Create,
    )
    .expect("write");
    drop(h);
    assert!(url.keeps_history(Some(&tenant)).expect("asked"));
    let again = url
        .open(
            &OpenOptions::new()
                .tenant(Some(tenant))
                .history(HistoryLogs::Required),
        )
        .expect("its history, required");
    assert!(again.log.is_some());
}
