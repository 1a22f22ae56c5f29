//! `MemoryTool`: JSON in, `ToolResult` out. All command logic lives here,
//! on top of the store's primitives, so every backend answers alike.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::audit::{AuditEvent, AuditSink};
use crate::command::{COMMANDS, Command};
use crate::config::{Config, CreatePolicy};
use crate::lines;
use crate::numbered::Numberer;
use crate::path::MemoryPath;
use crate::policy::{ContentPolicy, Decision};
use crate::render;
use crate::result::{Content, ImageFormat, ToolResult};
use crate::store::{Abort, EntryKind, FileReader, MemoryStore, Op, StoreError, Updated, WriteMode};

/// Bytes read from a file at a time while viewing it.
const READ_CHUNK: usize = 64 * 1024;

/// A shown line is cut after this many bytes (or `max_file_size`, if
/// larger), so one huge line cannot exhaust memory.
const MIN_SHOWN_LINE_BYTES: u64 = 1024 * 1024;

/// The memory tool handler: runs Claude's memory commands against a store.
///
/// Cheap to share: all methods take `&self`, and it is `Send + Sync` when
/// the store is, so one handler can serve many threads (or
/// `tokio::task::spawn_blocking` calls).
#[derive(Clone)]
pub struct MemoryTool<S> {
    store: S,
    config: Config,
    policy: Option<Arc<dyn ContentPolicy>>,
    audit: Option<Arc<dyn AuditSink>>,
    tenant: Option<String>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for MemoryTool<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTool")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("policy", &self.policy.is_some())
            .field("audit", &self.audit.is_some())
            .field("tenant", &self.tenant)
            .finish()
    }
}

/// The narrowest size column (`0B`) and its tab: rows are kept while a
/// lower bound of the output's length fits the limit, so every row that can
/// be shown is kept, before any size is known.
const MIN_SIZE_WIDTH: usize = 3;

/// Rows of a directory view. Only rows that may still fit the output limit
/// are kept; the rest are only counted, so a huge tree costs its walk (the
/// sizes need it) but not its formatting.
struct Listing {
    rows: Vec<(u64, String, bool)>,
    chars: usize,
    budget: usize,
    entries: usize,
}

impl Listing {
    /// Counts an entry and keeps its row if it may fit; returns its index.
    fn push(&mut self, parent: &str, name: &str, is_dir: bool) -> Option<usize> {
        self.entries += 1;
        if self.chars > self.budget {
            return None;
        }
        let path = format!("{parent}/{name}");
        self.chars += path.chars().count() + MIN_SIZE_WIDTH + 1;
        self.rows.push((0, path, is_dir));
        Some(self.rows.len() - 1)
    }
}

/// A command's outcome before it becomes a [`ToolResult`]; the error is the
/// rendered model-facing text.
type Outcome = Result<Content, String>;

impl<S: MemoryStore> MemoryTool<S> {
    /// A handler with the default [`Config`].
    pub fn new(store: S) -> Self {
        Self::with_config(store, Config::default())
    }

    /// A handler with the given limits and policies.
    pub fn with_config(store: S, config: Config) -> Self {
        MemoryTool {
            store,
            config,
            policy: None,
            audit: None,
            tenant: None,
        }
    }

    /// Checks the new content of every write with `policy` (see
    /// [`SecretDetector`](crate::policy::SecretDetector)).
    pub fn with_policy(mut self, policy: impl ContentPolicy + 'static) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Sends an [`AuditEvent`](crate::audit::AuditEvent) for every call to
    /// `sink`.
    pub fn with_audit(mut self, sink: impl AuditSink + 'static) -> Self {
        self.audit = Some(Arc::new(sink));
        self
    }

    /// Labels audit events with a tenant.
    pub fn with_tenant_label(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// The store this handler runs against.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs one call. `input` is either a `tool_use` block
    /// (`{"type":"tool_use","id":…,"input":{…}}`, whose `id` is echoed as
    /// `tool_use_id`) or a bare `input` object. Never panics: every problem
    /// is a result with `is_error: true`.
    pub fn dispatch(&self, input: &Value) -> ToolResult {
        let Some(object) = input.as_object() else {
            return ToolResult::error(render::invalid_input("expected a JSON object"));
        };
        if object.get("type").and_then(Value::as_str) != Some("tool_use") {
            return self.dispatch_input(input);
        }
        let id = object.get("id").and_then(Value::as_str).map(str::to_owned);
        let mut result = match object.get("input") {
            Some(inner @ Value::Object(_)) => self.dispatch_input(inner),
            _ => ToolResult::error(render::invalid_input(
                "the tool_use block's `input` must be a JSON object",
            )),
        };
        result.tool_use_id = id;
        result
    }

    /// [`dispatch`](Self::dispatch) on JSON text; unparseable text is an
    /// `Error: Invalid input: …` result.
    pub fn dispatch_json(&self, json: &str) -> ToolResult {
        match serde_json::from_str::<Value>(json) {
            Ok(value) => self.dispatch(&value),
            Err(e) => ToolResult::error(render::invalid_input(&e.to_string())),
        }
    }

    /// Runs an already-parsed command.
    pub fn execute(&self, command: &Command) -> ToolResult {
        let started = Instant::now();
        let outcome = match command {
            Command::View { path, view_range } => self.view(path, *view_range),
            Command::Create { path, file_text } => self.create(path, file_text),
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(path, old_str, new_str.as_deref().unwrap_or("")),
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(path, *insert_line, insert_text),
            Command::Delete { path } => self.delete(path),
            Command::Rename { old_path, new_path } => self.rename(old_path, new_path),
        };
        let result = match outcome {
            Ok(content) => ToolResult::ok(content),
            Err(text) => ToolResult::error(text),
        };
        if let Some(sink) = &self.audit {
            let (path, new_path, sent) = match command {
                Command::View { path, .. } | Command::Delete { path } => (path, None, 0),
                Command::Create { path, file_text } => (path, None, file_text.len()),
                Command::StrReplace { path, new_str, .. } => {
                    (path, None, new_str.as_deref().map_or(0, str::len))
                }
                Command::Insert {
                    path, insert_text, ..
                } => (path, None, insert_text.len()),
                Command::Rename { old_path, new_path } => (old_path, Some(new_path.as_str()), 0),
            };
            let returned = match (command, result.content.first()) {
                (Command::View { .. }, Some(Content::Text(t))) => t.len(),
                (Command::View { .. }, Some(Content::Image { data, .. })) => data.len(),
                _ => 0,
            };
            let text = sink.include_content().then(|| result.text()).flatten();
            sink.record(&AuditEvent {
                command: Some(command.name()),
                path: Some(path),
                new_path,
                is_error: result.is_error,
                bytes: (sent + returned) as u64,
                duration: started.elapsed(),
                tenant: self.tenant.as_deref(),
                result_text: text,
            });
        }
        result
    }

    fn dispatch_input(&self, input: &Value) -> ToolResult {
        let Some(object) = input.as_object() else {
            return ToolResult::error(render::invalid_input("expected a JSON object"));
        };
        match Command::from_input(object) {
            Ok(command) => self.execute(&command),
            Err(text) => {
                let result = ToolResult::error(text);
                if let Some(sink) = &self.audit {
                    let command = object.get("command").and_then(Value::as_str);
                    sink.record(&AuditEvent {
                        command: command.filter(|c| COMMANDS.contains(c)),
                        path: None,
                        new_path: None,
                        is_error: true,
                        bytes: 0,
                        duration: Duration::ZERO,
                        tenant: self.tenant.as_deref(),
                        result_text: sink.include_content().then(|| result.text()).flatten(),
                    });
                }
                result
            }
        }
    }

    // ---- view -------------------------------------------------------------

    fn view(&self, raw: &str, range: Option<[i64; 2]>) -> Outcome {
        let path = parse(raw)?;
        // Open first: a file (the common case) then costs one lookup.
        match self.store.open(&path) {
            Ok(file) => self.view_file(&path, file, range),
            Err(StoreError::IsADirectory { .. }) => self.view_directory(&path).map(Content::Text),
            Err(StoreError::NotFound { .. }) => Err(render::view_missing(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }

    fn view_directory(&self, dir: &MemoryPath) -> Result<String, String> {
        let base = dir.normalized();
        let mut listing = Listing {
            rows: vec![(0, base.clone(), false)],
            chars: base.chars().count() + MIN_SIZE_WIDTH,
            // Rows past this many characters cannot be shown: count them only.
            budget: self.config.view_output_limit,
            entries: 1,
        };
        listing.rows[0].0 = self
            .visit(dir, &base, 1, &mut listing)
            .map_err(|e| render::storage_failure(&e, &base))?;
        let mut out = render::directory_header(&base);
        let limit = self.config.view_output_limit;
        let mut used = 0;
        let mut shown = 0;
        for (size, path, is_dir) in &listing.rows {
            let line = render::listing_line(*size, path, *is_dir);
            let cost = line.chars().count() + usize::from(shown > 0);
            if shown > 0 && used + cost > limit {
                break;
            }
            used += cost;
            shown += 1;
            out.push('\n');
            out.push_str(&line);
        }
        if shown < listing.entries {
            out.push('\n');
            out.push_str(&render::listing_truncated(listing.entries - shown));
        }
        Ok(out)
    }

    /// Adds the visible entries of `dir` (depth first, by name) to the
    /// listing down to depth 2, and returns the visible total size below
    /// `dir` (which needs every level).
    fn visit(
        &self,
        dir: &MemoryPath,
        shown_as: &str,
        depth: usize,
        listing: &mut Listing,
    ) -> Result<u64, StoreError> {
        let mut entries = self.store.list(dir)?;
        entries.retain(|e| !e.name.starts_with('.') && e.name != "node_modules");
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut total = 0;
        for entry in entries {
            let is_dir = entry.kind == EntryKind::Directory;
            // A name no memory path can spell is not shown.
            let child = match is_dir {
                true => match dir.join(&entry.name) {
                    Some(child) => Some(child),
                    None => continue,
                },
                false if dir.is_valid_child(&entry.name) => None,
                false => continue,
            };
            let row = (depth <= 2).then(|| listing.push(shown_as, &entry.name, is_dir));
            let size = match child {
                Some(child) => {
                    let shown = format!("{shown_as}/{}", entry.name);
                    self.visit(&child, &shown, depth + 1, listing)?
                }
                None => entry.len,
            };
            if let Some(Some(row)) = row {
                listing.rows[row].0 = size;
            }
            total += size;
        }
        Ok(total)
    }

    fn view_file(
        &self,
        path: &MemoryPath,
        file: FileReader<'_>,
        range: Option<[i64; 2]>,
    ) -> Outcome {
        let raw = path.as_str();
        let read_error =
            |e: std::io::Error| render::storage_failure(&StoreError::io(Op::Read, path, e), raw);
        let mut reader = file.reader;
        // Small files need a small buffer (zeroing 64 KiB costs more than
        // numbering a short note).
        let size = usize::try_from(file.len)
            .unwrap_or(READ_CHUNK)
            .saturating_add(1);
        let mut buf = vec![0; size.clamp(8, READ_CHUNK)];
        let head_len = read_full(&mut reader, &mut buf[..8]).map_err(read_error)?;
        if let Some(format) = ImageFormat::detect(raw, &buf[..head_len]) {
            let limit = self.config.max_image_size;
            let mut data = buf[..head_len].to_vec();
            (&mut reader)
                .take(limit.saturating_add(1).saturating_sub(head_len as u64))
                .read_to_end(&mut data)
                .map_err(read_error)?;
            let size = file.len.max(data.len() as u64);
            if size > limit {
                return Err(render::image_too_large(raw, size, limit));
            }
            return Ok(Content::Image { format, data });
        }

        // Text: one streaming pass, whatever the file's size.
        let (first, last) = match range {
            None => (1, usize::MAX),
            Some([start, end]) if start >= 1 && (end == -1 || end >= start) => (
                usize::try_from(start).unwrap_or(usize::MAX),
                usize::try_from(end).unwrap_or(usize::MAX),
            ),
            Some(_) => (usize::MAX, 0), // invalid: only count lines for the message
        };
        let max_line = self.config.max_file_size.max(MIN_SHOWN_LINE_BYTES);
        // Room for the numbered text of a small file, without regrowing.
        let mut header = String::with_capacity(
            usize::try_from(file.len.saturating_mul(2))
                .unwrap_or(usize::MAX)
                .clamp(64, 4 * self.config.view_output_limit + 256),
        );
        header.push_str(&render::file_header(raw));
        let mut numberer = Numberer::new(
            header,
            first,
            last,
            self.config.view_output_limit,
            usize::try_from(max_line).unwrap_or(usize::MAX),
        );
        let not_utf8 = |_| render::not_utf8(raw);
        numberer.feed(&buf[..head_len]).map_err(not_utf8)?;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            numberer.feed(&buf[..n]).map_err(not_utf8)?;
        }
        let view = numberer.finish().map_err(not_utf8)?;
        let n_lines = view.n_lines;
        if n_lines > lines::MAX_LINES {
            return Err(render::too_many_lines(raw));
        }
        if let Some([start, end]) = range {
            if start < 1 || start as u64 > n_lines as u64 {
                return Err(render::view_range_start(start, end, n_lines));
            }
            if end != -1 && end < start {
                return Err(render::view_range_end(start, end));
            }
        }
        let mut out = view.text;
        if let Some((a, b)) = view.shown
            && b < last.min(n_lines)
        {
            out.push('\n');
            out.push_str(&render::file_truncated(a, b, n_lines));
        }
        Ok(Content::Text(out))
    }

    // ---- create -----------------------------------------------------------

    fn create(&self, raw: &str, file_text: &str) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::already_exists("/memories"));
        }
        if path.has_trailing_slash() {
            return Err(render::ends_in_slash(raw));
        }
        let file_text = self.apply_policy(&path, file_text.into())?;
        let file_text = file_text.as_ref();
        let size = file_text.len() as u64;
        self.check_file_size(raw, size)?;
        let mode = match self.config.create_policy {
            CreatePolicy::Reject => WriteMode::Create,
            CreatePolicy::Overwrite => WriteMode::Overwrite,
        };
        if self.config.max_store_size.is_some() {
            let existing = self
                .store
                .stat(&path)
                .map_err(|e| render::storage_failure(&e, raw))?;
            // A plain create would say "already exists" first.
            let replaced = match existing {
                Some(_) if mode == WriteMode::Create => return Err(render::already_exists(raw)),
                Some(m) => m.len,
                None => 0,
            };
            self.check_store_size(raw, replaced, size)?;
        }
        match self.store.write(&path, file_text.as_bytes(), mode) {
            Ok(_) => Ok(Content::Text(render::created(raw))),
            Err(StoreError::AlreadyExists { .. } | StoreError::IsADirectory { .. }) => {
                Err(render::already_exists(raw))
            }
            Err(StoreError::ParentNotDirectory { parent, .. }) => {
                Err(render::parent_is_file(raw, &parent.normalized()))
            }
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }

    // ---- str_replace and insert -------------------------------------------

    fn str_replace(&self, raw: &str, old_str: &str, new_str: &str) -> Outcome {
        let path = parse(raw)?;
        if old_str.is_empty() {
            return Err(render::empty_old_str());
        }
        let missing = render::edit_missing;
        let (text, start) = self.edit(&path, missing, |text| {
            let mut found = text.match_indices(old_str);
            let Some((start, _)) = found.next() else {
                return Err(render::no_match(old_str, raw));
            };
            if found.next().is_some() {
                return Err(render::multiple_matches(
                    old_str,
                    &match_lines(text, old_str),
                ));
            }
            let mut edited = String::with_capacity(text.len() - old_str.len() + new_str.len());
            edited.push_str(&text[..start]);
            edited.push_str(new_str);
            edited.push_str(&text[start + old_str.len()..]);
            Ok((edited, start))
        })?;
        let first = lines::line_at(&text, start);
        let last = match new_str.char_indices().last() {
            Some((i, _)) => lines::line_at(&text, start + i),
            None => first,
        };
        let mut out = render::edited_header().to_owned();
        let n_lines = lines::count(&text);
        if n_lines == 0 {
            out.push('\n');
            render::numbered_line(&mut out, 1, "");
            return Ok(Content::Text(out));
        }
        let from = first.saturating_sub(2).max(1);
        let to = (last + 2).min(n_lines);
        for (i, line) in lines::split(&text)
            .enumerate()
            .skip(from - 1)
            .take((to + 1).saturating_sub(from))
        {
            out.push('\n');
            render::numbered_line(&mut out, i + 1, line);
        }
        Ok(Content::Text(out))
    }

    fn insert(&self, raw: &str, insert_line: i64, insert_text: &str) -> Outcome {
        let path = parse(raw)?;
        let new_lines = insert_text.strip_suffix('\n').unwrap_or(insert_text);
        self.edit(&path, render::missing, |text| {
            let n_lines = lines::count(text);
            let at = usize::try_from(insert_line)
                .ok()
                .filter(|&n| n <= n_lines)
                .ok_or_else(|| render::insert_line_out_of_range(insert_line, n_lines))?;
            let offset = lines::end_of_line(text, at);
            let mut edited = String::with_capacity(text.len() + new_lines.len() + 2);
            edited.push_str(&text[..offset]);
            if !edited.is_empty() && !edited.ends_with('\n') {
                edited.push('\n');
            }
            edited.push_str(new_lines);
            edited.push('\n');
            edited.push_str(&text[offset..]);
            if !edited.ends_with('\n') {
                edited.push('\n');
            }
            Ok((edited, ()))
        })?;
        Ok(Content::Text(render::inserted(raw)))
    }

    /// Read-modify-write with compare-and-swap: `change` computes the new
    /// text from the current one; if another writer got in between, the
    /// edit is recomputed on the fresh content, so no update is lost.
    fn edit<T>(
        &self,
        path: &MemoryPath,
        missing: fn(&str) -> String,
        change: impl Fn(&str) -> Result<(String, T), String>,
    ) -> Result<(String, T), String> {
        let raw = path.as_str();
        let limit = self.config.max_file_size;
        // The store calls this once, or again on fresh content after a
        // concurrent write; the last call's refusal or extra is the answer.
        let mut refusal = None;
        let mut extra = None;
        let mut compute = |data: &[u8]| -> Result<Vec<u8>, Abort> {
            let attempt = (|| {
                let text = std::str::from_utf8(data).map_err(|_| render::not_utf8(raw))?;
                let (edited, more) = change(text)?;
                let edited = self.apply_policy(path, edited.into())?.into_owned();
                let size = edited.len() as u64;
                self.check_file_size(raw, size)?;
                if self.config.max_store_size.is_some() {
                    self.check_store_size(raw, data.len() as u64, size)?;
                }
                Ok::<_, String>((edited, more))
            })();
            match attempt {
                Ok((edited, more)) => {
                    extra = Some(more);
                    Ok(edited.into_bytes())
                }
                Err(message) => {
                    refusal = Some(message);
                    Err(Abort)
                }
            }
        };
        let outcome = self.store.update(path, limit, &mut compute);
        match outcome {
            Ok(Updated::Written(bytes)) => {
                let text = String::from_utf8(bytes).map_err(|_| render::not_utf8(raw))?;
                extra
                    .map(|more| (text, more))
                    .ok_or_else(|| render::edit_conflict(raw))
            }
            Ok(Updated::Aborted) => Err(refusal.unwrap_or_else(|| render::edit_conflict(raw))),
            Err(StoreError::NotFound { .. } | StoreError::IsADirectory { .. }) => Err(missing(raw)),
            Err(StoreError::TooLarge { len, .. }) => {
                Err(render::too_large_to_edit(raw, len, limit))
            }
            Err(StoreError::Conflict { .. }) => Err(render::edit_conflict(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }

    // ---- delete and rename ------------------------------------------------

    fn delete(&self, raw: &str) -> Outcome {
        let path = parse(raw)?;
        if path.is_root() {
            return Err(render::delete_root());
        }
        match self.store.delete(&path) {
            Ok(()) => Ok(Content::Text(render::deleted(raw))),
            Err(StoreError::NotFound { .. }) => Err(render::missing(raw)),
            Err(e) => Err(render::storage_failure(&e, raw)),
        }
    }

    fn rename(&self, old_raw: &str, new_raw: &str) -> Outcome {
        let from = parse(old_raw)?;
        let to = parse(new_raw)?;
        if from.is_root() {
            return Err(render::rename_root());
        }
        if to.is_strictly_inside(&from) {
            let exists = self
                .store
                .stat(&from)
                .map_err(|e| render::storage_failure(&e, old_raw))?;
            return Err(match exists {
                None => render::missing(old_raw),
                Some(_) => render::move_into_itself(old_raw),
            });
        }
        match self.store.rename(&from, &to) {
            Ok(()) => Ok(Content::Text(render::renamed(old_raw, new_raw))),
            Err(StoreError::NotFound { .. }) => Err(render::missing(old_raw)),
            Err(StoreError::AlreadyExists { .. }) => Err(render::destination_exists(new_raw)),
            Err(StoreError::ParentNotDirectory { parent, .. }) => Err(
                render::rename_parent_is_file(old_raw, new_raw, &parent.normalized()),
            ),
            Err(e) => {
                let shown = match &e {
                    StoreError::Symlink { path } if *path == to => new_raw,
                    _ => old_raw,
                };
                Err(render::storage_failure(&e, shown))
            }
        }
    }

    /// The content policy's verdict on a write: the text to write, or the
    /// model-facing refusal.
    fn apply_policy<'t>(
        &self,
        path: &MemoryPath,
        text: std::borrow::Cow<'t, str>,
    ) -> Result<std::borrow::Cow<'t, str>, String> {
        let Some(policy) = &self.policy else {
            return Ok(text);
        };
        match policy.check(path, &text) {
            Decision::Allow => Ok(text),
            Decision::Reject(reason) => Err(render::policy_refused(path.as_str(), &reason)),
            Decision::Redact(redacted) => Ok(redacted.into()),
        }
    }

    // ---- limits -----------------------------------------------------------

    fn check_file_size(&self, raw: &str, size: u64) -> Result<(), String> {
        let limit = self.config.max_file_size;
        if size > limit {
            return Err(render::file_too_large(raw, size, limit));
        }
        Ok(())
    }

    /// Refuses a write that replaces `old` bytes with `new` if the store
    /// would then exceed its limit.
    fn check_store_size(&self, raw: &str, old: u64, new: u64) -> Result<(), String> {
        let Some(limit) = self.config.max_store_size else {
            return Ok(());
        };
        let total = self
            .store
            .total_size()
            .map_err(|e| render::storage_failure(&e, raw))?;
        let after = total.saturating_sub(old) + new;
        if after > limit {
            return Err(render::store_too_large(after, limit));
        }
        Ok(())
    }
}

/// The ascending, de-duplicated lines where non-overlapping matches start,
/// counted in one pass.
fn match_lines(text: &str, needle: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let (mut line, mut counted_to) = (1, 0);
    for (i, _) in text.match_indices(needle) {
        line += lines::line_at(&text[counted_to..i], i - counted_to) - 1;
        counted_to = i;
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }
    lines
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn parse(raw: &str) -> Result<MemoryPath, String> {
    MemoryPath::parse(raw).map_err(|e| render::invalid_path(raw, &e))
}
