//! Everything the CLI prints goes through here: stdout with a closed pipe
//! taken as "the reader has gone, stop quietly" (never a panic, as
//! `println!` would), stderr best effort, the failures and their exit
//! statuses, and plurals.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

/// Why a command stopped early.
#[derive(Debug)]
pub enum Failure {
    /// The arguments cannot work: exit status 2.
    Usage(String),
    /// The operation failed: exit status 1.
    Failed(String),
    /// The operation failed and has said why already: exit status 1.
    Reported,
    /// The reader of stdout has gone (a broken pipe): stop, exit status 0,
    /// nothing more to say.
    Quiet,
}

impl Failure {
    /// Prints the message (if any) and gives the exit status.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Usage(message) => {
                err(format_args!(
                    "claude-memory: {message}\nRun `claude-memory --help` for usage."
                ));
                ExitCode::from(2)
            }
            Failure::Failed(message) => {
                // A failure can quote what a stored file or the model
                // wrote (a planted history line's path): no control
                // character reaches the terminal.
                err(format_args!("claude-memory: {}", no_controls(&message)));
                ExitCode::from(1)
            }
            Failure::Reported => ExitCode::from(1),
            Failure::Quiet => ExitCode::SUCCESS,
        }
    }
}

/// `text` with control characters written as escapes (`\x1b`, `\u{9b}`).
fn no_controls(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// `Failure::Failed` from anything displayable.
pub fn failed(e: impl fmt::Display) -> Failure {
    Failure::Failed(e.to_string())
}

/// An error and its causes, `outer: cause: cause`, so an operator sees
/// why (a refused role, a refused connection, a missing TLS) and not only
/// that it failed. A cause whose text is already shown is not repeated.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// What a command returns.
pub type Outcome = Result<(), Failure>;

/// A write error on stdout: a broken pipe ends quietly, anything else is a
/// failure.
pub fn stdout_error(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::Quiet
    } else {
        Failure::Failed(format!("cannot write to stdout: {e}"))
    }
}

/// Prints a line on stdout.
pub fn out(line: impl fmt::Display) -> Outcome {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(stdout_error)
}

/// Prints a line on stderr; if stderr is closed there is no one to tell.
pub fn err(line: impl fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// `1 file`, `2 files`; `1 directory`, `0 directories`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
