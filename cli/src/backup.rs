//! `export [--output FILE]` and `import FILE [--overwrite]`.

use std::io::{self, Read, Write};
use std::path::Path;

use claude_memory::backup::{
    Backup, ExportError, ExportOptions, ExportProblem, ImportOptions, OutputFile,
};

use crate::output::{Failure, Outcome, count, err, failed, out, stdout_error};

/// `encrypted`: `tool` is an encrypted store's wrapped store (the backup
/// is its ciphertext); the count then leaves out the wrapper's own files
/// (the key record), so it counts memories as a plaintext export does.
/// The backup is streamed, and refused first if a name cannot be spelled
/// or a file is over the limits an import with the same flags applies.
pub fn export(tool: &crate::Tool, output: Option<&Path>, encrypted: bool) -> Outcome {
    let options = ExportOptions::new().limits_of(tool.config());
    let Some(file) = output.filter(|file| file.as_os_str() != "-") else {
        let mut stdout = io::BufWriter::new(io::stdout().lock());
        Backup::write_store(tool.store(), &mut stdout, &options)
            .map_err(|e| export_failure(e, stdout_error))?;
        return stdout.flush().map_err(stdout_error);
    };
    let cannot = |e: io::Error| failed(format!("cannot write {}: {e}", file.display()));
    let mut out = OutputFile::create(file).map_err(cannot)?;
    let summary = Backup::write_store(tool.store(), &mut out, &options)
        .map_err(|e| export_failure(e, cannot))?;
    out.finish().map_err(cannot)?;
    // The wrapper's own files sit in the root, named with its prefix
    // (which no encrypted name, being base32, can take).
    let own = if encrypted {
        summary
            .files
            .iter()
            .filter(|path| {
                path.strip_prefix("/memories/")
                    .is_some_and(|n| !n.contains('/') && n.starts_with("_claude-memory-"))
            })
            .count()
    } else {
        0
    };
    err(format_args!(
        "exported {}{} and {} to {}",
        count(summary.files.len().saturating_sub(own), "file", "files"),
        if encrypted {
            " (encrypted, with the store's key record)"
        } else {
            ""
        },
        count(summary.directories, "empty directory", "empty directories"),
        file.display()
    ));
    Ok(())
}

/// An export's failure; `io` says what a write error means.
fn export_failure(e: ExportError, io: impl Fn(io::Error) -> Failure) -> Failure {
    match e {
        ExportError::Io(e) => io(e),
        ExportError::Refused(problems) => {
            let limits = problems.iter().any(|p| {
                matches!(
                    p,
                    ExportProblem::FileTooLarge { .. } | ExportProblem::StoreTooLarge { .. }
                )
            });
            let mut text = ExportError::Refused(problems).to_string();
            if limits {
                text.push_str("\n(the limits are --max-file-size and --max-store-size: to back such files up, raise them for both the export and the import)");
            }
            Failure::Failed(text)
        }
        e => failed(e),
    }
}

/// Reads and parses the backup `file` ("-" for stdin): done before the
/// store is opened, so a mistyped file name creates no store.
pub fn read(file: &Path) -> Result<Backup, Failure> {
    let shown = file.display();
    let mut text = String::new();
    let read = if file.as_os_str() == "-" {
        io::stdin().lock().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| failed(format!("cannot read {shown}: {e}")))?;
    Backup::from_json(&text).map_err(|e| Failure::Failed(format!("{shown}: {e}")))
}

/// Checks `backup` against an empty store with the same limits, before a
/// missing store is created: a backup that could not go in anywhere
/// (malformed, over a limit) must not leave a new, empty store behind.
pub fn precheck(backup: &Backup, config: &claude_memory::Config, file: &Path) -> Outcome {
    let options = ImportOptions::new().limits_of(config);
    backup
        .restore(&claude_memory::InMemoryStore::new(), &options)
        .map(|_| ())
        .map_err(|e| Failure::Failed(format!("{}: {e}", file.display())))
}

pub fn import(tool: &crate::Tool, file: &Path, backup: &Backup, overwrite: bool) -> Outcome {
    let options = ImportOptions::new()
        .overwrite(overwrite)
        .limits_of(tool.config());
    let report = backup
        .restore(tool.store(), &options)
        .map_err(|e| Failure::Failed(format!("{}: {e}", file.display())))?;
    let mut line = format!("imported {}", count(report.files(), "file", "files"));
    if report.replaced > 0 {
        line += &format!(" ({} replaced)", report.replaced);
    }
    if report.directories > 0 {
        line += &format!(
            " and {}",
            count(report.directories, "empty directory", "empty directories")
        );
    }
    out(line)
}
