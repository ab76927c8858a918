//! Golden tests over every GCP file of the shared corpus.
//!
//! Each corpus file is read at test time from `../../../shared/corpus/gcp` (relative
//! to this crate) or `$DRIFTREACTOR_CORPUS/gcp`; JSON arrays are split into their
//! events, each is normalized, and the key fields are compared with
//! `tests/golden/<stem>.expected.json`. Files that are not valid JSON must yield a
//! normalize error. Set `DRIFTREACTOR_BLESS=1` to (re)write the expected files, then
//! review them by hand: they are the spec.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn corpus_dir() -> PathBuf {
    let base = std::env::var_os("DRIFTREACTOR_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    );
    let dir = base.join("gcp");
    assert!(
        dir.is_dir(),
        "corpus folder {} is missing: check out shared/ beside the repo or set DRIFTREACTOR_CORPUS",
        dir.display()
    );
    dir
}

/// The key fields of one normalize result, as compared with the golden file.
fn summarize(payload: &[u8]) -> Value {
    match driftreactor_gcp::normalize(payload) {
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

fn results_for(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|item| summarize(&serde_json::to_vec(item).expect("re-serialize")))
                .collect(),
        ),
        _ => Value::Array(vec![summarize(bytes)]),
    }
}

#[test]
fn golden_corpus_gcp() {
    let dir = corpus_dir();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("DRIFTREACTOR_BLESS").is_some();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read corpus dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(file).expect("read corpus file");
        let actual = results_for(&bytes);
        if stem.ends_with("_INVALID_JSON") {
            let first = &actual[0];
            assert!(
                first.get("error").is_some(),
                "{stem}: invalid JSON must be rejected, got {first}"
            );
        }
        let expected_path = golden.join(format!("{stem}.expected.json"));
        if bless {
            std::fs::create_dir_all(&golden).unwrap();
            let text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
            std::fs::write(&expected_path, text).unwrap();
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&expected_path) else {
            failures.push(format!(
                "{stem}: no golden file {} (run with DRIFTREACTOR_BLESS=1 and review it)",
                expected_path.display()
            ));
            continue;
        };
        let expected: Value = serde_json::from_str(&text).expect("golden file is JSON");
        if expected != actual {
            failures.push(format!(
                "{stem}: differs from golden\n expected: {expected}\n   actual: {actual}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Nothing panics on any prefix or byte-flip of any corpus file.
#[test]
fn no_panic_on_truncated_or_mangled_corpus() {
    let dir = corpus_dir();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
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
