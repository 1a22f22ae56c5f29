//! `history copy --to STORE`: replays a store's history, version by
//! version, oldest first, into an empty store that keeps one: a loop over
//! the one versions API, whichever keeps the source (a `--history`
//! store's log, a managed memory store's service). Each change carries its
//! source version's id and time in its note; the times themselves are the
//! copy's (no store lets a change be written in the past).

use std::collections::HashMap;

use claude_memory::MemoryStore;
use claude_memory::history::{ChangeOp, HistoryError, Query, Version, Versions, escape};
use claude_memory::path::MemoryPath;
use claude_memory::store::{
    Context, DeleteIf, DeleteOptions, RenameOptions, StoreError, WriteMode, WriteOptions,
};

use crate::output::{Failure, Outcome, count, failed, out};

/// The sync's marker file: the sync's own, never copied (it names the
/// source's memory store). Without the `managed` feature there is no sync.
fn is_marker(p: &MemoryPath) -> bool {
    #[cfg(feature = "managed")]
    return p.components().len() == 1 && p.name() == Some(claude_memory::sync::MARKER_FILE);
    #[cfg(not(feature = "managed"))]
    {
        let _ = p;
        false
    }
}

/// What the copy did.
#[derive(Default)]
struct Copied {
    changes: usize,
    /// Redacted versions: their content is gone.
    redacted: usize,
    /// Versions that changed nothing (a revert to what was there).
    unchanged: usize,
}

/// Replays `source`'s history into `dest`, which must be empty: checked
/// first, so a copy never mixes with what a store already holds.
pub fn copy(source: &dyn Versions, dest: &dyn MemoryStore) -> Outcome {
    let root = MemoryPath::root();
    if !dest.list(&root).map_err(failed)?.is_empty() {
        return Err(failed(
            "the destination is not empty: history copy replays a history into an empty store only",
        ));
    }
    let mut done = Copied::default();
    // Each file's path and sha as the replay left it.
    let mut last: HashMap<String, (MemoryPath, Option<String>)> = HashMap::new();
    let mut stop: Option<Failure> = None;
    let walked = source.each(&Query::default(), &mut |v| {
        match replay(source, dest, &v, &mut last, &mut done) {
            Ok(()) => Ok(()),
            Err(e) => {
                stop = Some(failed(format_args!(
                    "copied {}; {} failed: {} (the destination holds the copy so far: empty it before trying again)",
                    count(done.changes, "change", "changes"),
                    v.id,
                    escape(&e.to_string())
                )));
                Err(HistoryError::Unsupported("the copy stopped"))
            }
        }
    });
    if let Some(f) = stop {
        return Err(f);
    }
    walked.map_err(failed)?;
    let mut also = Vec::new();
    if done.redacted > 0 {
        also.push(format!(
            "{} redacted, skipped",
            count(done.redacted, "version", "versions")
        ));
    }
    if done.unchanged > 0 {
        also.push(format!(
            "{} that changed nothing, skipped",
            count(done.unchanged, "version", "versions")
        ));
    }
    out(format_args!(
        "copied {}{}",
        count(done.changes, "change", "changes"),
        if also.is_empty() {
            String::new()
        } else {
            format!(" ({})", also.join("; "))
        }
    ))
}

/// One version, made again in `dest`.
fn replay(
    source: &dyn Versions,
    dest: &dyn MemoryStore,
    v: &Version,
    last: &mut HashMap<String, (MemoryPath, Option<String>)>,
    done: &mut Copied,
) -> Result<(), StoreError> {
    let at = v.path.as_deref().and_then(MemoryPath::from_stored);
    if at.as_ref().is_some_and(is_marker) {
        return Ok(());
    }
    let note = format!(
        "copied from {}, {}{}",
        v.id,
        claude_memory::history::format_time(v.time),
        v.actor
            .as_deref()
            .map(|a| format!(", by {a}"))
            .unwrap_or_default()
    );
    let source_id = v.id.to_string();
    let context = Context {
        call: Some(&source_id),
        note: Some(&note),
    };
    let before = last.get(&v.file).cloned();
    match (v.op, at, before) {
        (ChangeOp::Deleted, _, Some((at, _))) => {
            let delete = DeleteOptions {
                condition: DeleteIf::Exists,
                context,
            };
            dest.delete_opts(&at, delete)?;
            last.remove(&v.file);
            done.changes += 1;
        }
        (ChangeOp::Deleted, _, None) => {}
        // Redacted, or a name no memory path spells (a store's own).
        (_, None, _) => done.redacted += usize::from(v.redacted),
        (_, Some(path), before) => {
            let moved = before.as_ref().is_some_and(|(old, _)| *old != path);
            if let Some((old, _)) = before.as_ref().filter(|_| moved) {
                dest.rename_opts(old, &path, RenameOptions { context })?;
                done.changes += 1;
            }
            if before.as_ref().and_then(|(_, sha)| sha.as_ref()) != v.sha256.as_ref() {
                let full = source.show(&v.id).map_err(|e| StoreError::Invalid {
                    path: path.clone(),
                    reason: match e {
                        HistoryError::Unsupported(why) => why,
                        _ => "the source's version could not be read",
                    },
                })?;
                match full.content.filter(|_| !full.redacted) {
                    Some(content) => {
                        let write = WriteOptions {
                            mode: WriteMode::Overwrite,
                            quota: None,
                            context,
                        };
                        dest.write_opts(&path, &content, write)?;
                        done.changes += 1;
                    }
                    None => done.redacted += 1,
                }
            } else if !moved {
                done.unchanged += 1;
            }
            last.insert(v.file.clone(), (path, v.sha256.clone()));
        }
    }
    Ok(())
}
