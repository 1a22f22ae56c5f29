//! `StoreUrl`: a store named by one string, parsed and opened with its
//! tenant and its history log.

use claude_memory::history::HistoryStore;
use claude_memory::store::{HistoryLogs, MemoryStoreExt as _, OpenError, OpenOptions, StoreUrl};
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
    assert!(url.keeps_history(Some(&tenant)));
    assert!(!url.keeps_history(None), "the base keeps none");
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
