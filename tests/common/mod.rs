//! Helpers shared by integration tests.

use std::path::PathBuf;

/// The `stdio` example binary.
#[allow(dead_code)] // not every test binary uses every helper
pub fn stdio_binary() -> PathBuf {
    example_binary("stdio")
}

/// An example binary, which `cargo test` builds next to the test binaries
/// (in `target/<profile>/examples`).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test`, which builds the examples",
        bin.display()
    );
    bin
}
