//! The transcripts a dream reads: Claude Code's JSONL and Messages API
//! JSON as they are written, and broken ones (an error naming the file
//! and the line).

use claude_memory::dream::{MAX_SESSION_CHARS, read_session};
use serde_json::json;

#[test]
fn a_claude_code_jsonl_transcript_reads_as_its_turns() {
    let lines = [
        json!({"type": "summary", "summary": "Launch planning", "leafUuid": "a1"}),
        json!({"parentUuid": null, "isSidechain": false, "userType": "external", "cwd": "/work",
               "sessionId": "5f1c", "version": "2.1.3", "type": "user", "uuid": "u1",
               "timestamp": "2026-12-01T10:00:00.000Z",
               "message": {"role": "user", "content": "The launch moved to May."}}),
        json!({"parentUuid": "u1", "type": "assistant", "uuid": "a2", "timestamp": "2026-12-01T10:00:02.000Z",
               "message": {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                           "content": [{"type": "thinking", "thinking": "private", "signature": "sig"},
                                       {"type": "text", "text": "Noted: May."},
                                       {"type": "tool_use", "id": "toolu_01", "name": "memory",
                                        "input": {"command": "view", "path": "/memories"}}],
                           "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}}),
        json!({"type": "user", "uuid": "u3", "message": {"role": "user", "content": [
               {"type": "tool_result", "tool_use_id": "toolu_01", "content": "0B\t/memories"}]}}),
        json!({"type": "system", "content": "compacted", "level": "info"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let s = read_session("launch.jsonl", &text).expect("a session");
    assert_eq!(s.name, "launch.jsonl");
    assert_eq!(
        s.text,
        "user: The launch moved to May.\n\
         assistant: Noted: May.\n[tool_use memory {\"command\":\"view\",\"path\":\"/memories\"}]\n\
         user: [tool_result 0B\t/memories]\n"
    );
    assert!(!s.text.contains("private"), "thinking is not evidence");
}

#[test]
fn a_messages_api_transcript_reads_as_its_turns_array_or_request() {
    let messages = json!([
        {"role": "user", "content": "I prefer email follow-ups."},
        {"role": "assistant", "content": [{"type": "text", "text": "Saved."}]}
    ]);
    let a = read_session("a.json", &messages.to_string()).expect("array");
    assert_eq!(
        a.text,
        "user: I prefer email follow-ups.\nassistant: Saved.\n"
    );
    let request = json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages});
    let b = read_session(
        "b.json",
        &serde_json::to_string_pretty(&request).expect("json"),
    )
    .expect("request");
    assert_eq!(a.text, b.text);
}

#[test]
fn a_broken_transcript_names_its_file_and_line() {
    let jsonl = format!(
        "{}\n{}\n{{\"type\": \"user\", \"message\": \n",
        json!({"type": "user", "message": {"role": "user", "content": "one"}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": "two"}})
    );
    let e = read_session("s.jsonl", &jsonl).expect_err("line 3 is cut");
    assert_eq!((e.name.as_str(), e.line), ("s.jsonl", 3));
    assert!(
        e.to_string().starts_with("s.jsonl, line 3: not JSON"),
        "{e}"
    );
    let e = read_session(
        "s.json",
        "[\n{\"role\": \"user\", \"content\": \"x\"},\n{\"role\": ",
    )
    .expect_err("cut");
    assert_eq!(e.line, 3, "{e}");
    let e = read_session("s.json", r#"[{"content": "no role"}]"#).expect_err("no role");
    assert!(e.to_string().contains("message 1 has no `role`"), "{e}");
    let e = read_session("n.json", "42").expect_err("a number");
    assert!(e.to_string().contains("not a transcript"), "{e}");
    let e = read_session("x.jsonl", "[1]\n").expect_err("an array of numbers");
    assert!(e.to_string().contains("has no `role`"), "{e}");
}

#[test]
fn a_long_session_is_cut_and_says_so() {
    let long = "x".repeat(MAX_SESSION_CHARS * 2);
    let s = read_session(
        "long.json",
        &json!([{"role": "user", "content": long}]).to_string(),
    )
    .expect("a session");
    assert!(s.text.chars().count() < MAX_SESSION_CHARS + 200);
    assert!(
        s.text.ends_with("longer than 100000 characters]\n"),
        "{}",
        &s.text[s.text.len() - 80..]
    );
}
