//! The Messages API side of the handler: a whole response in, the memory
//! calls' `tool_result` blocks out, in order.

use serde_json::Value;

use super::MemoryTool;
use crate::api::{ToolResultBlock, ToolUseBlock, memory_tool_uses, tool_results_message};
use crate::store::MemoryStore;

impl<S: MemoryStore> MemoryTool<S> {
    /// Runs every memory `tool_use` block of a Messages API response (or
    /// of its `content` array) and returns their `tool_result` blocks in
    /// the order of the calls. Calls run one after another, so two calls on
    /// one file never interleave. Other tools' blocks are left to the
    /// caller ([`other_tool_uses`](crate::api::other_tool_uses)).
    pub fn run_tool_uses(&self, response: &Value) -> Vec<Value> {
        memory_tool_uses(response)
            .map(|block| self.dispatch(block).to_json())
            .collect()
    }

    /// The next `user` message for a response whose only tool calls are
    /// memory calls: `{"role": "user", "content": [tool_result, …]}`.
    /// With other tools in play, use [`run_tool_uses`](Self::run_tool_uses)
    /// and add their results to the same message.
    pub fn reply(&self, response: &Value) -> Value {
        tool_results_message(self.run_tool_uses(response))
    }

    /// Runs a typed `tool_use` block.
    pub fn run_block(&self, block: &ToolUseBlock) -> ToolResultBlock {
        let mut result = self.dispatch(&block.input);
        result.tool_use_id = Some(block.id.clone());
        result.to_block()
    }
}
