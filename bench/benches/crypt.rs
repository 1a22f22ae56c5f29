//! The encrypted store against the plain one, side by side on the
//! filesystem store with durable writes (the default):
//! `cargo bench -p claude-memory-bench --bench crypt --features encryption`.
//!
//! Each operation runs in alternating rounds on the two stores (so both
//! see the same disk and machine load), and the ratio of the medians is
//! printed: create, view of a 2 KB note, `str_replace` in it, and a view
//! of a directory of 100 files. Goals (issue 21): <= 1.3x, 1.3x, 1.3x,
//! 1.5x.

use std::time::Instant;

use claude_memory::store::crypt::{EncryptedStore, Key, Keyring};
use claude_memory::{FilesystemStore, MemoryStore, MemoryTool};
use serde_json::{Value, json};

const ROUNDS: usize = 15;
const PER_ROUND: usize = 40;

fn call(tool: &MemoryTool<Box<dyn MemoryStore>>, input: Value) {
    let r = tool.dispatch(&input);
    assert!(!r.is_error, "{:?}", r.text());
}

fn setup(tool: &MemoryTool<Box<dyn MemoryStore>>) {
    let note: String = (0..68)
        .map(|k| format!("- fact {k:02} about the customer.\n"))
        .collect();
    assert!((1900..2100).contains(&note.len()), "{}", note.len());
    call(
        tool,
        json!({"command": "create", "path": "/memories/note.md", "file_text": note}),
    );
    for i in 0..100 {
        call(
            tool,
            json!({"command": "create", "path": format!("/memories/dir/f{i:03}.md"), "file_text": "x\n"}),
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let plain_dir = tempfile::tempdir().expect("dir");
    let enc_dir = tempfile::tempdir().expect("dir");
    let plain: MemoryTool<Box<dyn MemoryStore>> = MemoryTool::new(Box::new(
        FilesystemStore::open(plain_dir.path()).expect("fs"),
    ));
    let key = Key::generate().expect("key");
    let enc: MemoryTool<Box<dyn MemoryStore>> = MemoryTool::new(Box::new(
        EncryptedStore::open(
            FilesystemStore::open(enc_dir.path()).expect("fs"),
            Keyring::new(key),
        )
        .expect("open"),
    ));
    setup(&plain);
    setup(&enc);
    type Op = fn(&MemoryTool<Box<dyn MemoryStore>>, usize, usize);
    let ops: [(&str, Op, f64); 4] = [
        (
            "create",
            |t, r, i| {
                call(
                    t,
                    json!({"command": "create", "path": format!("/memories/new/r{r}_{i}.md"), "file_text": "a new note of about forty bytes or so\n"}),
                )
            },
            1.3,
        ),
        (
            "view 2 KB",
            |t, _, _| call(t, json!({"command": "view", "path": "/memories/note.md"})),
            1.3,
        ),
        (
            "str_replace",
            |t, _, i| {
                let (a, b) = if i % 2 == 0 {
                    ("fact 07", "FACT 07")
                } else {
                    ("FACT 07", "fact 07")
                };
                call(
                    t,
                    json!({"command": "str_replace", "path": "/memories/note.md", "old_str": a, "new_str": b}),
                );
            },
            1.3,
        ),
        (
            "view dir of 100",
            |t, _, _| call(t, json!({"command": "view", "path": "/memories/dir"})),
            1.5,
        ),
    ];
    println!(
        "{:<18} {:>12} {:>12} {:>7} {:>6}",
        "operation", "plain µs", "encrypted µs", "ratio", "goal"
    );
    // CRYPT_BENCH_ONLY=view runs only the operations whose name holds it
    // (to profile one, e.g. under callgrind).
    let only = std::env::var("CRYPT_BENCH_ONLY").unwrap_or_default();
    for (name, op, goal) in ops {
        if !name.contains(only.as_str()) {
            continue;
        }
        let (mut p, mut e) = (Vec::new(), Vec::new());
        let rounds = std::env::var("CRYPT_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(ROUNDS);
        for round in 0..rounds {
            for (tool, out, tag) in [(&plain, &mut p, 0), (&enc, &mut e, 1)] {
                let start = Instant::now();
                for i in 0..PER_ROUND {
                    op(tool, round * 2 + tag, i);
                }
                out.push(start.elapsed().as_secs_f64() * 1e6 / PER_ROUND as f64);
            }
        }
        let (mp, me) = (median(p), median(e));
        println!(
            "{name:<18} {mp:>12.1} {me:>12.1} {:>6.2}x {goal:>5}x",
            me / mp
        );
    }
}
