//! Runs the `integration/` workspace's tests from a plain `cargo test`: the
//! README's Rust blocks as doc tests (every feature on, so a snippet that
//! stops compiling fails here) and the real-API loop example against a
//! local server. It is a workspace of its own so that its dependencies
//! (reqwest, rustls, the database drivers) never reach a newcomer's first
//! `cargo run --example quickstart`.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_snippets_and_the_api_loop_example_pass() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A directory of its own inside the outer build's target directory
    // (wherever the user put it: this binary is `<target>/debug/deps/…`),
    // since the outer `cargo test` holds the lock of its own while tests
    // run.
    let exe = std::env::current_exe().expect("test binary path");
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(|| root.join("target"), Path::to_path_buf)
        .join("integration");
    // --locked: its Cargo.lock must already match (a stale one fails here
    // instead of being rewritten in the user's checkout).
    let output = Command::new(cargo)
        .arg("test")
        .arg("--locked")
        .arg("--manifest-path")
        .arg(root.join("integration").join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "integration tests failed:\n{stdout}\n{stderr}"
    );
    // The README's blocks really ran as doc tests (a README without Rust
    // blocks, or a doctest target that stopped including it, fails here).
    assert!(
        stdout.contains("README.md - ReadmeDoctests"),
        "no README doc tests ran:\n{stdout}"
    );
    assert!(
        stdout.contains("a_preference_stored_in_session_one_is_recalled_in_session_two ... ok"),
        "the API loop replay did not run:\n{stdout}"
    );
}
