//! The review page (feature `ui`): a local web page over a store and its
//! history, to see, diff, revert and redact what a model remembered.
//!
//! Every view is a plain URL and every change a plain HTML form that
//! works with JavaScript off; the page's one script only adds
//! conveniences. `docs/ui.md` has its threat model.
//!
//! - [`ReviewServer`]: binds, checks the options, serves.
//! - `guard.rs`: who may ask (`Host`, `Origin`, the token's cookie), the
//!   anti-forgery tokens of the forms, and the headers every answer
//!   carries (a strict Content-Security-Policy).
//! - `pages.rs`: the views (browse, search, changes, a version, a diff,
//!   statistics); `actions.rs`: each change, shown before it is made;
//!   `diff.rs`: unified and side-by-side diffs with changed words marked;
//!   `layout.rs`: the page around them.
//!
//! ```no_run
//! use claude_memory::ui::{Backend, ReviewServer, UiOptions};
//! use claude_memory::FilesystemStore;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = FilesystemStore::open("./memory")?;
//! let ui = ReviewServer::bind("127.0.0.1:0".parse()?, Backend::Plain(Box::new(store)), UiOptions::default()).await?;
//! println!("{}", ui.url());
//! ui.serve(claude_memory::mcp::shutdown_signal()).await?;
//! # Ok(()) }
//! ```

mod actions;
mod diff;
mod guard;
mod layout;
mod pages;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::history::Versions;
use crate::mcp::Tokens;
use crate::store::MemoryStore;

/// What the page shows: a store, or a store with its history (a
/// `HistoryStore`, or a managed memory store's own versions).
pub enum Backend {
    /// A store without history: browse, search and edit.
    Plain(Box<dyn MemoryStore>),
    /// A store with its versions: everything, changes recorded.
    History(Box<dyn Versions + Send + Sync>),
}

impl Backend {
    /// The live store.
    pub(crate) fn store(&self) -> &dyn MemoryStore {
        match self {
            Backend::Plain(store) => store.as_ref(),
            Backend::History(versions) => versions.live(),
        }
    }

    /// The history, if the store keeps one.
    pub(crate) fn versions(&self) -> Option<&(dyn Versions + Send + Sync)> {
        match self {
            Backend::Plain(_) => None,
            Backend::History(versions) => Some(versions.as_ref()),
        }
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Plain(_) => "Backend::Plain",
            Backend::History(_) => "Backend::History",
        })
    }
}

/// Who may use the page and what it may do.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct UiOptions {
    /// The accepted tokens (the MCP server's token file format): needed on
    /// any address but loopback. A browser gives one once, on the page's
    /// sign-in form, and then holds a cookie.
    pub tokens: Option<Tokens>,
    /// Show everything, change nothing: no form that changes the store is
    /// shown, and every change is refused.
    pub read_only: bool,
    /// `Host` names allowed besides loopback ones and the bound address
    /// (the page's own name behind a proxy).
    pub allowed_hosts: Vec<String>,
    /// What the page calls itself in its title (a store's name).
    pub title: String,
}

impl UiOptions {
    /// Requires one of `tokens`.
    pub fn with_tokens(mut self, tokens: Tokens) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Shows everything and changes nothing.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }
}

/// Why the page would not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UiError {
    /// A non-loopback address without tokens.
    #[error(
        "the review page on {0}, which other machines can reach, needs a token file (--token-file)"
    )]
    NeedsTokens(SocketAddr),
    /// A token file that maps tokens to tenants: the page serves one store.
    #[error(
        "the review page serves one store: its token file cannot map tokens to tenants (use --tenant)"
    )]
    TenantTokens,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// What every request shares.
pub(crate) struct Ui {
    pub backend: Backend,
    pub options: UiOptions,
    pub guard: guard::Keys,
    /// The address bound, for the `Host` and `Origin` checks.
    pub addr: SocketAddr,
}

/// The review page, bound and not yet serving.
pub struct ReviewServer {
    listener: TcpListener,
    ui: Arc<Ui>,
}

impl std::fmt::Debug for ReviewServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewServer")
            .field("addr", &self.ui.addr)
            .finish_non_exhaustive()
    }
}

impl ReviewServer {
    /// Checks the options against `addr` and binds it.
    pub async fn bind(
        addr: SocketAddr,
        backend: Backend,
        options: UiOptions,
    ) -> Result<ReviewServer, UiError> {
        match &options.tokens {
            None if !addr.ip().is_loopback() => return Err(UiError::NeedsTokens(addr)),
            Some(tokens) if tokens.has_tenants() => return Err(UiError::TenantTokens),
            _ => {}
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| UiError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| UiError::Bind { addr, source })?;
        let guard = guard::Keys::new().map_err(|source| UiError::Bind { addr, source })?;
        let ui = Arc::new(Ui {
            backend,
            options,
            guard,
            addr,
        });
        Ok(ReviewServer { listener, ui })
    }

    /// The page's address, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.ui.addr)
    }

    /// Serves until `shutdown` resolves, then lets the requests in flight
    /// finish (up to 10 s).
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let ui = self.ui;
        let router = Router::new()
            .route("/", get(pages::browse))
            .route("/search", get(pages::search))
            .route("/changes", get(pages::changes))
            .route("/version", get(pages::version))
            .route("/diff", get(pages::diff))
            .route("/stats", get(pages::stats))
            .route("/act/{action}", get(actions::confirm).post(actions::act))
            .route("/login", get(guard::login_page).post(guard::login))
            .route("/assets/ui.css", get(layout::css))
            .route("/assets/ui.js", get(layout::js))
            .fallback(pages::not_found)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&ui),
                guard::check,
            ))
            .layer(axum::extract::DefaultBodyLimit::max(guard::MAX_BODY))
            .with_state(ui);
        let open = crate::mcp::connections::accept(
            self.listener,
            router,
            256,
            Duration::from_secs(10),
            shutdown,
        )
        .await;
        open.stop_taking();
        open.close(Duration::from_secs(10)).await;
        Ok(())
    }
}

/// Runs store work off the async threads; a panic in it is a 500.
pub(crate) async fn blocking<T: Send + 'static>(
    ui: &Arc<Ui>,
    f: impl FnOnce(&Ui) -> T + Send + 'static,
) -> Option<T> {
    let ui = Arc::clone(ui);
    tokio::task::spawn_blocking(move || f(&ui)).await.ok()
}
