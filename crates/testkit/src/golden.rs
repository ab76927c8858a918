//! Golden files: a test's actual output, as JSON, compared with a reviewed
//! `<name>.expected.json`.
//!
//! With `DRIFTREACTOR_BLESS` set (`DRIFTREACTOR_BLESS=1 cargo test …`) the expected
//! files are (re)written from the actual output instead; review the diff by hand, the
//! golden files are the spec. Mismatches are collected, so one run names every file
//! that differs.
//!
//! [`check_corpus`] is the whole golden test of one provider's corpus folder.

use std::path::{Path, PathBuf};

use driftreactor_event::{DriftEvent, NormalizeError};
use serde_json::{Value, json};

use crate::corpus;

/// A folder of golden files and the mismatches found so far.
#[derive(Debug)]
pub struct Golden {
    dir: PathBuf,
    bless: bool,
    failures: Vec<String>,
}

impl Golden {
    /// Golden files in `dir` (usually `<crate>/tests/golden`); blesses when the
    /// environment variable `DRIFTREACTOR_BLESS` is set.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            bless: std::env::var_os("DRIFTREACTOR_BLESS").is_some(),
            failures: Vec::new(),
        }
    }

    /// Compares `actual` with `<dir>/<name>.expected.json`, recording a failure when the
    /// file is missing or differs; when blessing, writes `actual` there (pretty JSON and
    /// a final newline) instead.
    ///
    /// # Panics
    /// When blessing and the file cannot be written, or when the golden file is not JSON.
    pub fn check(&mut self, name: &str, actual: &Value) {
        let path = self.dir.join(format!("{name}.expected.json"));
        if self.bless {
            std::fs::create_dir_all(&self.dir)
                .unwrap_or_else(|e| panic!("{}: {e}", self.dir.display()));
            let text = serde_json::to_string_pretty(actual).expect("JSON serializes") + "\n";
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            return;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            self.failures.push(format!(
                "{name}: no golden file {} (run with DRIFTREACTOR_BLESS=1 and review it)",
                path.display()
            ));
            return;
        };
        let expected: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("golden file {} is not JSON: {e}", path.display()));
        if expected != *actual {
            self.failures.push(format!(
                "{name}: differs from golden\n expected: {expected}\n   actual: {actual}"
            ));
        }
    }

    /// Ends the comparison.
    ///
    /// # Panics
    /// When any [`check`](Self::check) failed, listing every failure.
    pub fn finish(self) {
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// The key fields of one normalize result as golden files pin them: the
/// [`DriftEvent`] serialized without `request` (raw request parameters are too
/// bulky to review), or `{"error": "<message>"}`.
pub fn summary(result: Result<DriftEvent, NormalizeError>) -> Value {
    match result {
        Ok(ev) => {
            let mut v = serde_json::to_value(&ev).expect("DriftEvent serializes");
            if let Some(o) = v.as_object_mut() {
                o.remove("request");
            }
            v
        }
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// The golden test of one provider's corpus folder (`provider` = `azure`, `gcp`): each
/// `*.json` file of [`corpus::dir`]`(provider)` is split into its events as the
/// pipeline does ([`corpus::split`]), each is normalized and [summarized](summary),
/// and the array of summaries is checked against `<golden_dir>/<file stem>.expected.json`.
///
/// # Panics
/// When the corpus folder is missing or holds no JSON file, when a file whose stem ends
/// in `_INVALID_JSON` does not yield a normalize error for its first item, and (after
/// all files) when any golden file is missing or differs.
pub fn check_corpus(
    provider: &str,
    golden_dir: &Path,
    normalize: impl Fn(&[u8]) -> Result<DriftEvent, NormalizeError>,
) {
    let dir = corpus::dir(provider);
    let files = corpus::json_files(&dir);
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    let mut golden = Golden::new(golden_dir);
    for file in &files {
        let stem = file
            .file_stem()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let actual = Value::Array(
            corpus::split(&bytes)
                .0
                .into_iter()
                .map(|item| summary(item.and_then(|event| normalize(&event))))
                .collect(),
        );
        if stem.ends_with("_INVALID_JSON") {
            let first = &actual[0];
            assert!(
                first.get("error").is_some(),
                "{stem}: invalid JSON must be rejected, got {first}"
            );
        }
        golden.check(&stem, &actual);
    }
    golden.finish();
}
