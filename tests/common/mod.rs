//! Helpers shared by integration tests.

use std::path::PathBuf;

/// The `stdio` example binary, which `cargo test` builds next to the test
/// binaries (in `target/<profile>/examples`).
pub fn stdio_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join("stdio");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo test`, which builds the examples",
        bin.display()
    );
    bin
}
