//! Past sessions a dream reads: Messages API transcripts (a JSON array of
//! messages, or an object with `messages`) and Claude Code's JSONL
//! transcripts (one event a line; its `user` and `assistant` events carry
//! a `message`), rendered as plain text, each role's turn on its own
//! lines. A transcript is untrusted text: it is only ever shown to the
//! model as data (see [`super::PROMPT`]).

use serde_json::Value;

/// The most characters of one session a dream shows the model; past it
/// the session is cut, and says so.
pub const MAX_SESSION_CHARS: usize = 100_000;
/// The largest transcript file read: past it, the file is refused, not
/// read into memory (only [`MAX_SESSION_CHARS`] of it would be shown).
pub const MAX_SESSION_BYTES: usize = 32 << 20;
/// The most characters of one tool call's input or result shown.
const MAX_BLOCK_CHARS: usize = 500;

/// One past session, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Where it came from (a file name): how the model cites it.
    pub name: String,
    /// Its turns as text: `user: …`, `assistant: …`.
    pub text: String,
}

/// A transcript that is neither shape, naming the file and the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}, line {line}: {reason}")]
pub struct SessionError {
    /// The transcript's name.
    pub name: String,
    /// The line at fault (1 for a JSON document that does not parse at
    /// all and names none).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Reads transcript `data` (named `name`): a Messages API JSON document or
/// Claude Code JSONL, told apart by whether the whole text is one JSON
/// value.
pub fn read_session(name: &str, data: &str) -> Result<Session, SessionError> {
    let error = |line: usize, reason: String| SessionError {
        name: name.to_owned(),
        line,
        reason,
    };
    let messages: Vec<Value> = match serde_json::from_str::<Value>(data) {
        Ok(Value::Array(messages)) => messages,
        Ok(Value::Object(mut object)) => match object.remove("messages") {
            Some(Value::Array(messages)) => messages,
            // One JSONL line alone is one JSON object too.
            _ => jsonl(data).map_err(|(line, reason)| error(line, reason))?,
        },
        Ok(_) => {
            return Err(error(
                1,
                "not a transcript: expected a JSON array of messages, an object with `messages`, or JSONL".into(),
            ));
        }
        // One JSON document (it does not begin with a line that is JSON
        // by itself): its own error, at its line.
        Err(whole) if data.trim_start().starts_with('[') || !first_line_is_json(data) => {
            return Err(error(whole.line(), format!("not JSON: {whole}")));
        }
        Err(_) => jsonl(data).map_err(|(line, reason)| error(line, reason))?,
    };
    let mut text = String::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| error(i + 1, format!("message {} has no `role`", i + 1)))?;
        let content = render(message.get("content").unwrap_or(&Value::Null));
        if !content.trim().is_empty() {
            text.push_str(role);
            text.push_str(": ");
            text.push_str(content.trim_end());
            text.push('\n');
        }
    }
    if text.chars().count() > MAX_SESSION_CHARS {
        let cut: String = text.chars().take(MAX_SESSION_CHARS).collect();
        text = format!(
            "{cut}\n[the rest of this session is cut: it is longer than {MAX_SESSION_CHARS} characters]\n"
        );
    }
    Ok(Session {
        name: name.to_owned(),
        text,
    })
}

fn first_line_is_json(data: &str) -> bool {
    data.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| serde_json::from_str::<Value>(l).is_ok())
}

/// A transcript file's text: UTF-8, or an error naming the line where it
/// stops being so. At most [`MAX_SESSION_BYTES`].
pub fn session_text(name: &str, data: Vec<u8>) -> Result<String, SessionError> {
    if data.len() > MAX_SESSION_BYTES {
        return Err(SessionError {
            name: name.to_owned(),
            line: 1,
            reason: format!(
                "{} bytes, over the {MAX_SESSION_BYTES} a session may hold: cut it",
                data.len()
            ),
        });
    }
    String::from_utf8(data).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count();
        SessionError {
            name: name.to_owned(),
            line,
            reason: "not UTF-8 text".into(),
        }
    })
}

/// The messages of a Claude Code JSONL transcript: each line a JSON
/// object; `user` and `assistant` events give their `message`, lines of a
/// bare message (`role`, `content`) count as one, other events (a
/// summary, a system note) are skipped.
fn jsonl(data: &str) -> Result<Vec<Value>, (usize, String)> {
    let mut messages = Vec::new();
    for (i, line) in data.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| (i + 1, format!("not JSON: {e}")))?;
        let Some(object) = value.as_object() else {
            return Err((i + 1, "not a JSON object".into()));
        };
        let kind = object.get("type").and_then(Value::as_str);
        match (kind, object.get("message")) {
            (Some("user" | "assistant"), Some(message)) if message.is_object() => {
                messages.push(message.clone())
            }
            _ if object.contains_key("role") && object.contains_key("content") => {
                messages.push(value.clone())
            }
            _ => {}
        }
    }
    Ok(messages)
}

fn cut(text: &str) -> String {
    match text.chars().count() > MAX_BLOCK_CHARS {
        true => format!(
            "{}…",
            text.chars().take(MAX_BLOCK_CHARS).collect::<String>()
        ),
        false => text.to_owned(),
    }
}

/// A message's content as text: its text blocks, and each tool call and
/// result in brackets, cut short.
fn render(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for block in blocks {
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "text" => out.push(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    ),
                    "tool_use" => {
                        let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                        let input = block.get("input").map(Value::to_string).unwrap_or_default();
                        out.push(format!("[tool_use {name} {}]", cut(&input)));
                    }
                    "tool_result" => {
                        let result = render(block.get("content").unwrap_or(&Value::Null));
                        out.push(format!("[tool_result {}]", cut(&result)));
                    }
                    // Thinking is the model's own, and signed: not a fact.
                    "thinking" | "redacted_thinking" => {}
                    other => out.push(format!("[{other}]")),
                }
            }
            out.join("\n")
        }
        _ => String::new(),
    }
}
