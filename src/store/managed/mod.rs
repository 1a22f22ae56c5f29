//! `ManagedStore`: memories in one of Claude Managed Agents' memory stores,
//! a service of Anthropic's API (feature `managed`).
//!
//! - `api`: the HTTP requests, their retries and failures.
//! - `ops`: the [`MemoryStore`](crate::MemoryStore) primitives.
//! - `tree`: directories over the service's flat paths, and their markers.
//! - `lease`: the lock memory that serializes directory moves and
//!   size-limited writes, and finishes a move a killed process left.
//! - `versions`: the service's own history of each memory, as the one
//!   versions API ([`Versions`](crate::history::Versions)).

pub(crate) mod api;
mod lease;
pub(crate) mod ops;
pub(crate) mod tree;
mod versions;

pub(crate) use versions::{ServiceVersion, TOO_MANY};

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{Api, Fail, Retry};

use crate::path::MemoryPath;
use crate::store::runtime::Io;
use crate::store::{RemoteCause, StoreError, StoreResult};

/// The endpoint when `ANTHROPIC_BASE_URL` is not set.
const DEFAULT_BASE: &str = "https://api.anthropic.com";

/// A store over one of Claude Managed Agents' memory stores, so a Rust
/// agent on the Messages API, Claude Code or Claude Desktop (through this
/// crate's MCP server) and a managed agent share one memory.
///
/// `/memories/x/y.md` is the memory store's `/x/y.md`. Every edit and
/// delete carries the service's `content_sha256` precondition: a 409
/// makes the store read again and redo the edit on what it finds, so no
/// edit is lost and none overwrites a change it did not see. The service
/// keeps UTF-8 text only, at most 102,400 bytes a memory, 20 segments a
/// path and 2,000 memories a store: use it with
/// [`Config::managed_memory_stores`](crate::Config::managed_memory_stores),
/// which refuses what would not fit before any request. See
/// `docs/managed.md` for the threat model and what a killed directory
/// move leaves.
///
/// Its methods block on the network (as every store's do): from async
/// code, use it through `AsyncMemoryTool` (feature
/// `tokio`) or `spawn_blocking`, and open it the same way.
///
/// Cheap to clone: clones share the HTTP client and its I/O thread.
#[derive(Clone)]
pub struct ManagedStore {
    pub(crate) api: Api,
    /// The memory store's id (`memstore_…`).
    pub(crate) id: String,
    /// Known to be archived (when opened, archived by this handle, or
    /// learnt from a refusal; it cannot be undone): every write is refused
    /// before its request is sent.
    pub(crate) archived: Arc<AtomicBool>,
}

impl fmt::Debug for ManagedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key; the store's id is not secret but stays out too.
        f.debug_struct("ManagedStore").finish_non_exhaustive()
    }
}

impl ManagedStore {
    /// Opens memory store `id` (`memstore_…`), with the key from
    /// `ANTHROPIC_API_KEY` and the endpoint from `ANTHROPIC_BASE_URL`, as
    /// Anthropic's SDKs read them, and the workspace from
    /// `ANTHROPIC_WORKSPACE_ID` if it is set.
    pub fn open(id: &str) -> Result<ManagedStore, ManagedError> {
        ManagedStore::builder(id).open()
    }

    /// Archives the memory store, as the Console or the API's
    /// `POST /v1/memory_stores/{id}/archive` do: its memories stay
    /// readable, and every write is refused from then on with an error
    /// that says so. Archiving cannot be undone; a store already archived
    /// is left as it is.
    pub fn archive(&self) -> StoreResult<()> {
        let root = MemoryPath::root();
        let info = self.api.archive().map_err(|e| ops::fail(e, &root))?;
        if info.archived_at.is_none() {
            // Answered, and not archived: the service did not do it.
            return Err(StoreError::Invalid {
                path: root,
                reason: "the memory store answered the archive as not archived",
            });
        }
        self.archived.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Settings for memory store `id`.
    pub fn builder(id: &str) -> ManagedBuilder {
        ManagedBuilder {
            id: id.to_owned(),
            key: None,
            base: None,
            workspace: None,
            retry: Retry {
                retries: 4,
                max_wait: Duration::from_secs(10),
                timeout: Duration::from_secs(30),
            },
        }
    }
}

/// How to open a [`ManagedStore`]: key, endpoint, workspace, retries.
pub struct ManagedBuilder {
    id: String,
    key: Option<String>,
    base: Option<String>,
    workspace: Option<String>,
    retry: Retry,
}

impl fmt::Debug for ManagedBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedBuilder")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl ManagedBuilder {
    /// The API key, in place of `ANTHROPIC_API_KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The API's base URL, in place of `ANTHROPIC_BASE_URL` (by default
    /// `https://api.anthropic.com`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base = Some(url.into());
        self
    }

    /// The workspace header (`anthropic-workspace-id`), for a key that can
    /// act on more than one workspace, in place of `ANTHROPIC_WORKSPACE_ID`.
    pub fn workspace(mut self, id: impl Into<String>) -> Self {
        self.workspace = Some(id.into());
        self
    }

    /// Retries of a request answered with 429 or 5xx (4 by default), each
    /// after the wait the server asks for (`retry-after`) or a doubling
    /// backoff from 0.5 s, never longer than `max_wait` (10 s by default).
    /// Past them the model reads SPEC §4's unreachable answer.
    pub fn retries(mut self, retries: u32, max_wait: Duration) -> Self {
        self.retry.retries = retries;
        self.retry.max_wait = max_wait;
        self
    }

    /// Each request's deadline (30 s by default).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.retry.timeout = timeout;
        self
    }

    /// Checks that the memory store exists and the key may use it, and
    /// finishes a directory move that a killed process left half done.
    pub fn open(self) -> Result<ManagedStore, ManagedError> {
        let key = match self.key {
            Some(key) => key,
            None => std::env::var("ANTHROPIC_API_KEY").map_err(|_| ManagedError::NoKey)?,
        };
        // A header value: visible ASCII only (a pasted newline, say).
        if key.trim().is_empty() || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ManagedError::NoKey);
        }
        let base = match self.base {
            Some(base) => base,
            None => std::env::var("ANTHROPIC_BASE_URL")
                .ok()
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| DEFAULT_BASE.into()),
        };
        let parsed = reqwest::Url::parse(&base).map_err(|_| ManagedError::BadUrl(base.clone()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(ManagedError::BadUrl(base));
        }
        let workspace = self
            .workspace
            .or_else(|| std::env::var("ANTHROPIC_WORKSPACE_ID").ok())
            .filter(|w| !w.is_empty());
        if !self.id.starts_with("memstore_") || self.id.contains(['/', '?', '#']) {
            return Err(ManagedError::BadId);
        }
        // reqwest is built on rustls without a provider of its own (one
        // provider, ring, in every feature combination).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| ManagedError::Runtime(std::io::Error::other(e)))?;
        let io = Io::shared().map_err(ManagedError::Runtime)?;
        let api = Api::new(http, io, &base, &self.id, key, workspace, self.retry);
        let id = self.id;
        let unreachable = |cause| ManagedError::Unreachable {
            endpoint: base.clone(),
            cause,
        };
        let archived = match api.store() {
            Ok(info) => info.archived_at.is_some(),
            Err(Fail::NotFound) => return Err(ManagedError::NoSuchStore { endpoint: base }),
            Err(Fail::Unreachable(RemoteCause::AccessDenied)) => {
                return Err(ManagedError::AccessDenied);
            }
            Err(Fail::Unreachable(cause) | Fail::Unknown(cause)) => return Err(unreachable(cause)),
            Err(Fail::Conflict | Fail::Refused) => {
                return Err(unreachable(RemoteCause::Unavailable));
            }
        };
        let store = ManagedStore {
            api,
            id,
            archived: Arc::new(AtomicBool::new(archived)),
        };
        if !archived {
            store.recover();
        }
        Ok(store)
    }
}

/// Why a [`ManagedStore`] did not open. Never holds the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagedError {
    /// No API key, or one with spaces or control characters in it: set
    /// `ANTHROPIC_API_KEY` or call [`ManagedBuilder::api_key`].
    #[error("no usable API key: set ANTHROPIC_API_KEY (visible characters only)")]
    NoKey,
    /// Not a memory store id (`memstore_…`).
    #[error("not a memory store id (memstore_…)")]
    BadId,
    /// `ANTHROPIC_BASE_URL` (or [`ManagedBuilder::base_url`]) is not an
    /// `http://` or `https://` URL.
    #[error("`{0}` is not an http:// or https:// URL (ANTHROPIC_BASE_URL)")]
    BadUrl(String),
    /// The service answered that no such memory store exists for this key.
    #[error(
        "no such memory store at {endpoint} for this key: check the id, the key's workspace (ANTHROPIC_WORKSPACE_ID), and that ANTHROPIC_BASE_URL ends before /v1"
    )]
    NoSuchStore {
        /// The API's base URL.
        endpoint: String,
    },
    /// The service refused the key.
    #[error(
        "the API refused the key: check ANTHROPIC_API_KEY (and, for a key of several workspaces, ANTHROPIC_WORKSPACE_ID)"
    )]
    AccessDenied,
    /// The service could not be reached.
    #[error("could not reach the memory stores API at {endpoint} ({cause})")]
    Unreachable {
        /// The API's base URL.
        endpoint: String,
        /// Why.
        cause: RemoteCause,
    },
    /// The store's I/O thread could not start.
    #[error("could not start the store's I/O thread: {0}")]
    Runtime(#[source] std::io::Error),
}
