//! The JSON-lines bridge: one tool call per input line, one `tool_result`
//! per output line, so other programs and languages can use the crate
//! (see `examples/stdio.rs`).

use std::io::{self, BufRead, Write};

use crate::render;
use crate::result::ToolResult;
use crate::store::MemoryStore;
use crate::tool::MemoryTool;

/// Longest input line accepted, in bytes; longer lines get an error answer
/// and are skipped, so one huge line cannot exhaust memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Answers every non-blank line of `input` with one line on `output`,
/// flushed before the next line is read, until end of input.
///
/// A line is a bare tool `input` object or a whole `tool_use` block; the
/// answer is the `tool_result` block ([`ToolResult::to_json`]), with
/// `tool_use_id` only when the line was a `tool_use` block. Lines that are
/// not JSON objects get an error answer and the loop goes on; only I/O
/// errors on `input` or `output` end it.
pub fn serve<S: MemoryStore>(
    tool: &MemoryTool<S>,
    mut input: impl BufRead,
    mut output: impl Write,
) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let complete = read_line(&mut input, &mut line)?;
        if line.is_empty() && complete.is_none() {
            return Ok(());
        }
        let result = match (complete, std::str::from_utf8(&line)) {
            (Some(false), _) => ToolResult::error(render::invalid_input(&format!(
                "the line is longer than {MAX_LINE_BYTES} bytes"
            ))),
            (_, Err(_)) => ToolResult::error(render::invalid_input("the line is not valid UTF-8")),
            (_, Ok(text)) if text.trim().is_empty() => continue,
            (_, Ok(text)) => tool.dispatch_json(text),
        };
        serde_json::to_writer(&mut output, &result)?;
        output.write_all(b"\n")?;
        output.flush()?;
    }
}

/// Reads one line (without its `\n`) into `buf`, keeping at most
/// [`MAX_LINE_BYTES`]. Returns `None` at end of input with nothing read,
/// `Some(true)` for a whole line, `Some(false)` for one that was too long
/// (the rest of it is consumed and dropped).
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<bool>> {
    let mut read_any = false;
    let mut fits = true;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(read_any.then_some(fits));
        }
        read_any = true;
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if fits && buf.len() + chunk.len() <= MAX_LINE_BYTES {
            buf.extend_from_slice(chunk);
        } else {
            fits = false;
            buf.clear();
        }
        let used = done.unwrap_or(available.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some(fits));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryStore;

    fn run(input: &str) -> String {
        let tool = MemoryTool::new(InMemoryStore::new());
        let mut out = Vec::new();
        if let Err(e) = serve(&tool, input.as_bytes(), &mut out) {
            panic!("serve failed: {e}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn one_answer_per_non_blank_line() {
        let out = run(concat!(
            "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"hi\"}\n",
            "\n",
            "   \n",
            "{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"memory\",\"input\":{\"command\":\"view\",\"path\":\"/memories/a.md\"}}\n",
            "not json\n",
            "[1]",
        ));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"type":"tool_result","content":"File created successfully at: /memories/a.md"}"#,
                r#"{"type":"tool_result","tool_use_id":"toolu_9","content":"Here's the content of /memories/a.md with line numbers:\n     1\thi"}"#,
                r#"{"type":"tool_result","content":"Error: Invalid input: expected ident at line 1 column 2","is_error":true}"#,
                r#"{"type":"tool_result","content":"Error: Invalid input: expected a JSON object","is_error":true}"#,
            ]
        );
    }

    #[test]
    fn invalid_utf8_gets_an_answer_and_the_loop_goes_on() {
        let tool = MemoryTool::new(InMemoryStore::new());
        let mut out = Vec::new();
        let input: &[u8] = b"\xff\xfe\n{\"command\":\"view\",\"path\":\"/memories/x\"}\n";
        assert!(serve(&tool, input, &mut out).is_ok());
        let text = String::from_utf8_lossy(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            r#"{"type":"tool_result","content":"Error: Invalid input: the line is not valid UTF-8","is_error":true}"#
        );
    }

    #[test]
    fn an_overlong_line_is_refused_and_skipped() {
        let tool = MemoryTool::new(InMemoryStore::new());
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"command\":\"view\",\"path\":\"/memories\"}\n");
        let mut out = Vec::new();
        assert!(serve(&tool, io::BufReader::new(input.as_slice()), &mut out).is_ok());
        let text = String::from_utf8_lossy(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            r#"{"type":"tool_result","content":"Error: Invalid input: the line is longer than 67108864 bytes","is_error":true}"#
        );
        assert!(lines[1].contains("0B\\t/memories"));
    }
}
