//! Operations per second on each backend, single-threaded, with default
//! (durable) settings: `cargo bench -p claude-memory-bench --bench backends --features sqlite,postgres`
//! (PostgreSQL when CLAUDE_MEMORY_TEST_POSTGRES_URL is set).
//!
//! Each SQL backend is followed by its raw floor: the same work written
//! directly with the driver on the same table layout (one insert for a
//! create, one select for a view, one read and one conditional update in
//! one transaction for an edit, one select of both levels for the tree
//! view, one delete), and the ratio of the two. The filesystem store (on
//! Linux) is followed by its floor too: the same system calls made
//! directly with rustix (see `fs_floor`).

use std::time::Instant;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::json;

const N: usize = 300;

/// The work measured, one operation at a time.
trait Work {
    fn create(&mut self, i: usize, note: &str);
    fn view(&mut self, i: usize);
    fn replace(&mut self, i: usize);
    fn tree(&mut self);
    fn delete(&mut self, i: usize);
}

struct Tool<S: MemoryStore>(MemoryTool<S>);

impl<S: MemoryStore> Work for Tool<S> {
    fn create(&mut self, i: usize, note: &str) {
        let r = self.0.dispatch(&json!({"command": "create", "path": format!("/memories/bench/f{i}.md"), "file_text": note}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    fn view(&mut self, i: usize) {
        let r = self
            .0
            .dispatch(&json!({"command": "view", "path": format!("/memories/bench/f{i}.md")}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    fn replace(&mut self, i: usize) {
        let r = self.0.dispatch(&json!({"command": "str_replace", "path": format!("/memories/bench/f{i}.md"), "old_str": "fact 7 about", "new_str": "FACT 7 about"}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    fn tree(&mut self) {
        let r = self
            .0
            .dispatch(&json!({"command": "view", "path": "/memories"}));
        assert!(!r.is_error, "{:?}", r.text());
    }
    fn delete(&mut self, i: usize) {
        let r = self
            .0
            .dispatch(&json!({"command": "delete", "path": format!("/memories/bench/f{i}.md")}));
        assert!(!r.is_error, "{:?}", r.text());
    }
}

/// Rates per second: create, view, str_replace, tree view, delete.
fn measure(w: &mut dyn Work) -> [f64; 5] {
    let note: String = (0..20)
        .map(|k| format!("- remembered fact {k} about the customer\n"))
        .collect();
    let rate = |start: Instant, n: usize| n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..N {
        w.create(i, &note);
    }
    let create = rate(start, N);
    let views = rounds("CLAUDE_MEMORY_BENCH_VIEWS", 1);
    let start = Instant::now();
    for _ in 0..views {
        for i in 0..N {
            w.view(i);
        }
    }
    let view = rate(start, N * views);
    let start = Instant::now();
    for i in 0..N {
        w.replace(i);
    }
    let replace = rate(start, N);
    let trees = rounds("CLAUDE_MEMORY_BENCH_TREES", N / 10);
    let start = Instant::now();
    for _ in 0..trees {
        w.tree();
    }
    let tree = rate(start, trees);
    let start = Instant::now();
    for i in 0..N {
        w.delete(i);
    }
    let delete = rate(start, N);
    [create, view, replace, tree, delete]
}

/// How many rounds of a phase to time: `default`, or the number in the
/// environment variable `var` (`CLAUDE_MEMORY_BENCH_TREES` for tree views,
/// `CLAUDE_MEMORY_BENCH_VIEWS` for rounds of views of every note): more of
/// them make a profile of that cell, e.g. under `perf record`.
fn rounds(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn row(name: &str, r: [f64; 5]) {
    println!(
        "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        r[0], r[1], r[2], r[3], r[4]
    );
}

/// A store and its floor, and how many times slower than the floor the
/// store is.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // without the sql features
fn beside_floor(name: &str, store: [f64; 5], floor: [f64; 5]) {
    row(name, store);
    row(&format!("{name}: raw floor"), floor);
    println!(
        "| {name}: time vs floor | {} |",
        (0..5)
            .map(|k| format!("{:.2}x", floor[k] / store[k]))
            .collect::<Vec<_>>()
            .join(" | ")
    );
}

/// The edit every floor makes.
fn edited(text: &str) -> String {
    text.replacen("fact 7 about", "FACT 7 about", 1)
}

/// Milliseconds since the epoch, as the SQL stores write `modified_ms`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The filesystem store's floor (Linux): the system calls a durable
/// command needs, made directly with rustix, with no validation, no
/// rendering and no JSON: a create is the lock, the parent directory
/// opened beneath the root, a new temporary file written and fsynced,
/// renamed into place without replacing, the directory fsynced; a view
/// opens the file beneath the root, stats and reads it; an edit reads and
/// writes as those two do, under the lock; the tree view lists both
/// levels with a stat per entry; a delete unlinks and fsyncs the
/// directory, under the lock.
#[cfg(target_os = "linux")]
mod fs_floor {
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::{AsFd, OwnedFd};

    use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};

    pub struct Floor {
        root: OwnedFd,
        lock: File,
        n: u64,
    }

    fn dir_flags() -> OFlags {
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
    }

    fn beneath() -> ResolveFlags {
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
    }

    impl Floor {
        pub fn open(root: &std::path::Path) -> Floor {
            std::fs::create_dir_all(root).expect("floor root");
            let root = rfs::open(root, dir_flags(), Mode::empty()).expect("open root");
            let lock = rfs::openat(
                &root,
                ".claude-memory.lock",
                OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            )
            .expect("lock file");
            Floor {
                root,
                lock: File::from(lock),
                n: 0,
            }
        }

        fn dir(&self) -> OwnedFd {
            match rfs::openat2(&self.root, "bench", dir_flags(), Mode::empty(), beneath()) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => {
                    rfs::mkdirat(&self.root, "bench", Mode::RWXU).expect("mkdir");
                    rfs::fsync(&self.root).expect("fsync root");
                    rfs::openat2(&self.root, "bench", dir_flags(), Mode::empty(), beneath())
                        .expect("open dir")
                }
                Err(e) => panic!("open dir: {e}"),
            }
        }

        fn install(&mut self, dir: &OwnedFd, name: &str, data: &[u8], no_replace: bool) {
            self.n += 1;
            let temp = format!(".claude-memory.tmp.{}.{}", std::process::id(), self.n);
            let fd = rfs::openat(
                dir,
                temp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            )
            .expect("temp");
            let mut file = File::from(fd);
            file.write_all(data).expect("write");
            file.sync_all().expect("fsync");
            drop(file);
            let flags = if no_replace {
                RenameFlags::NOREPLACE
            } else {
                RenameFlags::empty()
            };
            rfs::renameat_with(dir, temp.as_str(), dir, name, flags).expect("rename");
            rfs::fsync(dir).expect("fsync dir");
        }

        fn read(&self, path: &str) -> Vec<u8> {
            let fd = rfs::openat2(
                &self.root,
                path,
                OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC
                    | OFlags::NOCTTY
                    | OFlags::NONBLOCK,
                Mode::empty(),
                beneath(),
            )
            .expect("open");
            let stat = rfs::fstat(&fd).expect("fstat");
            let mut data = Vec::with_capacity(stat.st_size as usize);
            File::from(fd).read_to_end(&mut data).expect("read");
            data
        }

        fn list(&self, dir: impl AsFd, count: &mut usize) -> Vec<String> {
            let dir = dir.as_fd();
            let mut subdirs = Vec::new();
            let mut entries = rfs::Dir::read_from(dir).expect("list");
            while let Some(entry) = entries.read() {
                let entry = entry.expect("entry");
                let name = entry.file_name();
                if name == c"." || name == c".." {
                    continue;
                }
                // As the store: the entry's type from the listing, a stat
                // for each file's size.
                match entry.file_type() {
                    rfs::FileType::Directory => subdirs.push(name.to_string_lossy().into_owned()),
                    rfs::FileType::RegularFile => {
                        let stat = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).expect("stat");
                        *count += stat.st_size as usize;
                    }
                    _ => {}
                }
            }
            subdirs
        }
    }

    impl super::Work for Floor {
        fn create(&mut self, i: usize, note: &str) {
            self.lock.lock().expect("lock");
            let dir = self.dir();
            self.install(&dir, &format!("f{i}.md"), note.as_bytes(), true);
            self.lock.unlock().expect("unlock");
        }
        fn view(&mut self, i: usize) {
            assert!(!self.read(&format!("bench/f{i}.md")).is_empty());
        }
        fn replace(&mut self, i: usize) {
            self.lock.lock().expect("lock");
            let dir = self.dir();
            let name = format!("f{i}.md");
            let fd = rfs::openat(
                &dir,
                name.as_str(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .expect("open");
            let stat = rfs::fstat(&fd).expect("fstat");
            let mut data = Vec::with_capacity(stat.st_size as usize);
            File::from(fd).read_to_end(&mut data).expect("read");
            let new = super::edited(&String::from_utf8_lossy(&data));
            self.install(&dir, &name, new.as_bytes(), false);
            self.lock.unlock().expect("unlock");
        }
        fn tree(&mut self) {
            let mut total = 0;
            for sub in self.list(&self.root, &mut total) {
                let fd = rfs::openat(&self.root, sub.as_str(), dir_flags(), Mode::empty())
                    .expect("open");
                self.list(&fd, &mut total);
            }
            assert!(total > 0);
        }
        fn delete(&mut self, i: usize) {
            self.lock.lock().expect("lock");
            let dir = self.dir();
            rfs::unlinkat(&dir, format!("f{i}.md").as_str(), AtFlags::empty()).expect("unlink");
            rfs::fsync(&dir).expect("fsync dir");
            self.lock.unlock().expect("unlock");
        }
    }
}

#[cfg(feature = "sqlite")]
mod sqlite_floor {
    use rusqlite::{Connection, TransactionBehavior, params};

    /// rusqlite on a database of the same layout, WAL and synchronous=FULL.
    pub struct Floor(pub Connection);

    const TENANT: &str = "";

    impl super::Work for Floor {
        fn create(&mut self, i: usize, note: &str) {
            self.0
                .prepare_cached(
                    "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
                     VALUES (?1, ?2, 'bench', ?3, 0, ?4, ?5, ?6, ?7)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        TENANT,
                        format!("bench/f{i}.md"),
                        format!("f{i}.md"),
                        note.as_bytes(),
                        note.len() as i64,
                        i as i64,
                        super::now_ms()
                    ])
                })
                .expect("insert");
        }
        fn view(&mut self, i: usize) {
            let data: Vec<u8> = self
                .0
                .prepare_cached(
                    "SELECT data FROM claude_memory_entries WHERE tenant = ?1 AND path = ?2",
                )
                .and_then(|mut s| {
                    s.query_row(params![TENANT, format!("bench/f{i}.md")], |r| r.get(0))
                })
                .expect("select");
            assert!(!data.is_empty());
        }
        fn replace(&mut self, i: usize) {
            let path = format!("bench/f{i}.md");
            let tx = self
                .0
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .expect("begin");
            let (data, version): (Vec<u8>, i64) = tx
                .prepare_cached("SELECT data, version FROM claude_memory_entries WHERE tenant = ?1 AND path = ?2")
                .and_then(|mut s| s.query_row(params![TENANT, path], |r| Ok((r.get(0)?, r.get(1)?))))
                .expect("select");
            let new = super::edited(&String::from_utf8_lossy(&data));
            let n = tx
                .prepare_cached("UPDATE claude_memory_entries SET data = ?3, len = ?4, version = version + 1000, modified_ms = ?5
                    WHERE tenant = ?1 AND path = ?2 AND version = ?6")
                .and_then(|mut s| s.execute(params![TENANT, path, new.as_bytes(), new.len() as i64, super::now_ms(), version]))
                .expect("update");
            assert_eq!(n, 1);
            tx.commit().expect("commit");
        }
        fn tree(&mut self) {
            let n = self
                .0
                .prepare_cached("SELECT name, is_dir, len, modified_ms FROM claude_memory_entries WHERE tenant = ?1 AND parent IN ('', 'bench')")
                .and_then(|mut s| {
                    s.query_map(params![TENANT], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
                    })?
                    .count();
                    Ok(())
                });
            n.expect("select");
        }
        fn delete(&mut self, i: usize) {
            self.0
                .prepare_cached("DELETE FROM claude_memory_entries WHERE tenant = ?1 AND path = ?2")
                .and_then(|mut s| s.execute(params![TENANT, format!("bench/f{i}.md")]))
                .expect("delete");
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres_floor {
    use tokio_postgres::{Client, Statement};

    /// tokio-postgres on a current-thread runtime this thread drives (as
    /// the blocking `postgres` crate does), statements prepared once, on
    /// the store's own table under a tenant of its own.
    pub struct Floor {
        rt: tokio::runtime::Runtime,
        client: Client,
        tenant: String,
        insert: Statement,
        select: Statement,
        select_v: Statement,
        update: Statement,
        tree: Statement,
        delete: Statement,
    }

    impl Floor {
        pub fn connect(url: &str, tenant: String) -> Floor {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let client = rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .expect("connect");
                tokio::spawn(conn);
                client
            });
            let prep = |sql: &str| rt.block_on(client.prepare(sql)).expect("prepare");
            Floor {
                insert: prep(
                    "INSERT INTO claude_memory_entries (tenant, path, parent, name, is_dir, data, len, version, modified_ms)
                     VALUES ($1, $2, 'bench', $3, FALSE, $4, $5, nextval('claude_memory_version'), $6)",
                ),
                select: prep("SELECT data FROM claude_memory_entries WHERE tenant = $1 AND path = $2"),
                select_v: prep(
                    "SELECT data, version FROM claude_memory_entries WHERE tenant = $1 AND path = $2",
                ),
                update: prep(
                    "UPDATE claude_memory_entries SET data = $3, len = $4, version = nextval('claude_memory_version'), modified_ms = $5
                     WHERE tenant = $1 AND path = $2 AND version = $6",
                ),
                tree: prep(
                    "SELECT name, is_dir, len, modified_ms FROM claude_memory_entries WHERE tenant = $1 AND parent IN ('', 'bench')",
                ),
                delete: prep("DELETE FROM claude_memory_entries WHERE tenant = $1 AND path = $2"),
                rt,
                client,
                tenant,
            }
        }
    }

    impl super::Work for Floor {
        fn create(&mut self, i: usize, note: &str) {
            let (path, name) = (format!("bench/f{i}.md"), format!("f{i}.md"));
            let len = note.len() as i64;
            let now = super::now_ms();
            self.rt
                .block_on(self.client.execute(
                    &self.insert,
                    &[&self.tenant, &path, &name, &note.as_bytes(), &len, &now],
                ))
                .expect("insert");
        }
        fn view(&mut self, i: usize) {
            let path = format!("bench/f{i}.md");
            let row = self
                .rt
                .block_on(self.client.query_one(&self.select, &[&self.tenant, &path]))
                .expect("select");
            assert!(!row.get::<_, Vec<u8>>(0).is_empty());
        }
        fn replace(&mut self, i: usize) {
            let path = format!("bench/f{i}.md");
            let Floor {
                rt, client, tenant, ..
            } = self;
            rt.block_on(async {
                let tx = client.transaction().await.expect("begin");
                let row = tx
                    .query_one(&self.select_v, &[&*tenant, &path])
                    .await
                    .expect("select");
                let (data, version): (Vec<u8>, i64) = (row.get(0), row.get(1));
                let new = super::edited(&String::from_utf8_lossy(&data));
                let len = new.len() as i64;
                let n = tx
                    .execute(
                        &self.update,
                        &[
                            &*tenant,
                            &path,
                            &new.as_bytes(),
                            &len,
                            &super::now_ms(),
                            &version,
                        ],
                    )
                    .await
                    .expect("update");
                assert_eq!(n, 1);
                tx.commit().await.expect("commit");
            });
        }
        fn tree(&mut self) {
            self.rt
                .block_on(self.client.query(&self.tree, &[&self.tenant]))
                .expect("select");
        }
        fn delete(&mut self, i: usize) {
            let path = format!("bench/f{i}.md");
            self.rt
                .block_on(self.client.execute(&self.delete, &[&self.tenant, &path]))
                .expect("delete");
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "| backend | create/s | view/s | str_replace/s | view of a 300-file tree/s | delete/s |"
    );
    println!("|---|---|---|---|---|---|");
    row(
        "in-memory",
        measure(&mut Tool(MemoryTool::new(InMemoryStore::new()))),
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let fs = measure(&mut Tool(MemoryTool::new(
        FilesystemStore::open(dir.path().join("fs")).expect("open"),
    )));
    #[cfg(target_os = "linux")]
    {
        let floor = measure(&mut fs_floor::Floor::open(&dir.path().join("fs-floor")));
        beside_floor("filesystem (durable)", fs, floor);
    }
    #[cfg(not(target_os = "linux"))]
    row("filesystem (durable)", fs);
    #[cfg(feature = "sqlite")]
    {
        let store = claude_memory::SqliteStore::open(dir.path().join("m.db")).expect("sqlite");
        let rates = measure(&mut Tool(MemoryTool::new(store)));
        let floor_db = dir.path().join("floor.db");
        drop(claude_memory::SqliteStore::open(&floor_db).expect("schema"));
        let conn = rusqlite::Connection::open(&floor_db).expect("raw connection");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("WAL");
        conn.pragma_update(None, "synchronous", "FULL")
            .expect("FULL");
        let floor = measure(&mut sqlite_floor::Floor(conn));
        beside_floor("sqlite (WAL, synchronous=FULL)", rates, floor);
    }
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL") {
        let tenant =
            claude_memory::TenantId::parse(&format!("bench-{}", std::process::id())).expect("id");
        let store = claude_memory::PostgresStore::connect(&url, 2)
            .expect("postgres")
            .for_tenant(&tenant);
        let rates = measure(&mut Tool(MemoryTool::new(store)));
        let floor = measure(&mut postgres_floor::Floor::connect(
            &url,
            format!("floor-{}", std::process::id()),
        ));
        beside_floor("postgres (local)", rates, floor);
    }
}
