//! The Rust side of `bench/benches/compare_sdk.py`: runs a workload file (one
//! `{"category": …, "input": {…}}` per line) through a durable
//! `FilesystemStore` and prints the time spent per category as JSON.
//!
//! ```text
//! cargo bench -p claude-memory-bench --bench sdk_workload -- --workload FILE --root DIR
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use claude_memory::{FilesystemStore, MemoryTool};
use serde_json::Value;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(workload), Some(root)) = (arg("--workload"), arg("--root")) else {
        // `cargo bench` without arguments: nothing to compare.
        eprintln!(
            "usage: sdk_workload --workload FILE --root DIR (see bench/benches/compare_sdk.py)"
        );
        return Ok(());
    };
    let steps: Vec<(String, Value)> = std::fs::read_to_string(workload)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            Ok((
                v["category"].as_str().unwrap_or("other").to_owned(),
                v["input"].clone(),
            ))
        })
        .collect::<Result<_, serde_json::Error>>()?;
    let tool = MemoryTool::new(FilesystemStore::open(root)?);
    let mut spent: BTreeMap<String, (Duration, usize, usize)> = BTreeMap::new();
    for (category, input) in &steps {
        let start = Instant::now();
        let result = tool.dispatch(input);
        let took = start.elapsed();
        let entry = spent.entry(category.clone()).or_default();
        entry.0 += took;
        entry.1 += 1;
        entry.2 += usize::from(result.is_error);
    }
    let out: BTreeMap<&str, Value> = spent
        .iter()
        .map(|(k, (d, n, e))| {
            (
                k.as_str(),
                serde_json::json!({"seconds": d.as_secs_f64(), "ops": n, "errors": e}),
            )
        })
        .collect();
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
