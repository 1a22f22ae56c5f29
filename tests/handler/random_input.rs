//! Random input never panics `dispatch` and random paths never reach
//! outside the store's root.

use std::fs;
use std::path::Path;

use claude_memory::{FilesystemStore, InMemoryStore, MemoryTool};
use proptest::prelude::*;
use serde_json::{Value, json};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "/memories",
            "/memories/a",
            "view",
            "create",
            "tool_use",
            "-1"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "command",
                    "path",
                    "view_range",
                    "file_text",
                    "old_str",
                    "new_str",
                    "insert_line",
                    "insert_text",
                    "old_path",
                    "new_path",
                    "type",
                    "id",
                    "input",
                    "x",
                ])
                .prop_map(str::to_owned),
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_command() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "view",
            "create",
            "str_replace",
            "insert",
            "delete",
            "rename",
        ]),
        arb_json(),
        arb_json(),
        arb_json(),
    )
        .prop_map(|(command, a, b, c)| {
            json!({
                "command": command, "path": a, "file_text": b, "old_str": b, "new_str": c,
                "insert_line": c, "insert_text": b, "old_path": a, "new_path": c, "view_range": c,
            })
        })
}

/// Path-like strings built from the pieces attacks are made of.
fn arb_path_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "/",
            "/memories",
            "memories",
            "..",
            ".",
            "%2e",
            "%2f",
            "%25",
            "%5c",
            "\\",
            "\0",
            "\n",
            "outside",
            "secret.txt",
            "a",
            "b",
            "//",
            ".claude-memory",
            "%00",
            "~",
            "é",
        ]),
        0..10,
    )
    .prop_map(|parts| parts.concat())
}

fn snapshot(dir: &Path, skip: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path == skip {
            continue;
        }
        if path.is_dir() {
            out.push((path.display().to_string(), Vec::new()));
            snapshot(&path, skip, out);
        } else {
            out.push((path.display().to_string(), fs::read(&path).expect("read")));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn dispatch_never_panics_on_random_json(input in arb_json()) {
        let tool = MemoryTool::new(InMemoryStore::new());
        let result = tool.dispatch(&input);
        prop_assert!(result.text().is_some());
        let wrapped = json!({"type": "tool_use", "id": "toolu_x", "name": "memory", "input": input});
        let answer = tool.dispatch(&wrapped);
        prop_assert_eq!(answer.tool_use_id.as_deref(), Some("toolu_x"));
    }

    #[test]
    fn dispatch_never_panics_on_random_commands(input in arb_command()) {
        let tool = MemoryTool::new(InMemoryStore::new());
        prop_assert!(tool.dispatch(&input).text().is_some());
    }

    #[test]
    fn dispatch_json_never_panics_on_random_text(text in ".{0,64}") {
        let tool = MemoryTool::new(InMemoryStore::new());
        let result = tool.dispatch_json(&text);
        prop_assert!(result.text().is_some());
    }

    #[test]
    fn random_paths_never_touch_anything_outside_the_root(
        paths in prop::collection::vec(arb_path_string(), 1..8)
    ) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = dir.path();
        let root = base.join("memories");
        fs::create_dir_all(base.join("outside")).expect("outside");
        fs::write(base.join("outside/secret.txt"), "top secret").expect("secret");
        fs::write(base.join("memoriesX"), "sibling").expect("sibling");
        let store = FilesystemStore::builder(&root).durable(false).open().expect("open");
        let tool = MemoryTool::new(store);
        let mut before = Vec::new();
        snapshot(base, &root, &mut before);
        for p in &paths {
            for input in [
                json!({"command": "create", "path": p, "file_text": "pwned"}),
                json!({"command": "view", "path": p}),
                json!({"command": "str_replace", "path": p, "old_str": "top", "new_str": "pwned"}),
                json!({"command": "insert", "path": p, "insert_line": 0, "insert_text": "pwned"}),
                json!({"command": "rename", "old_path": p, "new_path": "/memories/moved"}),
                json!({"command": "rename", "old_path": "/memories/moved", "new_path": p}),
                json!({"command": "delete", "path": p}),
            ] {
                let result = tool.dispatch(&input);
                let text = result.text().unwrap_or_default();
                prop_assert!(!text.contains("top secret"));
                prop_assert!(!text.contains(&base.display().to_string()));
            }
        }
        let mut after = Vec::new();
        snapshot(base, &root, &mut after);
        prop_assert_eq!(before, after);
    }
}
