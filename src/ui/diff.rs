//! A diff between two texts as the page shows it: unified or side by
//! side, three lines of context, and inside each changed line the words
//! that changed marked. Bounded: a diff takes at most 200 ms to compute
//! (then it is approximate, never wrong) and shows at most
//! [`MAX_LINES`] lines.

use std::time::Duration;

use maud::{Markup, html};
use similar::{ChangeTag, TextDiff};

/// The most lines one diff page shows.
pub(crate) const MAX_LINES: usize = 5_000;

/// One line of a diff, its changed words marked.
struct Line {
    tag: ChangeTag,
    old: Option<usize>,
    new: Option<usize>,
    parts: Vec<(bool, String)>,
}

/// The hunks of the diff from `old` to `new`, and whether lines were cut.
fn hunks(old: &str, new: &str) -> (Vec<Vec<Line>>, bool) {
    let diff = TextDiff::configure()
        .timeout(Duration::from_millis(200))
        .diff_lines(old, new);
    let mut out = Vec::new();
    let mut shown = 0;
    for group in diff.grouped_ops(3) {
        let mut hunk = Vec::new();
        for op in &group {
            for change in diff.iter_inline_changes(op) {
                if shown >= MAX_LINES {
                    out.push(hunk);
                    return (out, true);
                }
                shown += 1;
                let parts = change
                    .iter_strings_lossy()
                    .map(|(marked, s)| (marked, s.trim_end_matches(['\n', '\r']).to_owned()))
                    .collect();
                hunk.push(Line {
                    tag: change.tag(),
                    old: change.old_index().map(|i| i + 1),
                    new: change.new_index().map(|i| i + 1),
                    parts,
                });
            }
        }
        out.push(hunk);
    }
    (out, false)
}

fn text(parts: &[(bool, String)]) -> Markup {
    html! {
        @for (marked, s) in parts {
            @let s = super::layout::visible(s);
            @if *marked { mark { (s) } } @else { (s) }
        }
    }
}

fn number(n: Option<usize>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// The diff from `old` to `new`: unified, or side by side.
pub(crate) fn render(old: &str, new: &str, side_by_side: bool) -> Markup {
    let (hunks, cut) = hunks(old, new);
    html! {
        @if hunks.is_empty() {
            p.note { "No difference." }
        }
        @for hunk in &hunks {
            @if side_by_side { (split(hunk)) } @else { (unified(hunk)) }
        }
        @if cut {
            p.note { "The diff is longer than " (MAX_LINES) " lines; the rest is not shown." }
        }
    }
}

fn unified(hunk: &[Line]) -> Markup {
    html! {
        table.diff.unified {
            @for line in hunk {
                @let (class, sign) = match line.tag {
                    ChangeTag::Delete => ("del", "-"),
                    ChangeTag::Insert => ("ins", "+"),
                    ChangeTag::Equal => ("eq", " "),
                };
                tr class=(class) {
                    td.n { (number(line.old)) }
                    td.n { (number(line.new)) }
                    td.sign { (sign) }
                    td.code { (text(&line.parts)) }
                }
            }
        }
    }
}

/// Side by side: within a run of changes, the nth line removed beside
/// the nth line added.
fn split(hunk: &[Line]) -> Markup {
    let mut rows: Vec<(Option<&Line>, Option<&Line>)> = Vec::new();
    let mut i = 0;
    while i < hunk.len() {
        if hunk[i].tag == ChangeTag::Equal {
            rows.push((Some(&hunk[i]), Some(&hunk[i])));
            i += 1;
            continue;
        }
        let start = i;
        while i < hunk.len() && hunk[i].tag == ChangeTag::Delete {
            i += 1;
        }
        let deleted = &hunk[start..i];
        let mid = i;
        while i < hunk.len() && hunk[i].tag == ChangeTag::Insert {
            i += 1;
        }
        let inserted = &hunk[mid..i];
        for k in 0..deleted.len().max(inserted.len()) {
            rows.push((deleted.get(k), inserted.get(k)));
        }
    }
    html! {
        table.diff.split {
            @for (left, right) in rows {
                tr {
                    @match left {
                        Some(l) => {
                            td.n { (number(l.old)) }
                            td.code class=(if l.tag == ChangeTag::Delete { "del" } else { "eq" }) { (text(&l.parts)) }
                        }
                        None => { td.n {} td.code.none {} }
                    }
                    @match right {
                        Some(r) => {
                            td.n { (number(r.new)) }
                            td.code class=(if r.tag == ChangeTag::Insert { "ins" } else { "eq" }) { (text(&r.parts)) }
                        }
                        None => { td.n {} td.code.none {} }
                    }
                }
            }
        }
    }
}
