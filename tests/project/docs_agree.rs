//! The version and the user docs agree with each other (issue 18, edge 12):
//! `Cargo.toml` said 0.1.0 while the CHANGELOG kept the 0.2 work under
//! "Unreleased" and the README said `version = "0.1"`; the crate-level
//! example filtered blocks by hand; `history_conformance_tests!` was not in
//! the README; "Where things live" pointed at private files.

use std::path::Path;

fn read(file: &str) -> String {
    // The suite's manifest is suite/Cargo.toml; the files are the repository's.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// `major.minor` of the crate's version (before 1.0 a minor version is a
/// breaking release, so that is what a dependency line names).
fn major_minor() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    format!(
        "{}.{}",
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("")
    )
}

#[test]
fn readme_dependency_lines_name_the_crates_version() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme
        .lines()
        .filter(|l| l.trim_start().starts_with("claude-memory = "))
        .collect();
    assert!(!lines.is_empty(), "the README shows no dependency line");
    let want = format!("version = \"{}\"", major_minor());
    for line in lines {
        assert!(line.contains(&want), "{line:?} does not say {want}");
    }
}

#[test]
fn the_changelog_has_the_crates_version_unreleased_and_the_last_release_dated() {
    let changelog = read("CHANGELOG.md");
    let headings: Vec<&str> = changelog.lines().filter(|l| l.starts_with("## ")).collect();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        headings.first().copied(),
        Some(format!("## Unreleased ({version})").as_str())
    );
    // Every other heading is a release: `## X.Y.Z` with a date after 0.1.0.
    for heading in &headings[1..] {
        let rest = heading.trim_start_matches("## ");
        let number = rest.split_whitespace().next().unwrap_or("");
        assert_eq!(number.split('.').count(), 3, "{heading:?}");
        assert!(
            number.split('.').all(|n| n.parse::<u32>().is_ok()),
            "{heading:?}"
        );
        assert!(!rest.contains("Unreleased"), "{heading:?}");
    }
    assert!(
        headings.iter().any(|h| h.starts_with("## 0.2.0 - 20")),
        "no dated 0.2.0 heading: {headings:?}"
    );
}

#[test]
fn the_readme_documents_the_history_conformance_suite() {
    assert!(read("README.md").contains("history_conformance_tests!"));
}

/// The crate-level docs, as `//!` lines of `src/lib.rs`.
fn crate_docs() -> String {
    read("src/lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_crate_example_uses_the_response_helpers_as_the_readme_does() {
    let docs = crate_docs();
    let example = docs
        .split("# One step of a tool-use loop")
        .nth(1)
        .expect("the example section");
    assert!(
        example.contains("tool.reply(") || example.contains("tool.run_tool_uses("),
        "{example}"
    );
    assert!(
        !example.contains(".filter("),
        "filters blocks by hand: {example}"
    );
}

#[test]
fn where_things_live_names_only_what_a_user_can_open() {
    let docs = crate_docs();
    let section = docs
        .split("# Where things live")
        .nth(1)
        .and_then(|s| s.split("\n# ").next())
        .expect("the section");
    // Source files and directories are private; only public modules,
    // linked, are for users.
    for word in section.split('`').skip(1).step_by(2) {
        assert!(
            !word.ends_with(".rs") && !word.contains('/'),
            "`{word}` is a private file: {section}"
        );
    }
    let lib = read("src/lib.rs");
    for link in section.split("[`").skip(1) {
        let name = link.split('`').next().unwrap_or("");
        let module = name.split("::").next().unwrap_or(name);
        if module.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            assert!(
                lib.contains(&format!("pub mod {module};")),
                "[`{name}`] is no public module"
            );
        }
    }
}

/// The features named in the first column of the table that starts with
/// `| feature |` in `text`.
fn feature_table(text: &str) -> std::collections::BTreeSet<String> {
    let table = text
        .split("| feature |")
        .nth(1)
        .unwrap_or_else(|| panic!("no feature table"));
    table
        .lines()
        .skip(2) // the rest of the header row, and the separator
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect()
}

/// The features `Cargo.toml` declares.
fn cargo_features() -> std::collections::BTreeSet<String> {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .and_then(|s| s.split("\n[").next())
        .expect("a [features] section");
    section
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(' ') && l.contains(" = "))
        .filter_map(|l| l.split(" = ").next())
        .map(|name| name.trim().to_owned())
        .filter(|name| name != "default")
        .collect()
}

#[test]
fn the_readme_and_the_crate_docs_list_every_feature_and_no_other() {
    let features = cargo_features();
    assert!(
        features.contains("mcp") && features.contains("gcs"),
        "{features:?}"
    );
    assert_eq!(feature_table(&read("README.md")), features, "README.md");
    assert_eq!(feature_table(&crate_docs()), features, "src/lib.rs");
}

/// What `claude-memory --help` lists under a heading (`Commands:`,
/// `Store options:`): each entry's name (`view`, `--store`).
fn help_entries(help: &str, heading: &str) -> Vec<String> {
    help.split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading} in --help:\n{help}"))
        .lines()
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .filter_map(|l| {
            let indent = l.len() - l.trim_start().len();
            let first = l.split_whitespace().next()?;
            // A command at two spaces; an option line starts with a dash
            // (`-h, --help`, `--root <DIR>`); description lines are deeper.
            if first.starts_with('-') {
                l.split_whitespace().find(|w| w.starts_with("--"))
            } else if indent == 2 {
                Some(first)
            } else {
                None
            }
        })
        .map(|w| w.trim_end_matches(',').to_owned())
        .collect()
}

#[test]
fn the_readme_cli_summary_names_every_subcommand_and_store_option_help_has() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_claude-memory-cli"))
        .arg("--help")
        .output()
        .expect("run the CLI");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let readme = read("README.md");
    let summary = readme
        .split("## The command-line tool")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README's CLI section");
    let commands = help_entries(&help, "Commands:");
    assert!(commands.len() >= 10, "{commands:?}");
    for command in commands.iter().filter(|c| *c != "help") {
        assert!(
            summary.contains(&format!("`{command}")),
            "the README's CLI summary lacks `{command}`"
        );
    }
    let options = help_entries(&help, "Store options:");
    assert!(options.len() >= 10, "{options:?}");
    for option in options.iter().filter(|o| o.starts_with("--")) {
        if matches!(option.as_str(), "--help" | "--version") {
            continue;
        }
        assert!(
            summary.contains(&format!("`{option}")),
            "the README's CLI summary lacks `{option}`"
        );
    }
}
