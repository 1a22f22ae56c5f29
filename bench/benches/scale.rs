//! How the crate scales: opening a store and one create against its size,
//! directory views against tree size, `view_range` in a 100 MB file (time
//! and peak memory), `str_replace` against file size. Prints medians of
//! repeated runs; run by hand:
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench scale
//! cargo bench -p claude-memory-bench --bench scale -- open     # the first part alone
//! cargo bench -p claude-memory-bench --bench history_length     # history against its length
//! ```

use std::fs;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use serde_json::{Value, json};

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn time<S: MemoryStore>(tool: &MemoryTool<S>, input: &Value, runs: usize) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                let r = tool.dispatch(input);
                let took = start.elapsed();
                assert!(!r.is_error, "{input}: {:?}", r.text());
                took
            })
            .collect(),
    )
}

/// Peak resident memory of this process so far (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// Opening a filesystem store and one create in it, against the store's
/// size: opening walks nothing (temporary files a crash left go when a
/// listing finds them), so the ratio stays near 1.
fn open_and_create(dir: &std::path::Path) {
    println!("open + one create (durable filesystem store) against store size");
    let mut first = None;
    for files in [1_000usize, 10_000, 100_000] {
        let root = dir.join(format!("open{files}"));
        for i in 0..files {
            let sub = root.join(format!("d{:04}", i / 100));
            if i % 100 == 0 {
                fs::create_dir_all(&sub).expect("dir");
            }
            fs::write(sub.join(format!("f{i:06}.md")), "a memory\n").expect("file");
        }
        let runs: Vec<Duration> = (0..9)
            .map(|n| {
                let start = Instant::now();
                let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
                let p = format!("/memories/new/n{n}.md");
                let r = tool.dispatch(&json!({"command": "create", "path": p, "file_text": "x"}));
                assert!(!r.is_error, "{r:?}");
                start.elapsed()
            })
            .collect();
        let m = median(runs);
        let base = *first.get_or_insert(m);
        println!(
            "  {files:>8} files: {} ({:.2}x the 1,000-file store)",
            fmt(m),
            m.as_secs_f64() / base.as_secs_f64()
        );
        fs::remove_dir_all(&root).expect("cleanup");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list`
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    open_and_create(dir.path());
    if std::env::args().any(|a| a == "open") {
        return; // `cargo bench --bench scale -- open`: this part alone
    }
    println!();

    // A 100 MB file placed in the store by someone else.
    let root = dir.path().join("big");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    let lines = 999_999usize; // the most a view accepts
    {
        let mut w = BufWriter::new(fs::File::create(root.join("huge.log")).expect("create"));
        for i in 0..lines {
            writeln!(w, "{i:09} {}", "y".repeat(94)).expect("write");
        }
    }
    let size = fs::metadata(root.join("huge.log")).expect("size").len();
    let before = peak_rss_mib();
    println!(
        "view_range in a {} MB file of {lines} lines (peak RSS before: {before:.1} MiB)",
        size / 1_000_000
    );
    for (name, at) in [
        ("start", 10),
        ("middle", lines as i64 / 2),
        ("end", lines as i64 - 20),
    ] {
        let input =
            json!({"command": "view", "path": "/memories/huge.log", "view_range": [at, at + 10]});
        println!("  near the {name:6}: {}", fmt(time(&tool, &input, 5)));
    }
    let whole = json!({"command": "view", "path": "/memories/huge.log"});
    println!(
        "  whole file (truncated view): {}",
        fmt(time(&tool, &whole, 5))
    );
    println!(
        "  peak RSS after: {:.1} MiB (the file is {} MiB)",
        peak_rss_mib(),
        size >> 20
    );
    let edit = json!({"command": "str_replace", "path": "/memories/huge.log", "old_str": "000000010", "new_str": "x"});
    let refused = tool.dispatch(&edit);
    println!("  str_replace: {}", refused.text().unwrap_or_default());
    drop(tool);
    fs::remove_dir_all(&root).expect("cleanup");

    // str_replace against file size: one pass, so time grows linearly.
    println!("\nstr_replace (durable filesystem store) against file size");
    let tool = MemoryTool::new(FilesystemStore::open(dir.path().join("edit")).expect("open"));
    for kb in [10usize, 100, 500, 1000] {
        let text: String = (0..kb * 1024 / 64)
            .map(|i| format!("{i:08} {}\n", "z".repeat(54)))
            .collect();
        let _ = tool.dispatch(&json!({"command": "delete", "path": "/memories/e.md"}));
        let r = tool
            .dispatch(&json!({"command": "create", "path": "/memories/e.md", "file_text": text}));
        assert!(!r.is_error);
        let mut flip = false;
        let runs: Vec<Duration> = (0..9)
            .map(|_| {
                flip = !flip;
                let (a, b) = if flip { ("00000100 ", "0000010X ") } else { ("0000010X ", "00000100 ") };
                let input = json!({"command": "str_replace", "path": "/memories/e.md", "old_str": a, "new_str": b});
                let start = Instant::now();
                assert!(!tool.dispatch(&input).is_error);
                start.elapsed()
            })
            .collect();
        println!("  {kb:>5} KB: {}", fmt(median(runs)));
    }

    // Directory views against tree size: files in directories of 100.
    println!("\nview /memories (2 levels, output capped) against tree size");
    println!("  {:>8} {:>14} {:>14}", "files", "in-memory", "filesystem");
    for files in [100usize, 1_000, 10_000, 100_000] {
        let mem = MemoryTool::new(InMemoryStore::new());
        let fs_root = dir.path().join(format!("tree{files}"));
        let fst = MemoryTool::new(
            FilesystemStore::builder(&fs_root)
                .durable(false)
                .open()
                .expect("open"),
        );
        for i in 0..files {
            let p = format!("/memories/d{:04}/f{:05}.md", i / 100, i);
            let c = json!({"command": "create", "path": p, "file_text": "a memory\n"});
            assert!(!mem.dispatch(&c).is_error);
            assert!(!fst.dispatch(&c).is_error);
        }
        let view = json!({"command": "view", "path": "/memories"});
        let runs = if files >= 100_000 { 3 } else { 7 };
        println!(
            "  {files:>8} {:>14} {:>14}",
            fmt(time(&mem, &view, runs)),
            fmt(time(&fst, &view, runs))
        );
        drop(fst);
        fs::remove_dir_all(&fs_root).expect("cleanup");
    }
}
