//! `Runner`: the agent loop on the calling thread.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::{Compaction, ContextEditing};
use super::{
    Next, Request, RunError, RunOutcome, Setup, Stopped, other_tool, tool_name, tool_result,
    without_id,
};
use crate::api::unavailable_tool_result;
use crate::definition::MemoryToolDefinition;
use crate::store::MemoryStore;
use crate::tool::MemoryTool;

/// A tool's closure: the call's `input` in, the `tool_result` text out
/// (`Err` for an error result the model sees with `is_error: true`).
type Handler = Arc<dyn Fn(&Value) -> Result<String, String> + Send + Sync>;

/// The agent loop, synchronous: see the [module docs](crate::runner).
///
/// Build it once with the memory tool and the request's base fields
/// (`model`, `max_tokens`, `system`, server `tools`, …), register other
/// tools, then [`run`](Self::run) conversations through it; it is `Send +
/// Sync` when the store is, and a run borrows it (`&self`).
pub struct Runner<S> {
    tool: MemoryTool<S>,
    setup: Setup,
    tools: Vec<(String, Handler)>,
}

/// Clones share the registered handlers; the memory tool is cloned as
/// [`MemoryTool`] clones (its store cloned, or shared when it is an `Arc`).
impl<S> Clone for Runner<S>
where
    MemoryTool<S>: Clone,
{
    fn clone(&self) -> Self {
        Runner {
            tool: self.tool.clone(),
            setup: self.setup.clone(),
            tools: self.tools.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Runner<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Runner")
            .field("tool", &self.tool)
            .field("setup", &self.setup)
            .field("tools", &names)
            .finish()
    }
}

impl<S: MemoryStore> Runner<S> {
    /// A runner over `tool`; `base` holds the request's fields other than
    /// `messages` (an object; anything else counts as `{}`). Its `tools`,
    /// if any, are kept, followed by the memory tool's definition.
    pub fn new(tool: MemoryTool<S>, base: Value) -> Self {
        Runner {
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

    /// Registers another tool: `definition` goes into every request's
    /// `tools`, and calls to its `name` run `handler` with the call's
    /// `input`. A name registered twice, or the memory tool's name, is
    /// ignored: the first registration stays, and each name is sent once
    /// (the API refuses a request that names a tool twice).
    pub fn tool(
        mut self,
        definition: Value,
        handler: impl Fn(&Value) -> Result<String, String> + Send + Sync + 'static,
    ) -> Self {
        let name = tool_name(&definition).to_owned();
        if self.setup.add_definition(definition) {
            self.tools.push((name, Arc::new(handler)));
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
    pub fn memory_tool(&self) -> &MemoryTool<S> {
        &self.tool
    }

    /// The request the runner would send next for `messages`.
    pub fn request(&self, messages: &[Value]) -> Request {
        self.setup.request(messages)
    }

    /// Runs the loop from `messages` (the conversation so far, ending with
    /// a `user` message), sending each request through `send`.
    pub fn run<E>(
        &self,
        mut messages: Vec<Value>,
        mut send: impl FnMut(&Request) -> Result<Value, E>,
    ) -> Result<RunOutcome, RunError<E>> {
        let mut iterations = 0;
        loop {
            let request = self.setup.request(&messages);
            iterations += 1;
            let response = match send(&request) {
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
                    let results = calls.iter().map(|call| self.answer(call)).collect();
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

    /// One call's `tool_result`: memory calls through the handler, others
    /// through their closure, unregistered tools an error result.
    fn answer(&self, call: &Value) -> Value {
        if let Some(refused) = without_id(call) {
            return refused;
        }
        let Some(name) = other_tool(call) else {
            return self.tool.dispatch(call).to_json();
        };
        match self.tools.iter().find(|(n, _)| n == name) {
            Some((_, handler)) => {
                let input = call.get("input").unwrap_or(&Value::Null);
                tool_result(call, handler(input))
            }
            None => unavailable_tool_result(call),
        }
    }
}
