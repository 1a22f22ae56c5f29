//! Marks the suite's build of the crate (`cfg(claude_memory_suite)`), so
//! `src/lib.rs` attaches the README as doc tests there, with every feature
//! on, and nowhere else.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(claude_memory_suite)");
    println!("cargo::rustc-cfg=claude_memory_suite");
}
