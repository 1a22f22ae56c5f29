//! `dream`: a consolidation (`claude_memory::dream`) of the store by a
//! model over the Messages API (`ANTHROPIC_API_KEY`,
//! `ANTHROPIC_BASE_URL`), on a copy (`--output`, by default a new
//! directory), in place on a store with history (`--in-place`: one actor,
//! `dream:ID`, that `revert --actor` undoes), or on a scratch copy whose
//! diff is printed (`--dry-run`).

use std::path::PathBuf;

/// `dream`'s own options.
#[derive(Debug, clap::Args)]
pub struct DreamArgs {
    /// The model (such as claude-sonnet-4-5)
    #[arg(long, value_name = "MODEL")]
    pub model: String,
    /// Past sessions to read as evidence: Messages API transcripts (JSON)
    /// or Claude Code transcripts (JSONL), at most 100
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub sessions: Vec<PathBuf>,
    /// Instructions added to the built-in consolidation prompt
    #[arg(long, value_name = "FILE")]
    pub instructions: Option<PathBuf>,
    /// Where the consolidated memory goes (a new or empty store) [default:
    /// a new directory ./dream-ID]; the input is never written
    #[arg(long, value_name = "STORE", conflicts_with = "in_place")]
    pub output: Option<String>,
    /// Consolidate the store itself (it must keep a history: every change
    /// is the actor dream:ID's, and `revert --actor dream:ID` undoes them)
    #[arg(long)]
    pub in_place: bool,
    /// The most requests to send [default: 30]
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,
    /// The most tokens to spend, input and output [default: 2000000]
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Dream on a scratch copy and print the diff; nothing is written
    #[arg(long, conflicts_with_all = ["in_place", "output"])]
    pub dry_run: bool,
}

/// A dream's id: what names its actor and its default output.
pub fn new_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mixed = nanos ^ (u128::from(std::process::id()) << 64);
    format!("{:08x}", (mixed ^ (mixed >> 32)) as u32)
}

#[cfg(not(feature = "dream"))]
pub fn run(
    _: &crate::store::Stack,
    _: &claude_memory::Config,
    _: claude_memory::url::HistoryLogs,
    _: DreamArgs,
    _: &str,
) -> crate::output::Outcome {
    Err(crate::output::Failure::Usage(
        "this claude-memory was built without the dream feature (reinstall with the default features: cargo install claude-memory-cli)".into(),
    ))
}

#[cfg(feature = "dream")]
pub use job::run;

#[cfg(feature = "dream")]
mod job {
    use std::time::Duration;

    use claude_memory::dream::{self, Dream, read_session};
    use claude_memory::history::escape_text;
    use claude_memory::runner::Request;
    use claude_memory::url::{HistoryLogs, StoreUrl};
    use claude_memory::{Config, InMemoryStore, MemoryStore};
    use serde_json::Value;

    use super::DreamArgs;
    use crate::output::{Failure, Outcome, failed, out};
    use crate::store::{Access, Stack};

    /// Retries of a request answered 429, 5xx or 529.
    const RETRIES: u32 = 4;
    /// The most bytes of one answer read (a message is far smaller).
    const MAX_ANSWER: usize = 32 << 20;

    /// `POST {base}/v1/messages`, retried with backoff on 429 and 5xx.
    struct Messages {
        http: reqwest::blocking::Client,
        url: String,
        key: String,
    }

    impl Messages {
        fn from_env() -> Result<Messages, Failure> {
            let key = std::env::var("ANTHROPIC_API_KEY")
                .ok()
                .filter(|k| !k.trim().is_empty() && k.bytes().all(|b| b.is_ascii_graphic()))
                .ok_or_else(|| {
                    Failure::Usage("dream needs ANTHROPIC_API_KEY (the Messages API's key)".into())
                })?;
            let base = std::env::var("ANTHROPIC_BASE_URL")
                .ok()
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| "https://api.anthropic.com".into());
            let _ = rustls::crypto::ring::default_provider().install_default();
            // No redirect is followed: one to another host would carry the
            // key (x-api-key is not a header a redirect drops) and the memory.
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(600))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| failed(format_args!("cannot start an HTTP client: {e}")))?;
            Ok(Messages {
                http,
                url: format!("{}/v1/messages", base.trim_end_matches('/')),
                key,
            })
        }

        fn send(&self, request: &Request) -> Result<Value, String> {
            let body = request.body.to_string();
            let mut attempt = 0u32;
            loop {
                let mut call = self
                    .http
                    .post(&self.url)
                    .header("x-api-key", &self.key)
                    .header("anthropic-version", "2023-06-01")
                    .header("content-type", "application/json")
                    .body(body.clone());
                if let Some(beta) = request.anthropic_beta() {
                    call = call.header("anthropic-beta", beta);
                }
                let answer = call.send().map_err(|e| format!("the Messages API: {e}"))?;
                let status = answer.status().as_u16();
                let wait = answer
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map_or(Duration::from_millis(1000 << attempt.min(5)), |s| {
                        Duration::from_secs_f64(s.min(60.0))
                    });
                // At most MAX_ANSWER bytes of an answer are read.
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(answer, MAX_ANSWER as u64 + 1),
                    &mut bytes,
                )
                .map_err(|e| format!("the Messages API: {e}"))?;
                if bytes.len() > MAX_ANSWER {
                    return Err(format!(
                        "the Messages API answered more than {MAX_ANSWER} bytes"
                    ));
                }
                let text = String::from_utf8_lossy(&bytes).into_owned();
                match status {
                    200..=299 => {
                        return serde_json::from_str(&text).map_err(|_| {
                            "the Messages API answered something other than JSON".to_owned()
                        });
                    }
                    429 | 500..=599 if attempt < RETRIES => {
                        attempt += 1;
                        std::thread::sleep(wait);
                    }
                    _ => {
                        let message = serde_json::from_str::<Value>(&text)
                            .ok()
                            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                            .unwrap_or_default();
                        return Err(format!(
                            "the Messages API answered {status}: {}",
                            claude_memory::history::escape(&message)
                        ));
                    }
                }
            }
        }
    }

    fn job(args: &DreamArgs) -> Result<Dream, Failure> {
        let mut job = Dream::new(args.model.clone());
        if let Some(n) = args.max_turns {
            job.max_turns = n;
        }
        if let Some(n) = args.max_tokens {
            job.max_tokens = n;
        }
        if args.sessions.len() > dream::MAX_SESSIONS {
            return Err(Failure::Usage(format!(
                "at most {} sessions, not {}",
                dream::MAX_SESSIONS,
                args.sessions.len()
            )));
        }
        for file in &args.sessions {
            let name = file.display().to_string();
            let too_large =
                std::fs::metadata(file).is_ok_and(|m| m.len() > dream::MAX_SESSION_BYTES as u64);
            let data = match too_large {
                true => vec![0; dream::MAX_SESSION_BYTES + 1],
                false => std::fs::read(file)
                    .map_err(|e| Failure::Usage(format!("--sessions {name}: {e}")))?,
            };
            let text = dream::session_text(&name, data)
                .map_err(|e| Failure::Usage(format!("--sessions {e}")))?;
            let session = read_session(&name, &text)
                .map_err(|e| Failure::Usage(format!("--sessions {e}")))?;
            job.sessions.push(session);
        }
        if let Some(file) = &args.instructions {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Failure::Usage(format!("--instructions {}: {e}", file.display())))?;
            job.instructions = Some(text);
        }
        Ok(job)
    }

    fn report(call: &dream::Call) {
        eprintln!("dream: {call}");
    }

    /// Runs the dream on `store`; `undo` says, if it stops half-way, what
    /// undoes what it did.
    fn dream_on(
        job: &Dream,
        messages: &Messages,
        store: &dyn MemoryStore,
        config: &Config,
        undo: &str,
    ) -> Result<dream::Summary, Failure> {
        job.run(store, config.clone(), |r| messages.send(r), report)
            .map_err(|e| failed(format_args!("the dream stopped: {e}{undo}")))
    }

    /// Whether `output` (a directory or a SQLite file) would be inside, or
    /// be, the directory store `input`: its writes would land in the input.
    fn inside(input: &StoreUrl, output: &StoreUrl) -> bool {
        let StoreUrl::Dir(input) = input else {
            return false;
        };
        let out = match output {
            StoreUrl::Dir(p) | StoreUrl::Sqlite(p) => p,
            _ => return false,
        };
        let Ok(input) = std::fs::canonicalize(input) else {
            return false;
        };
        // The output may not exist yet: its nearest existing ancestor.
        let absolute = std::path::absolute(out).unwrap_or_else(|_| out.clone());
        let mut probe = absolute.as_path();
        let mut rest = Vec::new();
        loop {
            if let Ok(real) = std::fs::canonicalize(probe) {
                let full = rest.iter().rev().fold(real, |p, c| p.join(c));
                return full.starts_with(&input);
            }
            match (probe.parent(), probe.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    probe = parent;
                }
                _ => return false,
            }
        }
    }

    pub fn run(
        stack: &Stack,
        config: &Config,
        history: HistoryLogs,
        args: DreamArgs,
        id: &str,
    ) -> Outcome {
        let job = job(&args)?;
        // The key first: nothing is copied or opened for a dream that
        // cannot run.
        let messages = Messages::from_env()?;
        let shown = stack.url.shown();
        if args.dry_run {
            let input = stack.open(Access::Read, HistoryLogs::IfKept)?;
            let scratch = InMemoryStore::new();
            dream::copy(&*input, &scratch).map_err(failed)?;
            let summary = dream_on(&job, &messages, &scratch, config, "")?;
            for path in summary
                .changed
                .iter()
                .chain(&summary.created)
                .chain(&summary.deleted)
            {
                let read = |s: &dyn MemoryStore| {
                    claude_memory::MemoryPath::parse(path)
                        .ok()
                        .and_then(|p| s.read(&p, u64::MAX).ok())
                        .map(|f| String::from_utf8_lossy(&f.data).into_owned())
                        .unwrap_or_default()
                };
                let diff = claude_memory::history::unified_diff(
                    &read(&*input),
                    &read(&scratch),
                    path,
                    path,
                );
                // The model wrote it: no byte of it may drive the terminal.
                out(escape_text(diff.trim_end()))?;
            }
            return out(format_args!(
                "{summary}dry run: nothing was written to {shown}"
            ));
        }
        if args.in_place {
            if matches!(stack.url, StoreUrl::Managed(_)) {
                return Err(Failure::Usage(
                    "a managed store's versions are the service's, which cannot be reverted by actor: dream with --output STORE, then review and copy".into(),
                ));
            }
            let store = match history {
                // --history: started here if the store keeps none yet.
                HistoryLogs::Start => stack.open(Access::Change, HistoryLogs::Start)?,
                _ => {
                    // A missing store says so, before whether it keeps a history.
                    drop(stack.base(Access::Read)?);
                    let kept = stack
                        .url
                        .keeps_history(stack.tenant)
                        .map_err(|e| failed(format_args!("{shown}: {e}")))?;
                    if !kept {
                        return Err(Failure::Usage(format!(
                            "--in-place needs a store that keeps a history (its changes are reverted by actor): {shown} keeps none; add --history to start one, or dream with --output"
                        )));
                    }
                    Box::new(stack.history(Access::Change)?)
                }
            };
            let mut undo = format!("claude-memory --store {shown}");
            if let Some(t) = stack.tenant {
                undo.push_str(&format!(" --tenant {}", t.as_str()));
            }
            if stack.ring.is_some() {
                undo.push_str(" (with the same key options)");
            }
            undo.push_str(&format!(" revert --actor dream:{id}"));
            eprintln!("dream: in place as dream:{id}; to undo it: {undo}");
            let summary = dream_on(
                &job,
                &messages,
                &*store,
                config,
                &format!("; what it changed is dream:{id}'s: undo it with {undo}"),
            )?;
            return out(format_args!(
                "{summary}every change is dream:{id}'s: undo them with {undo}"
            ));
        }
        let output = args.output.clone().unwrap_or_else(|| format!("dream-{id}"));
        let out_url = crate::store::from_args(Some(&output), None)?;
        if inside(stack.url, &out_url) {
            return Err(Failure::Usage(format!(
                "--output {output} is inside the store {shown} (or is it): the dream would write its input; give a place outside it"
            )));
        }
        let input = stack.open(Access::Read, HistoryLogs::IfKept)?;
        // The output sealed with the input's keys: an encrypted memory is
        // never dreamed into plain text.
        let out_stack = Stack {
            url: &out_url,
            tenant: None,
            ring: stack.ring,
            label: stack.label,
        };
        let target = out_stack.open(Access::Create, HistoryLogs::IfKept)?;
        let copied =
            dream::copy(&*input, &*target).map_err(|e| failed(format_args!("{output}: {e}")))?;
        eprintln!("dream: copied {copied} files into {output}");
        let summary = dream_on(&job, &messages, &*target, config, "")?;
        out(format_args!(
            "{summary}the input {shown} was not written; review the result with claude-memory --store {output} ui"
        ))
    }
}
