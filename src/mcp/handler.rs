//! [`MemoryServer`]: the rmcp `ServerHandler` that answers `tools/call`
//! for `memory` by running [`MemoryTool::dispatch`] on Tokio's blocking
//! pool, so every call has the API handler's guarantees and strings.
//!
//! Calls are not serialized by the server: the handler is `Send + Sync`
//! and each store orders concurrent calls itself (the filesystem and SQL
//! stores edit under their write lock, others compare and swap), exactly
//! as for an API agent sharing a `MemoryTool` across threads. A call, once
//! started, runs to its end on the blocking pool even if the client goes
//! away, so a disconnect never leaves half a command.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::mcp::actor;
use crate::mcp::auth::Grant;
use crate::mcp::tool::{self, TOOL_NAME};
use crate::result::{Content, ToolResult};
use crate::store::MemoryStore;
use crate::tenant::TenantId;
use crate::{MemoryTool, base64};

/// A handler whatever its store: what the server needs of a `MemoryTool`.
trait Dispatch: Send + Sync {
    fn dispatch(&self, input: &Value) -> ToolResult;
}

impl<S: MemoryStore> Dispatch for MemoryTool<S> {
    fn dispatch(&self, input: &Value) -> ToolResult {
        MemoryTool::dispatch(self, input)
    }
}

type Handle = Arc<dyn Dispatch>;
type TenantFactory = Box<dyn Fn(&TenantId) -> Handle + Send + Sync>;

/// The memory tool as an MCP server: one tool, `memory`, over any
/// [`MemoryStore`], for [`serve_stdio`](crate::mcp::serve_stdio),
/// [`HttpServer`](crate::mcp::HttpServer), or any rmcp transport.
///
/// Cheap to clone (one `Arc`); every clone shares the store and the count
/// of calls in flight that a graceful shutdown waits for.
///
/// ```
/// use claude_memory::mcp::MemoryServer;
/// use claude_memory::{InMemoryStore, MemoryTool};
///
/// let server = MemoryServer::new(MemoryTool::new(InMemoryStore::new()));
/// assert_eq!(server.calls_in_flight(), 0);
/// ```
#[derive(Clone)]
pub struct MemoryServer {
    inner: Arc<Inner>,
}

struct Inner {
    default: Handle,
    tenants: Option<TenantFactory>,
    /// One handler per tenant a token named, built on its first call.
    /// Bounded: tenants come only from the token file.
    by_tenant: Mutex<HashMap<TenantId, Handle>>,
    in_flight: AtomicUsize,
    idle: Notify,
    /// The session part of the actor on transports without sessions of
    /// their own (stdio: one client per process).
    session: String,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer")
            .field("tenants", &self.inner.tenants.is_some())
            .field("in_flight", &self.calls_in_flight())
            .finish()
    }
}

impl MemoryServer {
    /// Serves `tool`: every client, and every token without a tenant,
    /// uses this handler (its store, limits, policy and history).
    pub fn new<S: MemoryStore + 'static>(tool: MemoryTool<S>) -> Self {
        MemoryServer {
            inner: Arc::new(Inner {
                default: Arc::new(tool),
                tenants: None,
                by_tenant: Mutex::new(HashMap::new()),
                in_flight: AtomicUsize::new(0),
                idle: Notify::new(),
                session: format!("stdio-{}", std::process::id()),
            }),
        }
    }

    /// Calls authenticated with a token mapped to a tenant (see
    /// [`Tokens`](crate::mcp::Tokens)) run on `tool_for(tenant)`, built
    /// once per tenant and kept (typically a
    /// [`TenantStore`](crate::TenantStore) over the shared base store).
    pub fn with_tenants<S: MemoryStore + 'static>(
        self,
        tool_for: impl Fn(&TenantId) -> MemoryTool<S> + Send + Sync + 'static,
    ) -> Self {
        let default = Arc::clone(&self.inner.default);
        let session = self.inner.session.clone();
        MemoryServer {
            inner: Arc::new(Inner {
                default,
                tenants: Some(Box::new(move |t| Arc::new(tool_for(t)) as Handle)),
                by_tenant: Mutex::new(HashMap::new()),
                in_flight: AtomicUsize::new(0),
                idle: Notify::new(),
                session,
            }),
        }
    }

    /// Whether calls with a tenant's token get that tenant's store
    /// ([`with_tenants`](Self::with_tenants)); an HTTP server refuses
    /// tenant tokens without it rather than give them the whole store.
    pub fn serves_tenants(&self) -> bool {
        self.inner.tenants.is_some()
    }

    /// Tool calls running now.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves once no tool call is running (at once if none is). A
    /// graceful shutdown stops taking requests, then waits on this.
    pub async fn calls_finished(&self) {
        loop {
            let notified = self.inner.idle.notified();
            if self.calls_in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The handler for a call made with `grant` (none: stdio, or a server
    /// without tokens).
    fn handle_for(&self, grant: Option<&Grant>) -> Handle {
        let tenant = grant.and_then(|g| g.tenant.as_ref());
        match (tenant, &self.inner.tenants) {
            (Some(tenant), Some(factory)) => {
                let mut map = match self.inner.by_tenant.lock() {
                    Ok(map) => map,
                    Err(poisoned) => poisoned.into_inner(),
                };
                Arc::clone(map.entry(tenant.clone()).or_insert_with(|| factory(tenant)))
            }
            _ => Arc::clone(&self.inner.default),
        }
    }

    /// Runs one `memory` call with `arguments` (absent: `{}`, which gets
    /// SPEC §4's missing-`command` answer) as `actor`, on the blocking
    /// pool. The call runs to its end even if the returned future is
    /// dropped (the client went away).
    pub(crate) async fn run(
        &self,
        arguments: Value,
        grant: Option<&Grant>,
        actor: String,
    ) -> Result<ToolResult, ErrorData> {
        let handle = self.handle_for(grant);
        let guard = InFlight::start(Arc::clone(&self.inner));
        // A tool_use block: its id is the per-call actor any history
        // records, and its `input` is taken as the arguments whatever they
        // hold (a bare object with "type": "tool_use" is not a block here).
        let block = json!({"type": "tool_use", "id": actor, "name": TOOL_NAME, "input": arguments});
        let task = tokio::task::spawn_blocking(move || {
            let _guard = guard;
            handle.dispatch(&block)
        });
        task.await
            .map_err(|_| ErrorData::internal_error("the memory call did not complete", None))
    }
}

/// Counts a call in flight from before it is queued to after it ran.
struct InFlight(Arc<Inner>);

impl InFlight {
    fn start(inner: Arc<Inner>) -> Self {
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(inner)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// SPEC §8: the §3/§4 text as one text item, `isError` where SPEC sets
/// `is_error`, an image view as one image item.
pub(crate) fn to_mcp(result: &ToolResult) -> CallToolResult {
    let content: Vec<ContentBlock> = result
        .content
        .iter()
        .map(|c| match c {
            Content::Text(text) => ContentBlock::text(text.clone()),
            Content::Image { format, data } => {
                ContentBlock::image(base64::encode(data), format.media_type())
            }
        })
        .collect();
    if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(tool::INSTRUCTIONS);
        info.server_info =
            rmcp::model::Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool::tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        (name == TOOL_NAME).then(tool::tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL_NAME {
            // The protocol's own error for an unknown tool (SPEC §8).
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", actor::clean(&request.name)),
                None,
            ));
        }
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let grant = parts.and_then(|p| p.extensions.get::<Grant>());
        let session = match parts {
            Some(p) => p
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            None => Some(self.inner.session.clone()),
        };
        let client = context.client_info().map(|i| i.name);
        let actor = actor::label(client.as_deref(), session.as_deref());
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = self.run(arguments, grant, actor).await?;
        Ok(to_mcp(&result).into())
    }

    /// rmcp hands a `tools/call` whose `arguments` is no object (an array,
    /// a string) here, as a method it does not know: it gets the
    /// protocol's invalid-params error with SPEC §4's text, not
    /// "method not found".
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        if request.method == "tools/call" {
            return Err(ErrorData::invalid_params(
                String::from(crate::render::invalid_input(
                    "`arguments` must be a JSON object",
                )),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }
}
