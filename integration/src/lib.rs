//! Not a library: this package holds what needs heavy dependencies, so a
//! newcomer's `cargo run --example quickstart` never builds them.
//!
//! - `examples/claude_loop.rs`: a real tool-use loop against the Messages
//!   API (reqwest), and `tests/claude_loop.rs`, which replays it against a
//!   local server.
//! - The README below, compiled by `cargo test` as doc tests with every
//!   feature on: a snippet that stops compiling fails CI. Snippets that
//!   need the network or a database are compiled, not run (`no_run`).

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
