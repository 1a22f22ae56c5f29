//! The memory tool served over the Model Context Protocol (feature `mcp`),
//! so MCP clients (Claude Code, Claude Desktop, other agents) and programs
//! using the API's memory tool share one store, with the same guarantees
//! and strings (SPEC §8).
//!
//! - [`MemoryServer`] (`handler.rs`): the rmcp server handler, one tool,
//!   `memory`, bridged to [`MemoryTool`](crate::MemoryTool) on Tokio's
//!   blocking pool.
//! - `tool.rs`: the tool's schema, description, annotations and the
//!   server instructions.
//! - [`serve_stdio`] / [`serve_io`] (`stdio.rs`): the stdio transport.
//! - [`HttpServer`] (`http.rs`) with `guard.rs`: streamable HTTP at
//!   `/mcp`, with tokens ([`Tokens`], `auth.rs`), `Origin` and `Host`
//!   checks, and bounds; `sessions.rs` binds each session to the token
//!   that opened it and gives every token its share.
//! - `connections.rs`: the bounded HTTP/1 connection loop (shared with
//!   the review page, feature `ui`).
//! - [`shutdown_signal`] (`shutdown.rs`): SIGINT and SIGTERM.
//!
//! ```no_run
//! use claude_memory::mcp::{MemoryServer, serve_stdio};
//! use claude_memory::{FilesystemStore, MemoryTool};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let tool = MemoryTool::new(FilesystemStore::open("./memory")?);
//!     serve_stdio(MemoryServer::new(tool)).await?;
//!     Ok(())
//! }
//! ```

mod actor;
mod auth;
pub(crate) mod connections;
mod guard;
mod handler;
mod http;
mod sessions;
mod shutdown;
mod stdio;
mod tool;

pub use auth::{Grant, MIN_TOKEN_LEN, TokenError, Tokens};
pub use handler::MemoryServer;
pub use http::{HttpError, HttpOptions, HttpServer};
pub use shutdown::shutdown_signal;
pub use stdio::{StdioError, serve_io, serve_stdio};
pub use tool::{DESCRIPTION, INSTRUCTIONS, TOOL_NAME, annotations, input_schema, tool};
