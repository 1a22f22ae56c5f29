//! A client that forwards every request to a real server's client, and
//! can hold chosen requests back for a while or record them: a slow or
//! reordered network, made on purpose, so races the attacks need happen
//! every run. The server does the work; nothing is answered here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_memory::object_store::path::Path;
use claude_memory::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

/// Which request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A create or an overwrite.
    Put,
    /// A put conditional on a version (`PutMode::Update`).
    Update,
    Get,
    Head,
    Delete,
    List,
    Copy,
}

type Rule = dyn Fn(Op, &str) -> Option<Duration> + Send + Sync;
type Seen = Arc<Mutex<Vec<(Op, String)>>>;

/// The forwarding client.
pub struct Tap {
    inner: Arc<dyn ObjectStore>,
    delay: Arc<Rule>,
    seen: Seen,
}

impl Tap {
    /// Forwards to `inner`, holding back each request for what `delay`
    /// says of its op and key.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        delay: impl Fn(Op, &str) -> Option<Duration> + Send + Sync + 'static,
    ) -> Arc<Tap> {
        Arc::new(Tap {
            inner,
            delay: Arc::new(delay),
            seen: Arc::new(Mutex::new(Vec::new())),
        })
    }

    async fn before(&self, op: Op, key: &str) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((op, key.to_owned()));
        }
        if let Some(d) = (self.delay)(op, key) {
            tokio::time::sleep(d).await;
        }
    }

    /// Whether a request `op` of a key ending in `suffix` was sent.
    pub fn sent(&self, op: Op, suffix: &str) -> bool {
        self.seen
            .lock()
            .map(|s| s.iter().any(|(o, k)| *o == op && k.ends_with(suffix)))
            .unwrap_or(false)
    }
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

impl std::fmt::Display for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

#[async_trait::async_trait]
impl ObjectStore for Tap {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let op = match opts.mode {
            PutMode::Update(_) => Op::Update,
            _ => Op::Put,
        };
        self.before(op, location.as_ref()).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.before(Op::Put, location.as_ref()).await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let op = if options.head { Op::Head } else { Op::Get };
        self.before(op, location.as_ref()).await;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // Each key is recorded and held back as its rule says, then sent.
        let (rule, seen) = (Arc::clone(&self.delay), Arc::clone(&self.seen));
        let held = locations
            .then(move |r| {
                let (rule, seen) = (Arc::clone(&rule), Arc::clone(&seen));
                async move {
                    if let Ok(p) = &r {
                        if let Ok(mut s) = seen.lock() {
                            s.push((Op::Delete, p.to_string()));
                        }
                        if let Some(d) = rule(Op::Delete, p.as_ref()) {
                            tokio::time::sleep(d).await;
                        }
                    }
                    r
                }
            })
            .boxed();
        self.inner.delete_stream(held)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((Op::List, prefix.map(|p| p.to_string()).unwrap_or_default()));
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        self.before(Op::List, &key).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.before(Op::Copy, from.as_ref()).await;
        self.inner.copy_opts(from, to, options).await
    }
}
