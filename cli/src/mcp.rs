//! `mcp`: the memory tool served over MCP (`claude_memory::mcp`), on
//! stdio or streamable HTTP, with every store option of the CLI.

use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;

/// The content policy for writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Secrets {
    /// Refuse a write that holds what looks like a secret.
    Reject,
    /// Store it with each secret replaced by a marker.
    Redact,
}

/// `mcp`'s own options.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio
    /// [default ADDR: 127.0.0.1:8765, loopback]
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765",
          value_parser = parse_addr)]
    pub http: Option<SocketAddr>,
    /// Bearer tokens, one a line, each optionally followed by the tenant
    /// it sees (`TOKEN alice`); `#` starts a comment
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve HTTP without a token (only on a loopback address)
    #[arg(long)]
    pub allow_unauthenticated: bool,
    /// A browser Origin allowed besides loopback ones (repeatable)
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// A Host name allowed besides loopback ones and ADDR (repeatable)
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Largest HTTP request body, in bytes [default: 8388608]
    #[arg(long, value_name = "BYTES")]
    pub max_body: Option<usize>,
    /// Sessions open at once [default: 256]
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<NonZeroUsize>,
    /// HTTP requests in flight at once [default: 256]
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<NonZeroUsize>,
    /// Check every write for secrets: reject or redact [default: off]
    #[arg(long, value_name = "POLICY")]
    pub secrets: Option<Secrets>,
}

/// `--http`'s address: `IP:PORT`, `[IPv6]:PORT`, `localhost:PORT` or a
/// bare `PORT` (both loopback, 127.0.0.1), the forms people type.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port = text
        .strip_prefix("localhost:")
        .or_else(|| text.strip_prefix("LOCALHOST:"))
        .unwrap_or(text);
    port.parse::<u16>()
        .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .map_err(|_| {
            format!("expected IP:PORT (127.0.0.1:8765, [::1]:8765, 0.0.0.0:8765), localhost:PORT or PORT, not {text:?}")
        })
}

#[cfg(not(feature = "mcp"))]
pub fn run(
    _: Box<dyn claude_memory::MemoryStore>,
    _: claude_memory::Config,
    _: McpArgs,
) -> crate::output::Outcome {
    Err(crate::output::Failure::Usage(
        "this claude-memory was built without the mcp feature (reinstall with the default features: cargo install claude-memory-cli)"
            .into(),
    ))
}

#[cfg(feature = "mcp")]
pub use serve::run;

#[cfg(feature = "mcp")]
mod serve {
    use std::sync::Arc;

    use claude_memory::mcp::{HttpOptions, HttpServer, MemoryServer, Tokens, shutdown_signal};
    use claude_memory::policy::SecretDetector;
    use claude_memory::{Config, MemoryStore, MemoryTool, TenantStore};

    use super::{McpArgs, Secrets};
    use crate::output::{Failure, Outcome, failed};

    type Base = Arc<Box<dyn MemoryStore>>;

    fn tool<S: MemoryStore>(store: S, config: &Config, secrets: Option<Secrets>) -> MemoryTool<S> {
        let tool = MemoryTool::with_config(store, config.clone());
        match secrets {
            Some(Secrets::Reject) => tool.with_policy(SecretDetector::reject()),
            Some(Secrets::Redact) => tool.with_policy(SecretDetector::redact()),
            None => tool,
        }
    }

    /// Serves `store`, opened as every subcommand opens it (`--tenant`, a
    /// key, and the history, labelled `claude-memory-mcp`, each version's
    /// call the client's name and session). A token's tenant sees
    /// `/memories/TENANT` of that store (`TenantStore`).
    pub fn run(store: Box<dyn MemoryStore>, config: Config, args: McpArgs) -> Outcome {
        let tokens = match &args.token_file {
            Some(file) => Some(
                Tokens::from_file(file)
                    .map_err(|e| Failure::Usage(format!("--token-file {}: {e}", file.display())))?,
            ),
            None => None,
        };
        if args.http.is_none() && (tokens.is_some() || args.allow_unauthenticated) {
            return Err(Failure::Usage(
                "--token-file and --allow-unauthenticated apply to --http only (stdio is the client's own pipe)".into(),
            ));
        }
        let base: Base = Arc::new(store);
        let secrets = args.secrets;
        let server = MemoryServer::new(tool(Arc::clone(&base), &config, secrets));
        let server = if tokens.as_ref().is_some_and(Tokens::has_tenants) {
            let base = Arc::clone(&base);
            let config = config.clone();
            server.with_tenants(move |t| {
                tool(
                    TenantStore::new(Arc::clone(&base), t.clone()),
                    &config,
                    secrets,
                )
            })
        } else {
            server
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| failed(format_args!("cannot start the runtime: {e}")))?;
        let Some(addr) = args.http else {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                // Someone ran it by hand to see if it works.
                eprintln!(
                    "claude-memory mcp: serving MCP on stdin/stdout; an MCP client starts this command itself (claude mcp add ... -- claude-memory --store ... mcp), or add --http for a server"
                );
            }
            return runtime
                .block_on(claude_memory::mcp::serve_stdio(server))
                .map_err(failed);
        };
        let mut options = HttpOptions::default();
        options.tokens = tokens;
        options.allow_unauthenticated = args.allow_unauthenticated;
        options.allowed_origins = args.allow_origin;
        options.allowed_hosts = args.allow_host;
        if let Some(n) = args.max_body {
            options.max_body_bytes = n;
        }
        if let Some(n) = args.max_sessions {
            options.max_sessions = n.get();
        }
        if let Some(n) = args.max_in_flight {
            options.max_in_flight = n.get();
        }
        runtime.block_on(async move {
            let http = HttpServer::bind(addr, server, options)
                .await
                .map_err(|e| Failure::Usage(e.to_string()))?;
            let bound = http.local_addr().map_err(failed)?;
            // The one line a supervisor or a test waits for (stderr: stdout
            // stays clean).
            eprintln!("claude-memory mcp: serving http://{bound}/mcp");
            http.serve(shutdown_signal()).await.map_err(failed)
        })
    }
}
