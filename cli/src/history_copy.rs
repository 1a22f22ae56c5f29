//! `history copy --to STORE`: replays a store's history, version by
//! version, into an empty store that keeps one: a `--history` store's
//! versions into a managed memory store (whose service makes one version
//! of each change), a managed store's versions into a `--history` store,
//! or one history backend into another. Each change carries its source
//! version's id and time in its note; the times themselves are the
//! copy's (no store lets a change be written in the past).

use claude_memory::MemoryStore;
use claude_memory::history::ChangeOp;
use claude_memory::path::MemoryPath;
use claude_memory::store::{
    Context, DeleteIf, DeleteOptions, RenameOptions, WriteMode, WriteOptions,
};

use crate::output::{Failure, Outcome, count, failed, out};

/// What a copy will do: its steps, and the versions it cannot or need
/// not replay.
#[derive(Default)]
pub struct Plan {
    steps: Vec<Step>,
    /// Redacted versions: their content is gone.
    redacted: usize,
    /// Versions that changed nothing (a revert to what was there).
    unchanged: usize,
}

/// One change to replay.
struct Step {
    op: Op,
    /// The source version's id (`v12`, `memver_…`), kept as the call.
    source: String,
    /// When and by whom the source version was made.
    note: String,
}

enum Op {
    Write(MemoryPath, Vec<u8>),
    Rename(MemoryPath, MemoryPath),
    Delete(MemoryPath),
}

/// The sync's marker file: the sync's own, never copied (it names the
/// source's memory store). Without the `managed` feature there is no sync.
fn is_marker(p: &MemoryPath) -> bool {
    #[cfg(feature = "managed")]
    return p.components().len() == 1
        && p.name() == Some(claude_memory::store::managed_sync::MARKER_FILE);
    #[cfg(not(feature = "managed"))]
    {
        let _ = p;
        false
    }
}

fn stored(p: &str) -> Result<MemoryPath, Failure> {
    MemoryPath::from_stored(p).ok_or_else(|| {
        failed(format_args!(
            "the history names a path no memory path spells: {}",
            claude_memory::history::escape(p)
        ))
    })
}

/// The steps of a `--history` store's versions, oldest first, each with
/// its content read before anything is written. A redacted version's
/// content is gone: it is skipped, and counted.
pub fn from_history(h: &crate::history::History) -> Result<Plan, Failure> {
    let mut plan = Plan::default();
    let all = claude_memory::history::Query {
        limit: Some(usize::MAX),
        ..Default::default()
    };
    for r in h.versions(&all).map_err(failed)? {
        let paths = [Some(&r.path), r.from.as_ref()];
        if paths
            .into_iter()
            .flatten()
            .any(|p| stored(p).is_ok_and(|p| is_marker(&p)))
        {
            continue;
        }
        let note = format!(
            "copied from v{}, {}{}",
            r.id,
            claude_memory::history::format_time(r.time),
            r.actor
                .as_deref()
                .map(|a| format!(", by {a}"))
                .unwrap_or_default()
        );
        let op = match r.op {
            ChangeOp::Created | ChangeOp::Modified => {
                let full = h.version(r.id).map_err(failed)?;
                match (full.redacted, full.content) {
                    (false, Some(content)) => Op::Write(stored(&r.path)?, content),
                    _ => {
                        plan.redacted += 1;
                        continue;
                    }
                }
            }
            ChangeOp::Renamed => match &r.from {
                Some(from) => Op::Rename(stored(from)?, stored(&r.path)?),
                None => continue,
            },
            ChangeOp::Deleted => Op::Delete(stored(&r.path)?),
        };
        plan.steps.push(Step {
            op,
            source: format!("v{}", r.id),
            note,
        });
    }
    Ok(plan)
}

/// The steps of a managed store's versions, oldest first: a version
/// whose path changed is a rename (then a write if its content did too).
#[cfg(feature = "managed")]
pub fn from_managed(id: &str) -> Result<Plan, Failure> {
    use claude_memory::store::{VersionOp, VersionQuery};
    use std::collections::HashMap;

    let store = claude_memory::ManagedStore::open(id).map_err(|e| {
        failed(format_args!(
            "cannot open the managed memory store {id}: {e}"
        ))
    })?;
    let mut plan = Plan::default();
    // Each memory's path and sha as the replay has left it.
    let mut last: HashMap<String, (MemoryPath, Option<String>)> = HashMap::new();
    for v in store.versions(&VersionQuery::default()).map_err(failed)? {
        let note = format!(
            "copied from {}, {}{}",
            v.id,
            v.created_at,
            v.actor
                .as_deref()
                .map(|a| format!(", by {a}"))
                .unwrap_or_default()
        );
        let step = |op| Step {
            op,
            source: v.id.clone(),
            note: note.clone(),
        };
        if v.path.as_ref().is_some_and(is_marker) {
            continue;
        }
        let before = last.get(&v.memory_id).cloned();
        match (v.op, &v.path, before) {
            (VersionOp::Deleted, _, Some((at, _))) => {
                plan.steps.push(step(Op::Delete(at)));
                last.remove(&v.memory_id);
            }
            (VersionOp::Deleted, _, None) => {}
            (_, None, _) => plan.redacted += 1,
            (_, Some(path), before) => {
                let moved = before.as_ref().is_some_and(|(old, _)| old != path);
                if let Some((old, _)) = before.as_ref().filter(|_| moved) {
                    plan.steps.push(step(Op::Rename(old.clone(), path.clone())));
                }
                if before.as_ref().and_then(|(_, sha)| sha.as_ref()) != v.sha256.as_ref() {
                    match store.version(&v.id).map_err(failed)?.content {
                        Some(text) => {
                            plan.steps
                                .push(step(Op::Write(path.clone(), text.into_bytes())));
                        }
                        None => plan.redacted += 1,
                    }
                } else if !moved {
                    plan.unchanged += 1;
                }
                last.insert(v.memory_id.clone(), (path.clone(), v.sha256.clone()));
            }
        }
    }
    Ok(plan)
}

#[cfg(not(feature = "managed"))]
pub fn from_managed(_: &str) -> Result<Plan, Failure> {
    Err(Failure::Usage(
        "this claude-memory was built without managed memory stores (reinstall with: cargo install claude-memory-cli --features managed)".into(),
    ))
}

/// Replays `steps` into `dest`, which must be empty: checked first, so a
/// copy never mixes with what a store already holds.
pub fn replay(dest: &dyn MemoryStore, plan: &Plan) -> Outcome {
    let steps = &plan.steps;
    let root = MemoryPath::root();
    if !dest.list(&root).map_err(failed)?.is_empty() {
        return Err(failed(
            "the destination is not empty: history copy replays a history into an empty store only",
        ));
    }
    for (done, step) in steps.iter().enumerate() {
        let context = Context {
            call: Some(&step.source),
            note: Some(&step.note),
        };
        let result = match &step.op {
            Op::Write(p, data) => dest
                .write_opts(
                    p,
                    data,
                    WriteOptions {
                        mode: WriteMode::Overwrite,
                        quota: None,
                        context,
                    },
                )
                .map(|_| ()),
            Op::Rename(from, to) => dest.rename_opts(from, to, RenameOptions { context }),
            Op::Delete(p) => dest
                .delete_opts(
                    p,
                    DeleteOptions {
                        condition: DeleteIf::Exists,
                        context,
                    },
                )
                .map(|_| ()),
        };
        if let Err(e) = result {
            return Err(failed(format_args!(
                "copied {} of {}; {} failed: {e} (the destination holds the copy so far: empty it before trying again)",
                done,
                count(steps.len(), "change", "changes"),
                claude_memory::history::escape(&step.source)
            )));
        }
    }
    let mut also = Vec::new();
    if plan.redacted > 0 {
        also.push(format!(
            "{} redacted, skipped",
            count(plan.redacted, "version", "versions")
        ));
    }
    if plan.unchanged > 0 {
        also.push(format!(
            "{} that changed nothing",
            count(plan.unchanged, "version", "versions")
        ));
    }
    out(format_args!(
        "copied {}{}",
        count(steps.len(), "change", "changes"),
        if also.is_empty() {
            String::new()
        } else {
            format!(" ({})", also.join("; "))
        }
    ))
}
