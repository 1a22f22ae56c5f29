//! Opening a [`CloudStore`]: the builder, its timeouts and leases, and
//! `s3://`, `az://` and `gs://` URLs configured from the environment.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;

use super::CloudStore;
use super::keys::Layout;
use crate::store::runtime::Io;

/// Why a [`CloudStore`] could not be opened. Its text may name the
/// bucket (it is for the operator, never the model).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CloudError {
    /// The backend cannot write conditionally, so concurrent writers
    /// would lose updates: refused rather than used unsafely.
    #[error(
        "this object store cannot do conditional writes ({0}); it would lose concurrent updates, so it is refused"
    )]
    NoConditionalWrites(&'static str),
    /// The URL or an environment setting is not usable.
    #[error("invalid cloud store settings: {0}")]
    Config(String),
    /// The store's I/O thread could not be started.
    #[error("could not start the cloud store's I/O thread")]
    Runtime(#[source] std::io::Error),
    /// The bucket could not be reached, or refused the probe at open.
    #[error("could not reach the object store")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A store's timeouts and leases.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    /// The longest one primitive's requests may take (retries included).
    pub(super) timeout: Duration,
    /// How old an intent record or size lock must be before another
    /// process takes it for an interrupted one's.
    pub(super) lease: Duration,
    /// How objects are copied without overwriting (learnt at open).
    pub(super) copy: super::intent::CopyHow,
}

impl Settings {
    /// The lease of the size lock: held for a few requests only.
    pub(super) fn lease_for_locks(&self) -> Duration {
        self.lease
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            // object_store's default retry budget is 3 minutes; a model's
            // call should not wait that long for one primitive.
            timeout: Duration::from_secs(60),
            lease: Duration::from_secs(30),
            copy: super::intent::CopyHow::Inline,
        }
    }
}

/// Settings for a [`CloudStore`], from [`CloudStore::builder`].
#[derive(Debug)]
#[must_use]
pub struct CloudBuilder {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    settings: Settings,
}

impl CloudBuilder {
    pub(super) fn new(store: Arc<dyn ObjectStore>) -> Self {
        CloudBuilder {
            store,
            prefix: String::new(),
            settings: Settings::default(),
        }
    }

    /// The prefix the store's objects live under (default: none, the
    /// whole bucket). One prefix per store or tenant.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_owned();
        self
    }

    /// The longest one primitive (its requests and object_store's retries)
    /// may take before it fails with SPEC §4's "timed out" answer
    /// (default 60 s). Per-request timeouts and retries are the object
    /// store's own (`ClientOptions`, `RetryConfig`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// How old an intent record or size lock must be before it is taken
    /// for an interrupted process's and finished or released (default
    /// 30 s: longer than any live operation's hold).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// Opens the store: starts the process's I/O thread if none runs
    /// yet, checks that the backend honours conditional writes and copies
    /// (five requests on two probe objects, in two round trips), and
    /// finishes an interrupted rename, if any.
    pub fn open(self) -> Result<CloudStore, CloudError> {
        let io = Io::shared().map_err(CloudError::Runtime)?;
        let mut store = CloudStore {
            store: self.store,
            layout: Layout::new(&self.prefix),
            io,
            settings: self.settings,
            stash: Default::default(),
        };
        store.probe()?;
        let root = crate::path::MemoryPath::root();
        store.recover(&root).map_err(|e| {
            let summary = super::errors::ForOperator::of(&e, store.settings.timeout);
            CloudError::Connect(Box::new(summary))
        })?;
        Ok(store)
    }
}

/// Which service a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudScheme {
    /// `s3://BUCKET/PREFIX`.
    S3,
    /// `az://CONTAINER/PREFIX`.
    Azure,
    /// `gs://BUCKET/PREFIX`.
    Gcs,
}

/// Splits `s3://bucket/a/b` into its scheme, bucket and prefix.
pub fn parse_url(url: &str) -> Result<(CloudScheme, String, String), CloudError> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        CloudError::Config(format!("`{url}` is not a URL: write s3://BUCKET/PREFIX"))
    })?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "s3" => CloudScheme::S3,
        "az" => CloudScheme::Azure,
        "gs" => CloudScheme::Gcs,
        other => {
            return Err(CloudError::Config(format!(
                "unknown object store `{other}://`: use s3://, az:// or gs://"
            )));
        }
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(CloudError::Config(format!("`{url}` names no bucket")));
    }
    Ok((
        scheme,
        bucket.to_owned(),
        prefix.trim_matches('/').to_owned(),
    ))
}

impl CloudStore {
    /// Installs rustls's ring provider as the process default, unless a
    /// provider is installed already. Call it before building an
    /// object_store client of your own with this crate's `s3`, `azure` or
    /// `gcs` features: their HTTP client (reqwest on rustls) is built
    /// without a provider of its own, so that every feature combination
    /// has exactly one (ring, which the PostgreSQL store uses too, and
    /// which needs no C toolchain), and building it with none installed
    /// panics. [`from_url`](Self::from_url) calls it for you.
    #[cfg(feature = "cloud-http")]
    pub fn install_crypto_provider() {
        // An error means a provider is installed already: reqwest uses it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    /// Opens `s3://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` or
    /// `gs://BUCKET/PREFIX`, configured from the standard environment
    /// variables as object_store's `from_env` builders read them
    /// (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `AWS_REGION`, credentials;
    /// `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`,
    /// `AZURE_STORAGE_USE_EMULATOR`; `GOOGLE_SERVICE_ACCOUNT`, …), with
    /// object_store's default `RetryConfig`. Each scheme needs its
    /// feature (`s3`, `azure`, `gcs`).
    #[cfg(any(feature = "s3", feature = "azure", feature = "gcs"))]
    pub fn from_url(url: &str) -> Result<CloudStore, CloudError> {
        Self::from_url_with(url, object_store::RetryConfig::default(), |b| b)
    }

    /// [`from_url`](Self::from_url) with a `RetryConfig` of your own and a
    /// last say on the store's settings.
    #[cfg(any(feature = "s3", feature = "azure", feature = "gcs"))]
    pub fn from_url_with(
        url: &str,
        retry: object_store::RetryConfig,
        settings: impl FnOnce(CloudBuilder) -> CloudBuilder,
    ) -> Result<CloudStore, CloudError> {
        CloudStore::install_crypto_provider();
        let (scheme, bucket, prefix) = parse_url(url)?;
        let config = |e: object_store::Error| CloudError::Config(e.to_string());
        let store: Arc<dyn ObjectStore> = match scheme {
            #[cfg(feature = "s3")]
            CloudScheme::S3 => Arc::new(
                s3_copies_conditionally(object_store::aws::AmazonS3Builder::from_env())
                    .with_bucket_name(bucket)
                    .with_retry(retry)
                    .build()
                    .map_err(config)?,
            ),
            #[cfg(feature = "azure")]
            CloudScheme::Azure => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_container_name(bucket)
                    .with_retry(retry)
                    .build()
                    .map_err(config)?,
            ),
            #[cfg(feature = "gcs")]
            CloudScheme::Gcs => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(retry)
                    .build()
                    .map_err(config)?,
            ),
            #[allow(unreachable_patterns)]
            other => {
                return Err(CloudError::Config(format!(
                    "this build has no {other:?} support (enable the s3, azure or gcs feature)"
                )));
            }
        };
        settings(CloudStore::builder(store).prefix(&prefix)).open()
    }
}

/// S3 copies with `If-None-Match: *` on CopyObject (Amazon S3 honours it
/// and answers 412 when the destination exists), unless the environment
/// configured a copy mode of its own (`AWS_COPY_IF_NOT_EXISTS`). Open's
/// probe checks that the service really refuses: one that ignores the
/// header is copied through the client instead.
#[cfg(feature = "s3")]
fn s3_copies_conditionally(
    builder: object_store::aws::AmazonS3Builder,
) -> object_store::aws::AmazonS3Builder {
    use object_store::aws::{AmazonS3ConfigKey, S3CopyIfNotExists};
    if builder
        .get_config_value(&AmazonS3ConfigKey::CopyIfNotExists)
        .is_some()
    {
        return builder;
    }
    builder.with_copy_if_not_exists(S3CopyIfNotExists::Header(
        "If-None-Match".into(),
        "*".into(),
    ))
}
