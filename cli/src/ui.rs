//! `ui`: the review page (`claude_memory::ui`) over the store, with its
//! history where it keeps one, in a browser.

use std::net::SocketAddr;
use std::path::PathBuf;

use claude_memory::url::HistoryLogs;

use crate::output::Outcome;
use crate::store::Stack;

/// `ui`'s own options.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// Listen on ADDR [default: 127.0.0.1, a free port]; any address but
    /// loopback needs --token-file
    #[arg(long, value_name = "ADDR", value_parser = crate::mcp::parse_addr)]
    pub http: Option<SocketAddr>,
    /// Tokens, one a line (the mcp command's format, docs/mcp.md, without
    /// tenants): a browser signs in with one
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Show everything, change nothing
    #[arg(long)]
    pub read_only: bool,
    /// A Host name allowed besides loopback ones and ADDR, such as a TLS
    /// proxy's (repeatable)
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
}

/// Who the history records for a change made in the page: `ui:USER`.
pub fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_default();
    let user: String = user
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    match user.is_empty() {
        true => "ui".to_owned(),
        false => format!("ui:{user}"),
    }
}

#[cfg(not(feature = "ui"))]
pub fn run(_: &Stack, _: HistoryLogs, _: UiArgs) -> Outcome {
    Err(crate::output::Failure::Usage(
        "this claude-memory was built without the ui feature (reinstall with the default features: cargo install claude-memory-cli)".into(),
    ))
}

/// Serves the page until SIGINT or SIGTERM; its URL is the first line
/// printed.
#[cfg(feature = "ui")]
pub fn run(stack: &Stack, history: HistoryLogs, args: UiArgs) -> Outcome {
    use claude_memory::mcp::{Tokens, shutdown_signal};
    use claude_memory::ui::{ReviewServer, UiOptions};

    use crate::output::{Failure, failed, out};
    use crate::store::Access;

    let tokens = match &args.token_file {
        Some(file) => Some(
            Tokens::from_file(file)
                .map_err(|e| Failure::Usage(format!("--token-file {}: {e}", file.display())))?,
        ),
        None => None,
    };
    let addr = args
        .http
        .unwrap_or(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)));
    let access = match args.read_only {
        true => Access::Read,
        false => Access::Change,
    };
    let backend = stack.review(access, history)?;
    let mut options = UiOptions::default();
    options.tokens = tokens;
    options.read_only = args.read_only;
    options.allowed_hosts = args.allow_host;
    options.title = match stack.tenant {
        Some(t) => format!("{} (tenant {})", stack.url.shown(), t.as_str()),
        None => stack.url.shown(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format_args!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let page = ReviewServer::bind(addr, backend, options)
            .await
            .map_err(|e| match e {
                claude_memory::ui::UiError::Bind { .. } => failed(e),
                e => Failure::Usage(e.to_string()),
            })?;
        out(page.url())?;
        eprintln!(
            "claude-memory ui: the review page of {}{}; Ctrl-C stops it",
            stack.url.shown(),
            if args.read_only { " (read-only)" } else { "" }
        );
        page.serve(shutdown_signal()).await.map_err(failed)
    })
}
