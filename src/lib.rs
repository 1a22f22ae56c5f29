//! A handler for Claude's memory tool (`memory_20250818`), for Rust.
//!
//! Claude's memory tool is client-side: Claude sends `tool_use` blocks with
//! one of six commands (`view`, `create`, `str_replace`, `insert`, `delete`,
//! `rename`) on paths under `/memories`, and your application runs them
//! against its own storage and answers with `tool_result` blocks. This crate
//! is that application side: validation, the six commands, the exact
//! reference result strings, and storage backends behind one trait.
//!
//! # Highlights
//!
//! - [`MemoryTool::dispatch`]: a `tool_use` block (or bare `input`) as
//!   [`serde_json::Value`] in, a [`ToolResult`] out, whose
//!   [`to_json`](ToolResult::to_json) is the `tool_result` block to send.
//!   It never panics; every bad input is a result with `is_error: true`.
//! - [`MemoryPath`]: the validated path type. Paths are checked once, at
//!   the boundary (`..`, encodings, control characters, lengths); stores
//!   never see a raw string.
//! - [`MemoryTool::reply`] / [`MemoryTool::run_tool_uses`]: a whole Messages
//!   API response in, the memory calls' `tool_result` blocks out, in order
//!   ([`api`] has the rest of the loop glue and typed blocks);
//!   `AsyncMemoryTool` (feature `tokio`) does the same without blocking the
//!   runtime.
//! - [`MemoryStore`]: a handful of primitives (stat, read, atomic write with
//!   create / overwrite / compare-and-swap modes, list, delete, rename
//!   without overwrite). Implement it for your own backend and prove it with
//!   the `conformance` suite (feature `conformance`, for your tests).
//!
//! # Available stores
//!
//! - [`FilesystemStore`]: files under a root directory; atomic, durable
//!   writes (temp file, fsync, rename, fsync dir), modes 0600/0700, refuses
//!   symbolic links, locked against concurrent writers.
//! - [`InMemoryStore`]: a tree in memory, for tests and ephemeral agents.
//! - `SqliteStore` (feature `sqlite`): one embedded database file, durable,
//!   for a single machine.
//! - `PostgresStore` (feature `postgres`): a shared database for many agent
//!   processes on many machines.
//! - `CloudStore` (features `cloud`, `s3`, `azure`, `gcs`): objects in a
//!   bucket or container, through object_store.
//! - `ManagedStore` (feature `managed`): one of Claude Managed Agents'
//!   memory stores, shared with managed agents.
//! - `EncryptedStore` (feature `encryption`): contents and names sealed
//!   over any of the above.
//! - [`TenantStore`]: one tenant's `/memories` inside any of the above.
//! - [`HistoryStore`](history::HistoryStore): any of the above with every
//!   change kept as a version: list, diff, revert, restore, redact, prune.
//!
//! # Features
//!
//! No feature is on by default.
//!
//! | feature | adds | turn it on when |
//! | --- | --- | --- |
//! | `tokio` | `AsyncMemoryTool`, `AsyncRunner`: the handler on Tokio's blocking pool | your agent is async |
//! | `sqlite` | `SqliteStore` (bundled SQLite) | one machine, one durable file |
//! | `postgres` | `PostgresStore` (tokio-postgres, a pool, rustls) | many agent processes on many machines |
//! | `cloud` | `CloudStore` over any `object_store` backend you build | you bring your own `ObjectStore` |
//! | `cloud-http` | object_store's HTTP client (reqwest, rustls) for `cloud` | a backend over HTTP, without the presets below |
//! | `s3` | `CloudStore` on Amazon S3 and S3-compatible services | memories in an S3 bucket |
//! | `azure` | `CloudStore` on Azure Blob Storage | memories in an Azure container |
//! | `gcs` | `CloudStore` on Google Cloud Storage | memories in a GCS bucket |
//! | `managed` | `ManagedStore`: a memory store of Claude Managed Agents (reqwest, rustls) | managed agents share the memory |
//! | `encryption` | `EncryptedStore`: contents and names sealed over any store | the storage is not trusted with plaintext |
//! | `mcp` | `claude_memory::mcp`: the tool over MCP (stdio, streamable HTTP) | other clients share the memory |
//! | `ui` | `claude_memory::ui`: the review page, a browser over a store and its history | people look at what the model remembered |
//! | `tracing` | one `tracing` span per command (never file content) | you collect traces |
//! | `conformance` | the suite every `MemoryStore` must pass, for your tests | you write your own store |
//!
//! # Where things live
//!
//! [`MemoryTool`] is the handler (the six commands, their checks and every
//! answer the model reads); [`path`] validates paths and [`tenant`] tenant
//! ids; [`store`] holds the [`MemoryStore`] trait, the tree walk
//! ([`store::walk()`]) and the stores; [`api`] the Messages API glue and
//! typed blocks, [`bridge`] the JSON-lines bridge; [`history`],
//! [`backup`], [`expiry`], [`policy`] and [`audit`] are operations on top;
//! the `conformance` module (feature `conformance`) holds the suite your
//! own store must pass.
//!
//! # One step of a tool-use loop
//!
//! ```
//! use claude_memory::{InMemoryStore, MemoryTool};
//! use serde_json::json;
//!
//! let tool = MemoryTool::new(InMemoryStore::new());
//!
//! // Send `claude_memory::tool_definition()` in the request's `tools`.
//! // A response may then hold blocks like these:
//! let response = json!({
//!     "role": "assistant", "stop_reason": "tool_use",
//!     "content": [
//!         {"type": "text", "text": "Let me check my memory first."},
//!         {"type": "tool_use", "id": "toolu_01", "name": "memory",
//!          "input": {"command": "create", "path": "/memories/notes.md",
//!                    "file_text": "Acme Corp prefers email follow-ups.\n"}},
//!     ],
//! });
//!
//! // Every memory call answered with a tool_result block, in order, as
//! // the next user message (`tool.run_tool_uses(&response)` gives the
//! // blocks alone, when other tools' results join them).
//! let reply = tool.reply(&response);
//! assert_eq!(
//!     reply,
//!     json!({"role": "user", "content": [
//!         {"type": "tool_result", "tool_use_id": "toolu_01",
//!          "content": "File created successfully at: /memories/notes.md"}]})
//! );
//! // Next request: append the response's content as the assistant
//! // message, then `reply`.
//! ```
#![warn(missing_docs)]
// On docs.rs, label each feature-gated item with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]
// The crate has no unsafe code: the filesystem store reaches the `*at`
// system calls through rustix's safe wrappers.
#![forbid(unsafe_code)]

pub mod api;
#[cfg(feature = "tokio")]
mod async_tool;
pub mod audit;
pub mod backup;
mod base64;
pub mod bridge;
mod command;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod definition;
pub mod dream;
pub mod expiry;
pub mod history;
mod lines;
#[cfg(feature = "mcp")]
pub mod mcp;
mod numbered;
pub mod path;
pub mod policy;
pub mod profile;
mod render;
mod result;
pub mod runner;
pub mod store;
#[cfg(feature = "managed")]
#[cfg_attr(docsrs, doc(cfg(feature = "managed")))]
pub mod sync;
pub mod tenant;
mod tool;
#[cfg(feature = "ui")]
pub mod ui;
pub mod url;

pub use api::{ToolResultBlock, ToolUseBlock, tool_definition, tool_definition_with_cache_control};
#[cfg(feature = "tokio")]
pub use async_tool::AsyncMemoryTool;
pub use command::Command;
pub use config::{Config, CreatePolicy};
pub use definition::{AllowedCaller, MemoryToolDefinition};
/// object_store, re-exported so a `CloudStore`'s backend is built against
/// the same release (feature `cloud`).
#[cfg(feature = "cloud")]
pub use object_store;
pub use path::{MemoryPath, PathError};
pub use render::human_size;
pub use result::{Content, ImageFormat, ToolResult};
#[cfg(any(unix, windows))]
pub use store::FilesystemStore;
pub use store::TenantStore;
#[cfg(feature = "encryption")]
pub use store::crypt::{EncryptedStore, Key, Keyring};
#[cfg(feature = "cloud")]
pub use store::{CloudBuilder, CloudError, CloudScheme, CloudStore, parse_cloud_url};
pub use store::{InMemoryStore, MemoryStore, StoreError};
#[cfg(feature = "managed")]
pub use store::{ManagedBuilder, ManagedError, ManagedStore};
#[cfg(feature = "postgres")]
pub use store::{PostgresBuilder, PostgresError, PostgresStore};
#[cfg(feature = "sqlite")]
pub use store::{SqliteError, SqliteStore};
pub use tenant::TenantId;
pub use tool::MemoryTool;
pub use url::StoreUrl;

/// The README's Rust blocks, compiled (and, unless marked `no_run`, run) as
/// doc tests by the test suite, with every feature on: a snippet that stops
/// compiling fails `cargo test`.
#[cfg(all(doctest, claude_memory_suite))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust blocks of the pages under `docs/`, compiled as doc tests the
/// same way.
#[cfg(all(doctest, claude_memory_suite))]
pub mod docs_doctests {
    #[doc = include_str!("../docs/loop.md")]
    pub struct Loop;
    #[doc = include_str!("../docs/mcp.md")]
    pub struct Mcp;
    #[doc = include_str!("../docs/configuration.md")]
    pub struct Configuration;
    #[doc = include_str!("../docs/history.md")]
    pub struct History;
    #[doc = include_str!("../docs/encryption.md")]
    pub struct Encryption;
    #[doc = include_str!("../docs/stores.md")]
    pub struct Stores;
    #[doc = include_str!("../docs/cloud.md")]
    pub struct Cloud;
    #[doc = include_str!("../docs/managed.md")]
    pub struct Managed;
    #[doc = include_str!("../docs/sql.md")]
    pub struct Sql;
    #[doc = include_str!("../docs/production.md")]
    pub struct Production;
    #[doc = include_str!("../docs/safety.md")]
    pub struct Safety;
    #[doc = include_str!("../docs/testing.md")]
    pub struct Testing;
    #[doc = include_str!("../docs/behaviour.md")]
    pub struct Behaviour;
    #[doc = include_str!("../docs/design.md")]
    pub struct Design;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/ui.md")]
    pub struct Ui;
    #[doc = include_str!("../docs/dream.md")]
    pub struct Dream;
}
