//! `history`, `show`, `diff`, `revert` and `redact` on a managed memory
//! store: the service's own versions (`ManagedStore::versions`), whoever
//! wrote them (this tool, the SDK's sync, a managed agent).

use std::time::SystemTime;

use crate::args::VersionId;
use crate::output::{Failure, Outcome};

/// What `history` was asked for.
#[cfg_attr(not(feature = "managed"), allow(dead_code))]
pub struct Listing<'a> {
    pub path: Option<&'a str>,
    pub prefix: Option<&'a str>,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    pub actor: Option<String>,
}

/// A history command on a managed store.
#[cfg_attr(not(feature = "managed"), allow(dead_code))]
pub enum Action<'a> {
    List(Listing<'a>),
    Show(String),
    Diff(String, Option<String>),
    Revert(String),
    Redact(String),
}

/// The managed store's own id from a `VersionId`.
pub fn id(v: VersionId) -> Result<String, Failure> {
    match v {
        VersionId::Managed(id) => Ok(id),
        VersionId::Number(n) => Err(Failure::Usage(format!(
            "v{n} is a --history store's version: a managed memory store's versions are memver_… (see `history`)"
        ))),
    }
}

/// What the service cannot do, said plainly, with what to do instead.
pub fn unsupported(what: &str, instead: &str) -> Failure {
    Failure::Usage(format!(
        "{what} does not work on a managed memory store: {instead}"
    ))
}

#[cfg(feature = "managed")]
pub fn run(store_id: &str, action: Action<'_>) -> Outcome {
    use claude_memory::history::{escape, escape_text};
    use claude_memory::store::{ManagedVersion, VersionOp, VersionQuery};
    use claude_memory::{ManagedStore, MemoryPath, StoreError};

    use crate::output::{count, failed, out};

    let store = ManagedStore::open(store_id).map_err(|e| {
        failed(format_args!(
            "cannot open the managed memory store {store_id}: {e}"
        ))
    })?;
    let path =
        |text: &str| MemoryPath::parse(text).map_err(|e| Failure::Usage(format!("{text}: {e}")));
    let shown = |p: &Option<MemoryPath>| {
        p.as_ref()
            .map_or_else(|| "[redacted]".to_owned(), |p| escape(p.as_str()))
    };
    let line = |v: &ManagedVersion, from: Option<&MemoryPath>| {
        let at = match from {
            Some(old) if v.path.as_ref() != Some(old) && v.path.is_some() => {
                format!("{} -> {}", escape(old.as_str()), shown(&v.path))
            }
            _ => shown(&v.path),
        };
        let sha = escape(v.sha256.as_deref().unwrap_or("-"));
        let mut text = format!(
            "{}\t{}\t{}\t{at}\t{}\t{}\t{}",
            escape(&v.id),
            escape(&v.created_at),
            v.op.as_str(),
            escape(v.actor.as_deref().unwrap_or("-")),
            sha.get(..12).unwrap_or(&sha),
            v.size.map_or_else(|| "-".into(), claude_memory::human_size),
        );
        if v.redacted {
            text.push_str("\t[redacted]");
        }
        text
    };
    let why = |e: StoreError| match e {
        StoreError::NotFound { .. } => failed("no such version in this memory store"),
        StoreError::Invalid { reason, .. } => failed(reason),
        e => failed(e),
    };
    match action {
        Action::List(l) => {
            let file = l.path.map(path).transpose()?;
            let prefix = l.prefix.map(path).transpose()?;
            let mut query = VersionQuery {
                since: l.since,
                until: l.until,
                ..VersionQuery::default()
            };
            // A live file's versions are its memory's, across renames; a
            // deleted one's are found by the path they had.
            if let Some(f) = &file {
                query.memory_id = store.memory_id(f).map_err(why)?;
            }
            let mut versions = store.versions(&query).map_err(why)?;
            if let (Some(f), None) = (&file, &query.memory_id) {
                let ids: std::collections::HashSet<String> = versions
                    .iter()
                    .filter(|v| v.path.as_ref() == Some(f))
                    .map(|v| v.memory_id.clone())
                    .collect();
                versions.retain(|v| ids.contains(&v.memory_id));
            }
            if let Some(p) = &prefix {
                versions.retain(|v| {
                    v.path
                        .as_ref()
                        .is_some_and(|x| x == p || x.is_strictly_inside(p))
                });
            }
            if let Some(a) = &l.actor {
                versions.retain(|v| {
                    v.actor
                        .as_deref()
                        .is_some_and(|x| x == a || x.ends_with(&format!(":{a}")))
                });
            }
            let mut last: std::collections::HashMap<String, MemoryPath> = Default::default();
            for v in &versions {
                out(line(v, last.get(&v.memory_id)))?;
                if let Some(p) = &v.path {
                    last.insert(v.memory_id.clone(), p.clone());
                }
            }
            out(count(versions.len(), "version", "versions"))
        }
        Action::Show(id) => {
            let v = store.version(&id).map_err(why)?;
            out(line(&v, None))?;
            out(format_args!(
                "sha256 {}",
                escape(v.sha256.as_deref().unwrap_or("-"))
            ))?;
            match (&v.content, v.op) {
                (Some(text), _) => out(format_args!("--- content ---\n{}", escape_text(text))),
                (None, VersionOp::Deleted) => out("--- deleted ---"),
                (None, _) => out("--- content redacted ---"),
            }
        }
        Action::Diff(a, b) => {
            // A redacted version's content is unknown, not empty.
            let redacted = |v: &ManagedVersion| {
                if v.redacted {
                    Err(failed(format_args!(
                        "{} was redacted: its content is gone",
                        escape(&v.id)
                    )))
                } else {
                    Ok(())
                }
            };
            let old = store.version(&a).map_err(why)?;
            redacted(&old)?;
            let label = |v: &ManagedVersion| format!("{}@{}", shown(&v.path), escape(&v.id));
            let (new, new_label) = match b {
                Some(b) => {
                    let v = store.version(&b).map_err(why)?;
                    redacted(&v)?;
                    (v.content.clone().unwrap_or_default(), label(&v))
                }
                None => match store.memory_now(&old.memory_id).map_err(why)? {
                    Some((p, text)) => (text, format!("{} (now)", escape(p.as_str()))),
                    None => (String::new(), "(deleted now)".into()),
                },
            };
            let before = old.content.clone().unwrap_or_default();
            let text =
                claude_memory::history::unified_diff(&before, &new, &label(&old), &new_label);
            if text.is_empty() {
                return out("no differences");
            }
            out(escape_text(text.trim_end()))
        }
        Action::Revert(id) => match store.revert_to(&id).map_err(why)? {
            Some(p) => out(format_args!(
                "reverted {} to {id} (the service keeps the change as a new version)",
                escape(p.as_str())
            )),
            None => out(format_args!("the memory already has the content of {id}")),
        },
        Action::Redact(id) => match store.redact_version(&id) {
            Ok(_) => out(format_args!(
                "redacted {id}: its content and path are erased on the service"
            )),
            Err(StoreError::Invalid { .. }) => Err(failed(format_args!(
                "the service refused to redact {id}: the current version of a live memory cannot be redacted; edit or delete the memory first"
            ))),
            Err(e) => Err(why(e)),
        },
    }
}

#[cfg(not(feature = "managed"))]
pub fn run(_: &str, _: Action<'_>) -> Outcome {
    Err(Failure::Usage(
        "this claude-memory was built without managed memory stores (reinstall with: cargo install claude-memory-cli --features managed)".into(),
    ))
}
