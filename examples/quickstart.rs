//! The two-session story from the memory tool docs, replayed without an API
//! key: session 1 looks at its memory and stores a customer preference;
//! session 2, a fresh handler on the same directory, finds it again.
//!
//! ```text
//! cargo run --example quickstart            # in a temporary directory
//! cargo run --example quickstart -- ./mem   # in ./mem (kept afterwards)
//! ```

use claude_memory::{FilesystemStore, MemoryTool};
use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The error's text, not its Debug form (`Os { code: 17, … }`).
            eprintln!("quickstart: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let root = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("memories")
        }
    };
    println!("Memory directory: {}\n", root.display());

    println!("=== Session 1: \"Acme Corp asked us to follow up by email, not phone.\" ===");
    {
        let tool = MemoryTool::new(FilesystemStore::open(&root)?);
        step(
            &tool,
            "toolu_01",
            json!({"command": "view", "path": "/memories"}),
        );
        step(
            &tool,
            "toolu_02",
            json!({
                "command": "create",
                "path": "/memories/customers/acme_corp.md",
                "file_text": "# Acme Corp\n- Prefers email follow-ups (not phone calls).\n",
            }),
        );
    }

    println!(
        "=== Session 2 (new conversation, no history): \"How should I contact Acme Corp?\" ==="
    );
    {
        let tool = MemoryTool::new(FilesystemStore::open(&root)?);
        step(
            &tool,
            "toolu_03",
            json!({"command": "view", "path": "/memories"}),
        );
        step(
            &tool,
            "toolu_04",
            json!({"command": "view", "path": "/memories/customers/acme_corp.md"}),
        );
    }
    println!("Claude, from memory: \"Acme Corp prefers email follow-ups.\"");
    Ok(())
}

/// Runs one tool call as Claude would send it and prints both sides.
fn step(tool: &MemoryTool<FilesystemStore>, id: &str, input: Value) {
    println!("tool_use ({id}): {input}");
    let block = json!({"type": "tool_use", "id": id, "name": "memory", "input": input});
    let result = tool.dispatch(&block);
    let status = if result.is_error { " [is_error]" } else { "" };
    println!("tool_result{status}:");
    for line in result.text().unwrap_or("(image)").lines() {
        println!("    {line}");
    }
    println!();
}
