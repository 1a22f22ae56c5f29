//! `claude-memory`: operate a memory store from the shell (feature `cli`).

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use claude_memory::store::{Flow, Order, Step, walk};
use claude_memory::{Config, FilesystemStore, MemoryPath, MemoryTool, human_size};
use serde_json::json;

const USAGE: &str = "\
claude-memory: operate a Claude memory store

Usage: claude-memory --root DIR [OPTIONS] COMMAND [ARGS]

Commands:
  serve                        answer JSON-lines tool calls on stdin (like examples/stdio.rs)
  view PATH [--range A:B]      show PATH as the model would see it
  export [--output FILE]       write the whole store as JSON (to stdout by default)
  import FILE [--overwrite]    load a JSON export (existing files are refused unless --overwrite)
  prune --older-than AGE       remove files not written for AGE (30d, 12h, 45m, 90s), then empty directories
  stats                        files, bytes, largest and oldest file
  help [COMMAND]               this text, or one command's

Options:
  --root DIR                   the memory directory (or CLAUDE_MEMORY_DIR)
  --view-limit CHARS           view output limit (default 16000)
  --max-file-size BYTES        largest file a write may produce (default 1048576)
  --max-store-size BYTES       largest total of the store (default: none)
  -h, --help                   help

Exit status: 0 success, 1 the operation failed, 2 usage error.";

fn command_help(command: &str) -> Option<&'static str> {
    Some(match command {
        "serve" => {
            "Usage: claude-memory --root DIR serve\n\nReads one tool call per line (a bare input object or a tool_use block) and writes one tool_result per line, flushed at once. Blank lines get no answer. Exits 0 at end of input."
        }
        "view" => {
            "Usage: claude-memory --root DIR view PATH [--range START:END]\n\nPrints what the model would see for `view PATH` (END may be -1). Exits 1 if the view is an error."
        }
        "export" => {
            "Usage: claude-memory --root DIR export [--output FILE]\n\nWrites every file of the store, hidden ones included, as one JSON document: {\"format\": \"claude-memory-export\", \"version\": 1, \"files\": [{\"path\", \"text\" | \"base64\"}]}."
        }
        "import" => {
            "Usage: claude-memory --root DIR import FILE [--overwrite]\n\nLoads a JSON export. Every path is validated first; nothing is written if any is invalid. Existing files are refused unless --overwrite."
        }
        "prune" => {
            "Usage: claude-memory --root DIR prune --older-than AGE\n\nRemoves files last written more than AGE ago (AGE: a number followed by d, h, m or s), then directories left empty. \"Used\" means written: reads do not keep a file alive."
        }
        "stats" => {
            "Usage: claude-memory --root DIR stats\n\nPrints the number of files, total bytes, the largest file and the least recently written one."
        }
        _ => return None,
    })
}

/// A usage error: printed with a hint, exit status 2.
struct Usage(String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(args) {
        Ok(code) => code,
        Err(Usage(message)) => {
            eprintln!("claude-memory: {message}\nRun `claude-memory --help` for usage.");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<ExitCode, Usage> {
    let mut root = std::env::var("CLAUDE_MEMORY_DIR").ok();
    let mut config = Config::default();
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| Usage(format!("{name} needs a value")))
        };
        match arg.as_str() {
            "-h" | "--help" if rest.is_empty() => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            "--root" => root = Some(value("--root")?),
            "--view-limit" => {
                config.view_output_limit = number(&value("--view-limit")?, "--view-limit")? as usize
            }
            "--max-file-size" => {
                config.max_file_size = number(&value("--max-file-size")?, "--max-file-size")?
            }
            "--max-store-size" => {
                config.max_store_size =
                    Some(number(&value("--max-store-size")?, "--max-store-size")?)
            }
            _ => rest.push(arg),
        }
    }
    let Some((command, args)) = rest.split_first() else {
        return Err(Usage("no command given".into()));
    };
    if command == "help" {
        match args.first() {
            None => println!("{USAGE}"),
            Some(c) => println!(
                "{}",
                command_help(c).ok_or_else(|| Usage(format!("unknown command `{c}`")))?
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(help) = command_help(command) else {
        return Err(Usage(format!("unknown command `{command}`")));
    };
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{help}");
        return Ok(ExitCode::SUCCESS);
    }
    let root = root.ok_or_else(|| Usage("--root DIR (or CLAUDE_MEMORY_DIR) is required".into()))?;
    let store = match FilesystemStore::open(&root) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("claude-memory: cannot open {root}: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let tool = MemoryTool::with_config(store, config);
    let outcome = match command.as_str() {
        "serve" => no_args(args).and_then(|()| serve(&tool)),
        "view" => view(&tool, args),
        "export" => export(&tool, args),
        "import" => import(&tool, args),
        "prune" => prune(&tool, args),
        "stats" => no_args(args).and_then(|()| stats(&tool)),
        _ => return Err(Usage(format!("unknown command `{command}`"))),
    };
    match outcome {
        Ok(code) => Ok(code),
        Err(Failure::Usage(u)) => Err(u),
        Err(Failure::Failed(message)) => {
            eprintln!("claude-memory: {message}");
            Ok(ExitCode::from(1))
        }
    }
}

enum Failure {
    Usage(Usage),
    Failed(String),
}

impl From<Usage> for Failure {
    fn from(u: Usage) -> Self {
        Failure::Usage(u)
    }
}

fn failed(e: impl std::fmt::Display) -> Failure {
    Failure::Failed(e.to_string())
}

type Outcome = Result<ExitCode, Failure>;

fn number(text: &str, name: &str) -> Result<u64, Usage> {
    text.parse()
        .map_err(|_| Usage(format!("{name} takes a number, not `{text}`")))
}

fn no_args(args: &[String]) -> Result<(), Failure> {
    match args.first() {
        None => Ok(()),
        Some(a) => Err(Usage(format!("unexpected argument `{a}`")).into()),
    }
}

fn serve(tool: &MemoryTool<FilesystemStore>) -> Outcome {
    claude_memory::bridge::serve(tool, io::stdin().lock(), io::stdout().lock()).map_err(failed)?;
    Ok(ExitCode::SUCCESS)
}

fn view(tool: &MemoryTool<FilesystemStore>, args: &[String]) -> Outcome {
    let mut path = None;
    let mut range = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--range" => {
                let r = it
                    .next()
                    .ok_or_else(|| Usage("--range needs START:END".into()))?;
                let (a, b) = r
                    .split_once(':')
                    .ok_or_else(|| Usage(format!("--range takes START:END, not `{r}`")))?;
                let parse = |s: &str| {
                    s.parse::<i64>()
                        .map_err(|_| Usage(format!("--range takes integers, not `{r}`")))
                };
                range = Some([parse(a)?, parse(b)?]);
            }
            _ if path.is_none() => path = Some(a.clone()),
            _ => return Err(Usage(format!("unexpected argument `{a}`")).into()),
        }
    }
    let path = path.ok_or_else(|| Usage("view needs a PATH".into()))?;
    let mut input = json!({"command": "view", "path": path});
    if let Some(r) = range {
        input["view_range"] = json!(r);
    }
    let result = tool.dispatch(&input);
    let text = match result.text() {
        Some(t) => t.to_owned(),
        None => "(an image)".to_owned(),
    };
    if result.is_error {
        eprintln!("{text}");
        return Ok(ExitCode::from(1));
    }
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn export(tool: &MemoryTool<FilesystemStore>, args: &[String]) -> Outcome {
    let output = match args {
        [] => None,
        [flag, file] if flag == "--output" => Some(file),
        _ => return Err(Usage("export takes only [--output FILE]".into()).into()),
    };
    let doc = claude_memory::backup::export(tool.store()).map_err(failed)?;
    let text = serde_json::to_string_pretty(&doc).map_err(failed)?;
    match output {
        None => {
            let mut out = io::stdout().lock();
            writeln!(out, "{text}").map_err(failed)?;
        }
        Some(file) => {
            std::fs::write(file, text + "\n")
                .map_err(|e| failed(format!("cannot write {file}: {e}")))?;
            let n = doc["files"].as_array().map_or(0, Vec::len);
            eprintln!("exported {n} files to {file}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn import(tool: &MemoryTool<FilesystemStore>, args: &[String]) -> Outcome {
    let (file, overwrite) = match args {
        [file] => (file, false),
        [file, flag] | [flag, file] if flag == "--overwrite" => (file, true),
        _ => return Err(Usage("import takes FILE [--overwrite]".into()).into()),
    };
    let text =
        std::fs::read_to_string(file).map_err(|e| failed(format!("cannot read {file}: {e}")))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| failed(format!("{file} is not JSON: {e}")))?;
    let n = claude_memory::backup::import(tool.store(), &doc, overwrite).map_err(failed)?;
    println!("imported {n} files");
    Ok(ExitCode::SUCCESS)
}

/// `30d`, `12h`, `45m`, `90s`.
fn parse_age(text: &str) -> Option<Duration> {
    let (n, unit) = text.split_at(text.len().checked_sub(1)?);
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "d" => n.checked_mul(86_400)?,
        "h" => n.checked_mul(3_600)?,
        "m" => n.checked_mul(60)?,
        "s" => n,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

fn prune(tool: &MemoryTool<FilesystemStore>, args: &[String]) -> Outcome {
    let age = match args {
        [flag, age] if flag == "--older-than" => parse_age(age).ok_or_else(|| {
            Usage(format!(
                "--older-than takes an age like 30d, 12h, 45m or 90s, not `{age}`"
            ))
        })?,
        _ => return Err(Usage("prune needs --older-than AGE".into()).into()),
    };
    let report =
        claude_memory::expiry::expire(tool.store(), age, SystemTime::now()).map_err(failed)?;
    for (path, size) in &report.removed_files {
        println!("removed {} ({})", path.normalized(), human_size(*size));
    }
    for dir in &report.removed_dirs {
        println!("removed empty directory {}", dir.normalized());
    }
    println!(
        "removed {} files ({}) and {} directories; kept {} files",
        report.removed_files.len(),
        human_size(report.removed_bytes()),
        report.removed_dirs.len(),
        report.kept_files
    );
    Ok(ExitCode::SUCCESS)
}

fn stats(tool: &MemoryTool<FilesystemStore>) -> Outcome {
    struct Totals {
        files: u64,
        bytes: u64,
        largest: Option<(u64, String)>,
        oldest: Option<(SystemTime, String)>,
    }
    let mut t = Totals {
        files: 0,
        bytes: 0,
        largest: None,
        oldest: None,
    };
    walk(
        tool.store(),
        &MemoryPath::root(),
        Order::AsListed,
        &mut |step| {
            if let Step::File { dir, entry, .. } = step {
                t.files += 1;
                t.bytes += entry.len;
                let path = || format!("{}/{}", dir.normalized(), entry.name);
                if t.largest.as_ref().is_none_or(|(n, _)| entry.len > *n) {
                    t.largest = Some((entry.len, path()));
                }
                if let Some(m) = entry.modified
                    && t.oldest.as_ref().is_none_or(|(o, _)| m < *o)
                {
                    t.oldest = Some((m, path()));
                }
            }
            Ok(Flow::Continue)
        },
    )
    .map_err(failed)?;
    println!("files: {}", t.files);
    println!("bytes: {} ({})", t.bytes, human_size(t.bytes));
    match &t.largest {
        Some((n, p)) => println!("largest: {p} ({})", human_size(*n)),
        None => println!("largest: -"),
    }
    match &t.oldest {
        Some((m, p)) => {
            let age = SystemTime::now()
                .duration_since(*m)
                .unwrap_or_default()
                .as_secs();
            println!("oldest: {p} (last written {} ago)", format_age(age));
        }
        None => println!("oldest: -"),
    }
    Ok(ExitCode::SUCCESS)
}

fn format_age(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h", secs / 3_600),
        _ => format!("{}d", secs / 86_400),
    }
}
