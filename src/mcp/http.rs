//! [`HttpServer`]: the memory tool over MCP's streamable HTTP transport at
//! `http://ADDR/mcp`, safe by default: loopback unless told otherwise,
//! bearer tokens required (or, on loopback only, explicitly waived),
//! `Host` and `Origin` checked against DNS rebinding, bodies, sessions and
//! requests in flight bounded, and a graceful shutdown that finishes the
//! calls in flight.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::mcp::MemoryServer;
use crate::mcp::auth::Tokens;
use crate::mcp::connections;
use crate::mcp::guard::{self, Guards, Posts};
use crate::mcp::sessions::Sessions;

/// How the HTTP server is bounded and who may use it. The defaults are
/// safe: tokens required, loopback `Origin`s only, 8 MiB bodies (a 1 MiB
/// file whose every character JSON-escapes to six) that must arrive
/// within 60 s, request headers within 10 s (also the longest a
/// connection may sit idle between requests), 1,024 connections (file
/// descriptors stay for the store), 256 sessions idle for at most 5
/// minutes, 256 requests in flight (each token getting its share of
/// sessions and requests), 30 s for calls in flight to finish on
/// shutdown. Together they hold 100 clients on one machine, sharing a
/// token or with one each (`cargo bench --bench clients`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The accepted tokens; `None` serves without a token, which needs
    /// `allow_unauthenticated` and a loopback address.
    pub tokens: Option<Tokens>,
    /// Serve without tokens (loopback only).
    pub allow_unauthenticated: bool,
    /// Browser `Origin`s allowed besides loopback ones (exact match, such
    /// as `https://app.example.com`).
    pub allowed_origins: Vec<String>,
    /// `Host` names allowed besides loopback ones and the bound address
    /// (a public server's own name).
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// Sessions open at once (more: 503). The default, 256, holds 100
    /// clients with a token each (2 sessions each) or sharing one; an idle
    /// session costs about 50 KiB.
    pub max_sessions: usize,
    /// Requests in flight at once, streamed responses included (more: 503).
    /// The default, 256, lets 100 clients sharing one token each have a
    /// call and a notification in flight. A request holds its body while
    /// it runs: a tool call is a few KiB, so 256 cost a few MiB, and at
    /// most `max_in_flight × max_body_bytes` (2 GiB) if every one sends
    /// the largest body allowed at once: lower either on a small machine.
    pub max_in_flight: usize,
    /// A session unused this long is closed.
    pub session_idle: Duration,
    /// TCP connections open at once; more wait to be accepted. Never less
    /// than `max_sessions + max_in_flight + 64`, so listening streams and
    /// requests in flight cannot hold every connection.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, or sit
    /// idle between requests on a kept-alive connection (then it is
    /// closed).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body (longer: 408).
    pub body_timeout: Duration,
    /// How long a shutdown waits for calls in flight.
    pub shutdown_grace: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            tokens: None,
            allow_unauthenticated: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: 8 * 1024 * 1024,
            max_sessions: 256,
            max_in_flight: 256,
            session_idle: Duration::from_secs(300),
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl HttpOptions {
    /// Requires one of `tokens` on every request.
    pub fn with_tokens(mut self, tokens: Tokens) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Serves without tokens (refused unless the address is loopback).
    pub fn allow_unauthenticated(mut self) -> Self {
        self.allow_unauthenticated = true;
        self
    }
}

/// Why the HTTP server would not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// No tokens and no `allow_unauthenticated`.
    #[error(
        "no token file: give one (--token-file) or, on a loopback address only, --allow-unauthenticated"
    )]
    NoTokens,
    /// `allow_unauthenticated` on an address other machines can reach.
    #[error(
        "serving without tokens is allowed only on a loopback address (127.0.0.1, ::1), not {0}"
    )]
    UnauthenticatedNotLoopback(SocketAddr),
    /// A token is mapped to a tenant but the server was built without
    /// [`MemoryServer::with_tenants`]: that token would see every tenant.
    #[error(
        "a token is mapped to a tenant, but the server has no tenant stores (MemoryServer::with_tenants)"
    )]
    TenantsNotServed,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// A bound, not yet serving, HTTP server.
///
/// ```no_run
/// use claude_memory::mcp::{HttpOptions, HttpServer, MemoryServer, Tokens, shutdown_signal};
/// use claude_memory::{MemoryTool, SqliteStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let server = MemoryServer::new(MemoryTool::new(SqliteStore::open("memory.db")?));
/// let options = HttpOptions::default().with_tokens(Tokens::from_file("tokens".as_ref())?);
/// let http = HttpServer::bind("127.0.0.1:8765".parse()?, server, options).await?;
/// http.serve(shutdown_signal()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HttpServer {
    listener: TcpListener,
    server: MemoryServer,
    options: HttpOptions,
}

impl HttpServer {
    /// Checks the options against `addr` and binds it.
    pub async fn bind(
        addr: SocketAddr,
        server: MemoryServer,
        options: HttpOptions,
    ) -> Result<HttpServer, HttpError> {
        if options.tokens.as_ref().is_some_and(Tokens::has_tenants) && !server.serves_tenants() {
            return Err(HttpError::TenantsNotServed);
        }
        if options.tokens.is_none() {
            if !options.allow_unauthenticated {
                return Err(HttpError::NoTokens);
            }
            if !addr.ip().is_loopback() {
                return Err(HttpError::UnauthenticatedNotLoopback(addr));
            }
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        Ok(HttpServer {
            listener,
            server,
            options,
        })
    }

    /// The address bound (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, then stops taking connections,
    /// lets the calls in flight finish and their answers go out (up to
    /// `shutdown_grace`), closes every session and returns.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let HttpServer {
            listener,
            server,
            options,
        } = self;
        let addr = listener.local_addr()?;
        let cancel = CancellationToken::new();
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
        hosts.extend(options.allowed_hosts.iter().cloned());
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(options.session_idle);
        let sessions = Arc::new(sessions);
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_max_request_body_bytes(options.max_body_bytes)
            .with_cancellation_token(cancel.child_token());
        let factory_server = server.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory_server.clone()),
            Arc::clone(&sessions),
            config,
        );
        let posts = Arc::new(Posts::default());
        let holders = options.tokens.as_ref().map_or(1, Tokens::len);
        let guards = Arc::new(Guards {
            tokens: options.tokens.clone(),
            allowed_origins: options.allowed_origins.clone(),
            permits: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            sessions: Arc::new(Sessions::new(
                sessions,
                options.max_sessions,
                options.max_in_flight,
                holders,
            )),
            posts: Arc::clone(&posts),
            max_body_bytes: options.max_body_bytes,
            body_timeout: options.body_timeout,
        });
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            // A client given http://ADDR or http://ADDR/ instead of /mcp.
            .fallback(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    "Not Found: the MCP endpoint is /mcp",
                )
            })
            .layer(axum::middleware::from_fn_with_state(guards, guard::check));

        // Room for every session's listening stream and every request in
        // flight, and then some: held streams never take the last slot.
        let floor = options
            .max_sessions
            .saturating_add(options.max_in_flight)
            .saturating_add(64);
        let open = connections::accept(
            listener,
            router,
            options.max_connections.max(floor),
            options.header_timeout,
            shutdown,
        )
        .await;
        // Stop taking requests (idle connections close); let the calls in
        // flight finish and their answers be sent before the streams are
        // cut; then end every session and, soon after, every connection
        // still open (a client that never finished its request).
        open.stop_taking();
        let _ = tokio::time::timeout(options.shutdown_grace, async {
            server.calls_finished().await;
            posts.finished().await;
        })
        .await;
        cancel.cancel();
        open.close(Duration::from_secs(2)).await;
        Ok(())
    }
}
