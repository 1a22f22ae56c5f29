//! `export [--output FILE]` and `import FILE [--overwrite]`.

use std::io::{self, Read, Write};
use std::path::Path;

use claude_memory::backup::{Backup, ImportOptions};

use crate::output::{Failure, Outcome, count, err, failed, out, stdout_error};

/// `encrypted`: `tool` is an encrypted store's wrapped store (the backup
/// is its ciphertext); the count then leaves out the wrapper's own files
/// (the key record), so it counts memories as a plaintext export does.
pub fn export(tool: &crate::Tool, output: Option<&Path>, encrypted: bool) -> Outcome {
    let backup = Backup::of_store(tool.store()).map_err(failed)?;
    if !backup.unspellable.is_empty() {
        return Err(Failure::Failed(format!(
            "nothing was exported: the store holds {} no memory path can spell (made outside the store, or by a release with looser rules, such as names not in NFC), which a backup would silently miss: {}; rename them on disk, then export again",
            count(backup.unspellable.len(), "entry", "entries"),
            backup.unspellable.join(", ")
        )));
    }
    // The wrapper's own files sit in the root, named with its prefix
    // (which no encrypted name, being base32, can take).
    let own = if encrypted {
        backup
            .files
            .iter()
            .filter(|e| {
                e.path
                    .strip_prefix("/memories/")
                    .is_some_and(|n| !n.contains('/') && n.starts_with("_claude-memory-"))
            })
            .count()
    } else {
        0
    };
    let summary = format!(
        "{}{} and {}",
        count(backup.file_count().saturating_sub(own), "file", "files"),
        if encrypted {
            " (encrypted, with the store's key record)"
        } else {
            ""
        },
        count(
            backup.directory_count(),
            "empty directory",
            "empty directories"
        )
    );
    match output.filter(|file| file.as_os_str() != "-") {
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(backup.to_json().as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(stdout_error)?;
        }
        Some(file) => {
            backup
                .write_to_file(file)
                .map_err(|e| failed(format!("cannot write {}: {e}", file.display())))?;
            err(format_args!("exported {summary} to {}", file.display()));
        }
    }
    Ok(())
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
