//! `stats`: files, bytes, the largest and the least recently written file.

use std::time::SystemTime;

use claude_memory::human_size;
use claude_memory::path::MemoryPath;
use claude_memory::store::walk::walk_noting_unlistable;
use claude_memory::store::{Flow, Order, Step};

use crate::output::{Outcome, failed, out};

#[derive(Default)]
struct Totals {
    files: u64,
    bytes: u64,
    largest: Option<(u64, String)>,
    oldest: Option<(SystemTime, String)>,
}

pub fn stats(tool: &crate::Tool) -> Outcome {
    let mut t = Totals::default();
    // As `view` does: a subdirectory that cannot be listed does not hide
    // every other file; it is named at the end, and the exit status is 1.
    let mut unlisted = Vec::new();
    walk_noting_unlistable(
        tool.store(),
        &MemoryPath::root(),
        Order::AsListed,
        &mut unlisted,
        &mut |step| {
            if let Step::File { dir, entry, .. } = step {
                t.files += 1;
                t.bytes += entry.len;
                let path = || format!("{}/{}", dir.normalized(), entry.name);
                if t.largest.as_ref().is_none_or(|(n, _)| entry.len > *n) {
                    t.largest = Some((entry.len, path()));
                }
                if let Some(m) = entry.modified
                    && t.oldest.as_ref().is_none_or(|(o, _)| m < *o)
                {
                    t.oldest = Some((m, path()));
                }
            }
            Ok(Flow::Continue)
        },
    )
    .map_err(failed)?;
    out(format_args!("files: {}", t.files))?;
    out(format_args!("bytes: {} ({})", t.bytes, human_size(t.bytes)))?;
    match &t.largest {
        Some((n, p)) => out(format_args!("largest: {p} ({})", human_size(*n)))?,
        None => out("largest: -")?,
    }
    match &t.oldest {
        Some((m, p)) => {
            let age = SystemTime::now()
                .duration_since(*m)
                .unwrap_or_default()
                .as_secs();
            out(format_args!(
                "oldest: {p} (last written {} ago)",
                format_age(age)
            ))?
        }
        None => out("oldest: -")?,
    }
    match unlisted.as_slice() {
        [] => Ok(()),
        dirs => {
            let names: Vec<String> = dirs.iter().map(MemoryPath::normalized).collect();
            Err(crate::output::Failure::Failed(format!(
                "could not list {} (not counted): {}",
                crate::output::count(dirs.len(), "directory", "directories"),
                names.join(", ")
            )))
        }
    }
}

fn format_age(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h", secs / 3_600),
        _ => format!("{}d", secs / 86_400),
    }
}
