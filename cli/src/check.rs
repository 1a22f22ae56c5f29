//! `check` (and `stats --profile managed`): what would not fit a managed
//! Memory Store.

use claude_memory::profile;

use crate::output::{Failure, Outcome, failed, out};

/// Lists every misfit; exits 1 if there is one.
pub fn check(tool: &crate::Tool) -> Outcome {
    let misfits = profile::check(tool.store()).map_err(failed)?;
    for misfit in &misfits {
        out(misfit)?;
    }
    match misfits.len() {
        0 => out("everything fits a managed Memory Store"),
        n => {
            out(format_args!(
                "{n} {} would not fit a managed Memory Store",
                if n == 1 { "entry" } else { "entries" }
            ))?;
            Err(Failure::Reported)
        }
    }
}

/// One line for `stats`: how many entries would not fit.
pub fn summary(tool: &crate::Tool) -> Outcome {
    let misfits = profile::check(tool.store()).map_err(failed)?;
    out(format_args!(
        "managed Memory Stores: {} would not fit{}",
        misfits.len(),
        if misfits.is_empty() {
            ""
        } else {
            " (run `check` for the list)"
        }
    ))
}
