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
    // Its own target directory: the outer `cargo test` holds the lock of
    // this one while tests run.
    let target = root.join("target").join("integration");
    let output = Command::new(cargo)
        .arg("test")
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
