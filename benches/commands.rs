//! Every command on each backend, with a raw `std::fs` floor beside the
//! filesystem numbers (same syscalls and fsyncs, no crate code), so ratios
//! come from one run on one machine.
//!
//! ```text
//! cargo bench --bench commands
//! ```

use std::fs;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

/// A 30-line file of about 2 KB, the size of a typical memory note.
fn note() -> String {
    (1..=30)
        .map(|i| format!("- fact number {i:02}: {}\n", "x".repeat(50)))
        .collect()
}

fn bench_backend<S: MemoryStore>(c: &mut Criterion, name: &str, tool: MemoryTool<S>) {
    let text = note();
    let ok = |input: &Value| {
        let r = tool.dispatch(input);
        assert!(!r.is_error, "{input}: {:?}", r.text());
        r
    };
    ok(&json!({"command": "create", "path": "/memories/note.md", "file_text": text}));
    for d in 0..10 {
        for f in 0..10 {
            ok(
                &json!({"command": "create", "path": format!("/memories/d{d}/f{f}.md"), "file_text": "small\n"}),
            );
        }
    }
    let mut g = c.benchmark_group(name);
    let view_file = json!({"command": "view", "path": "/memories/note.md"});
    g.bench_function("view file (2 KB, 30 lines)", |b| {
        b.iter(|| black_box(tool.dispatch(&view_file)))
    });
    let view_range =
        json!({"command": "view", "path": "/memories/note.md", "view_range": [10, 20]});
    g.bench_function("view_range", |b| {
        b.iter(|| black_box(tool.dispatch(&view_range)))
    });
    let view_dir = json!({"command": "view", "path": "/memories"});
    g.bench_function("view directory (110 files)", |b| {
        b.iter(|| black_box(tool.dispatch(&view_dir)))
    });
    let mut flip = false;
    g.bench_function("str_replace", |b| {
        b.iter(|| {
            flip = !flip;
            let (old, new) = if flip { ("fact number 15", "FACT number 15") } else { ("FACT number 15", "fact number 15") };
            ok(&json!({"command": "str_replace", "path": "/memories/note.md", "old_str": old, "new_str": new}))
        })
    });
    ok(&json!({"command": "create", "path": "/memories/ins.md", "file_text": ""}));
    g.bench_function("insert", |b| {
        b.iter(|| ok(&json!({"command": "insert", "path": "/memories/ins.md", "insert_line": 0, "insert_text": "line"})))
    });
    let n = AtomicU64::new(0);
    g.bench_function("create + delete", |b| {
        b.iter(|| {
            let p = format!("/memories/new{}.md", n.fetch_add(1, Ordering::Relaxed));
            ok(&json!({"command": "create", "path": p, "file_text": "hello\n"}));
            ok(&json!({"command": "delete", "path": p}))
        })
    });
    let mut there = false;
    g.bench_function("rename", |b| {
        b.iter(|| {
            there = !there;
            let (a, b) = if there {
                ("/memories/note.md", "/memories/moved.md")
            } else {
                ("/memories/moved.md", "/memories/note.md")
            };
            ok(&json!({"command": "rename", "old_path": a, "new_path": b}))
        })
    });
    g.finish();
}

/// The floor: what a minimal program does for the same work with `std::fs`.
fn bench_floor(c: &mut Criterion, name: &str, root: &Path, durable: bool) {
    fs::create_dir_all(root).expect("root");
    let text = note();
    fs::write(root.join("note.md"), &text).expect("note");
    let sync_dir = |d: &Path| {
        if durable {
            fs::File::open(d)
                .and_then(|f| f.sync_all())
                .expect("sync dir");
        }
    };
    let write_atomic = |path: &Path, data: &[u8]| {
        let tmp = path.with_extension("tmp");
        let mut f = fs::File::create(&tmp).expect("tmp");
        f.write_all(data).expect("write");
        if durable {
            f.sync_all().expect("sync");
        }
        fs::rename(&tmp, path).expect("rename");
        sync_dir(root);
    };
    let mut g = c.benchmark_group(name);
    g.bench_function("view file (2 KB, 30 lines)", |b| {
        b.iter(|| {
            let data = fs::read_to_string(root.join("note.md")).expect("read");
            let mut out = String::with_capacity(data.len() + 256);
            for (i, line) in data.lines().enumerate() {
                out.push_str(&format!("{:>6}\t{}\n", i + 1, line));
            }
            black_box(out)
        })
    });
    let mut flip = false;
    g.bench_function("str_replace", |b| {
        b.iter(|| {
            flip = !flip;
            let (old, new) = if flip {
                ("fact number 15", "FACT number 15")
            } else {
                ("FACT number 15", "fact number 15")
            };
            let data = fs::read_to_string(root.join("note.md")).expect("read");
            write_atomic(&root.join("note.md"), data.replacen(old, new, 1).as_bytes());
        })
    });
    let n = AtomicU64::new(0);
    g.bench_function("create + delete", |b| {
        b.iter(|| {
            let p = root.join(format!("new{}.md", n.fetch_add(1, Ordering::Relaxed)));
            write_atomic(&p, b"hello\n");
            fs::remove_file(&p).expect("delete");
            sync_dir(root);
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_backend(c, "in-memory", MemoryTool::new(InMemoryStore::new()));
    let dir = tempfile::tempdir().expect("temporary directory");
    let durable = FilesystemStore::open(dir.path().join("durable")).expect("open");
    bench_backend(c, "filesystem (durable)", MemoryTool::new(durable));
    bench_floor(
        c,
        "std::fs floor (durable)",
        &dir.path().join("floor-durable"),
        true,
    );
    let fast = FilesystemStore::builder(dir.path().join("fast"))
        .durable(false)
        .open()
        .expect("open");
    bench_backend(c, "filesystem (no fsync)", MemoryTool::new(fast));
    bench_floor(
        c,
        "std::fs floor (no fsync)",
        &dir.path().join("floor-fast"),
        false,
    );
}

criterion_group! {
    name = all;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(all);
