//! Golden tests over every GCP file of the shared corpus.
//!
//! Each corpus file is read at test time from `../../../shared/corpus/gcp` (relative
//! to this crate) or `$DRIFTREACTOR_CORPUS/gcp`; JSON arrays are split into their
//! events, each is normalized, and the key fields are compared with
//! `tests/golden/<stem>.expected.json`. Files that are not valid JSON must yield a
//! normalize error. Set `DRIFTREACTOR_BLESS=1` to (re)write the expected files, then
//! review them by hand: they are the spec.

use std::path::Path;

use driftreactor_testkit::{corpus, golden};

#[test]
fn golden_corpus_gcp() {
    golden::check_corpus(
        "gcp",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        driftreactor_gcp::normalize,
    );
}

/// Nothing panics on any prefix or byte-flip of any corpus file. An empty or missing
/// corpus folder fails the test rather than passing it vacuously.
#[test]
fn no_panic_on_truncated_or_mangled_corpus() {
    for file in corpus::nonempty_files(&corpus::dir("gcp")) {
        let bytes = std::fs::read(file).unwrap();
        for cut in (0..bytes.len()).step_by(5) {
            let _ = driftreactor_gcp::normalize(&bytes[..cut]);
        }
        for i in (0..bytes.len()).step_by(3) {
            let mut m = bytes.clone();
            m[i] = m[i].wrapping_add(1);
            let _ = driftreactor_gcp::normalize(&m);
        }
    }
}
