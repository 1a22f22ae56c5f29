//! `AsyncRunner`: the agent loop for async programs (feature `tokio`).
//! Memory calls run on Tokio's blocking pool through [`AsyncMemoryTool`],
//! one after another; other tools are async closures, awaited one after
//! another in the order of the calls.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::{Compaction, ContextEditing};
use super::{
    Next, Request, RunError, RunOutcome, Setup, Stopped, other_tool, tool_name, tool_result,
    without_id,
};
use crate::api::unavailable_tool_result;
use crate::async_tool::AsyncMemoryTool;
use crate::definition::MemoryToolDefinition;
use crate::store::MemoryStore;

type Answer = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;
type Handler = Arc<dyn Fn(Value) -> Answer + Send + Sync>;

/// The agent loop, async: the same loop as [`Runner`](super::Runner),
/// with an async `send` and async tools. Cheap to clone (`'static`
/// handles), so one runner can serve many tasks.
///
/// ```
/// use claude_memory::runner::{AsyncRunner, Request, StopReason, Stopped};
/// use claude_memory::{AsyncMemoryTool, InMemoryStore, MemoryTool};
/// use serde_json::{Value, json};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let tool = AsyncMemoryTool::new(MemoryTool::new(InMemoryStore::new()));
/// let runner = AsyncRunner::new(tool, json!({"model": "claude-sonnet-4-5", "max_tokens": 1024}))
///     .tool(json!({"name": "clock", "description": "The time.",
///                  "input_schema": {"type": "object"}}),
///           |_input| async { Ok("12:00".to_owned()) });
/// let send = |request: Request| async move {
///     // Your HTTP call goes here; this one answers from the request.
///     let turns = request.body["messages"].as_array().map_or(0, Vec::len);
///     Ok::<_, std::io::Error>(if turns == 1 {
///         json!({"stop_reason": "tool_use", "content": [
///             {"type": "tool_use", "id": "toolu_1", "name": "clock", "input": {}}]})
///     } else {
///         json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Noon."}]})
///     })
/// };
/// let run = runner.run(vec![json!({"role": "user", "content": "Time?"})], send).await.unwrap();
/// assert_eq!(run.stopped, Stopped::Model(StopReason::EndTurn));
/// assert_eq!(run.messages[2]["content"][0]["content"], "12:00");
/// # });
/// ```
pub struct AsyncRunner<S> {
    tool: AsyncMemoryTool<S>,
    setup: Setup,
    tools: Vec<(String, Handler)>,
}

/// Cheap for any store (the memory tool is shared, not cloned), so one
/// runner can be handed to many tasks.
impl<S> Clone for AsyncRunner<S> {
    fn clone(&self) -> Self {
        AsyncRunner {
            tool: self.tool.clone(),
            setup: self.setup.clone(),
            tools: self.tools.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for AsyncRunner<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("AsyncRunner")
            .field("tool", &self.tool)
            .field("setup", &self.setup)
            .field("tools", &names)
            .finish()
    }
}

impl<S: MemoryStore + 'static> AsyncRunner<S> {
    /// A runner over `tool`; `base` as in [`Runner::new`](super::Runner::new).
    pub fn new(tool: AsyncMemoryTool<S>, base: Value) -> Self {
        AsyncRunner {
            tool,
            setup: Setup::new(base),
            tools: Vec::new(),
        }
    }

    /// The memory tool's definition to send (default: the bare one).
    pub fn definition(mut self, definition: MemoryToolDefinition) -> Self {
        self.setup.set_definition(definition);
        self
    }

    /// Registers another tool, as [`Runner::tool`](super::Runner::tool),
    /// with an async handler that takes the call's `input`.
    pub fn tool<F, Fut>(mut self, definition: Value, handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        let name = tool_name(&definition).to_owned();
        if self.setup.add_definition(definition) {
            let handler: Handler = Arc::new(move |input| Box::pin(handler(input)) as Answer);
            self.tools.push((name, handler));
        }
        self
    }

    /// At most `n` requests per run (`0` counts as `1`; default
    /// [`DEFAULT_MAX_ITERATIONS`](super::DEFAULT_MAX_ITERATIONS)).
    pub fn max_iterations(mut self, n: usize) -> Self {
        self.setup.set_max_iterations(n);
        self
    }

    /// Adds the context-editing preset (and its beta) to every request.
    pub fn context_editing(mut self, edit: ContextEditing) -> Self {
        self.setup.set_context_editing(edit);
        self
    }

    /// Adds the server-side compaction preset (and its beta) to every
    /// request.
    pub fn compaction(mut self, edit: Compaction) -> Self {
        self.setup.set_compaction(edit);
        self
    }

    /// The memory tool.
    pub fn memory_tool(&self) -> &AsyncMemoryTool<S> {
        &self.tool
    }

    /// The request the runner would send next for `messages`.
    pub fn request(&self, messages: &[Value]) -> Request {
        self.setup.request(messages)
    }

    /// Runs the loop from `messages`, as [`Runner::run`](super::Runner::run),
    /// sending each request through `send`.
    pub async fn run<E, F, Fut>(
        &self,
        mut messages: Vec<Value>,
        mut send: F,
    ) -> Result<RunOutcome, RunError<E>>
    where
        F: FnMut(Request) -> Fut,
        Fut: Future<Output = Result<Value, E>>,
    {
        let mut iterations = 0;
        loop {
            let request = self.setup.request(&messages);
            iterations += 1;
            let response = match send(request).await {
                Ok(response) => response,
                Err(source) => return Err(RunError::Send { source, messages }),
            };
            let next = match self.setup.take(&mut messages, &response) {
                Some(next) => next,
                None => return Err(RunError::NotAMessage { response, messages }),
            };
            match next {
                Next::Stop(reason) => {
                    return Ok(RunOutcome {
                        response,
                        messages,
                        stopped: Stopped::Model(reason),
                        iterations,
                    });
                }
                Next::Resend => {}
                Next::Run(calls) => {
                    let mut results = Vec::with_capacity(calls.len());
                    // One call at a time, in order: memory calls never run
                    // concurrently with each other.
                    for call in &calls {
                        results.push(self.answer(call).await);
                    }
                    Setup::answer(&mut messages, results);
                }
            }
            if iterations >= self.setup.max_iterations() {
                return Ok(RunOutcome {
                    response,
                    messages,
                    stopped: Stopped::MaxIterations,
                    iterations,
                });
            }
        }
    }

    async fn answer(&self, call: &Value) -> Value {
        if let Some(refused) = without_id(call) {
            return refused;
        }
        let Some(name) = other_tool(call) else {
            return self.tool.dispatch(call).await.to_json();
        };
        match self.tools.iter().find(|(n, _)| n == name) {
            Some((_, handler)) => {
                let input = call.get("input").cloned().unwrap_or(Value::Null);
                tool_result(call, handler(input).await)
            }
            None => unavailable_tool_result(call),
        }
    }
}
