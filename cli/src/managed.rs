//! `--store managed:MEMSTORE_ID`: a memory store of Claude Managed Agents
//! (`ManagedStore`), with the key from `ANTHROPIC_API_KEY` and the
//! endpoint from `ANTHROPIC_BASE_URL`, as Anthropic's SDKs read them.

use claude_memory::MemoryStore;

use crate::output::Failure;
use crate::store::StoreSpec;

/// Checks the id's shape: `managed:memstore_…`.
pub fn parse(rest: &str, text: &str) -> Result<StoreSpec, Failure> {
    if !rest.starts_with("memstore_") || rest.contains(['/', '?', '#']) {
        return Err(Failure::Usage(format!(
            "`{text}` names no memory store: write managed:MEMSTORE_ID (an id starting memstore_)"
        )));
    }
    Ok(StoreSpec::Managed(rest.to_owned()))
}

/// Opens the store (the build needs the `managed` feature).
#[cfg(feature = "managed")]
pub fn open(id: &str) -> Result<Box<dyn MemoryStore>, Failure> {
    let store = claude_memory::ManagedStore::open(id).map_err(|e| {
        Failure::Failed(format!(
            "cannot open the managed memory store {id}: {}",
            crate::output::with_causes(&e)
        ))
    })?;
    Ok(Box::new(store))
}

/// Why a build without the `managed` feature refuses a managed store.
#[cfg(not(feature = "managed"))]
const NOT_BUILT: &str = "this claude-memory was built without managed memory stores (reinstall with: cargo install claude-memory-cli --features managed)";

#[cfg(not(feature = "managed"))]
pub fn open(_: &str) -> Result<Box<dyn MemoryStore>, Failure> {
    Err(Failure::Usage(NOT_BUILT.into()))
}

/// The store's history: the service's own versions.
#[cfg(feature = "managed")]
pub fn versions(id: &str) -> Result<Box<dyn claude_memory::history::Versions>, Failure> {
    let store = claude_memory::ManagedStore::open(id).map_err(|e| {
        Failure::Failed(format!(
            "cannot open the managed memory store {id}: {}",
            crate::output::with_causes(&e)
        ))
    })?;
    Ok(Box::new(store))
}

#[cfg(not(feature = "managed"))]
pub fn versions(_: &str) -> Result<Box<dyn claude_memory::history::Versions>, Failure> {
    Err(Failure::Usage(NOT_BUILT.into()))
}
