//! What a new user's review of the runner found (issue 24), each written as
//! the input that showed it:
//! - a memory call with no `id` was run (a file was created) and answered
//!   with a result no call could be matched to;
//! - a tool registered twice, a tool registered as `memory`, or a base
//!   whose `tools` already held the memory tool sent a tool name twice
//!   (the API refuses such a request);
//! - `max_iterations(0)` sent a request anyway, undocumented;
//! - `AsyncRunner<InMemoryStore>` could not be cloned (the derive asked
//!   for `InMemoryStore: Clone`).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use claude_memory::runner::{Request, Runner, Stopped};
use claude_memory::{InMemoryStore, MemoryStore, MemoryTool};
use serde_json::{Value, json};

fn clock() -> Value {
    json!({"name": "clock", "description": "The time.", "input_schema": {"type": "object"}})
}

fn names(request: &Request) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Every request a scripted `send` was given.
type Sent = Arc<Mutex<Vec<Request>>>;

/// Two responses: `first`, then `end_turn`; records every request.
fn scripted(first: Value) -> (Sent, impl FnMut(&Request) -> Result<Value, Infallible>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&sent);
    let mut replies = vec![
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}]}),
        first,
    ];
    let send = move |r: &Request| {
        log.lock().expect("log").push(r.clone());
        Ok(replies
            .pop()
            .unwrap_or_else(|| json!({"stop_reason": "end_turn", "content": []})))
    };
    (sent, send)
}

fn user() -> Vec<Value> {
    vec![json!({"role": "user", "content": "go"})]
}

#[test]
fn a_memory_call_without_an_id_is_an_error_result_and_is_not_run() {
    let store = Arc::new(InMemoryStore::new());
    let runner = Runner::new(
        MemoryTool::new(Arc::clone(&store)),
        json!({"model": "m", "max_tokens": 10}),
    )
    .tool(clock(), |_| Ok("noon".into()));
    let (_, send) = scripted(json!({"stop_reason": "tool_use", "content": [
        {"type": "tool_use", "name": "memory", "input": {"command": "create", "path": "/memories/noid.md", "file_text": "written\n"}},
        {"type": "tool_use", "name": "clock", "input": {}},
        {"type": "tool_use", "id": "toolu_ok", "name": "memory", "input": {"command": "create", "path": "/memories/id.md", "file_text": "written\n"}}
    ]}));
    let run = runner.run(user(), send).expect("run");
    let results = run.messages[2]["content"]
        .as_array()
        .expect("results")
        .clone();
    assert_eq!(results.len(), 3);
    for refused in &results[..2] {
        assert_eq!(refused["is_error"], true, "{refused}");
        assert_eq!(
            refused["content"],
            "Error: Invalid input: the tool_use block has no id"
        );
    }
    assert_eq!(results[2]["tool_use_id"], "toolu_ok");
    let noid = claude_memory::MemoryPath::parse("/memories/noid.md").expect("path");
    assert!(
        store.stat(&noid).expect("stat").is_none(),
        "the call without an id ran"
    );
    let id = claude_memory::MemoryPath::parse("/memories/id.md").expect("path");
    assert!(store.stat(&id).expect("stat").is_some());
}

#[test]
fn every_tool_name_is_sent_once_and_the_first_registration_answers() {
    let base = json!({"model": "m", "max_tokens": 10, "tools": [
        {"type": "memory_20250818", "name": "memory"},
        {"type": "web_search_20250305", "name": "web_search"},
        {"name": "clock", "description": "a stale copy", "input_schema": {"type": "object"}}
    ]});
    let runner = Runner::new(MemoryTool::new(InMemoryStore::new()), base)
        .tool(clock(), |_| Ok("first".into()))
        .tool(clock(), |_| Ok("second".into()))
        .tool(
            json!({"name": "memory", "description": "mine", "input_schema": {"type": "object"}}),
            |_| Ok("not the memory tool".into()),
        );
    let request = runner.request(&user());
    assert_eq!(names(&request), ["web_search", "memory", "clock"]);
    assert_eq!(request.body["tools"][2]["description"], "The time.");
    let (_, send) = scripted(json!({"stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "a", "name": "clock", "input": {}},
        {"type": "tool_use", "id": "b", "name": "memory", "input": {"command": "view", "path": "/memories"}}
    ]}));
    let run = runner.run(user(), send).expect("run");
    let results = &run.messages[2]["content"];
    assert_eq!(results[0]["content"], "first");
    let view = results[1]["content"].as_str().unwrap_or("");
    assert!(
        view.starts_with("Here're the files and directories"),
        "{view}"
    );
}

#[test]
fn max_iterations_zero_counts_as_one() {
    let runner = Runner::new(MemoryTool::new(InMemoryStore::new()), json!({})).max_iterations(0);
    let endless = json!({"stop_reason": "pause_turn", "content": []});
    let (sent, mut send) = scripted(endless.clone());
    let run = runner
        .run(user(), move |r| {
            let _ = send(r);
            Ok::<_, Infallible>(endless.clone())
        })
        .expect("run");
    assert_eq!(run.stopped, Stopped::MaxIterations);
    assert_eq!(run.iterations, 1);
    assert_eq!(sent.lock().expect("log").len(), 1);
}

#[cfg(feature = "tokio")]
#[test]
fn an_async_runner_over_a_store_that_is_not_clone_is_cloned_into_tasks() {
    use claude_memory::AsyncMemoryTool;
    use claude_memory::runner::{AsyncRunner, StopReason};
    for multi in [false, true] {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .expect("runtime");
        rt.block_on(async {
            let runner = AsyncRunner::new(
                AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new())),
                json!({}),
            );
            let mut tasks = Vec::new();
            for n in 0..2 {
                let runner = runner.clone();
                tasks.push(tokio::spawn(async move {
                    let path = format!("/memories/{n}.md");
                    let turns = std::sync::atomic::AtomicUsize::new(0);
                    runner
                        .run(user(), |_r: Request| {
                            let first = turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                            let path = path.clone();
                            async move {
                                Ok::<_, Infallible>(if first {
                                    json!({"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "c",
                                        "name": "memory", "input": {"command": "create", "path": path, "file_text": "x\n"}}]})
                                } else {
                                    json!({"stop_reason": "end_turn", "content": []})
                                })
                            }
                        })
                        .await
                        .expect("run")
                        .stopped
                }));
            }
            for task in tasks {
                assert_eq!(task.await.expect("task"), Stopped::Model(StopReason::EndTurn));
            }
            // Both clones wrote to the one store.
            let view = runner
                .memory_tool()
                .dispatch(&json!({"command": "view", "path": "/memories"}))
                .await;
            let text = view.text().unwrap_or("").to_owned();
            assert!(text.contains("0.md") && text.contains("1.md"), "{text}");
            drop(runner);
        });
    }
}
