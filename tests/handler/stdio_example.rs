//! The `stdio` example, run as a real process: the JSON-lines contract.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[path = "../common/mod.rs"]
mod common;
use common::stdio_binary;

#[test]
fn answers_each_line_before_reading_the_next() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("mem");
    let mut child = Command::new(stdio_binary())
        .args(["--root".as_ref(), root.as_os_str()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut ask = |line: &str| -> String {
        writeln!(stdin, "{line}").expect("write");
        stdin.flush().expect("flush");
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("read");
        answer.trim_end().to_owned()
    };
    // Each answer is read before the next line is written: the bridge flushes.
    assert_eq!(
        ask(r#"{"command":"create","path":"/memories/a.md","file_text":"hello\n"}"#),
        r#"{"type":"tool_result","content":"File created successfully at: /memories/a.md"}"#
    );
    assert_eq!(
        ask(
            r#"{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"view","path":"/memories/a.md"}}"#
        ),
        r#"{"type":"tool_result","tool_use_id":"toolu_01","content":"Here's the content of /memories/a.md with line numbers:\n     1\thello"}"#
    );
    assert_eq!(
        ask(r#"{"type":"tool_use","id":"toolu_02","name":"memory","input":[]}"#),
        r#"{"type":"tool_result","tool_use_id":"toolu_02","content":"Error: Invalid input: the tool_use block's `input` must be a JSON object","is_error":true}"#
    );
    assert_eq!(
        ask("this is not json"),
        r#"{"type":"tool_result","content":"Error: Invalid input: expected ident at line 1 column 2","is_error":true}"#
    );
    assert_eq!(
        ask("42"),
        r#"{"type":"tool_result","content":"Error: Invalid input: expected a JSON object","is_error":true}"#
    );
    // A blank line gets no answer: the next answer belongs to the next line.
    assert_eq!(
        ask("\n{\"command\":\"delete\",\"path\":\"/memories/a.md\"}"),
        r#"{"type":"tool_result","content":"Successfully deleted /memories/a.md"}"#
    );
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status}");
    assert!(root.is_dir(), "the root was created");
}

#[test]
fn in_memory_mode_and_end_of_input() {
    let output = Command::new(stdio_binary())
        .arg("--in-memory")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(b"{\"command\":\"view\",\"path\":\"/memories\"}\n\n")?;
            child.wait_with_output()
        })
        .expect("run stdio");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\"type\":\"tool_result\",\"content\":\"Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\\n0B\\t/memories\"}\n"
    );
}

#[test]
fn bad_arguments_print_usage_and_exit_2() {
    let output = Command::new(stdio_binary())
        .arg("--bogus")
        .output()
        .expect("run stdio");
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "usage: stdio --root DIR | stdio --in-memory\n"
    );
}
