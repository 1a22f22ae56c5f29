//! Round 5 of attacks on PostgreSQL (issue 23): a write is one statement
//! whose CTEs make the checks (size cap, parent not a directory, exists,
//! version) inside the tenant's locked transaction. Concurrent writers
//! from several pools race the cap and the checks; the model's answers
//! must be the in-memory store's, byte for byte.
#![cfg(feature = "postgres")]

use std::sync::Arc;

use claude_memory::store::MemoryStoreExt as _;
use claude_memory::{Config, InMemoryStore, MemoryStore, MemoryTool, PostgresStore, TenantId};
use serde_json::{Value, json};

fn url() -> Option<String> {
    let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_POSTGRES").is_none(),
            "CLAUDE_MEMORY_REQUIRE_POSTGRES is set but CLAUDE_MEMORY_TEST_POSTGRES_URL is not"
        );
        eprintln!("skipped: set CLAUDE_MEMORY_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

fn tenant(name: &str) -> TenantId {
    TenantId::parse(&format!("r5-{name}-{}", std::process::id())).expect("tenant")
}

fn text(out: &claude_memory::ToolResult) -> String {
    format!("{}{}", out.is_error, out.text().unwrap_or_default())
}

const CAP: u64 = 2_000;

/// Eight writers, each on a pool of its own (as eight processes), create
/// 100-byte files under a 2,000-byte cap, 10 each: 8,000 bytes asked for.
/// Every success must be in the store, the store must hold at most the
/// cap, and it must be full (no write refused while there was room).
/// Then the next create's refusal must read as the in-memory store's at
/// the same fill.
#[test]
fn writers_racing_the_size_cap_never_pass_it() {
    let Some(url) = url() else { return };
    let t = tenant("cap");
    let config = Config::default().with_max_store_size(CAP);
    let body = "x".repeat(100);
    let succeeded: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|w| {
                let (url, t, config, body) = (url.clone(), t.clone(), config.clone(), body.clone());
                scope.spawn(move || {
                    let tool = MemoryTool::with_config(
                        PostgresStore::connect(&url, 2)
                            .expect("connect")
                            .for_tenant(&t),
                        config,
                    );
                    let mut ok = Vec::new();
                    for i in 0..10 {
                        let path = format!("/memories/w{w}/f{i}.md");
                        let out = tool.dispatch(&json!({"command": "create",
                            "path": path, "file_text": body}));
                        if !out.is_error {
                            ok.push(path);
                        }
                    }
                    ok
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    });
    let ok: Vec<String> = succeeded.into_iter().flatten().collect();
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    let total = store.total_size().expect("total");
    assert!(total <= CAP, "{total} bytes under a cap of {CAP}");
    assert_eq!(total, ok.len() as u64 * 100, "every success, and no more");
    assert_eq!(total, CAP, "a write was refused while there was room");
    // The refusal at the cap, against the in-memory store at the same fill.
    let pg = MemoryTool::with_config(store, config.clone());
    let mem = MemoryTool::with_config(InMemoryStore::new(), config);
    for path in &ok {
        let out = mem.dispatch(&json!({"command": "create", "path": path, "file_text": body}));
        assert!(!out.is_error, "{out:?}");
    }
    for input in [
        json!({"command": "create", "path": "/memories/one-more.md", "file_text": "y"}),
        json!({"command": "str_replace", "path": ok[0], "old_str": "x", "new_str": "yy"}),
        json!({"command": "insert", "path": ok[0], "insert_line": 0, "insert_text": "z"}),
        json!({"command": "str_replace", "path": ok[0], "old_str": "xx", "new_str": "y"}),
    ] {
        assert_eq!(
            text(&pg.dispatch(&input)),
            text(&mem.dispatch(&input)),
            "{input}"
        );
    }
}

/// Model-driven sequences whose every step is refused or allowed by one
/// of the statement's checks: PostgreSQL must answer each exactly as the
/// in-memory store does (the conformance suite's errors), with and
/// without a cap.
#[test]
fn every_checked_refusal_reads_as_the_in_memory_stores() {
    let Some(url) = url() else { return };
    for (name, cap) in [("plain", None), ("capped", Some(300u64))] {
        let t = tenant(name);
        let config = match cap {
            Some(c) => Config::default().with_max_store_size(c),
            None => Config::default(),
        };
        let pg = MemoryTool::with_config(
            PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&t),
            config.clone(),
        );
        let mem = MemoryTool::with_config(InMemoryStore::new(), config);
        let long = format!("/memories/{}", "n/".repeat(500));
        let steps: Vec<Value> = vec![
            json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
            json!({"command": "create", "path": "/memories/a.md", "file_text": "again\n"}),
            json!({"command": "create", "path": "/memories/a.md/b.md", "file_text": "under a file\n"}),
            json!({"command": "create", "path": "/memories/a.md/c/d.md", "file_text": "deeper\n"}),
            json!({"command": "create", "path": "/memories/dir/x.md", "file_text": "x\n"}),
            json!({"command": "create", "path": "/memories/dir", "file_text": "over a dir\n"}),
            json!({"command": "str_replace", "path": "/memories/dir", "old_str": "x", "new_str": "y"}),
            json!({"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "z"}),
            json!({"command": "create", "path": "/memories/big.md", "file_text": "b".repeat(290)}),
            json!({"command": "create", "path": "/memories/fits.md", "file_text": "f".repeat(280)}),
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "o".repeat(400)}),
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/a.md/dir"}),
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir/sub"}),
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/a.md"}),
            json!({"command": "create", "path": format!("{long}x.md"), "file_text": "deep\n"}),
            json!({"command": "create", "path": format!("{long}{}.md", "y".repeat(40)), "file_text": "deep\n"}),
            json!({"command": "delete", "path": "/memories/a.md/b.md"}),
            json!({"command": "view", "path": "/memories"}),
            json!({"command": "view", "path": "/memories/a.md/b.md"}),
            json!({"command": "delete", "path": "/memories/dir"}),
            json!({"command": "create", "path": "/memories/dir/x.md", "file_text": "back\n"}),
            json!({"command": "view", "path": "/memories"}),
        ];
        for step in &steps {
            let (a, b) = (text(&pg.dispatch(step)), text(&mem.dispatch(step)));
            assert_eq!(a, b, "{name}: {step}");
        }
    }
}

/// Two writers, on pools of their own, race on one path: one creates it
/// as a file while the other creates a file below it (so it must be a
/// directory). Exactly one of each pair may succeed, and the store must
/// never hold a file with a child.
#[test]
fn a_file_and_a_child_of_it_racing_never_both_land() {
    let Some(url) = url() else { return };
    let t = tenant("parent");
    let open = || {
        Arc::new(MemoryTool::new(
            PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&t),
        ))
    };
    let (one, two) = (open(), open());
    for i in 0..40 {
        let path = format!("/memories/p{i}");
        let (a, b) = std::thread::scope(|scope| {
            let first = scope.spawn(|| {
                one.dispatch(&json!({"command": "create", "path": path, "file_text": "file\n"}))
            });
            let second = scope.spawn(|| {
                two.dispatch(&json!({"command": "create",
                    "path": format!("{path}/child.md"), "file_text": "child\n"}))
            });
            (first.join().expect("first"), second.join().expect("second"))
        });
        assert!(
            a.is_error != b.is_error,
            "{path}: exactly one lands: {a:?} / {b:?}"
        );
    }
}

/// A create deep below a directory racing a rename of that directory to
/// a deeper place, from two pools: each may land alone, but never both
/// (SPEC §1: no command may make an entry whose full path is over 1,024
/// bytes). Every stored path must still parse.
#[test]
fn a_deep_create_racing_a_deepening_rename_never_passes_the_path_limit() {
    let Some(url) = url() else { return };
    let t = tenant("depth");
    let open = || {
        MemoryTool::new(
            PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&t),
        )
    };
    let (one, two) = (open(), open());
    let c = "c".repeat(250);
    let pad = "p".repeat(100);
    for i in 0..30 {
        let dir = format!("/memories/a{i:02}");
        let seed = one.dispatch(&json!({"command": "create",
            "path": format!("{dir}/seed.md"), "file_text": "s\n"}));
        assert!(!seed.is_error, "{seed:?}");
        let deep = format!("{dir}/{c}/{c}/{c}/{}.md", "d".repeat(195));
        assert!(
            deep.len() <= 1024 && deep.len() + 101 > 1024,
            "{}",
            deep.len()
        );
        std::thread::scope(|scope| {
            scope.spawn(|| {
                one.dispatch(&json!({"command": "create", "path": deep, "file_text": "deep\n"}))
            });
            scope.spawn(|| {
                two.dispatch(&json!({"command": "rename", "old_path": dir,
                    "new_path": format!("/memories/{pad}/a{i:02}")}))
            });
        });
    }
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    claude_memory::store::walk::walk(
        &store,
        &claude_memory::MemoryPath::root(),
        claude_memory::store::walk::Order::AsListed,
        &mut |step| {
            if let claude_memory::store::walk::Step::File { dir, entry, .. } = step {
                let full = format!("{}/{}", dir.normalized(), entry.name);
                assert!(
                    claude_memory::MemoryPath::parse(&full).is_ok(),
                    "a stored path over the limit: {} bytes",
                    full.len()
                );
            }
            Ok(claude_memory::store::walk::Flow::Continue)
        },
    )
    .expect("walk");
}

/// A directory view over a tree of 10,001 entries (past the one-query
/// tree listing's 10,000) and one of exactly 10,000: PostgreSQL's view is
/// the in-memory store's, byte for byte.
#[test]
fn views_at_the_tree_listing_bound_read_as_the_in_memory_stores() {
    let Some(url) = url() else { return };
    for (name, files) in [
        ("tree10000", 10_000 - 60 - 3),
        ("tree10001", 10_001 - 60 - 3),
    ] {
        let t = tenant(name);
        let pg = PostgresStore::connect(&url, 4)
            .expect("connect")
            .for_tenant(&t);
        let mem = InMemoryStore::new();
        // Three top directories, 20 below each, files spread below those:
        // 3 + 60 directories, the rest files.
        for n in 0..files {
            let path = claude_memory::MemoryPath::parse(&format!(
                "/memories/t{}/s{}/f{n}.md",
                n % 3,
                n % 60
            ))
            .expect("path");
            for store in [&pg as &dyn MemoryStore, &mem] {
                store
                    .write(&path, b"x", claude_memory::store::WriteMode::Overwrite)
                    .expect("write");
            }
        }
        let (pg, mem) = (MemoryTool::new(pg), MemoryTool::new(mem));
        for path in ["/memories", "/memories/t1"] {
            let view = json!({"command": "view", "path": path});
            assert_eq!(
                text(&pg.dispatch(&view)),
                text(&mem.dispatch(&view)),
                "{name} {path}"
            );
        }
    }
}

/// An edit racing a rename of its file's directory, from two pools: the
/// edit lands before the move (and moves with the file) or after it (and
/// finds no file): an edit that answered success is in the file at one
/// of the two paths.
#[test]
fn an_edit_racing_a_rename_of_its_directory_is_not_lost() {
    let Some(url) = url() else { return };
    let t = tenant("edit-rename");
    let open = || {
        MemoryTool::new(
            PostgresStore::connect(&url, 2)
                .expect("connect")
                .for_tenant(&t),
        )
    };
    let (one, two) = (open(), open());
    for i in 0..30 {
        let (from, to) = (format!("/memories/r{i}"), format!("/memories/moved/r{i}"));
        let made = one.dispatch(&json!({"command": "create",
            "path": format!("{from}/f.md"), "file_text": "alpha\n"}));
        assert!(!made.is_error, "{made:?}");
        let (edit, moved) = std::thread::scope(|scope| {
            let edit = scope.spawn(|| {
                one.dispatch(&json!({"command": "str_replace",
                    "path": format!("{from}/f.md"), "old_str": "alpha", "new_str": "EDITED"}))
            });
            let moved = scope.spawn(|| {
                two.dispatch(&json!({"command": "rename", "old_path": from, "new_path": to}))
            });
            (edit.join().expect("edit"), moved.join().expect("rename"))
        });
        assert!(!moved.is_error, "{moved:?}");
        let shown = one.dispatch(&json!({"command": "view", "path": format!("{to}/f.md")}));
        assert!(!shown.is_error, "{shown:?}");
        let gone = one.dispatch(&json!({"command": "view", "path": format!("{from}/f.md")}));
        assert!(gone.is_error, "the file is at both paths: {gone:?}");
        if !edit.is_error {
            assert!(
                shown.text().unwrap_or_default().contains("EDITED"),
                "round {i}: the edit answered {edit:?} but the moved file is {shown:?}"
            );
        }
    }
}

/// A tree with hidden names, non-ASCII names, names that sort between a
/// directory and its children in byte order (`a.b`, `a-b`, `a0` beside
/// `a/…`) and a sibling directory whose name extends another's: the
/// PostgreSQL view (one tree query) is the in-memory store's.
#[test]
fn a_tree_of_awkward_names_views_as_the_in_memory_store() {
    let Some(url) = url() else { return };
    let t = tenant("names");
    let pg = MemoryTool::new(
        PostgresStore::connect(&url, 2)
            .expect("connect")
            .for_tenant(&t),
    );
    let mem = MemoryTool::new(InMemoryStore::new());
    let names = [
        "a/x.md",
        "a/.hidden.md",
        "a/b/deep.md",
        "a.b",
        "a-b/y.md",
        "a0",
        "ab/z.md",
        "café/é.md",
        "日本/語.md",
        ".dotdir/inside.md",
        "a/b c/sp.md",
        "A/upper.md",
    ];
    for n in names {
        let c = json!({"command": "create", "path": format!("/memories/{n}"), "file_text": n});
        assert_eq!(text(&pg.dispatch(&c)), text(&mem.dispatch(&c)), "{n}");
    }
    for path in [
        "/memories",
        "/memories/a",
        "/memories/a/b",
        "/memories/café",
        "/memories/ab",
    ] {
        let v = json!({"command": "view", "path": path});
        assert_eq!(text(&pg.dispatch(&v)), text(&mem.dispatch(&v)), "{path}");
    }
}

/// Six pools grow their own file by 100 bytes per `insert` under a
/// 2,000-byte cap (the locked read, change and cap check of
/// `update_within`): the total never passes the cap, and every insert
/// that answered success is in its file.
#[test]
fn edits_racing_the_size_cap_never_pass_it() {
    let Some(url) = url() else { return };
    let t = tenant("cap-edit");
    let config = Config::default().with_max_store_size(CAP);
    let line = "y".repeat(99);
    let landed: Vec<(String, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|w| {
                let (url, t, config, line) = (url.clone(), t.clone(), config.clone(), line.clone());
                scope.spawn(move || {
                    let tool = MemoryTool::with_config(
                        PostgresStore::connect(&url, 2)
                            .expect("connect")
                            .for_tenant(&t),
                        config,
                    );
                    let path = format!("/memories/g{w}.md");
                    let made =
                        tool.dispatch(&json!({"command": "create", "path": path, "file_text": ""}));
                    assert!(!made.is_error, "{made:?}");
                    let mut ok = 0;
                    for _ in 0..10 {
                        let out = tool.dispatch(&json!({"command": "insert", "path": path,
                            "insert_line": 0, "insert_text": line}));
                        ok += usize::from(!out.is_error);
                    }
                    (path, ok)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    });
    let store = PostgresStore::connect(&url, 2)
        .expect("connect")
        .for_tenant(&t);
    let total = store.total_size().expect("total");
    assert!(total <= CAP, "{total} bytes under a cap of {CAP}");
    for (path, ok) in landed {
        let data = store
            .read(
                &claude_memory::MemoryPath::parse(&path).expect("path"),
                u64::MAX,
            )
            .expect("read")
            .data;
        assert_eq!(
            data.len(),
            ok * 100,
            "{path}: {ok} inserts answered success"
        );
    }
}
