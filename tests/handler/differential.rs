//! The same command script on every backend gives byte-identical results.

use claude_memory::{FilesystemStore, InMemoryStore, MemoryStore, MemoryTool};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Runs `script` on a fresh store of each kind; returns each kind's answers
/// as serialized `tool_result` lines.
fn run_everywhere(script: &[Value]) -> Vec<(&'static str, Vec<String>)> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let host = dir.path().to_string_lossy().into_owned();
    let fs = FilesystemStore::builder(dir.path().join("memories"))
        .durable(false)
        .open()
        .expect("open store");
    #[allow(unused_mut)]
    let mut stores: Vec<(&'static str, Box<dyn MemoryStore>)> = vec![
        ("in-memory", Box::new(InMemoryStore::new())),
        ("filesystem", Box::new(fs)),
    ];
    #[cfg(feature = "sqlite")]
    stores.push((
        "sqlite",
        Box::new(claude_memory::SqliteStore::open(dir.path().join("memory.db")).expect("sqlite")),
    ));
    if let Some(store) = postgres_store() {
        stores.push(("postgres", store));
    }
    let runs: Vec<(&'static str, Vec<String>)> = stores
        .into_iter()
        .map(|(name, store)| {
            let tool = MemoryTool::new(store);
            let answers = script
                .iter()
                .map(|input| serde_json::to_string(&tool.dispatch(input)).expect("serialize"))
                .collect();
            (name, answers)
        })
        .collect();
    for (name, answers) in &runs {
        for answer in answers {
            assert!(
                !answer.contains(&host),
                "{name} leaked the host path: {answer}"
            );
            assert!(
                !answer.contains("os error"),
                "{name} leaked OS error text: {answer}"
            );
        }
    }
    runs
}

/// A fresh tenant in the test PostgreSQL database, when there is one.
fn postgres_store() -> Option<Box<dyn MemoryStore>> {
    #[cfg(feature = "postgres")]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let url = std::env::var("CLAUDE_MEMORY_TEST_POSTGRES_URL").ok()?;
        let store = claude_memory::PostgresStore::connect(&url, 2).expect("postgres");
        let tenant = format!(
            "diff-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let id = claude_memory::TenantId::parse(&tenant).expect("tenant");
        return Some(Box::new(store.for_tenant(&id)));
    }
    #[allow(unreachable_code)]
    None
}

fn assert_identical(script: &[Value]) {
    let runs = run_everywhere(script);
    let (first_name, first) = &runs[0];
    for (name, answers) in &runs[1..] {
        for (i, (a, b)) in first.iter().zip(answers).enumerate() {
            assert_eq!(
                a, b,
                "step {i} ({}) differs between {first_name} and {name}",
                script[i]
            );
        }
    }
}

#[test]
fn a_full_session_is_byte_identical_on_every_backend() {
    let script = vec![
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "create", "path": "/memories/customers/acme.md", "file_text": "# Acme\n- email\n"}),
        json!({"command": "create", "path": "/memories/customers/acme.md", "file_text": "again"}),
        json!({"command": "create", "path": "/memories/notes/todo.md", "file_text": "a\nb\nc\n"}),
        json!({"command": "create", "path": "/memories/.hidden/x", "file_text": "hidden"}),
        json!({"command": "create", "path": "/memories/node_modules/m.js", "file_text": "m"}),
        json!({"command": "create", "path": "/memories/deep/er/est/file.txt", "file_text": "d".repeat(3000)}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "view", "path": "/memories/deep/"}),
        json!({"command": "view", "path": "/memories/notes/todo.md", "view_range": [2, -1]}),
        json!({"command": "view", "path": "/memories/notes/todo.md", "view_range": [9, 9]}),
        json!({"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "b", "new_str": "B\nB2"}),
        json!({"command": "str_replace", "path": "/memories/notes/todo.md", "old_str": "zzz", "new_str": "y"}),
        json!({"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 0, "insert_text": "top"}),
        json!({"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 99, "insert_text": "x"}),
        json!({"command": "view", "path": "/memories/notes/todo.md"}),
        json!({"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/archive/notes"}),
        json!({"command": "rename", "old_path": "/memories/archive", "new_path": "/memories/archive/x"}),
        json!({"command": "rename", "old_path": "/memories/customers/acme.md", "new_path": "/memories/archive/notes/todo.md"}),
        json!({"command": "delete", "path": "/memories/deep"}),
        json!({"command": "delete", "path": "/memories/deep"}),
        json!({"command": "delete", "path": "/memories/"}),
        json!({"command": "view", "path": "/memories/../etc"}),
        json!({"command": "View", "path": "/memories"}),
        json!({"command": "insert", "path": "/memories/a", "insert_line": "1", "insert_text": "x"}),
        json!({"command": "create", "path": "/memories/customers/acme.md/x", "file_text": "x"}),
        json!({"command": "view", "path": "/memories"}),
    ];
    assert_identical(&script);
}

fn arb_path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/memories".to_owned()),
        Just("/memories/".to_owned()),
        prop::sample::select(vec![
            "a", "b", "a/b", "a/c", "b/a", ".h", "a/.h", "x.md", "a/b/c"
        ])
        .prop_map(|p| format!("/memories/{p}")),
        prop::sample::select(vec![
            "/etc",
            "/memories/../a",
            "/memories/a/",
            "memories",
            ""
        ])
        .prop_map(str::to_owned),
    ]
}

fn arb_text() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "", "a", "a\n", "a\nb\n", "b\r\nb", "ab ab", "é\n", "\n\n",
    ])
    .prop_map(str::to_owned)
}

fn arb_command() -> impl Strategy<Value = Value> {
    prop_oneof![
        (arb_path(), prop::option::of((-2i64..6, -2i64..6))).prop_map(|(p, r)| match r {
            Some((a, b)) => json!({"command": "view", "path": p, "view_range": [a, b]}),
            None => json!({"command": "view", "path": p}),
        }),
        (arb_path(), arb_text())
            .prop_map(|(p, t)| json!({"command": "create", "path": p, "file_text": t})),
        (arb_path(), arb_text(), prop::option::of(arb_text())).prop_map(|(p, o, n)| {
            json!({"command": "str_replace", "path": p, "old_str": o, "new_str": n})
        }),
        (arb_path(), -1i64..4, arb_text()).prop_map(|(p, l, t)| {
            json!({"command": "insert", "path": p, "insert_line": l, "insert_text": t})
        }),
        arb_path().prop_map(|p| json!({"command": "delete", "path": p})),
        (arb_path(), arb_path())
            .prop_map(|(a, b)| json!({"command": "rename", "old_path": a, "new_path": b})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_scripts_are_byte_identical_on_every_backend(script in prop::collection::vec(arb_command(), 1..40)) {
        assert_identical(&script);
    }
}
