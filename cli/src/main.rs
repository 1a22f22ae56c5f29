//! `claude-memory`: operate a memory store from the shell (package `claude-memory-cli`).
//!
//! - `args`: the command line (clap).
//! - `store`: which store it names, opened read-only or for writing.
//! - `output`: stdout/stderr, broken pipes, failures and exit statuses.
//! - one file per command: `view`, `backup` (export, import), `prune`,
//!   `stats`, `history` (history, show, diff, revert, restore, redact,
//!   history prune), `mcp` (the MCP server), `sync` (with a managed
//!   memory store); `serve` is the stdio bridge.
//!
//! Exit status: 0 success (and a closed stdout), 1 the operation failed,
//! 2 usage error. No argument list makes it panic.

mod args;
mod backup;
mod check;
mod crypt;
mod dream;
mod history;
mod history_copy;
mod mcp;
mod output;
mod prune;
mod stats;
mod store;
mod sync;
mod ui;
mod view;

use std::io;
use std::process::ExitCode;

use clap::Parser;
use claude_memory::{Config, MemoryStore, MemoryTool};

/// The handler on whichever store the command line names.
type Tool = MemoryTool<Box<dyn MemoryStore>>;

use crate::args::{Cli, Command};
use crate::output::{Failure, Outcome, failed};
use claude_memory::url::{HistoryLogs, StoreUrl};

use crate::store::{Access, Stack};

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and --version go to stdout (status 0), errors to stderr
            // (status 2); a closed stream is no reason to panic.
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

fn run(cli: Cli) -> Outcome {
    if let Command::Keygen { output } = &cli.command {
        return crypt::keygen(output);
    }
    let spec = store::from_args(cli.store.as_deref(), cli.root)?;
    // A managed memory store takes its service's limits unasked, so what
    // it would refuse is refused before any request.
    let mut config = match (cli.profile, &spec) {
        (Some(args::Profile::Managed), _) | (None, StoreUrl::Managed(_)) => {
            Config::managed_memory_stores()
        }
        (None, _) => Config::default(),
    };
    if let Some(n) = cli.view_limit {
        config.view_output_limit = n;
    }
    if let Some(n) = cli.max_file_size {
        config.max_file_size = n;
    }
    if cli.max_store_size.is_some() {
        config.max_store_size = cli.max_store_size;
    }
    // Each command says what it does to the store: only reading commands
    // open it read-only; only serve and import may create it.
    // A store that keeps a history records every change, with the flag or
    // not; `--history` starts one.
    let tenant = store::tenant(cli.tenant.as_deref())?;
    let tenant = tenant.as_ref();
    if cli.history && matches!(spec, StoreUrl::Managed(_)) {
        return Err(Failure::Usage(
            "--history does not apply to a managed memory store: the service keeps a version of every change itself (see `history`)".into(),
        ));
    }
    let history = match cli.history {
        true => HistoryLogs::Start,
        false => HistoryLogs::IfKept,
    };
    let ring = crypt::ring(&cli.key_file, cli.passphrase_file.as_deref(), tenant)?;
    let dream_id = dream::new_id();
    let label = match cli.command {
        Command::Mcp(_) => "claude-memory-mcp".to_owned(),
        Command::Ui(_) => ui::actor(),
        Command::Dream(_) => format!("dream:{dream_id}"),
        _ => "claude-memory-cli".to_owned(),
    };
    let stack = Stack {
        url: &spec,
        tenant,
        ring: ring.as_ref(),
        label: &label,
    };
    let open = |access: Access| -> Result<Tool, Failure> {
        Ok(MemoryTool::with_config(
            stack.open(access, history)?,
            config.clone(),
        ))
    };
    match cli.command {
        Command::Keygen { .. } => Ok(()),
        Command::Rekey => crypt::rekey(stack.base(Access::Change)?, ring.as_ref()),
        Command::Export {
            output,
            plaintext: false,
        } if ring.is_some() => {
            let raw = crypt::raw(stack.base(Access::Read)?, ring.as_ref())?;
            backup::export(
                &MemoryTool::with_config(raw, config.clone()),
                output.as_deref(),
                true,
            )
        }
        Command::Serve => {
            let tool = open(Access::Create)?;
            claude_memory::bridge::serve(&tool, io::stdin().lock(), io::stdout().lock()).map_err(
                |e| match e.kind() {
                    io::ErrorKind::BrokenPipe => Failure::Quiet,
                    _ => failed(format_args!("serve stopped: {e}")),
                },
            )
        }
        Command::Mcp(args) => mcp::run(stack.open(Access::Create, history)?, config.clone(), args),
        Command::Sync(args) => {
            let id = sync::target(&args, &spec)?;
            let state = sync::state_path(&args, &spec, tenant.is_some(), &id)?;
            sync::run(&|| open(Access::Create), &id, &state, &args)
        }
        Command::View { path, range } => view::view(&open(Access::Read)?, &path, range),
        Command::Export { output, .. } => {
            backup::export(&open(Access::Read)?, output.as_deref(), false)
        }
        Command::Import { file, overwrite } => {
            // Read and check first: a mistyped or unusable backup file
            // creates no store.
            let b = backup::read(&file)?;
            backup::precheck(&b, &config, &file)?;
            backup::import(&open(Access::Create)?, &file, &b, overwrite)
        }
        Command::Prune {
            older_than,
            dry_run,
        } => {
            let access = if dry_run {
                Access::Read
            } else {
                Access::Change
            };
            prune::prune(&open(access)?, older_than, dry_run)
        }
        Command::Stats => {
            let tool = open(Access::Read)?;
            stats::stats(&tool)?;
            match cli.profile {
                Some(args::Profile::Managed) => check::summary(&tool),
                None => Ok(()),
            }
        }
        Command::Check => check::check(&open(Access::Read)?),
        Command::Archive { yes } => archive(&stack, yes),
        Command::Ui(args) => ui::run(&stack, history, args),
        Command::Dream(args) => dream::run(&stack, &config, history, args, &dream_id),
        Command::History {
            action: Some(args::HistoryAction::Copy { to }),
            ..
        } => {
            let dest_url = store::parse(&to)?;
            let source = stack.versions(Access::Read)?;
            let dest = Stack {
                url: &dest_url,
                tenant: None,
                ring: None,
                label: stack.label,
            };
            // A managed store keeps its own versions of what is copied.
            let dest = dest.open(
                Access::Create,
                match dest_url {
                    StoreUrl::Managed(_) => HistoryLogs::Never,
                    _ => HistoryLogs::Start,
                },
            )?;
            history_copy::copy(&*source, &*dest)
        }
        Command::History {
            action:
                Some(args::HistoryAction::Prune {
                    older_than,
                    keep,
                    dry_run,
                }),
            path,
            prefix,
            since,
            until,
            actor,
            call,
            limit,
            before,
        } => {
            if path.is_some()
                || prefix.is_some()
                || since.is_some()
                || until.is_some()
                || actor.is_some()
                || call.is_some()
                || limit.is_some()
                || before.is_some()
            {
                return Err(Failure::Usage(
                    "history prune applies to the whole history: it takes --older-than and --keep only (no PATH, --prefix, --since, --until, --actor, --call, --limit or --before)".into(),
                ));
            }
            let access = if dry_run {
                Access::Read
            } else {
                Access::Change
            };
            history::prune(&*stack.versions(access)?, older_than, keep, dry_run)
        }
        Command::History {
            action: None,
            path,
            prefix,
            since,
            until,
            actor,
            call,
            limit,
            before,
        } => {
            let query = claude_memory::history::Query {
                since,
                until,
                actor,
                call,
                limit: limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                before,
                ..Default::default()
            };
            history::list(
                &*stack.versions(Access::Read)?,
                query,
                path.as_deref(),
                prefix.as_deref(),
            )
        }
        Command::Show { id } => history::show(&*stack.versions(Access::Read)?, &id),
        Command::Diff { from, to } => {
            history::diff(&*stack.versions(Access::Read)?, &from, to.as_ref())
        }
        Command::Revert { id, actor, call } => {
            history::revert(&*stack.versions(Access::Change)?, id.as_ref(), actor, call)
        }
        Command::Restore {
            at,
            prefix,
            dry_run,
        } => {
            let access = if dry_run {
                Access::Read
            } else {
                Access::Change
            };
            history::restore(&*stack.versions(access)?, at, prefix.as_deref(), dry_run)
        }
        Command::Redact { id, text } => history::redact(
            &*stack.versions(Access::Change)?,
            id.as_ref(),
            text.as_deref(),
        ),
    }
}

/// `archive`: archives the managed memory store `--store` names, only
/// with `--yes` (it cannot be undone).
fn archive(stack: &Stack, yes: bool) -> Outcome {
    let StoreUrl::Managed(id) = stack.url else {
        return Err(Failure::Usage(format!(
            "archive is for a managed memory store (--store managed:memstore_…), not {}",
            stack.url.shown()
        )));
    };
    let id = claude_memory::history::escape(id);
    if stack.tenant.is_some() {
        return Err(Failure::Usage(format!(
            "archive archives the whole memory store {id}, every tenant's memories with it: run it without --tenant"
        )));
    }
    if !yes {
        return Err(Failure::Usage(format!(
            "archiving {id} cannot be undone: its memories stay readable and can never be changed again; run again with --yes to archive it"
        )));
    }
    #[cfg(feature = "managed")]
    {
        let store = stack.managed(Access::Change)?;
        store
            .archive()
            .map_err(|e| failed(format_args!("cannot archive {id}: {e}")))?;
        output::out(format_args!(
            "archived {id}: its memories can be read, not changed"
        ))
    }
    #[cfg(not(feature = "managed"))]
    Err(stack.not_built(Access::Change))
}
