//! The small Tokio runtime an HTTP store (cloud, managed) owns.
//!
//! object_store and reqwest are async and need a Tokio reactor. The
//! store runs a current-thread runtime on a thread of its own; a blocking
//! call hands its future to that thread and waits for the answer on a
//! channel, never entering a runtime itself. So the store can be created,
//! used and dropped on any thread: a plain one, a worker of either Tokio
//! flavour, `spawn_blocking`, or the blocking pool of `AsyncMemoryTool`.
//! Dropping the last handle stops the thread, which drops its runtime
//! there (a runtime dropped inside another runtime's context panics).

use std::future::Future;
use std::sync::{Arc, mpsc};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// A handle on the store's I/O thread; clones share it.
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
    /// Starts the I/O thread.
    pub(crate) fn start() -> std::io::Result<Io> {
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

    /// Runs `fut` on the I/O thread and waits for its output. `None` only
    /// if the I/O thread is gone (it cannot be while `self` lives, short
    /// of a panic inside the runtime).
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
