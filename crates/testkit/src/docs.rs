//! Generated sections of documentation files, checked against the code they describe.
//!
//! A document holds its generated part between the lines
//! `<!-- BEGIN GENERATED (do not edit; …) -->` and `<!-- END GENERATED -->`;
//! [`check_generated`] compares that part with what the code renders and, with
//! `DRIFTREACTOR_BLESS` set, rewrites it instead.

use std::path::Path;

/// The first marker line of a generated section (followed by the reason on one line).
pub const BEGIN: &str = "<!-- BEGIN GENERATED";
/// The last marker line of a generated section.
pub const END: &str = "<!-- END GENERATED -->";

/// Asserts that the generated section of the document at `path` is `expected`
/// (compared after trimming surrounding blank lines); with `DRIFTREACTOR_BLESS` set,
/// writes `expected` there instead.
///
/// # Panics
/// When the file cannot be read (or written when blessing), has no generated section,
/// or its section differs from `expected` (naming the file and how to regenerate it).
pub fn check_generated(path: &Path, expected: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let begin = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{}: no `{BEGIN}` line", path.display()));
    let body_start = text[begin..]
        .find('\n')
        .map(|i| begin + i + 1)
        .unwrap_or_else(|| panic!("{}: `{BEGIN}` is the last line", path.display()));
    let end = text[body_start..]
        .find(END)
        .map(|i| body_start + i)
        .unwrap_or_else(|| panic!("{}: no `{END}` line", path.display()));
    let current = &text[body_start..end];
    if current.trim() == expected.trim() {
        return;
    }
    if std::env::var_os("DRIFTREACTOR_BLESS").is_some() {
        let new = format!(
            "{}\n{}\n{}",
            &text[..body_start].trim_end_matches('\n'),
            expected.trim(),
            &text[end..]
        );
        std::fs::write(path, new).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    panic!(
        "{}: the generated section is out of date with the code's tables; rerun the test \
         with DRIFTREACTOR_BLESS=1 and review the diff\n--- expected ---\n{}\n--- found ---\n{}",
        path.display(),
        expected.trim(),
        current.trim()
    );
}
