//! The module layout: the leaf modules everything stands on name nothing
//! above them (issue 18: `path.rs` called `render::path_reason`, and
//! `render.rs` imports `path.rs`, a circle).

use std::path::Path;

/// Code lines (not comments, not doc comments) of a source file that name
/// another module of the crate.
fn upward_references(file: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../src")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    // The unit tests at the end may use `super::*`.
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .filter(|line| line.contains("crate::") || line.contains("super::"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn path_rs_is_a_leaf() {
    assert_eq!(upward_references("path.rs"), Vec::<String>::new());
}

#[test]
fn tenant_rs_is_a_leaf() {
    assert_eq!(upward_references("tenant.rs"), Vec::<String>::new());
}

/// Every `.rs` file below `src/dir`, as `(path from src, text)`.
fn sources(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut out = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap_or_else(|e| panic!("{at:?}: {e}")) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read");
                let name = path.strip_prefix(&root).expect("below src");
                out.push((name.display().to_string(), text));
            }
        }
    }
    assert!(!out.is_empty(), "no sources below src/{dir}");
    out
}

/// The code lines (comments left out) of `sources(dir)` naming `module`.
fn naming(dir: &str, module: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (file, text) in sources(dir) {
        for line in text.lines().map(str::trim) {
            if !line.starts_with("//") && line.contains(&format!("crate::{module}")) {
                found.push(format!("{file}: {line}"));
            }
        }
    }
    found
}

/// The stores know nothing of history: the logs kept in a store's own
/// medium (a bucket, a database, sealed by an encrypted store) live in
/// `history/`, which uses the stores, never the other way round.
#[test]
fn store_never_names_history() {
    assert_eq!(naming("store", "history"), Vec::<String>::new());
}

/// And `history/` does name the stores (the check above is not vacuous).
#[test]
fn history_stands_on_store() {
    assert!(!naming("history", "store").is_empty());
}
