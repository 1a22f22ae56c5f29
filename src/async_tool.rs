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

use crate::api::{ToolResultBlock, ToolUseBlock};
use crate::render;
use crate::result::ToolResult;
use crate::store::MemoryStore;
use crate::tool::MemoryTool;

/// A cloneable, `'static` handle on a [`MemoryTool`] whose methods never
/// block the async runtime. Its methods mirror [`MemoryTool`]'s and borrow
/// what they are given the same way; each runs on Tokio's blocking pool
/// (inline when called outside a runtime).
///
/// ```
/// use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
/// let response = json!({"stop_reason": "tool_use", "content": [
///     {"type": "tool_use", "id": "toolu_1", "name": "memory",
///      "input": {"command": "create", "path": "/memories/a.md", "file_text": "hi\n"}},
/// ]});
/// // The next user message: one tool_result per tool_use, in order.
/// let reply = tool.reply(&response).await;
/// assert_eq!(reply["content"][0]["content"], "File created successfully at: /memories/a.md");
/// // `response` is only borrowed: it can still be pushed to the messages.
/// assert_eq!(response["stop_reason"], "tool_use");
/// # });
/// ```
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
    ///
    /// ```
    /// # use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool};
    /// # use serde_json::json;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
    /// let result = tool.dispatch(&json!({"command": "view", "path": "/etc/passwd"})).await;
    /// assert!(result.is_error);
    /// # });
    /// ```
    pub async fn dispatch(&self, input: &Value) -> ToolResult {
        let id = input.get("id").and_then(Value::as_str).map(str::to_owned);
        let input = input.clone();
        self.run(move |tool| tool.dispatch(&input))
            .await
            .unwrap_or_else(|| failed(id))
    }

    /// [`MemoryTool::run_tool_uses`], on the blocking pool: the memory
    /// calls' `tool_result` blocks, in order, run one after another.
    pub async fn run_tool_uses(&self, response: &Value) -> Vec<Value> {
        let calls: Vec<Value> = crate::api::memory_tool_uses(response).cloned().collect();
        self.run_calls(calls).await
    }

    /// [`MemoryTool::reply`], on the blocking pool: one `tool_result` for
    /// every `tool_use`, other tools' calls answered with an error result.
    pub async fn reply(&self, response: &Value) -> Value {
        let calls: Vec<Value> = crate::api::tool_uses(response).cloned().collect();
        let memory: Vec<Value> = calls
            .iter()
            .filter(|b| crate::api::is_memory_call(b))
            .cloned()
            .collect();
        let mut memory_results = self.run_calls(memory).await.into_iter();
        let results = calls
            .iter()
            .map(|block| match crate::api::is_memory_call(block) {
                true => memory_results
                    .next()
                    .unwrap_or_else(|| failed(call_id(block)).to_json()),
                false => crate::api::unavailable_tool_result(block),
            })
            .collect();
        crate::api::tool_results_message(results)
    }

    /// [`MemoryTool::run_block`], on the blocking pool.
    ///
    /// ```
    /// # use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool, ToolUseBlock};
    /// # use serde_json::json;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
    /// let block: ToolUseBlock = serde_json::from_value(json!({"type": "tool_use",
    ///     "id": "toolu_1", "name": "memory", "input": {"command": "view", "path": "/memories"}}))
    ///     .unwrap();
    /// let result = tool.run_block(&block).await;
    /// assert_eq!(result.tool_use_id, "toolu_1");
    /// assert_eq!(result.is_error, None);
    /// # });
    /// ```
    pub async fn run_block(&self, block: &ToolUseBlock) -> ToolResultBlock {
        let owned = block.clone();
        self.run(move |tool| tool.run_block(&owned))
            .await
            .unwrap_or_else(|| {
                let mut failed = failed(Some(block.id.clone()));
                failed.tool_use_id = Some(block.id.clone());
                failed.to_block()
            })
    }

    /// Runs memory `tool_use` blocks one after another, in one hop to the
    /// blocking pool.
    async fn run_calls(&self, calls: Vec<Value>) -> Vec<Value> {
        let ids: Vec<Option<String>> = calls.iter().map(call_id).collect();
        self.run(move |tool| calls.iter().map(|b| tool.dispatch(b).to_json()).collect())
            .await
            .unwrap_or_else(|| ids.into_iter().map(|id| failed(id).to_json()).collect())
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

fn call_id(block: &Value) -> Option<String> {
    block.get("id").and_then(Value::as_str).map(str::to_owned)
}

/// The answer when the handler panicked (a bug): an internal-failure error
/// result for the call, so the conversation stays valid.
fn failed(id: Option<String>) -> ToolResult {
    let mut failed = ToolResult::error(render::internal_failure());
    failed.tool_use_id = id;
    failed
}
