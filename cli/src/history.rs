//! `history`, `show`, `diff`, `revert`, `restore --at`, `redact` and
//! `history prune` over the one versions API (`claude_memory::history::
//! Versions`): a `--history` store's log and a managed memory store's own
//! versions alike, and the logs a `--history` store keeps.

use std::time::{Duration, SystemTime};

use claude_memory::history::{
    ChangeOp, HistoryError, Query, Retention, Version, VersionId, Versions, escape, escape_text,
};
use claude_memory::path::MemoryPath;

use crate::output::{Failure, Outcome, count, failed, out};

fn time(t: SystemTime) -> String {
    claude_memory::history::format_time(t)
}

/// One listing line. Every field a model, a stored file or the service
/// controls is escaped: no control character can move the cursor or
/// forge a row.
fn line(v: &Version, label: &str) -> String {
    let shown = |p: &Option<String>| p.as_deref().map_or_else(|| "[redacted]".into(), escape);
    let path = match &v.from {
        Some(from) => format!("{} -> {}", escape(from), shown(&v.path)),
        None => shown(&v.path),
    };
    let actor = match (&v.actor, &v.call) {
        (Some(a), Some(c)) => format!("{}/{}", escape(a), escape(c)),
        (Some(a), None) => escape(a),
        (None, Some(c)) => escape(c),
        (None, None) => "-".into(),
    };
    let sha = escape(v.sha256.as_deref().unwrap_or("-"));
    let mut text = format!(
        "{label}\t{}\t{}\t{path}\t{actor}\t{}\t{}",
        time(v.time),
        v.op.as_str(),
        sha.get(..12).unwrap_or(&sha),
        v.size.map_or_else(|| "-".into(), claude_memory::human_size),
    );
    if v.redacted {
        text.push_str("\t[redacted]");
    }
    if let Some(note) = &v.note {
        text.push_str(&format!("\t({})", escape(note)));
    }
    text
}

fn path(text: &str) -> Result<MemoryPath, Failure> {
    MemoryPath::parse(text).map_err(|e| Failure::Usage(format!("{text}: {e}")))
}

/// A history operation's failure, in the store's words where they help.
fn why(e: HistoryError) -> Failure {
    match e {
        // Asked of a history that cannot do it: the command, not the store.
        HistoryError::Unsupported(what) => Failure::Usage(what.into()),
        HistoryError::NoSuchVersion(_) => failed("no such version in this history"),
        e => failed(e),
    }
}

/// `history [PATH] [--prefix P] [--since T] [--until T] [--actor A]
/// [--call ID] [--limit N] [--before ID]`: every version, oldest first,
/// streamed a page at a time; with --limit, the newest N.
pub fn list(
    h: &dyn Versions,
    mut query: Query,
    file: Option<&str>,
    prefix: Option<&str>,
) -> Outcome {
    query.path = file.map(path).transpose()?;
    query.prefix = prefix.map(path).transpose()?;
    let mut n = 0;
    if query.limit.is_some() {
        let page = h.history(&query).map_err(why)?;
        for v in &page {
            out(line(v, &v.id.to_string()))?;
        }
        n = page.len();
        if let Some(oldest) = page.first().filter(|_| Some(n) == query.limit) {
            out(format_args!(
                "{} (older ones: --before {})",
                count(n, "version", "versions"),
                oldest.id
            ))?;
            return Ok(());
        }
    } else {
        let mut printed = Ok(());
        h.each(&query, &mut |v| {
            n += 1;
            if printed.is_ok() {
                printed = out(line(&v, &v.id.to_string()));
            }
            Ok(())
        })
        .map_err(why)?;
        printed?;
    }
    out(count(n, "version", "versions"))
}

/// `show ID`: the record, then the content.
pub fn show(h: &dyn Versions, id: &VersionId) -> Outcome {
    let v = h.show(id).map_err(why)?;
    out(line(&v, &id.to_string()))?;
    out(format_args!(
        "sha256 {}",
        escape(v.sha256.as_deref().unwrap_or("-"))
    ))?;
    match (v.text(), v.op) {
        (Some(text), _) if !v.redacted => {
            out(format_args!("--- content ---\n{}", escape_text(&text)))
        }
        (None, ChangeOp::Deleted) if !v.redacted => out("--- deleted ---"),
        _ => out("--- content redacted ---"),
    }
}

/// `diff A [B]`.
pub fn diff(h: &dyn Versions, a: &VersionId, b: Option<&VersionId>) -> Outcome {
    let text = h.diff_versions(a, b).map_err(why)?;
    if text.is_empty() {
        return out("no differences");
    }
    out(escape_text(text.trim_end()))
}

/// `revert ID`, or `revert --actor LABEL` / `--call ID`: everything one
/// actor or one call did, undone as one command.
pub fn revert(
    h: &dyn Versions,
    id: Option<&VersionId>,
    actor: Option<String>,
    call: Option<String>,
) -> Outcome {
    if let Some(id) = id {
        return match h.revert_to(id).map_err(why)? {
            Some(p) => out(format_args!(
                "reverted {} to {id} (the revert is itself a change, kept in the history)",
                escape(&p)
            )),
            None => out(format_args!("the file already has the content of {id}")),
        };
    }
    let (by, note) = match (actor, call) {
        (Some(a), _) => (
            Query {
                actor: Some(a.clone()),
                ..Query::default()
            },
            format!("revert of {a}"),
        ),
        (None, Some(c)) => (
            Query {
                call: Some(c.clone()),
                ..Query::default()
            },
            format!("revert of call {c}"),
        ),
        (None, None) => {
            return Err(Failure::Usage(
                "revert needs a version id, --actor LABEL or --call ID".into(),
            ));
        }
    };
    let any = Query {
        limit: Some(1),
        ..by.clone()
    };
    if h.history(&any).map_err(why)?.is_empty() {
        return Err(Failure::Failed(format!(
            "no version in this history was made by {}: nothing to revert (`claude-memory history` lists the versions, with their actors and calls)",
            escape(note.trim_start_matches("revert of "))
        )));
    }
    let report = h.revert_changes(&by, &note).map_err(why)?;
    for (p, what) in &report.reverted {
        out(format_args!("{what} {}", escape(p)))?;
    }
    for (p, reason) in &report.skipped {
        out(format_args!("skipped {}: {}", escape(p), escape(reason)))?;
    }
    out(format_args!(
        "{}: {} put back, {} left as {} (noted \"{}\")",
        escape(&note),
        count(report.reverted.len(), "file", "files"),
        report.skipped.len(),
        if report.skipped.len() == 1 {
            "it is"
        } else {
            "they are"
        },
        escape(&note)
    ))?;
    if report.skipped.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// `restore --at TIME [--prefix P]`.
pub fn restore(h: &dyn Versions, at: SystemTime, prefix: Option<&str>, dry_run: bool) -> Outcome {
    let prefix = prefix.map(path).transpose()?;
    let report = h.restore_at(at, prefix.as_ref(), dry_run).map_err(why)?;
    let (restored, deleted) = if dry_run {
        ("would restore", "would delete")
    } else {
        ("restored", "deleted")
    };
    for p in &report.written {
        out(format_args!("{restored} {}", escape(p)))?;
    }
    for p in &report.deleted {
        out(format_args!("{deleted} {}", escape(p)))?;
    }
    for (p, why) in &report.skipped {
        out(format_args!("skipped {}: {}", escape(p), why.as_str()))?;
    }
    for (p, e) in &report.failed {
        crate::output::err(format_args!(
            "claude-memory: cannot restore {}: {}",
            escape(p),
            escape(e)
        ));
    }
    out(format_args!(
        "{} to {}: {} written, {} deleted, {} skipped",
        if dry_run { "would restore" } else { "restored" },
        time(at),
        count(report.written.len(), "file", "files"),
        report.deleted.len(),
        report.skipped.len()
    ))?;
    if report.failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// `redact ID` or `redact --text TEXT`.
pub fn redact(h: &dyn Versions, id: Option<&VersionId>, text: Option<&str>) -> Outcome {
    if let Some(text) = text {
        let (ids, still) = h.erase_text(text.as_bytes()).map_err(why)?;
        let list: Vec<String> = ids.iter().map(ToString::to_string).collect();
        out(format_args!(
            "erased the text from {}{}",
            count(ids.len(), "version", "versions"),
            if list.is_empty() {
                String::new()
            } else {
                format!(" ({})", list.join(", "))
            }
        ))?;
        for p in &still {
            out(format_args!(
                "the live file {} still holds it: edit or delete it (the history does not change the store)",
                escape(p)
            ))?;
        }
        return Ok(());
    }
    let Some(id) = id else {
        return Err(Failure::Usage(
            "redact needs a version id or --text TEXT".into(),
        ));
    };
    let ids = h.redact_version(id).map_err(why)?;
    let also: Vec<String> = ids.iter().skip(1).map(ToString::to_string).collect();
    if also.is_empty() {
        out(format_args!(
            "redacted {id}: its content is erased, its record kept"
        ))
    } else {
        out(format_args!(
            "redacted {id} and {} holding the same content ({}): their content is erased, their records kept",
            count(also.len(), "other version", "other versions"),
            also.join(", ")
        ))
    }
}

/// `history prune [--older-than AGE] [--keep N]`.
pub fn prune(
    h: &dyn Versions,
    older_than: Option<Duration>,
    keep: Option<usize>,
    dry_run: bool,
) -> Outcome {
    if keep == Some(0) {
        return Err(Failure::Usage(
            "--keep 0 would leave a live file without its latest version: keep at least 1".into(),
        ));
    }
    if older_than.is_none() && keep.is_none() {
        return Err(Failure::Usage(
            "history prune needs --older-than AGE, --keep N or both".into(),
        ));
    }
    let retention = Retention {
        max_age: older_than,
        keep_per_file: keep,
    };
    let removed = h.prune_history(&retention, dry_run).map_err(why)?;
    out(format_args!(
        "{} {} (the latest version of every live file is kept)",
        if dry_run { "would remove" } else { "removed" },
        count(removed.len(), "version", "versions")
    ))
}

/// A time: RFC 3339 (`2026-11-30T12:00:00Z`, `2026-11-30 12:00:00`) or an
/// age before now (`10m`, `2h`, `1d`).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(t);
    }
    let age = humantime::parse_duration(text).map_err(|_| {
        format!(
            "`{text}` is not a time: give RFC 3339 (2026-11-30T12:00:00Z) or an age (10m, 2h, 1d)"
        )
    })?;
    SystemTime::now()
        .checked_sub(age)
        .ok_or_else(|| format!("`{text}` is too far back"))
}
