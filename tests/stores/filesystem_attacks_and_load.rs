//! The filesystem store under attack and under load: symlink swaps mid-call,
//! many writers across threads and processes, writers killed at any moment.
//! Figures are printed (`cargo test --test stores_filesystem_attacks_and_load -- --nocapture`).
//! Unix: the Windows equivalents are in `tests/stores/windows.rs`.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use claude_memory::{FilesystemStore, MemoryTool, ToolResult};
use serde_json::{Value, json};

#[path = "../common/mod.rs"]
mod common;
use common::stdio_binary;

const SECRET: &str = "TOP SECRET: outside the root\n";

/// Every file and directory below `dir`, with content, without following
/// links.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        for entry in fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("metadata");
            if meta.is_dir() {
                out.insert(path.clone(), None);
                walk(&path, out);
            } else {
                out.insert(path.clone(), Some(fs::read(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// Busy-waits, so the swapper keeps its core instead of sleeping through
/// the workers' calls.
fn spin(d: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn leaked(result: &ToolResult) -> bool {
    result.text().is_some_and(|t| t.contains("TOP SECRET"))
}

#[test]
fn a_directory_swapped_for_a_symlink_mid_call_never_leads_outside() {
    swap_race(true);
}

#[test]
fn the_openat_walk_fallback_is_race_proof_too() {
    swap_race(false);
}

fn swap_race(openat2: bool) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    let outside = dir.path().join("outside");
    fs::create_dir_all(outside.join("sub")).expect("outside");
    fs::write(outside.join("secret.txt"), SECRET).expect("secret");
    fs::write(outside.join("sub/secret.txt"), SECRET).expect("secret");
    let store = FilesystemStore::builder(&root)
        .durable(false)
        .open()
        .expect("open");
    let tool = MemoryTool::new(store);
    fs::create_dir(root.join("d")).expect("d");
    let before = snapshot(&outside);

    let stop = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let ops = AtomicU64::new(0);
    let escapes = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let (d, stash) = (root.join("d"), root.join("d_stash"));
            while !stop.load(Ordering::Relaxed) {
                // A worker's create may recreate `d` while it is away; clear
                // whatever is in the way so the swapping goes on.
                if fs::rename(&d, &stash).is_err() {
                    let _ = fs::remove_dir_all(&stash);
                    let _ = fs::create_dir(&d);
                    continue;
                }
                if symlink(&outside, &d).is_err() {
                    let _ = fs::remove_dir_all(&d);
                    if symlink(&outside, &d).is_err() {
                        continue;
                    }
                }
                swaps.fetch_add(1, Ordering::Relaxed);
                // Hold each state for a moment so calls meet both.
                spin(Duration::from_micros(40));
                let _ = fs::remove_file(&d);
                let _ = fs::rename(&stash, &d);
                spin(Duration::from_micros(40));
            }
        });
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (tool, ops, escapes) = (&tool, &ops, &escapes);
                s.spawn(move || {
                    for i in 0..1000 {
                        let f = format!("/memories/d/w{w}_{i}.txt");
                        let g = format!("/memories/d/r{w}_{i}.txt");
                        let script = [
                            json!({"command": "create", "path": f, "file_text": "pwned\n"}),
                            json!({"command": "view", "path": f}),
                            json!({"command": "view", "path": "/memories/d/secret.txt"}),
                            json!({"command": "view", "path": "/memories/d/sub/secret.txt", "view_range": [1, 1]}),
                            json!({"command": "view", "path": "/memories/d"}),
                            json!({"command": "str_replace", "path": "/memories/d/secret.txt", "old_str": "TOP", "new_str": "PWNED"}),
                            json!({"command": "insert", "path": "/memories/d/sub/secret.txt", "insert_line": 0, "insert_text": "pwned"}),
                            json!({"command": "create", "path": format!("/memories/d/sub/x{w}_{i}.txt"), "file_text": "pwned"}),
                            json!({"command": "rename", "old_path": f, "new_path": g}),
                            json!({"command": "rename", "old_path": "/memories/d/secret.txt", "new_path": format!("/memories/stolen{w}_{i}")}),
                            json!({"command": "delete", "path": g}),
                            json!({"command": "delete", "path": "/memories/d/sub"}),
                            json!({"command": "delete", "path": "/memories/d/secret.txt"}),
                        ];
                        for input in &script {
                            let result = tool.dispatch(input);
                            ops.fetch_add(1, Ordering::Relaxed);
                            if leaked(&result) {
                                escapes.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
        stop.store(true, Ordering::Relaxed);
    });
    let after = snapshot(&outside);
    let changed = before.len().abs_diff(after.len())
        + before
            .iter()
            .filter(|(k, v)| after.get(*k) != Some(*v))
            .count();
    println!(
        "symlink swap race (openat2: {openat2}): {} operations, {} swaps, {} results with outside content, {} outside entries created/changed/deleted",
        ops.load(Ordering::Relaxed),
        swaps.load(Ordering::Relaxed),
        escapes.load(Ordering::Relaxed),
        changed
    );
    assert!(swaps.load(Ordering::Relaxed) > 0, "the swapper ran");
    assert_eq!(
        escapes.load(Ordering::Relaxed),
        0,
        "content from outside was read"
    );
    assert_eq!(
        after, before,
        "something outside the root was created, changed or deleted"
    );
    let stolen = fs::read_dir(&root)
        .expect("root")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("stolen"))
        })
        .count();
    assert_eq!(stolen, 0, "a file from outside was moved into the root");
}

#[test]
fn replacing_the_root_directory_does_not_redirect_writes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).expect("outside");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    fs::rename(&root, dir.path().join("moved")).expect("move root");
    symlink(&outside, &root).expect("symlink in its place");
    let result =
        tool.dispatch(&json!({"command": "create", "path": "/memories/a.md", "file_text": "a"}));
    assert!(!result.is_error, "{result:?}");
    assert!(
        dir.path().join("moved/a.md").is_file(),
        "the write went to the directory the store opened"
    );
    assert_eq!(fs::read_dir(&outside).expect("outside").count(), 0);
}

#[test]
fn hard_linked_files_are_refused_and_their_other_links_untouched() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    let secret = dir.path().join("secret.txt");
    fs::write(&secret, SECRET).expect("secret");
    fs::hard_link(&secret, root.join("link.txt")).expect("hard link");
    let refused = "Error: Refusing to use /memories/link.txt: it has more than one hard link, so its content may come from outside /memories";
    for input in [
        json!({"command": "view", "path": "/memories/link.txt"}),
        json!({"command": "str_replace", "path": "/memories/link.txt", "old_str": "TOP", "new_str": "x"}),
        json!({"command": "insert", "path": "/memories/link.txt", "insert_line": 0, "insert_text": "x"}),
    ] {
        let result = tool.dispatch(&input);
        assert_eq!(result.text(), Some(refused), "{input}");
        assert!(result.is_error);
    }
    let deleted = tool.dispatch(&json!({"command": "delete", "path": "/memories/link.txt"}));
    assert_eq!(
        deleted.text(),
        Some("Successfully deleted /memories/link.txt")
    );
    assert_eq!(fs::read_to_string(&secret).expect("secret"), SECRET);
}

#[test]
fn leftover_temporary_files_go_when_their_directory_is_listed_and_fifos_do_not_hang() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    fs::create_dir_all(root.join("a/b")).expect("dirs");
    fs::write(root.join(".claude-memory.tmp.99999.1"), "half").expect("temp");
    fs::write(root.join("a/b/.claude-memory.tmp.99999.2"), "half").expect("temp");
    fs::write(root.join("a/keep.md"), "keep").expect("file");
    let fifo = root.join("pipe.md");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    // Opening walks nothing; a listing clears its own directory, and a
    // directory view lists every directory below it (for their sizes).
    assert!(root.join(".claude-memory.tmp.99999.1").exists());
    assert!(root.join("a/b/.claude-memory.tmp.99999.2").exists());
    tool.dispatch(&json!({"command": "view", "path": "/memories/a/b"}));
    assert!(!root.join("a/b/.claude-memory.tmp.99999.2").exists());
    assert!(root.join(".claude-memory.tmp.99999.1").exists());
    let view = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
    assert!(!view.text().unwrap_or_default().contains(".claude-memory"));
    assert!(!root.join(".claude-memory.tmp.99999.1").exists());
    assert!(root.join("a/keep.md").exists());
    if made {
        let result = tool.dispatch(&json!({"command": "view", "path": "/memories/pipe.md"}));
        assert_eq!(
            result.text(),
            Some("The path /memories/pipe.md does not exist. Please provide a valid path.")
        );
    }
}

/// Sends `lines` to a `stdio` process on `root` and returns its answers.
fn spawn_bridge(root: &Path) -> Child {
    Command::new(stdio_binary())
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn stdio")
}

fn run_bridge(mut child: Child, lines: Vec<Value>) -> Vec<Value> {
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").expect("write");
        }
    });
    let answers = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json answer"))
        .collect();
    writer.join().expect("writer");
    assert!(child.wait().expect("wait").success());
    answers
}

fn is_error(answer: &Value) -> bool {
    answer["is_error"] == true
}

#[test]
fn concurrent_edits_from_threads_and_processes_are_never_lost() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    assert!(
        !tool
            .dispatch(&json!({"command": "create", "path": "/memories/shared.md", "file_text": ""}))
            .is_error
    );
    let (processes, threads, per_writer) = (3, 3, 40);
    let insert = |token: &str| json!({"command": "insert", "path": "/memories/shared.md", "insert_line": 0, "insert_text": token});
    let children: Vec<(Vec<String>, Child)> = (0..processes)
        .map(|p| {
            (
                (0..per_writer).map(|k| format!("p{p}_{k}")).collect(),
                spawn_bridge(&root),
            )
        })
        .collect();
    let mut succeeded = BTreeSet::new();
    let mut failed = 0;
    std::thread::scope(|s| {
        let procs: Vec<_> = children
            .into_iter()
            .map(|(tokens, child)| {
                s.spawn(move || {
                    let answers = run_bridge(child, tokens.iter().map(|t| insert(t)).collect());
                    tokens
                        .into_iter()
                        .zip(answers)
                        .map(|(t, a)| (t, !is_error(&a)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let thrs: Vec<_> = (0..threads)
            .map(|t| {
                let root = &root;
                s.spawn(move || {
                    // Each thread has its own store handle, like a separate agent.
                    let tool = MemoryTool::new(FilesystemStore::open(root).expect("open"));
                    (0..per_writer)
                        .map(|k| {
                            let token = format!("t{t}_{k}");
                            let ok = !tool.dispatch(&insert(&token)).is_error;
                            (token, ok)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in procs.into_iter().chain(thrs) {
            for (token, ok) in h.join().expect("writer") {
                if ok {
                    succeeded.insert(token);
                } else {
                    failed += 1;
                }
            }
        }
    });
    let text = fs::read_to_string(root.join("shared.md")).expect("shared");
    let lines: Vec<&str> = text.lines().collect();
    let in_file: BTreeSet<String> = lines.iter().map(|l| l.to_string()).collect();
    let lost = succeeded.difference(&in_file).count();
    println!(
        "concurrent edits: {} attempted by {processes} processes and {threads} threads, {} reported success, {failed} reported an error, {lost} lost, {} lines in the file",
        (processes + threads) * per_writer,
        succeeded.len(),
        lines.len()
    );
    assert_eq!(lost, 0, "an edit reported as a success is missing");
    assert_eq!(
        lines.len(),
        succeeded.len(),
        "every line in the file is a reported success, once"
    );
    assert_eq!(in_file, succeeded);
}

#[test]
fn racing_creates_and_renames_never_double_create_or_overwrite() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    let (processes, rounds) = (4, 25);
    for p in 0..processes {
        for r in 0..rounds {
            let src = format!("/memories/src/p{p}_r{r}.md");
            assert!(!tool.dispatch(&json!({"command": "create", "path": src, "file_text": format!("from p{p}")})).is_error);
        }
    }
    let children: Vec<_> = (0..processes).map(|_| spawn_bridge(&root)).collect();
    let answers: Vec<Vec<Value>> = std::thread::scope(|s| {
        let handles: Vec<_> = children
            .into_iter()
            .enumerate()
            .map(|(p, child)| {
                let lines = (0..rounds)
                    .flat_map(|r| {
                        [
                            json!({"command": "create", "path": format!("/memories/once/r{r}.md"), "file_text": format!("winner p{p}")}),
                            json!({"command": "rename", "old_path": format!("/memories/src/p{p}_r{r}.md"), "new_path": format!("/memories/dest/r{r}.md")}),
                        ]
                    })
                    .collect();
                s.spawn(move || run_bridge(child, lines))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bridge"))
            .collect()
    });
    let mut double_creates = 0;
    let mut overwrites = 0;
    for r in 0..rounds {
        let created: Vec<usize> = (0..processes)
            .filter(|&p| !is_error(&answers[p][2 * r]))
            .collect();
        let renamed: Vec<usize> = (0..processes)
            .filter(|&p| !is_error(&answers[p][2 * r + 1]))
            .collect();
        double_creates += created.len().saturating_sub(1);
        overwrites += renamed.len().saturating_sub(1);
        assert_eq!(
            created.len(),
            1,
            "round {r}: creates reported as successes: {created:?}"
        );
        assert_eq!(
            renamed.len(),
            1,
            "round {r}: renames reported as successes: {renamed:?}"
        );
        let once = fs::read_to_string(root.join(format!("once/r{r}.md"))).expect("once");
        assert_eq!(once, format!("winner p{}", created[0]));
        let dest = fs::read_to_string(root.join(format!("dest/r{r}.md"))).expect("dest");
        assert_eq!(dest, format!("from p{}", renamed[0]));
        for p in (0..processes).filter(|&p| p != renamed[0]) {
            assert!(
                root.join(format!("src/p{p}_r{r}.md")).is_file(),
                "a refused rename lost its source"
            );
        }
    }
    println!(
        "create/rename races: {rounds} rounds x {processes} processes, {double_creates} double creates, {overwrites} overwriting renames"
    );
}

/// A small deterministic generator (no dependency needed for test timing).
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn whole_file(len: usize, round: usize, j: usize) -> String {
    let body = "x".repeat(len);
    let mut text = format!("BEGIN r{round} j{j}\n{body}\n");
    let total = text.len() + "END 0000000000\n".len();
    text.push_str(&format!("END {total:010}\n"));
    text
}

fn is_whole(text: &str) -> bool {
    let Some(end) = text.strip_suffix('\n').and_then(|t| t.rsplit_once('\n')) else {
        return false;
    };
    text.starts_with("BEGIN ")
        && end
            .1
            .strip_prefix("END ")
            .and_then(|n| n.parse::<usize>().ok())
            == Some(text.len())
}

#[test]
fn a_writer_killed_at_any_moment_leaves_every_file_whole() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    drop(FilesystemStore::open(&root).expect("open"));
    let marker_body = "m".repeat(300_000);
    fs::write(root.join("marker.md"), format!("{marker_body}\nMARK 0\n")).expect("marker");
    let (rounds, mut seed) = (30, 0x9E37_79B9_7F4A_7C15_u64);
    let (mut files_checked, mut torn, mut temps_before, mut answered) = (0, 0, 0, 0);
    for round in 0..rounds {
        let mut child = spawn_bridge(&root);
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || BufReader::new(stdout).lines().count());
        let lines: Vec<Value> = (0..200)
            .flat_map(|j| {
                let f = format!("/memories/f{}.md", j % 6);
                [
                    json!({"command": "delete", "path": f}),
                    json!({"command": "create", "path": f, "file_text": whole_file(150_000 + j * 97, round, j)}),
                    json!({"command": "str_replace", "path": "/memories/marker.md", "old_str": format!("MARK {}", j % 2), "new_str": format!("MARK {}", (j + 1) % 2)}),
                ]
            })
            .collect();
        let writer = std::thread::spawn(move || {
            for line in lines {
                if writeln!(stdin, "{line}").is_err() {
                    break; // the child was killed
                }
            }
        });
        std::thread::sleep(Duration::from_millis(5 + next_random(&mut seed) % 60));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let _ = writer.join();
        answered += reader.join().unwrap_or(0);
        // Before reopening: temporary files may be left, but never visible.
        temps_before += walk_names(&root)
            .iter()
            .filter(|n| n.contains(".claude-memory.tmp"))
            .count();
        let tool = MemoryTool::new(FilesystemStore::open(&root).expect("reopen"));
        let listing = tool.dispatch(&json!({"command": "view", "path": "/memories"}));
        assert!(
            !listing
                .text()
                .unwrap_or_default()
                .contains(".claude-memory")
        );
        assert!(
            walk_names(&root)
                .iter()
                .all(|n| !n.contains(".claude-memory.tmp")),
            "round {round}: a temporary file survived the first view"
        );
        for entry in fs::read_dir(&root).expect("root") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.') {
                continue;
            }
            let text = fs::read_to_string(&path).expect("read");
            files_checked += 1;
            let ok = if name == "marker.md" {
                text == format!("{marker_body}\nMARK 0\n")
                    || text == format!("{marker_body}\nMARK 1\n")
            } else {
                is_whole(&text)
            };
            if !ok {
                torn += 1;
                eprintln!("round {round}: {name} is torn ({} bytes)", text.len());
            }
        }
    }
    println!(
        "crash safety: {rounds} SIGKILLs mid-write, {answered} commands answered before the kills, {files_checked} files checked, {torn} torn, {temps_before} temporary files left by kills (all removed by the first view)"
    );
    assert_eq!(torn, 0);
}

fn walk_names(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .keys()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

/// A crash's temporary file under the name a new handle's first write
/// takes (the same pid, reused, as in a container): the write removes it
/// and succeeds, where it failed with "File exists" once opening stopped
/// sweeping.
#[test]
fn attack_a_leftover_under_a_reused_temporary_name_never_fails_a_write() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    fs::create_dir_all(&root).expect("root");
    let reused = root.join(format!(".claude-memory.tmp.{}.0", std::process::id()));
    fs::write(&reused, "half").expect("leftover");
    let tool = MemoryTool::new(FilesystemStore::open(&root).expect("open"));
    let made =
        tool.dispatch(&json!({"command": "create", "path": "/memories/a.md", "file_text": "a"}));
    assert_eq!(
        made.text(),
        Some("File created successfully at: /memories/a.md")
    );
    assert!(!reused.exists());
}

/// A directory holding only a crash's temporary files is empty to every
/// command: a delete of an empty directory (expiry, restore) removes it,
/// and a move's depth check does not count them.
#[test]
fn attack_leftovers_never_keep_a_directory_from_being_empty_or_a_move_from_fitting() {
    use claude_memory::store::MemoryStoreExt as _;
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("memories");
    fs::create_dir_all(root.join("e")).expect("dir");
    fs::write(root.join("e/.claude-memory.tmp.99999.3"), "half").expect("leftover");
    let store = FilesystemStore::open(&root).expect("open");
    let e = claude_memory::MemoryPath::parse("/memories/e").expect("path");
    assert_eq!(store.remove_empty_dir(&e).ok(), Some(true));
    assert!(!root.join("e").exists());

    fs::create_dir_all(root.join("a")).expect("dir");
    fs::write(root.join("a/x.md"), "x").expect("file");
    let long_temp = format!(".claude-memory.tmp.{}", "9".repeat(200));
    fs::write(root.join("a").join(&long_temp), "half").expect("leftover");
    let tool = MemoryTool::new(store);
    // 814 bytes: x.md fits below it, the leftover's 219-byte name would not.
    let to = format!("/memories{}", format!("/{}", "b".repeat(200)).repeat(4));
    let moved =
        tool.dispatch(&json!({"command": "rename", "old_path": "/memories/a", "new_path": to}));
    assert_eq!(
        moved.text().map(|t| t.starts_with("Successfully renamed")),
        Some(true),
        "{moved:?}"
    );
}
