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
