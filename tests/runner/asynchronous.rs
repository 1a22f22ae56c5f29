//! The async runner (feature `tokio`): created, used and dropped inside
//! both Tokio runtime flavours, replaying a recorded turn with several
//! memory calls, another tool and an unregistered one; the request bodies
//! are checked byte for byte, and match the sync runner's.
#![cfg(feature = "tokio")]

use std::sync::{Arc, Mutex};

use claude_memory::runner::{AsyncRunner, Compaction, Request, Runner, StopReason, Stopped};
use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool};
use serde_json::{Value, json};

fn recorded() -> Vec<Value> {
    vec![
        json!({"stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": "u1", "name": "memory", "input": {"command": "create", "path": "/memories/a.md", "file_text": "one\n"}},
            {"type": "tool_use", "id": "u2", "name": "clock", "input": {}},
            {"type": "tool_use", "id": "u3", "name": "memory", "input": {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}},
            {"type": "tool_use", "id": "u4", "name": "nope", "input": {}},
            {"type": "tool_use", "id": "u5", "name": "memory", "input": {"command": "view", "path": "/memories/a.md"}},
        ]}),
        json!({"stop_reason": "pause_turn", "content": [{"type": "text", "text": "…"}]}),
        json!({"stop_reason": "compaction", "content": [{"type": "compaction", "content": "S"}]}),
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]}),
    ]
}

const BASE: &str = r#"{"model": "m", "max_tokens": 64}"#;

fn clock() -> Value {
    json!({"name": "clock", "input_schema": {"type": "object"}})
}

const RESULTS: &str = concat!(
    r#"{"content":["#,
    r#"{"content":"File created successfully at: /memories/a.md","tool_use_id":"u1","type":"tool_result"},"#,
    r#"{"content":"12:00","tool_use_id":"u2","type":"tool_result"},"#,
    r#"{"content":"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ttwo","tool_use_id":"u3","type":"tool_result"},"#,
    r#"{"content":"Error: The tool \"nope\" is not available here. Do not call it again; go on without it.","is_error":true,"tool_use_id":"u4","type":"tool_result"},"#,
    r#"{"content":"Here's the content of /memories/a.md with line numbers:\n     1\ttwo","tool_use_id":"u5","type":"tool_result"}"#,
    r#"],"role":"user"}"#
);

async fn run_async() -> Vec<String> {
    let base: Value = serde_json::from_str(BASE).expect("base");
    let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
    let runner = AsyncRunner::new(tool, base)
        .compaction(Compaction::new().pause_after_compaction(true))
        .tool(clock(), |_| async {
            tokio::task::yield_now().await;
            Ok("12:00".to_owned())
        });
    let sent = Arc::new(Mutex::new(Vec::new()));
    let mut responses = recorded().into_iter();
    let log = Arc::clone(&sent);
    let run = runner
        .run(
            vec![json!({"role": "user", "content": "hi"})],
            move |r: Request| {
                let body = serde_json::to_string(&r.body).expect("serialize");
                assert_eq!(r.anthropic_beta().as_deref(), Some("compact-2026-01-12"));
                log.lock().expect("lock").push(body);
                let next = responses.next();
                async move {
                    tokio::task::yield_now().await;
                    next.ok_or("more requests than recorded")
                }
            },
        )
        .await
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
    assert_eq!(run.iterations, 4);
    assert_eq!(
        serde_json::to_string(&run.messages[2]).expect("serialize"),
        RESULTS
    );
    drop(runner); // dropped on the runtime
    sent.lock().expect("lock").clone()
}

fn run_sync() -> Vec<String> {
    let base: Value = serde_json::from_str(BASE).expect("base");
    let runner = Runner::new(MemoryTool::new(InMemoryStore::new()), base)
        .compaction(Compaction::new().pause_after_compaction(true))
        .tool(clock(), |_| Ok("12:00".to_owned()));
    let mut bodies = Vec::new();
    let mut responses = recorded().into_iter();
    let run = runner
        .run(vec![json!({"role": "user", "content": "hi"})], |r| {
            bodies.push(serde_json::to_string(&r.body).expect("serialize"));
            responses.next().ok_or("more requests than recorded")
        })
        .expect("the run ends");
    assert_eq!(run.iterations, 4);
    bodies
}

fn expected() -> Vec<String> {
    let head = r#"{"context_management":{"edits":[{"pause_after_compaction":true,"type":"compact_20260112"}]},"max_tokens":64,"messages":["#;
    let tail = r#"],"model":"m","tools":[{"name":"memory","type":"memory_20250818"},{"input_schema":{"type":"object"},"name":"clock"}]}"#;
    let user = r#"{"content":"hi","role":"user"}"#;
    let calls = r#"{"content":[{"id":"u1","input":{"command":"create","file_text":"one\n","path":"/memories/a.md"},"name":"memory","type":"tool_use"},{"id":"u2","input":{},"name":"clock","type":"tool_use"},{"id":"u3","input":{"command":"str_replace","new_str":"two","old_str":"one","path":"/memories/a.md"},"name":"memory","type":"tool_use"},{"id":"u4","input":{},"name":"nope","type":"tool_use"},{"id":"u5","input":{"command":"view","path":"/memories/a.md"},"name":"memory","type":"tool_use"}],"role":"assistant"}"#;
    let paused = r#"{"content":[{"text":"…","type":"text"}],"role":"assistant"}"#;
    let compacted = r#"{"content":[{"content":"S","type":"compaction"}],"role":"assistant"}"#;
    let m1 = user.to_owned();
    let m2 = format!("{m1},{calls},{RESULTS}");
    let m3 = format!("{m2},{paused}");
    let m4 = format!("{m3},{compacted}");
    [m1, m2, m3, m4]
        .iter()
        .map(|m| format!("{head}{m}{tail}"))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn the_async_runner_replays_on_a_current_thread_runtime() {
    assert_eq!(run_async().await, expected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_runner_replays_on_a_multi_thread_runtime() {
    assert_eq!(run_async().await, expected());
}

#[test]
fn the_sync_runner_sends_the_same_bytes_on_a_plain_thread() {
    let bodies = std::thread::spawn(run_sync).join().expect("thread");
    assert_eq!(bodies, expected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_runner_is_created_used_and_dropped_inside_a_runtime() {
    // Inside async code, on the blocking pool (its send blocks).
    let bodies = tokio::task::spawn_blocking(run_sync).await.expect("task");
    assert_eq!(bodies, expected());
}

#[tokio::test(flavor = "current_thread")]
async fn the_sync_runner_and_the_builders_are_created_used_and_dropped_on_a_current_thread_runtime()
{
    use claude_memory::runner::ContextEditing;
    use claude_memory::{AllowedCaller, MemoryToolDefinition};
    let definition = MemoryToolDefinition::new()
        .defer_loading(true)
        .allowed_callers([AllowedCaller::Direct]);
    let edit = ContextEditing::new().keep_tool_uses(2);
    let runner = Runner::new(
        MemoryTool::new(InMemoryStore::new()),
        json!({"model": "m", "max_tokens": 8}),
    )
    .definition(definition.clone())
    .context_editing(edit.clone());
    let request = runner.request(&[json!({"role": "user", "content": "hi"})]);
    assert_eq!(
        serde_json::to_string(&request.body).expect("serialize"),
        r#"{"context_management":{"edits":[{"exclude_tools":["memory"],"keep":{"type":"tool_uses","value":2},"type":"clear_tool_uses_20250919"}]},"max_tokens":8,"messages":[{"content":"hi","role":"user"}],"model":"m","tools":[{"allowed_callers":["direct"],"defer_loading":true,"name":"memory","type":"memory_20250818"}]}"#
    );
    assert_eq!(
        request.anthropic_beta().as_deref(),
        Some("context-management-2025-06-27")
    );
    // A run whose send needs no I/O is fine on the runtime's thread.
    let run = runner
        .run(vec![json!({"role": "user", "content": "hi"})], |_| {
            Ok::<_, std::io::Error>(json!({"stop_reason": "end_turn", "content": []}))
        })
        .expect("run");
    assert_eq!(run.iterations, 1);
    drop((runner, definition, edit, run));
}

#[test]
fn the_async_runner_is_created_used_and_dropped_on_a_plain_thread() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    std::thread::spawn(|| {
        let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
        let runner = AsyncRunner::new(tool, json!({"model": "m", "max_tokens": 8}));
        let mut responses = vec![
            json!({"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "a",
                   "name": "memory", "input": {"command": "view", "path": "/memories"}}]}),
            json!({"stop_reason": "end_turn", "content": []}),
        ]
        .into_iter();
        {
            let run = runner.run(vec![json!({"role": "user", "content": "hi"})], |_| {
                let next = responses.next();
                async move { next.ok_or("more requests than recorded") }
            });
            let mut run = std::pin::pin!(run);
            // No runtime: memory calls run inline, so the run is ready at once.
            let mut cx = Context::from_waker(Waker::noop());
            match run.as_mut().poll(&mut cx) {
                Poll::Ready(outcome) => {
                    let outcome = outcome.expect("run");
                    assert_eq!(outcome.iterations, 2);
                    assert_eq!(outcome.messages[2]["content"][0]["tool_use_id"], "a");
                }
                Poll::Pending => panic!("pending without a runtime"),
            }
        }
        drop(runner);
    })
    .join()
    .expect("thread");
}
