//! `sync managed:MEMSTORE_ID`: keeps the store `--store` names in step
//! with a memory store of Claude Managed Agents (`ManagedStore::sync`),
//! once or every `--interval`, with its state in a JSON file beside it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::output::{Failure, Outcome};
use claude_memory::url::StoreUrl;

/// `sync`'s own options.
#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// The memory store: managed:MEMSTORE_ID
    #[arg(value_name = "managed:MEMSTORE_ID")]
    pub target: String,
    /// One pass, then exit (status 1 if a path failed, or the store could
    /// not be synced at all)
    #[arg(long)]
    pub once: bool,
    /// Time between passes: 15s, 1m, … (at least 5s) [default: 15s]
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, conflicts_with = "once")]
    pub interval: Option<Duration>,
    /// Whether a file deleted here deletes its memory: enabled (after 30 s
    /// missing, a few per pass), log-only (only say so) or disabled
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Deletes::Enabled)]
    pub deletes: Deletes,
    /// Only pull: never change the memory store
    #[arg(long)]
    pub read_only: bool,
    /// The sync's state file [default for a directory store:
    /// DIR/.claude-memory-sync-MEMSTORE_ID.json]
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// `--deletes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Deletes {
    /// Delete the memory once the file has stayed deleted.
    Enabled,
    /// Only say which memories would be deleted.
    LogOnly,
    /// Never delete a memory.
    Disabled,
}

/// `--interval`: a duration of at least 5 s, as the SDKs require.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|_| format!("`{text}` is not a duration: write 15s, 1m, 2m30s (at least 5s)"))?;
    if d < Duration::from_secs(5) {
        return Err(format!(
            "`{text}` is too short: a pass lists the whole memory store, so passes are at least 5s apart"
        ));
    }
    Ok(d)
}

/// The memory store's id, from `managed:MEMSTORE_ID`.
pub fn target(args: &SyncArgs, local: &StoreUrl) -> Result<String, Failure> {
    let not_managed = || {
        Failure::Usage(format!(
            "`{}` is not a memory store: sync takes managed:MEMSTORE_ID",
            args.target
        ))
    };
    if !args.target.starts_with("managed:") {
        return Err(not_managed());
    }
    let StoreUrl::Managed(id) = crate::store::parse(&args.target)? else {
        return Err(not_managed());
    };
    if matches!(local, StoreUrl::Managed(_)) {
        return Err(Failure::Usage(
            "sync keeps a local store in step with a memory store: --store names the local one (a directory, sqlite:…, …)".into(),
        ));
    }
    Ok(id)
}

/// Where the state lives: `--state`, or beside a directory store's files
/// (a reserved name, so no view or sync ever shows it).
pub fn state_path(
    args: &SyncArgs,
    local: &StoreUrl,
    tenant: bool,
    id: &str,
) -> Result<PathBuf, Failure> {
    match (&args.state, local) {
        (Some(path), _) if path.is_dir() => Err(Failure::Usage(format!(
            "--state {} is a directory: give the state file's path (it is created)",
            path.display()
        ))),
        (Some(path), StoreUrl::Dir(dir)) if inside(dir, path) && !reserved(path) => {
            Err(Failure::Usage(format!(
                "--state {} is inside the store, where sync would send it as a memory: put it elsewhere, or name it .claude-memory-sync….json",
                path.display()
            )))
        }
        (Some(path), _) => Ok(path.clone()),
        (None, StoreUrl::Dir(dir)) if !tenant => {
            Ok(dir.join(format!(".claude-memory-sync-{id}.json")))
        }
        _ => Err(Failure::Usage(
            "sync needs --state FILE for this store (only a directory store, without --tenant, has a default)".into(),
        )),
    }
}

/// Whether `file` would be inside directory `dir` (both as they resolve).
fn inside(dir: &Path, file: &Path) -> bool {
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (dir.canonicalize(), parent.canonicalize()) {
        (Ok(dir), Ok(parent)) => parent.starts_with(dir),
        _ => false,
    }
}

/// A name the stores keep for themselves (never listed, never synced).
fn reserved(file: &Path) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(claude_memory::path::is_reserved)
}

/// Runs the passes. `open` opens the local store, again after a pass
/// that failed (a directory replaced under a running sync is found anew).
#[cfg(feature = "managed")]
pub fn run(
    open: &dyn Fn() -> Result<crate::Tool, Failure>,
    id: &str,
    state_file: &Path,
    args: &SyncArgs,
) -> Outcome {
    use claude_memory::history::escape;
    use claude_memory::sync::{DeleteMode, SyncOptions, SyncOutcome};

    use crate::output::{err, failed, out};

    let remote = claude_memory::ManagedStore::open(id).map_err(|e| {
        failed(format_args!(
            "cannot open the managed memory store {id}: {e}"
        ))
    })?;
    // The state's directory is made if it is missing (private: the state
    // names every path).
    if let Some(dir) = state_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| {
            failed(format_args!(
                "cannot make the sync state's directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    let _lock = lock(state_file)?;
    let mut state = read_state(state_file)?;
    let options = SyncOptions {
        deletes: match args.deletes {
            Deletes::Enabled => DeleteMode::Enabled,
            Deletes::LogOnly => DeleteMode::LogOnly,
            Deletes::Disabled => DeleteMode::Disabled,
        },
        read_only: args.read_only,
        ..SyncOptions::default()
    };
    let interval = args
        .interval
        .unwrap_or(claude_memory::sync::DEFAULT_INTERVAL);
    if !args.once {
        err(format_args!(
            "claude-memory: syncing with {id} every {} (Ctrl-C stops; a change prints a line)",
            humantime::format_duration(interval)
        ));
    }
    // Each line escaped (paths come from the store and the service); in a
    // loop, each says when.
    let say = |line: &dyn std::fmt::Display| -> Outcome {
        let line = escape(&line.to_string());
        if args.once {
            out(line)
        } else {
            let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
            out(format_args!("{now} {line}"))
        }
    };
    let mut local = open()?;
    // A state the disk does not hold yet: no pass runs until it does.
    let mut unsaved = false;
    loop {
        let mut trouble = false;
        let mut again = false;
        if unsaved {
            unsaved = save(state_file, &state).is_err();
        }
        if unsaved {
            trouble = true;
        } else {
            match remote.sync(local.store(), &mut state, &options) {
                Ok(report) => {
                    // The state first: printing can fail, and a pass whose
                    // state is lost misleads the next one.
                    unsaved = save(state_file, &state).is_err();
                    trouble |= unsaved;
                    match report.outcome {
                        SyncOutcome::Joined => say(&format_args!(
                            "first sync with {id}: marker written, both sides merged (nothing deleted)"
                        ))?,
                        SyncOutcome::Recovered(why) => {
                            say(&format_args!("{why}: rebuilding from {id}, nothing sent"))?;
                            again = !unsaved;
                        }
                        SyncOutcome::Untrusted(why) => {
                            err(format_args!(
                                "claude-memory: {why}: not syncing (the files here may not be this memory store's; move them away, or restore the marker)"
                            ));
                            trouble = true;
                        }
                        _ => {}
                    }
                    for event in &report.events {
                        trouble |= event.left_out_of_step();
                        say(event)?;
                    }
                    if args.once && !trouble && !again && report.events.is_empty() {
                        match state.refused() {
                            0 => out(format_args!("in step with {id}"))?,
                            n => out(format_args!(
                                "in step with {id}, but for {} the service refused (unchanged since)",
                                crate::output::count(n, "file", "files")
                            ))?,
                        }
                    }
                }
                Err(e) => {
                    err(format_args!(
                        "claude-memory: sync failed: {}",
                        escape(&e.to_string())
                    ));
                    trouble = true;
                    if let Ok(reopened) = open() {
                        local = reopened;
                    }
                }
            }
        }
        if again {
            continue;
        }
        if args.once {
            return if trouble {
                Err(Failure::Reported)
            } else {
                Ok(())
            };
        }
        std::thread::sleep(interval);
    }
}

/// Saves the state, saying so if it cannot.
#[cfg(feature = "managed")]
fn save(path: &Path, state: &claude_memory::sync::SyncState) -> Outcome {
    write_state(path, state).inspect_err(|f| {
        if let Failure::Failed(why) = f {
            crate::output::err(format_args!(
                "claude-memory: {why}; no pass runs until it is saved"
            ));
        }
    })
}

#[cfg(not(feature = "managed"))]
pub fn run(
    _: &dyn Fn() -> Result<crate::Tool, Failure>,
    _: &str,
    _: &Path,
    _: &SyncArgs,
) -> Outcome {
    Err(Failure::Usage(
        "this claude-memory was built without managed memory stores (reinstall with: cargo install claude-memory-cli --features managed)".into(),
    ))
}

/// One sync per state file at a time: two would each send what the
/// other's baseline does not know.
#[cfg(feature = "managed")]
fn lock(state_file: &Path) -> Result<std::fs::File, Failure> {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".lock");
    // Private, and never through a planted link.
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Nor block on a FIFO planted there.
        options.mode(0o600).custom_flags(
            (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
        );
    }
    let opened = options
        .open(&name)
        .and_then(|f| match f.metadata()?.is_file() {
            true => Ok(f),
            false => Err(std::io::Error::other("not a regular file")),
        });
    let file = opened.map_err(|e| {
        Failure::Failed(format!(
            "cannot open the sync's lock file {}: {e}",
            Path::new(&name).display()
        ))
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Failure::Failed(format!(
            "another sync with this state file is running ({})",
            state_file.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Failure::Failed(format!(
            "cannot lock {}: {e}",
            Path::new(&name).display()
        ))),
    }
}

/// The most a state file may hold: about a million paths and their shas.
#[cfg(feature = "managed")]
const MAX_STATE: u64 = 256 << 20;

/// Reads the state: a regular file, opened without following a link or
/// blocking on a FIFO, at most [`MAX_STATE`] bytes.
#[cfg(feature = "managed")]
fn read_state(path: &Path) -> Result<claude_memory::sync::SyncState, Failure> {
    use std::io::Read as _;
    let cannot =
        |e: std::io::Error| Failure::Failed(format!("cannot read {}: {e}", path.display()));
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
    );
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(claude_memory::sync::SyncState::new());
        }
        Err(e) => return Err(cannot(e)),
    };
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(Failure::Failed(format!(
            "{} is not a regular file: the sync state is one (move it away)",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_STATE + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_STATE {
        return Err(Failure::Failed(format!(
            "{} is larger than any sync state ({MAX_STATE} bytes): delete it to start over (a first sync deletes nothing)",
            path.display()
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::Failed(format!(
            "{} is not a sync state file ({e}); delete it to start over (a first sync deletes nothing)",
            path.display()
        ))
    })
}

/// Replaces the state file whole: a new private (0600) temporary file
/// beside it, made fresh (`O_EXCL`, so no planted link redirects it) under
/// a reserved name (a killed sync's leftover is never synced), fsynced,
/// then renamed over the state, which replaces whatever is at that name (a
/// link planted there included) and never what a link points to. The
/// state names every path and its sha.
#[cfg(feature = "managed")]
fn write_state(path: &Path, state: &claude_memory::sync::SyncState) -> Outcome {
    use std::io::Write as _;
    let fail = |e: std::io::Error| {
        Failure::Failed(format!(
            "cannot write the sync state {}: {e}",
            path.display()
        ))
    };
    let json = serde_json::to_vec(state).map_err(|e| fail(std::io::Error::other(e)))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            "{}-sync-state.tmp.{}.{attempt}",
            claude_memory::path::RESERVED_PREFIX,
            std::process::id()
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&tmp) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1;
            }
            Err(e) => return Err(fail(e)),
        }
    };
    let written = file
        .write_all(&json)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    // The rename is durable once the directory is.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
