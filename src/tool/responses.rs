//! The Messages API side of the handler: a whole response in, the memory
//! calls' `tool_result` blocks out, in order.

use serde_json::Value;

use super::MemoryTool;
use crate::api::{
    ToolResultBlock, ToolUseBlock, is_memory_call, memory_tool_uses, tool_results_message,
    tool_uses, unavailable_tool_result,
};
use crate::store::MemoryStore;

impl<S: MemoryStore> MemoryTool<S> {
    /// Runs every memory `tool_use` block of a Messages API response (or
    /// of its `content` array) and returns their `tool_result` blocks in
    /// the order of the calls. Calls run one after another, so two calls on
    /// one file never interleave. Other tools' blocks are left to the
    /// caller ([`other_tool_uses`](crate::api::other_tool_uses)), who must
    /// answer each in the same `user` message; the
    /// [`runner`](crate::runner) does all of it.
    pub fn run_tool_uses(&self, response: &Value) -> Vec<Value> {
        memory_tool_uses(response)
            .map(|block| self.dispatch(block).to_json())
            .collect()
    }

    /// The next `user` message for a response:
    /// `{"role": "user", "content": [tool_result, …]}`, one `tool_result`
    /// for every `tool_use` block, in the order of the calls.
    ///
    /// Memory calls are run. A call to any other tool is answered with an
    /// error result (`Error: The tool "get_weather" is not available
    /// here. …`, `is_error: true`) instead of being dropped: a dropped call
    /// makes the API refuse the next request (every `tool_use` needs its
    /// `tool_result`), and an error result keeps the conversation valid
    /// and tells the model the tool is not there. With other tools in play,
    /// use the [`runner`](crate::runner) (tools registered as closures), or
    /// [`run_tool_uses`](Self::run_tool_uses) and answer the others
    /// yourself.
    ///
    /// ```
    /// use claude_memory::{InMemoryStore, MemoryTool};
    /// use serde_json::json;
    ///
    /// let tool = MemoryTool::new(InMemoryStore::new());
    /// let response = json!({"stop_reason": "tool_use", "content": [
    ///     {"type": "tool_use", "id": "toolu_1", "name": "memory",
    ///      "input": {"command": "view", "path": "/memories"}},
    ///     {"type": "tool_use", "id": "toolu_2", "name": "get_weather",
    ///      "input": {"city": "Paris"}},
    /// ]});
    /// let reply = tool.reply(&response);
    /// assert_eq!(reply["content"][0]["tool_use_id"], "toolu_1");
    /// assert_eq!(reply["content"][1]["tool_use_id"], "toolu_2");
    /// assert_eq!(reply["content"][1]["is_error"], true);
    /// ```
    pub fn reply(&self, response: &Value) -> Value {
        let results = tool_uses(response)
            .map(|block| {
                if is_memory_call(block) {
                    self.dispatch(block).to_json()
                } else {
                    unavailable_tool_result(block)
                }
            })
            .collect();
        tool_results_message(results)
    }

    /// Runs a typed `tool_use` block (its id is the call's actor in a
    /// history, as with [`dispatch`](Self::dispatch) of the JSON block).
    pub fn run_block(&self, block: &ToolUseBlock) -> ToolResultBlock {
        let mut result = self.dispatch_input(&block.input, Some(&block.id));
        result.tool_use_id = Some(block.id.clone());
        result.to_block()
    }
}
