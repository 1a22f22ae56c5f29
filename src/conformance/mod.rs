//! The conformance suite: one set of behaviour checks that every
//! [`MemoryStore`] must pass, built-in or your own.
//!
//! **Not a stable API.** This module is behind the `conformance` feature and
//! exists to test stores: cases may be added, renamed or made stricter in
//! any release, without a major version. Enable it in your
//! `[dev-dependencies]` only.
//!
//! Each case takes a fresh, empty store and panics (like `assert!`) on the
//! first difference from SPEC. Expected strings are written out in full
//! here, never rebuilt with the crate's own rendering.
//!
//! Run every case as its own `#[test]` with [`conformance_tests!`](crate::conformance_tests):
//!
//! ```
//! mod in_memory {
//!     claude_memory::conformance_tests!(|run| run(&claude_memory::InMemoryStore::new()));
//! }
//! ```
//!
//! The closure receives `run` and calls it with a fresh store, so it can
//! set up and tear down whatever the store needs (a temporary directory, a
//! database schema) around the call. [`run_all`] and [`CASES`] run the same
//! cases without the test harness.
//!
//! The cases live by subject: `view_cases` (directory and file views),
//! `edit_cases` (create, str_replace, insert, delete, rename),
//! `input_cases` (limits, bad input, `tool_use` ids, hostile paths) and
//! `store_cases` (the store primitives' own contract); all are re-exported
//! here.

mod edit_cases;
mod helpers;
mod history_cases;
mod input_cases;
mod log_cases;
mod store_cases;
mod view_cases;

pub use edit_cases::*;
pub use history_cases::*;
pub use input_cases::*;
pub use log_cases::*;
pub use store_cases::*;
pub use view_cases::*;

use crate::store::MemoryStore;

/// A conformance case: checks one behaviour on a fresh, empty store.
pub type Case = fn(&dyn MemoryStore);

/// Runs `case` on a store provided by `with`, which calls its argument once
/// with a fresh, empty store.
pub fn run_case(case: Case, with: impl FnOnce(&dyn Fn(&dyn MemoryStore))) {
    with(&|store| case(store));
}

/// Runs every case in [`CASES`], each on its own fresh store.
pub fn run_all(with: impl Fn(&dyn Fn(&dyn MemoryStore))) {
    for (_, case) in CASES {
        run_case(*case, &with);
    }
}

/// The one list of conformance cases, from which both [`CASES`] and
/// [`conformance_tests!`](crate::conformance_tests) are generated, so the two
/// cannot disagree.
///
/// `__conformance_for_each_case!([path::to::callback] tokens…)` expands to
/// `path::to::callback! { tokens… ; case_a, case_b, … }`. A new case is a
/// `pub fn` in one of the `*_cases.rs` files and its name here (a unit test
/// checks that every such function is listed).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_for_each_case {
    ([$($callback:tt)+] $($args:tt)*) => {
        $($callback)+! { $($args)* ;
            view_of_an_empty_store_lists_the_root,
            directory_view_lists_two_levels_with_sizes,
            directory_view_prints_the_normalised_path,
            directory_view_is_truncated_at_the_limit,
            file_view_numbers_lines,
            file_view_handles_empty_crlf_and_unicode,
            file_view_range_selects_and_clamps,
            file_view_range_errors,
            file_view_is_truncated_at_whole_lines,
            file_view_refuses_too_many_lines,
            view_of_a_missing_path,
            view_of_non_utf8_text,
            view_returns_real_images_only,
            create_stores_exact_bytes_and_parents,
            create_refuses_existing_and_invalid_targets,
            create_policy_overwrite_replaces_files_only,
            str_replace_shows_a_snippet,
            str_replace_refuses_missing_and_ambiguous_text,
            str_replace_edge_cases,
            insert_adds_lines,
            insert_errors,
            delete_files_and_directories,
            delete_errors,
            rename_files_and_directories,
            rename_errors_in_order,
            file_size_limit_changes_nothing,
            store_size_limit_changes_nothing,
            bad_input_gets_exact_errors,
            tool_use_blocks_echo_their_id,
            hostile_paths_are_rejected_and_touch_nothing,
            store_write_modes,
            store_rename_and_delete,
            store_rename_refuses_paths_past_the_limit,
            store_list_and_stat,
            concurrent_edits_are_never_lost,
            oversized_files_are_viewed_but_never_read_whole_for_edits,
            store_update_writes_or_aborts,
            store_quota_is_checked_with_the_write,
            store_delete_file_if_decides_at_the_instant,
            store_list_tree_agrees_with_list,
        }
    };
}

/// Generates one `#[test]` per conformance case, in the current module.
///
/// The argument is a closure `|run| …` that calls `run(&store)` with a
/// fresh, empty store (see [`conformance`](crate::conformance)). Needs the
/// `conformance` feature; the tests are exactly the cases of [`CASES`].
#[macro_export]
macro_rules! conformance_tests {
    ($with:expr) => {
        $crate::__conformance_for_each_case!([$crate::__conformance_tests] $with);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($with:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::run_case($crate::conformance::$case, $with);
        }
    )*};
}

macro_rules! cases_const {
    (; $($case:ident),* $(,)?) => {
        /// Every case, by name, for runners that do not use the macro
        /// (the same cases, in the same order, as
        /// [`conformance_tests!`](crate::conformance_tests)).
        pub const CASES: &[(&str, Case)] = &[$((stringify!($case), $case)),*];
    };
}

crate::__conformance_for_each_case!([cases_const]);

/// A history case: checks a [`HistoryStore`](crate::history::HistoryStore)
/// over a fresh, empty store, given a function that opens that store's
/// history log (the same log on every call).
pub type HistoryCase = fn(&dyn MemoryStore, OpenLog<'_>);

/// Every history case, by name (see [`history_conformance_tests!`](crate::history_conformance_tests)).
pub const HISTORY_CASES: &[(&str, HistoryCase)] = &[
    ("history_records_every_change", history_records_every_change),
    (
        "history_follows_renames_and_directories",
        history_follows_renames_and_directories,
    ),
    (
        "history_failed_changes_leave_no_version",
        history_failed_changes_leave_no_version,
    ),
    (
        "history_is_invisible_to_the_model",
        history_is_invisible_to_the_model,
    ),
    ("history_queries_filter", history_queries_filter),
    ("history_diff_revert_restore", history_diff_revert_restore),
    ("history_redact_and_prune", history_redact_and_prune),
    ("history_repair_on_open", history_repair_on_open),
    (
        "history_log_answers_match_the_reference",
        history_log_answers_match_the_reference,
    ),
    (
        "history_revert_changes_undoes_one_actor",
        history_revert_changes_undoes_one_actor,
    ),
];

/// The check of `history_log_answers_match_the_reference` on `count`
/// versions and `rounds` filters: for a log whose every query reads its
/// versions one by one (`CloudLog`, a request per version), where the
/// full case (3,000 versions, 300 filters) would take hours.
pub fn history_log_answers_match_a_smaller_reference(
    store: &dyn MemoryStore,
    log: OpenLog<'_>,
    count: usize,
    rounds: usize,
) {
    log_cases::answers_match(store, log, count, rounds);
}

/// Runs a history case on a store and log provided by `with`, which
/// calls its argument once with a fresh, empty store and its log opener.
pub fn run_history_case(
    case: HistoryCase,
    with: impl FnOnce(&dyn Fn(&dyn MemoryStore, OpenLog<'_>)),
) {
    with(&|store, log| case(store, log));
}

/// Generates one `#[test]` per history case, in the current module. The
/// argument is a closure `|run| …` that calls `run(&store, &open_log)`.
///
/// `history_conformance_tests!(one_request_per_version, |run| …)` is for a
/// log whose every query reads its versions one by one (`CloudLog`): the
/// log's answers are checked on 200 versions and 20 filters
/// ([`history_log_answers_match_a_smaller_reference`](crate::conformance::history_log_answers_match_a_smaller_reference)),
/// not 3,000 and 300, which would take hours there.
#[macro_export]
macro_rules! history_conformance_tests {
    (one_request_per_version, $with:expr) => {
        $crate::__history_conformance_tests! { $with;
            history_records_every_change,
            history_follows_renames_and_directories,
            history_failed_changes_leave_no_version,
            history_is_invisible_to_the_model,
            history_queries_filter,
            history_diff_revert_restore,
            history_redact_and_prune,
            history_repair_on_open,
            history_revert_changes_undoes_one_actor,
        }

        #[test]
        fn history_log_answers_match_a_smaller_reference() {
            $crate::conformance::run_history_case(
                |store, log| {
                    $crate::conformance::history_log_answers_match_a_smaller_reference(
                        store, log, 200, 20,
                    )
                },
                $with,
            );
        }
    };
    ($with:expr) => {
        $crate::__history_conformance_tests! { $with;
            history_records_every_change,
            history_follows_renames_and_directories,
            history_failed_changes_leave_no_version,
            history_is_invisible_to_the_model,
            history_queries_filter,
            history_diff_revert_restore,
            history_redact_and_prune,
            history_repair_on_open,
            history_log_answers_match_the_reference,
            history_revert_changes_undoes_one_actor,
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __history_conformance_tests {
    ($with:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::run_history_case($crate::conformance::$case, $with);
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::CASES;

    /// `src/conformance`, from the crate's manifest or the test suite's
    /// (`suite/`, which builds these sources from `../src`).
    fn source_dir() -> std::path::PathBuf {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let own = manifest.join("src/conformance");
        if own.is_dir() {
            return own;
        }
        manifest.join("../src/conformance")
    }

    /// Every `pub fn` in the case files is a case, and every case is listed
    /// once: a case written but left out of the list would otherwise never
    /// run anywhere.
    #[test]
    fn every_case_function_is_listed_once() {
        let dir = source_dir();
        let mut defined = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("src/conformance") {
            let file = entry.expect("directory entry").path();
            if file
                .file_name()
                .is_some_and(|n| n == "mod.rs" || n == "history_cases.rs" || n == "log_cases.rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("case file");
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("pub fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    defined.push(name);
                }
            }
        }
        defined.sort_unstable();
        let mut listed: Vec<String> = CASES.iter().map(|(n, _)| (*n).to_owned()).collect();
        listed.sort_unstable();
        let before = listed.len();
        listed.dedup();
        assert_eq!(listed.len(), before, "a case is listed twice");
        let unlisted: Vec<&String> = defined.iter().filter(|n| !listed.contains(n)).collect();
        let undefined: Vec<&String> = listed.iter().filter(|n| !defined.contains(n)).collect();
        assert!(
            unlisted.is_empty() && undefined.is_empty(),
            "case functions not in __conformance_for_each_case!: {unlisted:?}; \
             listed but not found as `pub fn` in a case file: {undefined:?}"
        );
        assert_eq!(listed, defined);
    }

    /// The same for the history cases: every `pub fn` of
    /// `history_cases.rs` and `log_cases.rs` is in `HISTORY_CASES` (and the macro, whose
    /// expansion `tests/history/conformance.rs` checks against it).
    #[test]
    fn every_history_case_is_listed() {
        let mut text = String::new();
        for name in ["history_cases.rs", "log_cases.rs"] {
            text += &std::fs::read_to_string(source_dir().join(name)).expect(name);
        }
        let mut defined: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pub fn "))
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            })
            .collect();
        defined.sort_unstable();
        let mut listed: Vec<String> = super::HISTORY_CASES
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, defined);
    }
}
