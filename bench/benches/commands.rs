//! Every command, each on its own, on the in-memory store and the
//! filesystem store, with a raw `std::fs` floor beside each filesystem
//! number: the same reads, writes, renames and fsyncs a minimal program
//! would do, with no crate code. Crate and floor run in the same group of
//! the same run, so their ratio is meaningful on a noisy machine.
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench commands
//! python3 bench/benches/ratios.py      # the ratio table from the results
//! ```

use std::fs;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use serde_json::{Value, json};

/// A 30-line file of about 2 KB, the size of a typical memory note.
fn note() -> String {
    (1..=30)
        .map(|i| format!("- fact number {i:02}: {}\n", "x".repeat(50)))
        .collect()
}

fn must(tool: &MemoryTool<impl MemoryStore>, input: &Value) {
    let r = tool.dispatch(input);
    assert!(!r.is_error, "{input}: {:?}", r.text());
    black_box(r);
}

fn put(tool: &MemoryTool<impl MemoryStore>, path: &str, text: &str) {
    let _ = tool.dispatch(&json!({"command": "delete", "path": path}));
    must(
        tool,
        &json!({"command": "create", "path": path, "file_text": text}),
    );
}

fn gone(tool: &MemoryTool<impl MemoryStore>, path: &str) {
    let _ = tool.dispatch(&json!({"command": "delete", "path": path}));
}

/// The crate's side of each operation, in group `{op}`, function `name`.
fn crate_ops<S: MemoryStore>(c: &mut Criterion, name: &str, tool: &MemoryTool<S>) {
    let text = note();
    put(tool, "/memories/note.md", &text);
    let each =
        |c: &mut Criterion, op: &str, f: &mut dyn FnMut(&mut BenchmarkGroup<'_, WallTime>)| {
            let mut g = c.benchmark_group(op);
            f(&mut g);
            g.finish();
        };
    let view = json!({"command": "view", "path": "/memories/note.md"});
    each(c, "view", &mut |g| {
        g.bench_function(name, |b| b.iter(|| must(tool, &view)));
    });
    let range = json!({"command": "view", "path": "/memories/note.md", "view_range": [10, 20]});
    each(c, "view_range", &mut |g| {
        g.bench_function(name, |b| b.iter(|| must(tool, &range)));
    });
    let create = json!({"command": "create", "path": "/memories/new.md", "file_text": "hello\n"});
    each(c, "create", &mut |g| {
        g.bench_function(name, |b| {
            b.iter_batched(
                || gone(tool, "/memories/new.md"),
                |()| must(tool, &create),
                BatchSize::PerIteration,
            )
        });
    });
    let replace = json!({"command": "str_replace", "path": "/memories/e.md", "old_str": "fact number 15", "new_str": "FACT number 15"});
    each(c, "str_replace", &mut |g| {
        g.bench_function(name, |b| {
            b.iter_batched(
                || put(tool, "/memories/e.md", &text),
                |()| must(tool, &replace),
                BatchSize::PerIteration,
            )
        });
    });
    let insert = json!({"command": "insert", "path": "/memories/e.md", "insert_line": 15, "insert_text": "a new fact"});
    each(c, "insert", &mut |g| {
        g.bench_function(name, |b| {
            b.iter_batched(
                || put(tool, "/memories/e.md", &text),
                |()| must(tool, &insert),
                BatchSize::PerIteration,
            )
        });
    });
    let rename =
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"});
    each(c, "rename", &mut |g| {
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    gone(tool, "/memories/b.md");
                    put(tool, "/memories/a.md", "a\n");
                },
                |()| must(tool, &rename),
                BatchSize::PerIteration,
            )
        });
    });
    let delete = json!({"command": "delete", "path": "/memories/d.md"});
    each(c, "delete", &mut |g| {
        g.bench_function(name, |b| {
            b.iter_batched(
                || put(tool, "/memories/d.md", "d\n"),
                |()| must(tool, &delete),
                BatchSize::PerIteration,
            )
        });
    });
}

/// The floor: the same work with plain `std::fs` calls, in `root`.
struct Floor {
    root: PathBuf,
    durable: bool,
}

impl Floor {
    fn sync_dir(&self) {
        if self.durable {
            fs::File::open(&self.root)
                .and_then(|f| f.sync_all())
                .expect("sync dir");
        }
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) {
        let tmp = self.root.join(".tmp");
        let mut f = fs::File::create(&tmp).expect("tmp");
        f.write_all(data).expect("write");
        if self.durable {
            f.sync_all().expect("sync");
        }
        fs::rename(&tmp, path).expect("rename");
        self.sync_dir();
    }

    fn view(&self, path: &Path, first: usize, last: usize) -> String {
        let data = fs::read_to_string(path).expect("read");
        let mut out = String::with_capacity(data.len() * 2);
        out.push_str("header\n");
        for (i, line) in data
            .lines()
            .enumerate()
            .skip(first - 1)
            .take(last + 1 - first)
        {
            out.push_str(&format!("{:>6}\t{}\n", i + 1, line));
        }
        out
    }
}

fn floor_ops(c: &mut Criterion, name: &str, floor: &Floor) {
    let text = note();
    fs::create_dir_all(&floor.root).expect("root");
    let p = |n: &str| floor.root.join(n);
    fs::write(p("note.md"), &text).expect("note");
    let mut g = c.benchmark_group("view");
    g.bench_function(name, |b| {
        b.iter(|| black_box(floor.view(&p("note.md"), 1, 30)))
    });
    g.finish();
    let mut g = c.benchmark_group("view_range");
    g.bench_function(name, |b| {
        b.iter(|| black_box(floor.view(&p("note.md"), 10, 20)))
    });
    g.finish();
    let mut g = c.benchmark_group("create");
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                let _ = fs::remove_file(p("new.md"));
            },
            |()| floor.write_atomic(&p("new.md"), b"hello\n"),
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mut g = c.benchmark_group("str_replace");
    g.bench_function(name, |b| {
        b.iter_batched(
            || floor.write_atomic(&p("e.md"), text.as_bytes()),
            |()| {
                let data = fs::read_to_string(p("e.md")).expect("read");
                floor.write_atomic(
                    &p("e.md"),
                    data.replacen("fact number 15", "FACT number 15", 1)
                        .as_bytes(),
                );
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mut g = c.benchmark_group("insert");
    g.bench_function(name, |b| {
        b.iter_batched(
            || floor.write_atomic(&p("e.md"), text.as_bytes()),
            |()| {
                let data = fs::read_to_string(p("e.md")).expect("read");
                let mut lines: Vec<&str> = data.lines().collect();
                lines.insert(15, "a new fact");
                floor.write_atomic(&p("e.md"), (lines.join("\n") + "\n").as_bytes());
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mut g = c.benchmark_group("rename");
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                let _ = fs::remove_file(p("b.md"));
                floor.write_atomic(&p("a.md"), b"a\n");
            },
            |()| {
                fs::rename(p("a.md"), p("b.md")).expect("rename");
                floor.sync_dir();
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mut g = c.benchmark_group("delete");
    g.bench_function(name, |b| {
        b.iter_batched(
            || floor.write_atomic(&p("d.md"), b"d\n"),
            |()| {
                fs::remove_file(p("d.md")).expect("delete");
                floor.sync_dir();
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    crate_ops(c, "in-memory", &MemoryTool::new(InMemoryStore::new()));
    let dir = tempfile::tempdir().expect("temporary directory");
    let durable = FilesystemStore::open(dir.path().join("durable")).expect("open");
    crate_ops(c, "filesystem durable", &MemoryTool::new(durable));
    floor_ops(
        c,
        "floor durable",
        &Floor {
            root: dir.path().join("floor-durable"),
            durable: true,
        },
    );
    let fast = FilesystemStore::builder(dir.path().join("fast"))
        .durable(false)
        .open()
        .expect("open");
    crate_ops(c, "filesystem no-fsync", &MemoryTool::new(fast));
    floor_ops(
        c,
        "floor no-fsync",
        &Floor {
            root: dir.path().join("floor-fast"),
            durable: false,
        },
    );
}

criterion_group! {
    name = all;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(all);
