//! `str_replace` and `insert`: read-modify-write edits that never lose a
//! concurrent update (the store's
//! [`update_opts`](crate::MemoryStore::update_opts)).

use super::{MemoryTool, Outcome, parse};
use crate::lines;
use crate::path::MemoryPath;
use crate::render::{self, ModelError};
use crate::result::Content;
use crate::store::{Abort, Context, MemoryStore, Quota, StoreError, UpdateOptions, Updated};

impl<S: MemoryStore> MemoryTool<S> {
    pub(super) fn str_replace(
        &self,
        raw: &str,
        old_str: &str,
        new_str: &str,
        context: Context<'_>,
    ) -> Outcome {
        let path = parse(raw)?;
        if old_str.is_empty() {
            return Err(render::empty_old_str());
        }
        let missing = render::edit_missing;
        let (text, start) = self.edit(&path, context, missing, |text| {
            let mut found = text.match_indices(old_str);
            let Some((start, _)) = found.next() else {
                return Err(render::no_match(old_str, raw));
            };
            if found.next().is_some() {
                let (shown, total) = match_lines(text, old_str);
                return Err(render::multiple_matches(old_str, &shown, total));
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
        // An empty file has no lines to show: the header alone (SPEC §3).
        let n_lines = lines::count(&text);
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

    pub(super) fn insert(
        &self,
        raw: &str,
        insert_line: i64,
        insert_text: &str,
        context: Context<'_>,
    ) -> Outcome {
        let path = parse(raw)?;
        let new_lines = insert_text.strip_suffix('\n').unwrap_or(insert_text);
        self.edit(&path, context, render::missing, |text| {
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
        context: Context<'_>,
        missing: fn(&str) -> ModelError,
        change: impl Fn(&str) -> Result<(String, T), ModelError>,
    ) -> Result<(String, T), ModelError> {
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
                Ok::<_, ModelError>((edited, more))
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
        // With a store limit, the store checks it after `compute`,
        // atomically with the write.
        let root = MemoryPath::root();
        let quota = self.config.max_store_size.map(|max_bytes| Quota {
            scope: &root,
            max_bytes,
        });
        let options = UpdateOptions {
            limit,
            quota,
            context,
        };
        let outcome = self.store.update_opts(path, options, &mut compute);
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
}

/// The first [`render::MATCH_LINES_SHOWN`] of the ascending, de-duplicated
/// lines where non-overlapping matches start, and how many such lines there
/// are in all, counted in one pass. The list stays small however many lines
/// match (SPEC §3), so a 1 MiB file of matches answers in a few hundred
/// bytes.
fn match_lines(text: &str, needle: &str) -> (Vec<usize>, usize) {
    let mut shown = Vec::new();
    let (mut line, mut counted_to, mut last, mut total) = (1, 0, 0, 0);
    for (i, _) in text.match_indices(needle) {
        line += lines::line_at(&text[counted_to..i], i - counted_to) - 1;
        counted_to = i;
        if last != line {
            last = line;
            total += 1;
            if shown.len() < render::MATCH_LINES_SHOWN {
                shown.push(line);
            }
        }
    }
    (shown, total)
}
