//! Nothing here: the benchmarks are under `benches/` (see `Cargo.toml`).
