//! Every string the model sees, in one place (SPEC §3–§5).
//!
//! Nothing else in the crate formats model-facing text. Paths passed in are
//! virtual (`/memories/…`); host paths and OS error text never reach here,
//! so they cannot leak into a tool result.

use std::io;

use crate::path::PathError;
use crate::store::{RemoteCause, StoreError};

/// What the model is told when its call fails: only this file makes one,
/// so no other text (a host path, an OS error) can reach the model as an
/// error. Its `Display` is the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelError(String);

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ModelError> for String {
    fn from(e: ModelError) -> String {
        e.0
    }
}

// ---- input (§4) -----------------------------------------------------------

pub(crate) fn invalid_input(reason: &str) -> ModelError {
    ModelError(format!("Error: Invalid input: {reason}"))
}

pub(crate) fn unknown_command(command: &str) -> ModelError {
    ModelError(format!(
        "Error: Unknown command `{command}`. Expected one of: view, create, str_replace, insert, delete, rename"
    ))
}

pub(crate) fn missing_command() -> ModelError {
    ModelError("Error: Missing required parameter `command`".to_owned())
}

pub(crate) fn missing_field(field: &str, command: &str) -> ModelError {
    ModelError(format!(
        "Error: Missing required parameter `{field}` for command `{command}`"
    ))
}

pub(crate) fn wrong_type(field: &str, expected: &str) -> ModelError {
    ModelError(format!("Error: Parameter `{field}` must be {expected}"))
}

// ---- paths (§2) -----------------------------------------------------------

pub(crate) fn invalid_path(path: &str, error: &PathError) -> ModelError {
    ModelError(format!(
        "Error: The path {path} is not a valid memory path: {}",
        path_reason(error)
    ))
}

/// `PathError`'s text lives here, not in the leaf module `path.rs`, which
/// keeps the reason a value and imports nothing above it.
impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&path_reason(self))
    }
}

/// The short reason a path was refused (SPEC §2); also `PathError`'s
/// `Display`.
pub(crate) fn path_reason(error: &PathError) -> String {
    match error {
        PathError::Empty => "it is empty".to_owned(),
        PathError::TooLong => "it is longer than 1024 bytes".to_owned(),
        PathError::ComponentTooLong => "a component is longer than 255 bytes".to_owned(),
        PathError::ControlCharacter => "control characters are not allowed".to_owned(),
        PathError::Backslash => "'\\' is not allowed".to_owned(),
        PathError::OutsideRoot => "it must start with /memories".to_owned(),
        PathError::ParentComponent => "'..' is not allowed".to_owned(),
        PathError::Reserved => "names starting with .claude-memory are reserved".to_owned(),
        PathError::FormatCharacter => "invisible or format characters are not allowed".to_owned(),
        PathError::NotNfc => "it must be in Unicode Normalization Form C".to_owned(),
        PathError::Encoded(inner) => format!("{} once percent-decoded", path_reason(inner)),
        PathError::EncodedSlash => "an encoded '/' is not allowed".to_owned(),
    }
}

pub(crate) fn symlink(path: &str) -> ModelError {
    ModelError(format!(
        "Error: Refusing to follow a symbolic link for {path}"
    ))
}

// ---- view -----------------------------------------------------------------

pub(crate) fn directory_header(path: &str) -> String {
    format!(
        "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:"
    )
}

#[cfg(test)]
pub(crate) fn listing_line(size: u64, path: &str, is_dir: bool) -> String {
    let slash = if is_dir { "/" } else { "" };
    format!("{}\t{path}{slash}", human_size(size))
}

/// Appends [`listing_line`]'s text to `out` without the formatting
/// machinery or a string of its own (a directory view writes one per
/// entry); returns its length in characters.
pub(crate) fn push_listing_line(out: &mut String, size: u64, path: &str, is_dir: bool) -> usize {
    let start = out.len();
    if size < 1024 {
        push_decimal(out, size);
        out.push('B');
    } else {
        out.push_str(&human_size(size));
    }
    // The size is ASCII: its characters are its bytes.
    let size_chars = out.len() - start;
    out.push('\t');
    out.push_str(path);
    if is_dir {
        out.push('/');
    }
    size_chars + 1 + path.chars().count() + usize::from(is_dir)
}

/// Appends `n` in decimal, as `format!("{n}")` writes it.
fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

pub(crate) fn listing_truncated(more: usize) -> String {
    format!("[Output truncated: {more} more entries not shown.]")
}

pub(crate) fn file_header(path: &str) -> String {
    format!("Here's the content of {path} with line numbers:")
}

/// One numbered line, as `cat -n` would print it: `format!("{n:>6}\t{line}")`,
/// written without the formatting machinery (it is the hot loop of `view`).
pub(crate) fn numbered_line(out: &mut String, n: usize, line: &str) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let width = digits.len() - i;
    out.reserve(width.max(6) + 1 + line.len());
    for _ in width..6 {
        out.push(' ');
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
    out.push('\t');
    out.push_str(line);
}

pub(crate) fn file_truncated(first: usize, last: usize, n_lines: usize) -> String {
    format!(
        "[Output truncated: showing lines {first}-{last} of {n_lines}. Use view_range to see the rest.]"
    )
}

pub(crate) fn view_range_not_integers(shown: &str) -> ModelError {
    ModelError(format!(
        "Error: Invalid `view_range` parameter: {shown}. It should be a list of two integers."
    ))
}

pub(crate) fn view_range_start(start: i64, end: i64, n_lines: usize) -> ModelError {
    ModelError(format!(
        "Error: Invalid `view_range` parameter: [{start}, {end}]. Its first element `{start}` should be within the range of lines of the file: [1, {n_lines}]"
    ))
}

pub(crate) fn view_range_end(start: i64, end: i64) -> ModelError {
    ModelError(format!(
        "Error: Invalid `view_range` parameter: [{start}, {end}]. Its second element `{end}` should be larger or equal than its first `{start}`."
    ))
}

pub(crate) fn too_many_lines(path: &str) -> ModelError {
    ModelError(format!(
        "File {path} exceeds maximum line limit of 999,999 lines."
    ))
}

pub(crate) fn image_too_large(path: &str, size: u64, limit: u64) -> ModelError {
    ModelError(format!(
        "Error: Image {path} is {size} bytes, over the limit of {limit} bytes"
    ))
}

pub(crate) fn not_utf8(path: &str) -> ModelError {
    ModelError(format!(
        "Error: The file {path} is not a valid UTF-8 text file."
    ))
}

pub(crate) fn view_missing(path: &str) -> ModelError {
    ModelError(format!(
        "The path {path} does not exist. Please provide a valid path."
    ))
}

// ---- create ---------------------------------------------------------------

pub(crate) fn created(path: &str) -> String {
    format!("File created successfully at: {path}")
}

pub(crate) fn already_exists(path: &str) -> ModelError {
    ModelError(format!("Error: File {path} already exists"))
}

pub(crate) fn ends_in_slash(path: &str) -> ModelError {
    ModelError(format!(
        "Error: The path {path} ends in /, which cannot name a file"
    ))
}

pub(crate) fn parent_is_file(path: &str, parent: &str) -> ModelError {
    ModelError(format!(
        "Error: Cannot create {path}: {parent} is a file, not a directory"
    ))
}

// ---- str_replace ----------------------------------------------------------

pub(crate) fn edited_header() -> &'static str {
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):"
}

pub(crate) fn edit_missing(path: &str) -> ModelError {
    ModelError(format!(
        "Error: The path {path} does not exist. Please provide a valid path."
    ))
}

pub(crate) fn no_match(old_str: &str, path: &str) -> ModelError {
    ModelError(format!(
        "No replacement was performed, old_str `{}` did not appear verbatim in {path}.",
        echo(old_str)
    ))
}

/// SPEC §3 lists at most this many line numbers of a repeated `old_str`.
pub(crate) const MATCH_LINES_SHOWN: usize = 100;

/// `lines` holds at most [`MATCH_LINES_SHOWN`] numbers; `total` is how many
/// lines matched in all (SPEC §3: the rest are counted, not listed).
pub(crate) fn multiple_matches(old_str: &str, lines: &[usize], total: usize) -> ModelError {
    let shown = &lines[..lines.len().min(MATCH_LINES_SHOWN)];
    let list: Vec<String> = shown.iter().map(usize::to_string).collect();
    let more = total.saturating_sub(shown.len());
    let mut joined = list.join(", ");
    if more > 0 {
        joined.push_str(&format!(", … ({more} more)"));
    }
    ModelError(format!(
        "No replacement was performed. Multiple occurrences of old_str `{}` in lines: {joined}. Please ensure it is unique",
        echo(old_str),
    ))
}

pub(crate) fn empty_old_str() -> ModelError {
    ModelError("Error: old_str must not be empty.".to_owned())
}

/// `old_str` as echoed: at most 200 characters, then `…`.
fn echo(old_str: &str) -> std::borrow::Cow<'_, str> {
    match old_str.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &old_str[..cut]).into(),
        None => old_str.into(),
    }
}

// ---- insert ---------------------------------------------------------------

pub(crate) fn inserted(path: &str) -> String {
    format!("The file {path} has been edited.")
}

pub(crate) fn missing(path: &str) -> ModelError {
    ModelError(format!("Error: The path {path} does not exist"))
}

pub(crate) fn insert_line_out_of_range(insert_line: i64, n_lines: usize) -> ModelError {
    ModelError(format!(
        "Error: Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines of the file: [0, {n_lines}]"
    ))
}

// ---- delete ---------------------------------------------------------------

pub(crate) fn deleted(path: &str) -> String {
    format!("Successfully deleted {path}")
}

pub(crate) fn delete_root() -> ModelError {
    ModelError("Error: Cannot delete the /memories directory itself".to_owned())
}

// ---- rename ---------------------------------------------------------------

pub(crate) fn renamed(old_path: &str, new_path: &str) -> String {
    format!("Successfully renamed {old_path} to {new_path}")
}

pub(crate) fn destination_exists(new_path: &str) -> ModelError {
    ModelError(format!("Error: The destination {new_path} already exists"))
}

pub(crate) fn rename_root() -> ModelError {
    ModelError("Error: Cannot rename the /memories directory itself".to_owned())
}

pub(crate) fn move_into_itself(old_path: &str) -> ModelError {
    ModelError(format!("Error: Cannot move {old_path} into itself"))
}

pub(crate) fn rename_parent_is_file(old_path: &str, new_path: &str, parent: &str) -> ModelError {
    ModelError(format!(
        "Error: Cannot move {old_path} to {new_path}: {parent} is a file, not a directory"
    ))
}

// ---- content policy -------------------------------------------------------

pub(crate) fn rename_too_deep(old_path: &str, new_path: &str, limit: usize) -> ModelError {
    ModelError(format!(
        "Error: Cannot move {old_path} to {new_path}: the path of an entry below it would be longer than {limit} bytes"
    ))
}

pub(crate) fn create_too_deep(path: &str, segments: usize, limit: usize) -> ModelError {
    ModelError(format!(
        "Error: Cannot create {path}: it would be {segments} levels deep below /memories, over the limit of {limit}"
    ))
}

pub(crate) fn rename_too_many_segments(
    old_path: &str,
    new_path: &str,
    segments: usize,
    limit: usize,
) -> ModelError {
    ModelError(format!(
        "Error: Cannot move {old_path} to {new_path}: an entry would be {segments} levels deep below /memories, over the limit of {limit}"
    ))
}

pub(crate) fn too_many_files(path: &str, limit: u64) -> ModelError {
    ModelError(format!(
        "Error: Cannot create {path}: the memory store is at its limit of {limit} files. Delete or merge memories first"
    ))
}

pub(crate) fn policy_refused(path: &str, reason: &str) -> ModelError {
    ModelError(format!("Error: Nothing was written to {path}: {reason}"))
}

/// A `rename` whose destination name the content policy refuses.
pub(crate) fn rename_refused(old_path: &str, new_path: &str, reason: &str) -> ModelError {
    ModelError(format!(
        "Error: Cannot move {old_path} to {new_path}: {reason}"
    ))
}

// ---- limits (§5) ----------------------------------------------------------

pub(crate) fn file_too_large(path: &str, size: u64, limit: u64) -> ModelError {
    ModelError(format!(
        "Error: File {path} would be {size} bytes, over the limit of {limit} bytes"
    ))
}

pub(crate) fn store_too_large(total: u64, limit: u64) -> ModelError {
    ModelError(format!(
        "Error: The memory store would hold {total} bytes, over the limit of {limit} bytes"
    ))
}

/// An existing file over the size limit (placed by someone else) is not
/// read into memory for an edit.
pub(crate) fn too_large_to_edit(path: &str, size: u64, limit: u64) -> ModelError {
    ModelError(format!(
        "Error: File {path} is {size} bytes, over the limit of {limit} bytes, so it cannot be edited"
    ))
}

// ---- storage failures (§4) ------------------------------------------------

pub(crate) fn hard_link(path: &str) -> ModelError {
    ModelError(format!(
        "Error: Refusing to use {path}: it has more than one hard link, so its content may come from outside /memories"
    ))
}

/// A call to a tool the program does not run (an unregistered tool in the
/// runner, any other tool in `MemoryTool::reply`). The name is the model's:
/// cut to 64 characters, control characters dropped.
pub(crate) fn tool_unavailable(name: &str) -> ModelError {
    let shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    ModelError(format!(
        "Error: The tool {shown:?} is not available here. Do not call it again; go on without it."
    ))
}

#[cfg(feature = "tokio")]
pub(crate) fn internal_failure() -> ModelError {
    ModelError(
        "Error: The memory tool failed internally; nothing is known to have changed. Try again"
            .to_owned(),
    )
}

pub(crate) fn edit_conflict(path: &str) -> ModelError {
    ModelError(format!(
        "Error: The file {path} kept changing while it was being edited; nothing was written. Try the edit again"
    ))
}

/// After a directory view's row for a subdirectory that could not be
/// listed (its contents and size are unknown).
pub(crate) const UNLISTED: &str = " (Error: could not be listed)";

/// A storage failure the command has no more specific text for:
/// `Error: {what failed} for {path}`, the virtual path only.
pub(crate) fn storage_failure(error: &StoreError, path: &str) -> ModelError {
    match error {
        StoreError::Symlink { .. } => symlink(path),
        StoreError::HardLink { .. } => hard_link(path),
        StoreError::Conflict { .. } => edit_conflict(path),
        StoreError::Io { op, source, .. } => ModelError(format!(
            "Error: Could not {op} ({}) for {path}",
            io_cause(source)
        )),
        StoreError::NotFound { .. } => missing(path),
        StoreError::AlreadyExists { .. } => already_exists(path),
        StoreError::StoreFull { total, limit, .. } => store_too_large(*total, *limit),
        StoreError::TooManyFiles { limit, .. } => too_many_files(path, *limit),
        StoreError::UnsupportedName { reason, .. } => ModelError(format!(
            "Error: The path {path} is not a valid memory path: {reason}"
        )),
        StoreError::Unreachable { cause, .. } => unreachable_store(*cause, path),
        StoreError::OutcomeUnknown { cause, .. } => outcome_unknown(*cause, path),
        StoreError::Integrity { .. } => integrity_failed(path),
        StoreError::Invalid { reason, .. } => ModelError(format!(
            "Error: The storage operation failed ({reason}) for {path}"
        )),
        _ => ModelError(format!("Error: The storage operation failed for {path}")),
    }
}

/// SPEC §4: a store that cannot be reached.
pub(crate) fn unreachable_store(cause: RemoteCause, path: &str) -> ModelError {
    ModelError(format!(
        "Error: Could not reach the memory store ({cause}) for {path}"
    ))
}

/// SPEC §4: a write whose outcome is unknown.
pub(crate) fn outcome_unknown(cause: RemoteCause, path: &str) -> ModelError {
    ModelError(format!(
        "Error: Could not confirm the write ({cause}) for {path}; view it before trying again"
    ))
}

/// SPEC §4: stored bytes that failed an integrity check.
pub(crate) fn integrity_failed(path: &str) -> ModelError {
    ModelError(format!(
        "Error: Could not read {path}: its stored content failed the integrity check"
    ))
}

fn io_cause(e: &io::Error) -> &'static str {
    use io::ErrorKind as K;
    // EMFILE / ENFILE: no ErrorKind of their own.
    if matches!(e.raw_os_error(), Some(23 | 24)) {
        return "too many open files";
    }
    match e.kind() {
        K::PermissionDenied => "permission denied",
        K::NotFound => "no such file or directory",
        K::StorageFull => "no space left on the storage",
        K::QuotaExceeded => "storage quota exceeded",
        K::ReadOnlyFilesystem => "the storage is read-only",
        K::FileTooLarge => "file too large for the storage",
        K::Interrupted | K::TimedOut | K::WouldBlock => "interrupted",
        _ => "input/output error",
    }
}

// ---- sizes ----------------------------------------------------------------

/// A byte count in binary units as SPEC §3 prints it: `512B`, `1.5K`,
/// `4.0M`. The unit is the smallest whose one-decimal form is below
/// `1024.0`, so 1,048,575 bytes is `1.0M`, never `1024.0K`.
pub fn human_size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    for unit in ['K', 'M', 'G'] {
        let shown = format!("{value:.1}");
        if shown.parse::<f64>().is_ok_and(|v| v < 1024.0) {
            return format!("{shown}{unit}");
        }
        value /= 1024.0;
    }
    format!("{value:.1}T")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_spec_examples() {
        assert_eq!(human_size(0), "0B");
        assert_eq!(human_size(512), "512B");
        assert_eq!(human_size(1023), "1023B");
        assert_eq!(human_size(1024), "1.0K");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(12595), "12.3K");
        assert_eq!(human_size(1_048_575), "1.0M");
        assert_eq!(human_size(4 * 1024 * 1024), "4.0M");
        assert_eq!(human_size(u64::MAX), "16777216.0T");
    }

    #[test]
    fn pushed_listing_lines_match_the_format_macro() {
        for size in [0, 7, 10, 999, 1023, 1024, 1536, 12_595, 4 << 20, u64::MAX] {
            for (path, is_dir) in [("/memories/a.md", false), ("/memories/dé", true)] {
                let mut out = String::from("x");
                let chars = push_listing_line(&mut out, size, path, is_dir);
                let line = listing_line(size, path, is_dir);
                assert_eq!(out, format!("x{line}"));
                assert_eq!(chars, line.chars().count());
            }
        }
    }

    #[test]
    fn numbered_lines_match_the_format_macro() {
        for n in [
            0,
            1,
            9,
            10,
            99_999,
            999_999,
            1_000_000,
            12_345_678,
            usize::MAX,
        ] {
            let mut out = String::new();
            numbered_line(&mut out, n, "text é");
            assert_eq!(out, format!("{n:>6}\ttext é"));
        }
    }

    #[test]
    fn remote_and_integrity_answers_follow_spec_4() {
        use std::time::Duration;
        let after = Duration::from_secs(30);
        assert_eq!(
            unreachable_store(RemoteCause::TimedOut { after }, "/memories/a.md").to_string(),
            "Error: Could not reach the memory store (timed out after 30 s) for /memories/a.md"
        );
        assert_eq!(
            outcome_unknown(RemoteCause::ConnectionLost, "/memories/a.md").to_string(),
            "Error: Could not confirm the write (connection lost) for /memories/a.md; view it before trying again"
        );
        assert_eq!(
            integrity_failed("/memories/a.md").to_string(),
            "Error: Could not read /memories/a.md: its stored content failed the integrity check"
        );
    }

    #[test]
    fn old_str_echo_is_cut_at_200_characters() {
        let long = "é".repeat(201);
        assert_eq!(echo(&long), format!("{}…", "é".repeat(200)));
        let exact = "x".repeat(200);
        assert_eq!(echo(&exact), exact);
    }
}
