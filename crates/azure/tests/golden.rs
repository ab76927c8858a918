//! Golden tests over every Azure file of the shared corpus.
//!
//! Each corpus file is read at test time from `../../../shared/corpus/azure` (relative
//! to this crate) or `$DRIFTREACTOR_CORPUS/azure`; JSON arrays are split into their
//! events, each is normalized, and the key fields are compared with
//! `tests/golden/<stem>.expected.json`. Files that are not valid JSON must yield a
//! normalize error. Set `DRIFTREACTOR_BLESS=1` to (re)write the expected files, then
//! review them by hand: they are the spec.

use std::path::Path;

use driftreactor_testkit::{corpus, golden};
use serde_json::Value;

#[test]
fn golden_corpus_azure() {
    golden::check_corpus(
        "azure",
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        driftreactor_azure::normalize,
    );
}

/// Nothing panics on any prefix or byte-flip of any corpus file. An empty or missing
/// corpus folder fails the test rather than passing it vacuously.
#[test]
fn no_panic_on_truncated_or_mangled_corpus() {
    for file in corpus::nonempty_files(&corpus::dir("azure")) {
        let bytes = std::fs::read(file).unwrap();
        for cut in (0..bytes.len()).step_by(5) {
            let _ = driftreactor_azure::normalize(&bytes[..cut]);
            let _ = driftreactor_azure::subscription_validation_code(&bytes[..cut]);
        }
        if let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&bytes) {
            for item in items {
                let one = serde_json::to_vec(&item).unwrap();
                for i in (0..one.len()).step_by(3) {
                    let mut m = one.clone();
                    m[i] = m[i].wrapping_add(1);
                    let _ = driftreactor_azure::normalize(&m);
                }
            }
        }
    }
}
