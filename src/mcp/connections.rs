//! The HTTP/1 connection loop the MCP server and the review page share:
//! at most `max` connections at once (more wait in the listen queue),
//! request headers within a deadline (also the longest a connection may
//! sit idle), and a stop that lets requests in flight finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The connections a loop accepted, after it stopped accepting.
pub(crate) struct Connections {
    open: JoinSet<()>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// Serves `router` on each connection `listener` accepts, until
/// `shutdown` resolves; then stops accepting and hands the open
/// connections back.
pub(crate) async fn accept(
    listener: TcpListener,
    router: axum::Router,
    max: usize,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> Connections {
    let connections = Arc::new(Semaphore::new(max.max(1)));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut open = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while open.try_join_next().is_some() {}
        // A free connection slot first, then a connection: past the
        // bound, clients wait in the listen queue.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&connections).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            // An answer streamed in pieces must not wait for the
            // client's delayed ACK (Nagle): 40 ms a call otherwise.
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                stream
            }
            // Out of file descriptors, or a connection reset before it
            // was accepted: wait a little and go on serving.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let connection = http1.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let mut stopped = stopped.clone();
        open.spawn(async move {
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stopped.wait_for(|s| *s) => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
    }
    drop(listener);
    Connections { open, stop }
}

impl Connections {
    /// Stops taking requests: idle connections close, requests in flight
    /// go on.
    pub(crate) fn stop_taking(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits up to `grace` for every connection to end, then cuts the rest
    /// (a client that never finished its request).
    pub(crate) async fn close(mut self, grace: Duration) {
        let _ = tokio::time::timeout(grace, async {
            while self.open.join_next().await.is_some() {}
        })
        .await;
        self.open.abort_all();
    }
}
