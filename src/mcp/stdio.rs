//! The memory tool over MCP's stdio transport: JSON-RPC messages, one a
//! line, on stdin and stdout (what `claude mcp add` and Claude Desktop
//! start). Logs never go to stdout.

use std::future::Future;
use std::time::Duration;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServiceExt};

use crate::mcp::MemoryServer;

/// Why the stdio server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// The client never completed the MCP handshake.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// The session ended abnormally.
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// Serves `server` on `reader` and `writer` until the client closes its
/// end, or `shutdown` resolves: then the calls in flight are finished
/// (up to `grace`) before it returns.
pub async fn serve_io<R, W>(
    server: MemoryServer,
    reader: R,
    writer: W,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> Result<(), StdioError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let watch = server.clone();
    let transport = UntilInitialize {
        inner: AsyncRwTransport::new_server(reader, writer),
        initialized: false,
    };
    let running = server
        .serve(transport)
        .await
        .map_err(|e| StdioError::Handshake(e.to_string()))?;
    let cancel = running.cancellation_token();
    tokio::select! {
        ended = running.waiting() => {
            ended.map(|_| ()).map_err(|e| StdioError::Session(e.to_string()))?;
        }
        () = shutdown => {
            let _ = tokio::time::timeout(grace, watch.calls_finished()).await;
            cancel.cancel();
        }
    }
    // A call the client abandoned still runs to its end.
    let _ = tokio::time::timeout(grace, watch.calls_finished()).await;
    Ok(())
}

/// A transport that drops the notifications and responses a client sends
/// before its `initialize` request. rmcp's handshake ends the whole
/// session on any of them (a stray `notifications/cancelled` killed the
/// server, and its error printed the message's Rust debug text); requests
/// (a `ping`, an early `tools/call`) still reach rmcp, which answers them.
struct UntilInitialize<T> {
    inner: T,
    initialized: bool,
}

impl<T> Transport<RoleServer> for UntilInitialize<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            if self.initialized {
                return Some(message);
            }
            if let ClientJsonRpcMessage::Request(request) = &message {
                self.initialized = matches!(request.request, ClientRequest::InitializeRequest(_));
                return Some(message);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Serves `server` on this process's stdin and stdout until the client
/// closes stdin or SIGINT/SIGTERM arrives (calls in flight are finished,
/// up to 30 s).
pub async fn serve_stdio(server: MemoryServer) -> Result<(), StdioError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_io(
        server,
        stdin,
        stdout,
        crate::mcp::shutdown_signal(),
        Duration::from_secs(30),
    )
    .await
}
