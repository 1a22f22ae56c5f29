//! `AsyncMemoryTool`: the handler for async programs (feature `tokio`).
//!
//! Design: the command logic stays synchronous, written once, and async
//! callers run it on Tokio's blocking pool. A memory call is a few short
//! file or database operations, tiny next to the model call around it, so
//! a blocking-pool hop costs nothing that matters while keeping the runtime
//! free. A database backend implements the same sync [`MemoryStore`] with
//! its driver's blocking API (or `Handle::block_on` on an async driver, from
//! inside the blocking pool), and inherits every string and check unchanged.
//! An async trait mirroring [`MemoryStore`] would double the API and the
//! conformance surface for no gain a user could measure.

use std::sync::Arc;

use serde_json::Value;

use crate::render;
use crate::result::ToolResult;
use crate::store::MemoryStore;
use crate::tool::MemoryTool;

/// A cloneable, `'static` handle on a [`MemoryTool`] whose methods never
/// block the async runtime.
#[derive(Debug)]
pub struct AsyncMemoryTool<S> {
    tool: Arc<MemoryTool<S>>,
}

impl<S> Clone for AsyncMemoryTool<S> {
    fn clone(&self) -> Self {
        AsyncMemoryTool {
            tool: Arc::clone(&self.tool),
        }
    }
}

impl<S: MemoryStore + 'static> AsyncMemoryTool<S> {
    /// Wraps a handler.
    pub fn new(tool: MemoryTool<S>) -> Self {
        AsyncMemoryTool {
            tool: Arc::new(tool),
        }
    }

    /// The wrapped handler, for synchronous use.
    pub fn tool(&self) -> &MemoryTool<S> {
        &self.tool
    }

    /// [`MemoryTool::dispatch`], on the blocking pool.
    pub async fn dispatch(&self, input: Value) -> ToolResult {
        let id = input.get("id").and_then(Value::as_str).map(str::to_owned);
        self.run(move |tool| tool.dispatch(&input))
            .await
            .unwrap_or_else(|| {
                let mut failed = ToolResult::error(render::internal_failure());
                failed.tool_use_id = id;
                failed
            })
    }

    /// [`MemoryTool::run_tool_uses`], on the blocking pool.
    pub async fn run_tool_uses(&self, response: Value) -> Vec<Value> {
        let ids: Vec<Option<String>> = crate::api::memory_tool_uses(&response)
            .map(|b| b.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        self.run(move |tool| tool.run_tool_uses(&response))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|id| {
                        let mut failed = ToolResult::error(render::internal_failure());
                        failed.tool_use_id = id;
                        failed.to_json()
                    })
                    .collect()
            })
    }

    /// [`MemoryTool::reply`], on the blocking pool.
    pub async fn reply(&self, response: Value) -> Value {
        crate::api::tool_results_message(self.run_tool_uses(response).await)
    }

    /// Runs `f` on Tokio's blocking pool, or inline outside a runtime.
    /// `None` if it panicked (a bug; never a model's input).
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&MemoryTool<S>) -> T + Send + 'static,
    ) -> Option<T> {
        let tool = Arc::clone(&self.tool);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle.spawn_blocking(move || f(&tool)).await.ok(),
            Err(_) => Some(f(&tool)),
        }
    }
}
