//! `--store s3://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` and
//! `gs://BUCKET/PREFIX`: a `CloudStore`, configured from the standard
//! environment variables (object_store's `from_env` builders).

use claude_memory::MemoryStore;

use crate::output::Failure;
use crate::store::StoreSpec;

/// Checks a cloud URL's shape: `SCHEME://BUCKET[/PREFIX]`.
pub fn parse(scheme: &str, rest: &str, text: &str) -> Result<StoreSpec, Failure> {
    let Some(path) = rest.strip_prefix("//") else {
        return Err(Failure::Usage(format!(
            "`{text}` is not an object store URL: write {scheme}://BUCKET/PREFIX"
        )));
    };
    if path.split('/').next().is_none_or(str::is_empty) {
        return Err(Failure::Usage(format!(
            "`{text}` names no bucket: write {scheme}://BUCKET/PREFIX"
        )));
    }
    Ok(StoreSpec::Cloud(text.to_owned()))
}

/// Opens the store (the build needs the scheme's feature).
#[cfg(any(feature = "s3", feature = "azure", feature = "gcs"))]
pub fn open(url: &str) -> Result<Box<dyn MemoryStore>, Failure> {
    let store = claude_memory::CloudStore::from_url(url).map_err(|e| {
        Failure::Failed(format!(
            "cannot open the cloud store {url}: {}",
            crate::output::with_causes(&e)
        ))
    })?;
    Ok(Box::new(store))
}

#[cfg(not(any(feature = "s3", feature = "azure", feature = "gcs")))]
pub fn open(_: &str) -> Result<Box<dyn MemoryStore>, Failure> {
    Err(Failure::Usage(
        "this claude-memory was built without cloud storage (reinstall with: cargo install claude-memory-cli --features s3; or azure, or gcs)".into(),
    ))
}

/// The history log of the cloud store at `url`: in its own bucket, below
/// its prefix (`CloudLog`), or below the tenant's prefix with `--tenant`.
#[cfg(any(feature = "s3", feature = "azure", feature = "gcs"))]
pub fn log(
    url: &str,
    tenant: Option<&claude_memory::TenantId>,
) -> Result<Box<dyn claude_memory::history::HistoryLog>, Failure> {
    let store = claude_memory::CloudStore::from_url(url).map_err(|e| {
        Failure::Failed(format!(
            "cannot open the cloud store {url}: {}",
            crate::output::with_causes(&e)
        ))
    })?;
    Ok(Box::new(match tenant {
        Some(tenant) => claude_memory::history::CloudLog::for_tenant(&store, tenant),
        None => claude_memory::history::CloudLog::for_store(&store),
    }))
}

#[cfg(not(any(feature = "s3", feature = "azure", feature = "gcs")))]
pub fn log(
    url: &str,
    _: Option<&claude_memory::TenantId>,
) -> Result<Box<dyn claude_memory::history::HistoryLog>, Failure> {
    match open(url) {
        Err(e) => Err(e),
        Ok(_) => Err(Failure::Usage("no cloud storage in this build".into())),
    }
}
