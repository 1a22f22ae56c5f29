//! The six commands, parsed from the model's JSON with SPEC §4's errors.
//!
//! Parsing is by hand rather than through `serde::Deserialize` because the
//! model must get exact, actionable messages (which field, which type), in
//! the order SPEC fixes; the type still derives `Serialize`/`Deserialize`
//! for programs that build commands themselves.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::render::{self, ModelError};

/// The six command names, as the model spells them.
pub(crate) const COMMANDS: [&str; 6] = [
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
];

/// One memory tool call, as Claude sends it in a `tool_use` block's `input`.
///
/// Paths are raw strings here; `dispatch` validates them into
/// [`MemoryPath`](crate::MemoryPath) before any storage is touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Show a directory listing or a file with line numbers.
    View {
        /// File or directory to show.
        path: String,
        /// Optional `[start, end]` lines of a file; `end = -1` means the last.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view_range: Option<[i64; 2]>,
    },
    /// Create a file.
    Create {
        /// File to create.
        path: String,
        /// Its whole content.
        file_text: String,
    },
    /// Replace the one occurrence of `old_str` with `new_str`.
    StrReplace {
        /// File to edit.
        path: String,
        /// Text to find; must occur exactly once.
        old_str: String,
        /// Replacement; absent deletes `old_str`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_str: Option<String>,
    },
    /// Insert lines after line `insert_line` (0 = at the top).
    Insert {
        /// File to edit.
        path: String,
        /// Line to insert after.
        insert_line: i64,
        /// Text to insert.
        insert_text: String,
    },
    /// Delete a file or a directory with its contents.
    Delete {
        /// What to delete.
        path: String,
    },
    /// Move a file or directory; never overwrites.
    Rename {
        /// What to move.
        old_path: String,
        /// Where to; must not exist.
        new_path: String,
    },
}

impl Command {
    /// The path the command acts on, as sent (`old_path` for `rename`),
    /// and `new_path` for `rename`.
    pub fn paths(&self) -> (&str, Option<&str>) {
        match self {
            Command::View { path, .. }
            | Command::Create { path, .. }
            | Command::StrReplace { path, .. }
            | Command::Insert { path, .. }
            | Command::Delete { path } => (path, None),
            Command::Rename { old_path, new_path } => (old_path, Some(new_path)),
        }
    }

    /// The command's name as the model spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::View { .. } => "view",
            Command::Create { .. } => "create",
            Command::StrReplace { .. } => "str_replace",
            Command::Insert { .. } => "insert",
            Command::Delete { .. } => "delete",
            Command::Rename { .. } => "rename",
        }
    }

    /// Parses a tool `input` object. The error is the model-facing text.
    pub(crate) fn from_input(input: &Map<String, Value>) -> Result<Command, ModelError> {
        let command = match present(input, "command") {
            None => return Err(render::missing_command()),
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(render::wrong_type("command", "a string")),
        };
        let fields = Fields { input, command };
        Ok(match command {
            "view" => Command::View {
                path: fields.string("path")?,
                view_range: fields.view_range()?,
            },
            "create" => Command::Create {
                path: fields.string("path")?,
                file_text: fields.string("file_text")?,
            },
            "str_replace" => Command::StrReplace {
                path: fields.string("path")?,
                old_str: fields.string("old_str")?,
                new_str: fields.optional_string("new_str")?,
            },
            "insert" => Command::Insert {
                path: fields.string("path")?,
                insert_line: fields.integer("insert_line")?,
                insert_text: fields.string("insert_text")?,
            },
            "delete" => Command::Delete {
                path: fields.string("path")?,
            },
            "rename" => Command::Rename {
                old_path: fields.string("old_path")?,
                new_path: fields.string("new_path")?,
            },
            other => return Err(render::unknown_command(other)),
        })
    }
}

/// A field that is absent or JSON `null` is missing (SPEC §4).
fn present<'a>(input: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    input.get(field).filter(|v| !v.is_null())
}

struct Fields<'a> {
    input: &'a Map<String, Value>,
    command: &'a str,
}

impl Fields<'_> {
    fn required(&self, field: &str) -> Result<&Value, ModelError> {
        present(self.input, field).ok_or_else(|| render::missing_field(field, self.command))
    }

    fn string(&self, field: &str) -> Result<String, ModelError> {
        match self.required(field)? {
            Value::String(s) => Ok(s.clone()),
            _ => Err(render::wrong_type(field, "a string")),
        }
    }

    fn optional_string(&self, field: &str) -> Result<Option<String>, ModelError> {
        match present(self.input, field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(render::wrong_type(field, "a string")),
        }
    }

    fn integer(&self, field: &str) -> Result<i64, ModelError> {
        // serde_json keeps `2.0` and `1e2` as floats, so `as_i64` accepts
        // exactly the numbers written without fraction or exponent.
        self.required(field)?
            .as_i64()
            .ok_or_else(|| render::wrong_type(field, "an integer"))
    }

    fn view_range(&self) -> Result<Option<[i64; 2]>, ModelError> {
        let Some(value) = present(self.input, "view_range") else {
            return Ok(None);
        };
        // The bridge's parser kept only the start of a long one (not two
        // integers, surely): its echo, already cut.
        if let Some(Value::String(cut)) = self.input.get(VIEW_RANGE_CUT) {
            return Err(render::view_range_not_integers(&format!("{cut}…")));
        }
        match value.as_array().map(Vec::as_slice) {
            Some([a, b]) => match (a.as_i64(), b.as_i64()) {
                (Some(a), Some(b)) => Ok(Some([a, b])),
                _ => Err(not_two_integers(value)),
            },
            _ => Err(not_two_integers(value)),
        }
    }
}

fn not_two_integers(value: &Value) -> ModelError {
    render::view_range_not_integers(&echo(value))
}

/// The most bytes of a `view_range`'s compact JSON an error echoes; a
/// longer one is cut there (at a character boundary) and ends in `…`.
pub(crate) const VIEW_RANGE_ECHO_BYTES: usize = 1024;

/// Where the bridge's parser leaves the cut echo of a `view_range` too long
/// to keep (see `tool::slim`). No client field: it starts with a NUL.
pub(crate) const VIEW_RANGE_CUT: &str = "\0view_range_cut";

/// `value` as compact JSON, cut after [`VIEW_RANGE_ECHO_BYTES`] (never
/// formatting more than that).
fn echo(value: &Value) -> String {
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = VIEW_RANGE_ECHO_BYTES + 1 - self.0.len().min(VIEW_RANGE_ECHO_BYTES + 1);
            if room == 0 {
                return Err(std::io::Error::other("cut"));
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    let whole = serde_json::to_writer(&mut out, value).is_ok();
    let bytes = &out.0;
    let cut = !whole || bytes.len() > VIEW_RANGE_ECHO_BYTES;
    let head = &bytes[..bytes.len().min(VIEW_RANGE_ECHO_BYTES)];
    // JSON text is UTF-8: only a cut can end inside a character.
    let valid = match std::str::from_utf8(head) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut text = valid.to_owned();
    if cut {
        text.push('…');
    }
    text
}
