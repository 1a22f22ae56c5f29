//! What a dream sends for a store of 100 memories and 10 sessions of a
//! typical size, measured in requests and bytes, with a scripted model
//! that views the directory, reads every file (ten a turn), rewrites
//! twenty and stops. Tokens are estimated at 4 bytes a token (the API's
//! `count_tokens` endpoint cannot be reached from here):
//!
//! ```text
//! cargo run -p claude-memory-bench --example dream_cost --release
//! ```

use claude_memory::dream::{Dream, read_session};
use claude_memory::runner::Request;
use claude_memory::store::{MemoryStoreExt as _, WriteMode};
use claude_memory::{Config, InMemoryStore, MemoryPath};
use serde_json::{Value, json};

fn main() {
    let store = InMemoryStore::new();
    let line = "A fact the assistant noted about the project, its people or its plans.\n";
    for i in 0..100 {
        let path = MemoryPath::parse(&format!("/memories/topic-{:02}/note-{i:03}.md", i / 10))
            .expect("path");
        store
            .write(&path, line.repeat(11).as_bytes(), WriteMode::Create)
            .expect("write");
    }
    let mut job = Dream::new("claude-sonnet-4-5");
    for s in 0..10 {
        // A session of 40 turns of about 500 bytes: 20 KB.
        let turns: Vec<Value> = (0..40)
            .map(|t| {
                let role = if t % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": "Some discussion of the work at hand, with a decision or two. ".repeat(8)})
            })
            .collect();
        job.sessions.push(
            read_session(
                &format!("session-{s}.json"),
                &Value::Array(turns).to_string(),
            )
            .expect("session"),
        );
    }
    let mut script: Vec<Value> = vec![tool_use(vec![
        json!({"command": "view", "path": "/memories"}),
    ])];
    for batch in 0..10 {
        script.push(tool_use(
            (0..10)
                .map(|k| {
                    let i = batch * 10 + k;
                    json!({"command": "view", "path": format!("/memories/topic-{:02}/note-{i:03}.md", i / 10)})
                })
                .collect(),
        ));
    }
    for batch in 0..2 {
        script.push(tool_use(
            (0..10)
                .map(|k| {
                    let i = batch * 10 + k;
                    json!({"command": "create", "path": format!("/memories/merged-{i:02}.md"), "file_text": line.repeat(3)})
                })
                .collect(),
        ));
    }
    script
        .push(json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Merged."}]}));
    let mut replies = script.into_iter();
    let mut sizes = Vec::new();
    let send = |r: &Request| -> Result<Value, String> {
        sizes.push(r.body.to_string().len());
        replies.next().ok_or_else(|| "done".to_owned())
    };
    let summary = job
        .run(&store, Config::default(), send, |_| {})
        .expect("dream");
    let total: usize = sizes.iter().sum();
    println!(
        "| requests | bytes sent (all requests) | first request | last request | tokens (estimate, 4 bytes each) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| {} | {} KB | {} KB | {} KB | about {}k input |",
        summary.turns,
        total / 1000,
        sizes.first().copied().unwrap_or(0) / 1000,
        sizes.last().copied().unwrap_or(0) / 1000,
        total / 4 / 1000
    );
}

fn tool_use(inputs: Vec<Value>) -> Value {
    let content: Vec<Value> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": "memory", "input": input}))
        .collect();
    json!({"stop_reason": "tool_use", "content": content})
}
