//! Issue 30, item 7: two planted 256 MiB objects took `export` to 1,208
//! MiB and were exported, although `import` with the same limits refuses
//! them. Export now applies import's limits (refusing, before writing
//! anything, what an import would refuse) and streams the backup one file
//! at a time.
#![cfg(unix)]

use claude_memory::backup::{Backup, ExportError, ExportOptions, ExportProblem, ImportOptions};
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{Config, InMemoryStore, MemoryPath};

fn p(text: &str) -> MemoryPath {
    MemoryPath::parse(text).expect("path")
}

#[test]
fn export_refuses_what_import_with_the_same_limits_refuses() {
    let store = InMemoryStore::new();
    store
        .write(&p("/memories/a.md"), b"alpha", WriteMode::Create)
        .expect("write");
    store
        .write(
            &p("/memories/big.bin"),
            &vec![7u8; 2_000_000],
            WriteMode::Create,
        )
        .expect("write");
    let config = Config::default();
    let limited = ExportOptions::new().limits_of(&config);
    let mut out = Vec::new();
    match Backup::write_store(&store, &mut out, &limited) {
        Err(ExportError::Refused(problems)) => assert_eq!(
            problems,
            [ExportProblem::FileTooLarge {
                path: "/memories/big.bin".into(),
                len: 2_000_000,
                limit: config.max_file_size,
            }]
        ),
        other => panic!("{other:?}"),
    }
    assert!(out.is_empty(), "nothing was written");
    // Without limits it is exported, and an import with them refuses it:
    // the same rule both ways.
    let summary = Backup::write_store(&store, &mut out, &ExportOptions::new()).expect("export");
    assert_eq!(summary.files, ["/memories/a.md", "/memories/big.bin"]);
    let text = String::from_utf8(out).expect("UTF-8");
    assert_eq!(text, Backup::of_store(&store).expect("of_store").to_json());
    let backup = Backup::from_json(&text).expect("parse");
    let refused = backup.restore(
        &InMemoryStore::new(),
        &ImportOptions::new().limits_of(&config),
    );
    assert!(refused.is_err(), "{refused:?}");
    // The store's total against its limit, as import counts it.
    let mut small = config.clone();
    small.max_file_size = 4_000_000;
    small.max_store_size = Some(1_000_000);
    match Backup::write_store(
        &store,
        &mut Vec::new(),
        &ExportOptions::new().limits_of(&small),
    ) {
        Err(ExportError::Refused(problems)) => assert_eq!(
            problems,
            [ExportProblem::StoreTooLarge {
                total: 2_000_005,
                limit: 1_000_000
            }]
        ),
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "cli")]
mod cli {
    use std::fs;
    use std::io::Read;
    use std::path::Path;
    use std::process::{Command, Output, Stdio};

    const BIN: &str = env!("CARGO_BIN_EXE_claude-memory-cli");

    fn cli(root: &Path, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--root")
            .arg(root)
            .args(args)
            .env_remove("CLAUDE_MEMORY_STORE")
            .env_remove("CLAUDE_MEMORY_DIR")
            .stdin(Stdio::null())
            .output()
            .expect("run the CLI")
    }

    fn stderr(o: &Output) -> String {
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// The largest peak RSS, in KiB, of the children this process has
    /// waited for (every child of these tests is a CLI run that must stay
    /// small).
    fn children_peak_kib() -> u64 {
        // SAFETY: getrusage only writes the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        assert_eq!(rc, 0, "getrusage");
        u64::try_from(usage.ru_maxrss).unwrap_or(0)
    }

    /// The peak memory any CLI run may reach here: the binary itself is
    /// about 10 MiB; one file of at most the 1 MiB limit is held at a time.
    const BOUND_KIB: u64 = 64 * 1024;

    #[test]
    fn a_planted_file_over_the_limit_is_refused_by_export_without_reading_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("mem");
        fs::create_dir(&root).expect("mkdir");
        fs::write(root.join("a.md"), "alpha\n").expect("write");
        // Sparse: 256 MiB that cost no disk.
        fs::File::create(root.join("big.bin"))
            .and_then(|f| f.set_len(256 << 20))
            .expect("plant");
        let o = cli(&root, &["export"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "nothing is written");
        let err = stderr(&o);
        assert!(
            err.contains("nothing was exported")
                && err.contains(
                    "/memories/big.bin is 268435456 bytes, over the file size limit of 1048576"
                )
                && err.contains("--max-file-size"),
            "{err}"
        );
        let out = dir.path().join("backup.json");
        let o = cli(&root, &["export", "--output", out.to_str().expect("utf8")]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let left: Vec<_> = fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 1, "no backup or temporary file is left");
        let peak = children_peak_kib();
        eprintln!("peak RSS of the exports: {peak} KiB");
        assert!(peak < BOUND_KIB, "an export took {peak} KiB");
    }

    /// 48 files of 1 MiB (the limit): the backup (48 MiB) is streamed,
    /// never held.
    #[test]
    fn export_streams_one_file_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("mem");
        fs::create_dir(&root).expect("mkdir");
        let mb = "m".repeat(1 << 20);
        for i in 0..48 {
            fs::write(root.join(format!("f{i:02}.md")), &mb).expect("write");
        }
        let mut child = Command::new(BIN)
            .arg("--root")
            .arg(&root)
            .arg("export")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut buf = vec![0u8; 1 << 16];
        let (mut total, mut tail) = (0usize, Vec::new());
        loop {
            let n = stdout.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            total += n;
            tail.extend_from_slice(&buf[..n]);
            let keep = tail.len().saturating_sub(16);
            tail.drain(..keep);
        }
        let o = child.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(total > 48 << 20, "{total} bytes");
        assert!(tail.ends_with(b"\n  ]\n}\n"), "the document is whole");
        let peak = children_peak_kib();
        eprintln!("peak RSS of the exports: {peak} KiB");
        assert!(peak < BOUND_KIB, "an export took {peak} KiB");
    }
}
