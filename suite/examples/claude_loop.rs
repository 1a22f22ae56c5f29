//! A real tool-use loop against the Messages API, with the memory tool.
//!
//! ```text
//! export ANTHROPIC_API_KEY=sk-ant-…
//! cargo run --example claude_loop -- "Remember that Acme Corp prefers email follow-ups."
//! cargo run --example claude_loop -- "How should I follow up with Acme Corp?"
//! ```
//!
//! Environment: `ANTHROPIC_API_KEY` (required), `ANTHROPIC_MODEL` (default
//! `claude-sonnet-4-5`), `ANTHROPIC_BASE_URL` (default
//! `https://api.anthropic.com`), `CLAUDE_MEMORY_DIR` (default `./memory`).
//! Each run is a fresh conversation; the memory directory carries over.

use std::env;

use claude_memory::{FilesystemStore, MemoryTool, api, tool_definition};
use serde_json::{Value, json};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(key) = env::var("ANTHROPIC_API_KEY").ok().filter(|k| !k.is_empty()) else {
        eprintln!("Set ANTHROPIC_API_KEY to run this example (it calls the Messages API).");
        std::process::exit(2);
    };
    let model = env::var("ANTHROPIC_MODEL").unwrap_or_else(|_| "claude-sonnet-4-5".into());
    let base =
        env::var("ANTHROPIC_BASE_URL").unwrap_or_else(|_| "https://api.anthropic.com".into());
    let dir = env::var("CLAUDE_MEMORY_DIR").unwrap_or_else(|_| "./memory".into());
    let prompt = env::args().skip(1).collect::<Vec<_>>().join(" ");
    let prompt = if prompt.is_empty() {
        "What do you remember about me?".to_owned()
    } else {
        prompt
    };

    let tool = MemoryTool::new(FilesystemStore::open(&dir)?);
    // One TLS crypto provider for the process: rustls with ring, the one the
    // crate's PostgreSQL store uses (reqwest is built here without a
    // provider of its own; with its default features it brings aws-lc-rs).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::blocking::Client::new();
    let mut messages = vec![json!({"role": "user", "content": prompt})];
    loop {
        let response: Value = http
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", &key)
            .header("anthropic-version", "2023-06-01")
            .json(&json!({
                "model": model,
                "max_tokens": 2048,
                "system": "Before answering, check your memory directory; record what will matter later.",
                "tools": [tool_definition()],
                "messages": messages,
            }))
            .send()?
            .error_for_status()?
            .json()?;
        for block in api::content_blocks(&response) {
            match block["type"].as_str() {
                Some("text") => println!("Claude: {}", block["text"].as_str().unwrap_or_default()),
                Some("tool_use") => println!("  [memory] {}", block["input"]),
                _ => {}
            }
        }
        messages.push(json!({"role": "assistant", "content": response["content"]}));
        match response["stop_reason"].as_str() {
            // Runs every memory call, in order (any other call gets an error result).
            Some("tool_use") => messages.push(tool.reply(&response)),
            // A paused turn or a compaction: send the response back as it is.
            Some("pause_turn" | "compaction") => continue,
            _ => break,
        }
    }
    Ok(())
}
