//! The small Tokio runtime the remote stores (cloud, managed, PostgreSQL)
//! share.
//!
//! object_store, reqwest and tokio-postgres are async and need a Tokio
//! reactor. The
//! stores run one current-thread runtime on a thread of its own, started
//! by the first store and kept for the process; a blocking call hands its
//! future to that thread and waits for the answer on a channel, never
//! entering a runtime itself. So a store can be created, used and dropped
//! on any thread: a plain one, a worker of either Tokio flavour,
//! `spawn_blocking`, or the blocking pool of `AsyncMemoryTool`.
//!
//! One runtime for every store, never stopped: a pooled connection is
//! driven by a task on the runtime that opened it, and a client is often
//! shared (one `Arc<dyn ObjectStore>` given to several stores), so a
//! runtime that stopped with its store would kill connections the others
//! reuse.

use std::future::Future;
use std::sync::{Arc, OnceLock, mpsc};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// A handle on the I/O thread; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Io {
    inner: Arc<Thread>,
}

#[derive(Debug)]
struct Thread {
    handle: Handle,
    /// Dropped with the last clone: the thread's `block_on` returns and
    /// the runtime is dropped on that thread.
    _stop: oneshot::Sender<()>,
}

impl Io {
    /// The process's I/O thread, started on first use.
    pub(crate) fn shared() -> std::io::Result<Io> {
        static SHARED: OnceLock<Io> = OnceLock::new();
        if let Some(io) = SHARED.get() {
            return Ok(io.clone());
        }
        // Two first users may both start one: the loser's stops when dropped.
        let io = Io::start()?;
        Ok(SHARED.get_or_init(|| io).clone())
    }

    /// Starts an I/O thread, which stops when the last clone is dropped.
    fn start() -> std::io::Result<Io> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("claude-memory-io".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(Io {
            inner: Arc::new(Thread {
                handle,
                _stop: stop,
            }),
        })
    }

    /// The runtime's handle, for a store that polls its futures on its
    /// own thread with the runtime's reactor and timers (PostgreSQL's).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn handle(&self) -> &Handle {
        &self.inner.handle
    }

    /// Runs `fut` on the I/O thread and waits for its output. `None` only
    /// if the I/O thread is gone (it cannot be while `self` lives, short
    /// of a panic inside the runtime).
    #[cfg_attr(not(any(feature = "cloud", feature = "managed")), allow(dead_code))]
    pub(crate) fn run<F>(&self, fut: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.inner.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().ok()
    }
}
