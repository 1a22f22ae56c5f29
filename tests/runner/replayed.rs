//! The runner, replayed: recorded response sequences in, no network; each
//! test checks every request body the runner sends, byte for byte, and the
//! outcome it hands back.

use std::cell::RefCell;
use std::convert::Infallible;

use claude_memory::runner::{
    Compaction, ContextEditing, Request, RunError, Runner, StopReason, Stopped,
};
use claude_memory::{InMemoryStore, MemoryTool};
use serde_json::{Value, json};

/// Answers requests from a recorded sequence and records what was sent
/// (the body as serialized, and the beta header).
struct Replay {
    responses: RefCell<std::vec::IntoIter<Value>>,
    sent: RefCell<Vec<(String, Option<String>)>>,
}

impl Replay {
    fn new(responses: Vec<Value>) -> Self {
        Replay {
            responses: RefCell::new(responses.into_iter()),
            sent: RefCell::new(Vec::new()),
        }
    }

    fn send(&self, request: &Request) -> Result<Value, Infallible> {
        let body = serde_json::to_string(&request.body).expect("serialize");
        self.sent
            .borrow_mut()
            .push((body, request.anthropic_beta()));
        Ok(self
            .responses
            .borrow_mut()
            .next()
            .expect("the runner sent more requests than were recorded"))
    }

    fn bodies(&self) -> Vec<String> {
        self.sent.borrow().iter().map(|(b, _)| b.clone()).collect()
    }
}

fn runner() -> Runner<InMemoryStore> {
    Runner::new(
        MemoryTool::new(InMemoryStore::new()),
        json!({"model": "m", "max_tokens": 64}),
    )
}

fn user() -> Vec<Value> {
    vec![json!({"role": "user", "content": "hi"})]
}

/// A request body: `messages` (already serialized, comma-separated) with
/// the base fields and the memory tool alone.
fn body(messages: &str) -> String {
    format!(
        r#"{{"max_tokens":64,"messages":[{messages}],"model":"m","tools":[{{"name":"memory","type":"memory_20250818"}}]}}"#
    )
}

const USER: &str = r#"{"content":"hi","role":"user"}"#;

#[test]
fn every_stop_reason_but_tool_use_pause_turn_and_compaction_stops_the_run() {
    let cases = [
        (json!("end_turn"), StopReason::EndTurn),
        (json!("stop_sequence"), StopReason::StopSequence),
        (json!("max_tokens"), StopReason::MaxTokens),
        (json!("refusal"), StopReason::Refusal),
        (
            json!("model_context_window_exceeded"),
            StopReason::ModelContextWindowExceeded,
        ),
        (
            json!("a_reason_from_2027"),
            StopReason::Other("a_reason_from_2027".into()),
        ),
        (Value::Null, StopReason::Other(String::new())),
    ];
    for (stop_reason, expected) in cases {
        let response =
            json!({"stop_reason": stop_reason, "content": [{"type": "text", "text": "ok"}]});
        let replay = Replay::new(vec![response.clone()]);
        let run = runner()
            .run(user(), |r| replay.send(r))
            .expect("the run ends");
        assert_eq!(run.stopped, Stopped::Model(expected), "{stop_reason}");
        assert_eq!(run.iterations, 1);
        assert_eq!(run.response, response);
        assert_eq!(
            run.messages,
            vec![
                user()[0].clone(),
                json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
            ]
        );
        assert_eq!(replay.bodies(), vec![body(USER)]);
        assert_eq!(replay.sent.borrow()[0].1, None, "no beta without presets");
    }
}

#[test]
fn several_memory_calls_other_tools_and_an_unregistered_tool_in_one_turn() {
    let first = json!({"stop_reason": "tool_use", "content": [
        {"type": "text", "text": "t"},
        {"type": "tool_use", "id": "u1", "name": "memory", "input": {"command": "create", "path": "/memories/a.md", "file_text": "one\n"}},
        {"type": "tool_use", "id": "u2", "name": "clock", "input": {"tz": "UTC"}},
        {"type": "tool_use", "id": "u3", "name": "memory", "input": {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}},
        {"type": "tool_use", "id": "u4", "name": "search", "input": {"q": "x"}},
        {"type": "tool_use", "id": "u5", "name": "fail", "input": {}},
        {"type": "tool_use", "id": "u6", "name": "memory", "input": {"command": "view", "path": "/memories/a.md"}},
    ]});
    let last = json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]});
    let replay = Replay::new(vec![first, last]);
    let clock = json!({"name": "clock", "input_schema": {"type": "object"}});
    let fail = json!({"name": "fail", "input_schema": {"type": "object"}});
    let runner = runner()
        .tool(clock, |input| {
            Ok(format!("12:00 {}", input["tz"].as_str().unwrap_or("?")))
        })
        .tool(fail, |_| Err("no luck".to_owned()));
    let run = runner
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
    assert_eq!(run.iterations, 2);
    assert_eq!(run.messages.len(), 4);

    let tools = r#"[{"name":"memory","type":"memory_20250818"},{"input_schema":{"type":"object"},"name":"clock"},{"input_schema":{"type":"object"},"name":"fail"}]"#;
    let assistant = r#"{"content":[{"text":"t","type":"text"},{"id":"u1","input":{"command":"create","file_text":"one\n","path":"/memories/a.md"},"name":"memory","type":"tool_use"},{"id":"u2","input":{"tz":"UTC"},"name":"clock","type":"tool_use"},{"id":"u3","input":{"command":"str_replace","new_str":"two","old_str":"one","path":"/memories/a.md"},"name":"memory","type":"tool_use"},{"id":"u4","input":{"q":"x"},"name":"search","type":"tool_use"},{"id":"u5","input":{},"name":"fail","type":"tool_use"},{"id":"u6","input":{"command":"view","path":"/memories/a.md"},"name":"memory","type":"tool_use"}],"role":"assistant"}"#;
    // One tool_result per tool_use, in the order of the calls, in one user
    // message; the memory calls ran in order (the view sees the edit).
    let results = concat!(
        r#"{"content":["#,
        r#"{"content":"File created successfully at: /memories/a.md","tool_use_id":"u1","type":"tool_result"},"#,
        r#"{"content":"12:00 UTC","tool_use_id":"u2","type":"tool_result"},"#,
        r#"{"content":"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ttwo","tool_use_id":"u3","type":"tool_result"},"#,
        r#"{"content":"Error: The tool \"search\" is not available here. Do not call it again; go on without it.","is_error":true,"tool_use_id":"u4","type":"tool_result"},"#,
        r#"{"content":"no luck","is_error":true,"tool_use_id":"u5","type":"tool_result"},"#,
        r#"{"content":"Here's the content of /memories/a.md with line numbers:\n     1\ttwo","tool_use_id":"u6","type":"tool_result"}"#,
        r#"],"role":"user"}"#
    );
    let with_tools = |messages: &str| {
        format!(r#"{{"max_tokens":64,"messages":[{messages}],"model":"m","tools":{tools}}}"#)
    };
    assert_eq!(
        replay.bodies(),
        vec![
            with_tools(USER),
            with_tools(&format!("{USER},{assistant},{results}")),
        ]
    );
    assert_eq!(
        serde_json::to_string(&run.messages[2]).expect("serialize"),
        results
    );
}

#[test]
fn max_iterations_reached_hands_back_a_conversation_ready_to_resume() {
    let call = json!({"stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "v", "name": "memory", "input": {"command": "view", "path": "/memories"}}]});
    let replay = Replay::new(vec![call.clone(), call.clone(), call]);
    let run = runner()
        .max_iterations(2)
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::MaxIterations);
    assert_eq!(run.iterations, 2);
    let assistant = r#"{"content":[{"id":"v","input":{"command":"view","path":"/memories"},"name":"memory","type":"tool_use"}],"role":"assistant"}"#;
    let result = r#"{"content":[{"content":"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories","tool_use_id":"v","type":"tool_result"}],"role":"user"}"#;
    assert_eq!(
        replay.bodies(),
        vec![body(USER), body(&format!("{USER},{assistant},{result}"))]
    );
    // Two requests sent, the third response never asked for; the
    // messages end with the answered calls, ready for the next request.
    assert_eq!(run.messages.len(), 5);
    assert_eq!(run.messages[4]["role"], "user");
    assert_eq!(
        serde_json::to_string(&run.messages[4]).expect("serialize"),
        result
    );
}

#[test]
fn a_pause_turn_is_resumed_by_sending_the_response_back_as_it_is() {
    let paused = json!({"stop_reason": "pause_turn", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "text", "text": "Searching"}]});
    let done = json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Found."}]});
    let replay = Replay::new(vec![paused, done]);
    let runner = Runner::new(
        MemoryTool::new(InMemoryStore::new()),
        json!({"model": "m", "max_tokens": 64,
               "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
    );
    let run = runner
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
    let tools = r#"[{"name":"web_search","type":"web_search_20250305"},{"name":"memory","type":"memory_20250818"}]"#;
    let assistant = r#"{"content":[{"id":"srvtoolu_1","input":{"query":"q"},"name":"web_search","type":"server_tool_use"},{"text":"Searching","type":"text"}],"role":"assistant"}"#;
    let with = |messages: &str| {
        format!(r#"{{"max_tokens":64,"messages":[{messages}],"model":"m","tools":{tools}}}"#)
    };
    // The second request is the first plus the paused turn, nothing else.
    assert_eq!(
        replay.bodies(),
        vec![with(USER), with(&format!("{USER},{assistant}"))]
    );
    assert_eq!(run.messages.len(), 3);
}

#[test]
fn a_compaction_block_is_resumed_with_the_presets_and_their_betas() {
    let compacted = json!({"stop_reason": "compaction", "content": [
        {"type": "compaction", "content": "Summary: the user said hi."}]});
    let done = json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello."}]});
    let replay = Replay::new(vec![compacted, done]);
    let runner = runner()
        .context_editing(
            ContextEditing::new()
                .trigger_input_tokens(30_000)
                .keep_tool_uses(3),
        )
        .compaction(
            Compaction::new()
                .trigger_input_tokens(100_000)
                .pause_after_compaction(true),
        );
    let run = runner
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
    let management = r#""context_management":{"edits":[{"exclude_tools":["memory"],"keep":{"type":"tool_uses","value":3},"trigger":{"type":"input_tokens","value":30000},"type":"clear_tool_uses_20250919"},{"pause_after_compaction":true,"trigger":{"type":"input_tokens","value":100000},"type":"compact_20260112"}]}"#;
    let with = |messages: &str| {
        format!(
            r#"{{{management},"max_tokens":64,"messages":[{messages}],"model":"m","tools":[{{"name":"memory","type":"memory_20250818"}}]}}"#
        )
    };
    let assistant = r#"{"content":[{"content":"Summary: the user said hi.","type":"compaction"}],"role":"assistant"}"#;
    assert_eq!(
        replay.bodies(),
        vec![with(USER), with(&format!("{USER},{assistant}"))]
    );
    let beta = Some("context-management-2025-06-27,compact-2026-01-12".to_owned());
    assert!(replay.sent.borrow().iter().all(|(_, b)| *b == beta));
}

#[test]
fn a_failed_send_and_an_error_body_keep_the_messages() {
    let runner = runner();
    let failed = runner.run(user(), |_| {
        Err::<Value, _>(std::io::Error::other("offline"))
    });
    match failed {
        Err(RunError::Send { source, messages }) => {
            assert_eq!(source.to_string(), "offline");
            assert_eq!(messages, user());
        }
        other => panic!("{other:?}"),
    }
    let error_body =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let replay = Replay::new(vec![error_body.clone()]);
    match runner.run(user(), |r| replay.send(r)) {
        Err(RunError::NotAMessage { response, messages }) => {
            assert_eq!(response, error_body);
            assert_eq!(messages, user());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_use_without_a_call_stops_instead_of_spinning() {
    let replay = Replay::new(vec![json!({"stop_reason": "tool_use", "content": []})]);
    let run = runner()
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    assert_eq!(run.stopped, Stopped::Model(StopReason::ToolUse));
    assert_eq!(run.iterations, 1);
}

#[test]
fn hostile_calls_from_the_model_are_error_results_not_panics() {
    // No id, a non-object input, a name that is not a string, a huge
    // name with control characters: each still gets its one tool_result.
    let long = format!("evil\n{}", "x".repeat(10_000));
    let first = json!({"stop_reason": "tool_use", "content": [
        {"type": "tool_use", "name": "memory", "input": "view /"},
        {"type": "tool_use", "id": "b", "name": 7, "input": {}},
        {"type": "tool_use", "id": "c", "name": long, "input": {}},
    ]});
    let replay = Replay::new(vec![
        first,
        json!({"stop_reason": "end_turn", "content": []}),
    ]);
    let run = runner()
        .run(user(), |r| replay.send(r))
        .expect("the run ends");
    let results = run.messages[2]["content"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r["is_error"] == true));
    assert_eq!(results[0].get("tool_use_id"), None);
    assert_eq!(results[1]["tool_use_id"], "b");
    let text = results[2]["content"].as_str().expect("text");
    assert!(text.len() < 200 && !text.contains('\n'), "{text}");
}
