//! A JSON-lines bridge: other programs (in any language) send one memory
//! tool call per line on stdin and read one `tool_result` per line on stdout.
//!
//! ```text
//! cargo run --example stdio -- --root ./memories
//! cargo run --example stdio -- --in-memory
//! ```
//!
//! A line is a bare tool input (`{"command":"view","path":"/memories"}`) or a
//! whole `tool_use` block; blank lines get no answer; every other line gets
//! exactly one answer, flushed at once. Exits 0 at end of input.

use std::io;
use std::process::ExitCode;

use claude_memory::store::MemoryStore;
use claude_memory::{FilesystemStore, InMemoryStore, MemoryTool};

const USAGE: &str = "usage: stdio --root DIR | stdio --in-memory";

fn main() -> ExitCode {
    // `--root=DIR` is `--root DIR`, as in the CLI.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .flat_map(|a| match a.strip_prefix("--root=") {
            Some(dir) => vec!["--root".to_owned(), dir.to_owned()],
            None => vec![a],
        })
        .collect();
    let store: Box<dyn MemoryStore> = match args.iter().map(String::as_str).collect::<Vec<_>>()[..]
    {
        ["--help" | "-h"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        ["--in-memory"] => Box::new(InMemoryStore::new()),
        ["--root", dir] => match FilesystemStore::open(dir) {
            Ok(store) => Box::new(store),
            Err(e) => {
                eprintln!("stdio: cannot open the memory directory {dir}: {e}");
                return ExitCode::from(1);
            }
        },
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let tool = MemoryTool::new(store);
    match claude_memory::bridge::serve(&tool, io::stdin().lock(), io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stdio: {e}");
            ExitCode::from(1)
        }
    }
}
