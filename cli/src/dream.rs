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
    use claude_memory::runner::Request;
    use claude_memory::url::{HistoryLogs, StoreUrl};
    use claude_memory::{Config, InMemoryStore, MemoryStore};
    use serde_json::Value;

    use super::DreamArgs;
    use crate::output::{Failure, Outcome, failed, out};
    use crate::store::{Access, Stack};

    /// Retries of a request answered 429, 5xx or 529.
    const RETRIES: u32 = 4;

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
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(600))
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
                let text = answer
                    .text()
                    .map_err(|e| format!("the Messages API: {e}"))?;
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
            let text = std::fs::read_to_string(file)
                .map_err(|e| Failure::Usage(format!("--sessions {}: {e}", file.display())))?;
            let session = read_session(&file.display().to_string(), &text)
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

    /// Runs the dream on `store`; the summary printed.
    fn dream_on(
        job: &Dream,
        store: &dyn MemoryStore,
        config: &Config,
    ) -> Result<dream::Summary, Failure> {
        let messages = Messages::from_env()?;
        job.run(store, config.clone(), |r| messages.send(r), report)
            .map_err(|e| failed(format_args!("the dream stopped: {e}")))
    }

    pub fn run(
        stack: &Stack,
        config: &Config,
        _history: HistoryLogs,
        args: DreamArgs,
        id: &str,
    ) -> Outcome {
        let job = job(&args)?;
        let shown = stack.url.shown();
        if args.dry_run {
            let input = stack.open(Access::Read, HistoryLogs::IfKept)?;
            let scratch = InMemoryStore::new();
            dream::copy(&*input, &scratch).map_err(failed)?;
            let summary = dream_on(&job, &scratch, config)?;
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
                out(diff.trim_end())?;
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
            let history = stack.history(Access::Change).map_err(|_| {
                Failure::Usage(format!(
                    "--in-place needs a store that keeps a history (its changes are reverted by actor): {shown} keeps none; start one with --history, or dream with --output"
                ))
            })?;
            let summary = dream_on(&job, &history, config)?;
            return out(format_args!(
                "{summary}every change is dream:{id}'s: undo them with claude-memory --store {shown} revert --actor dream:{id}"
            ));
        }
        let output = args.output.clone().unwrap_or_else(|| format!("dream-{id}"));
        let input = stack.open(Access::Read, HistoryLogs::IfKept)?;
        let out_url = crate::store::from_args(Some(&output), None)?;
        let out_stack = Stack {
            url: &out_url,
            tenant: None,
            ring: None,
            label: stack.label,
        };
        let target = out_stack.open(Access::Create, HistoryLogs::IfKept)?;
        let copied =
            dream::copy(&*input, &*target).map_err(|e| failed(format_args!("{output}: {e}")))?;
        eprintln!("dream: copied {copied} files into {output}");
        let summary = dream_on(&job, &*target, config)?;
        out(format_args!(
            "{summary}the input {shown} was not written; review the result with claude-memory --store {output} ui"
        ))
    }
}
