//! Shared by the cloud tests: the servers' clients, fresh prefixes, and
//! the environment the CLI reads for them.
#![allow(dead_code)] // not every test binary uses every helper

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use claude_memory::CloudStore;
use claude_memory::object_store::ObjectStore;
use claude_memory::object_store::aws::{AmazonS3Builder, S3CopyIfNotExists};
use claude_memory::object_store::azure::MicrosoftAzureBuilder;

/// The bucket (S3) and container (Azure) `.ci/cloud.sh` creates.
pub const BUCKET: &str = "claude-memory-test";
/// Azurite's well-known development account key (public, in its docs).
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The backend's client, or `None` (with a printed line) when its server
/// is not configured. `s3` copies conditionally (`If-None-Match` on
/// CopyObject, as `CloudStore::from_url` configures it); `s3-plain` is a
/// client without that setting, so the store copies through the client.
pub fn bucket(backend: &str) -> Option<Arc<dyn ObjectStore>> {
    let var = endpoint_variable(backend);
    let Ok(endpoint) = std::env::var(var) else {
        assert!(
            std::env::var_os("CLAUDE_MEMORY_REQUIRE_CLOUD").is_none(),
            "CLAUDE_MEMORY_REQUIRE_CLOUD is set but {var} is not"
        );
        eprintln!("skipped: {var} is not set (run `source .ci/cloud.sh` first)");
        return None;
    };
    CloudStore::install_crypto_provider();
    let s3 = || {
        AmazonS3Builder::new()
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
    };
    Some(match backend {
        "s3" => Arc::new(
            s3().with_copy_if_not_exists(S3CopyIfNotExists::Header(
                "If-None-Match".into(),
                "*".into(),
            ))
            .build()
            .expect("s3 client"),
        ),
        "s3-plain" => Arc::new(s3().build().expect("s3 client")),
        _ => Arc::new(
            MicrosoftAzureBuilder::new()
                .with_endpoint(endpoint.clone())
                .with_allow_http(true)
                .with_account("devstoreaccount1")
                .with_access_key(AZURITE_KEY)
                .with_container_name(BUCKET)
                .build()
                .expect("azure client"),
        ),
    })
}

/// A prefix no other test or run uses.
pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "t/{tag}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh, empty store on `backend`.
pub fn fresh(backend: &str) -> Option<CloudStore> {
    let bucket = bucket(backend)?;
    Some(CloudStore::open(bucket, &unique(backend)).expect("open"))
}

/// The variable that says where `backend`'s server is.
fn endpoint_variable(backend: &str) -> &'static str {
    match backend {
        "s3" | "s3-plain" => "CLAUDE_MEMORY_TEST_S3_ENDPOINT",
        _ => "CLAUDE_MEMORY_TEST_AZURE_ENDPOINT",
    }
}

/// The endpoint variable of `backend`, if set (no skip message).
pub fn endpoint(backend: &str) -> Option<String> {
    std::env::var(endpoint_variable(backend)).ok()
}

/// The `--store` URL of a fresh prefix on `backend`, and the standard
/// environment variables object_store's `from_env` builders read for it.
pub fn cli_store(backend: &str, tag: &str) -> Option<(String, Vec<(&'static str, String)>)> {
    let ep = endpoint(backend)?;
    let prefix = unique(tag);
    Some(match backend {
        "s3" => (
            format!("s3://{BUCKET}/{prefix}"),
            vec![
                ("AWS_ENDPOINT_URL", ep),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "test".into()),
                ("AWS_SECRET_ACCESS_KEY", "test".into()),
                ("AWS_REGION", "us-east-1".into()),
            ],
        ),
        _ => (
            format!("az://{BUCKET}/{prefix}"),
            vec![
                ("AZURE_STORAGE_ENDPOINT", ep),
                ("AZURE_ALLOW_HTTP", "true".into()),
                ("AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1".into()),
                ("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY.into()),
            ],
        ),
    })
}

pub mod proxy;
pub mod tap;
