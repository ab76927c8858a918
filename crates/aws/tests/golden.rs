//! Golden tests: every record of every file in the AWS corpus
//! (`../shared/corpus/aws`, or `$DRIFTREACTOR_CORPUS/aws`) is normalized and its key
//! fields compared with `tests/golden/<file stem>.expected.json`.
//!
//! `DRIFTREACTOR_BLESS=1 cargo test -p driftreactor-aws --test golden` rewrites the
//! expected files; review the diff by hand, they are the spec.

use std::path::{Path, PathBuf};

use driftreactor_aws::normalize;
use driftreactor_event::{DriftEvent, Outcome};
use driftreactor_testkit::corpus;
use serde_json::{Value, json};

fn corpus_dir() -> PathBuf {
    let base = match std::env::var_os("DRIFTREACTOR_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    let dir = base.join("aws");
    assert!(
        dir.is_dir(),
        "AWS corpus not found at {} (set DRIFTREACTOR_CORPUS to the corpus root)",
        dir.display()
    );
    dir
}

/// Splits a corpus file into its records with the pipeline's own splitter
/// ([`driftreactor_source::split`], through [`corpus::split`]): a JSON array, a
/// `{"Records": [...]}` log file, or one object.
///
/// # Panics
/// When a part of the file does not split (the corpus files are JSON).
fn split(bytes: &[u8]) -> Vec<Vec<u8>> {
    corpus::split(bytes)
        .0
        .into_iter()
        .map(|item| item.expect("corpus file is JSON"))
        .collect()
}

/// The fields the golden files pin down.
fn summary(ev: &DriftEvent) -> Value {
    let resources: Vec<Value> = ev
        .resources
        .iter()
        .map(|r| {
            if r.parents.is_empty() {
                json!({"id": r.id})
            } else {
                json!({"id": r.id, "parents": r.parents})
            }
        })
        .collect();
    json!({
        "id": ev.id,
        "service": ev.service,
        "operation": ev.operation,
        "change": ev.change,
        "not_a_change": ev.not_a_change,
        "resources": resources,
        "principal": {"id": ev.principal.id, "also": ev.principal.also},
        "via": ev.via,
        "read_only": ev.read_only,
        "outcome": match &ev.outcome {
            Outcome::Success => json!("success"),
            Outcome::Failed { code } => json!({"failed": code}),
        },
        "account": ev.account,
        "region": ev.region,
        "occurred_at": ev.occurred_at,
    })
}

#[test]
fn corpus_matches_golden_files() {
    let dir = corpus_dir();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("DRIFTREACTOR_BLESS").is_some();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    let mut failures = Vec::new();
    let mut seen = 0;
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).unwrap();
        if stem.ends_with("_INVALID_JSON") {
            // Not JSON as published: the caller rejects it; normalize must say so.
            assert!(normalize(&bytes).is_err(), "{stem} should not normalize");
            continue;
        }
        let got: Vec<Value> = split(&bytes)
            .iter()
            .map(|rec| match normalize(rec) {
                Ok(ev) => summary(&ev),
                Err(e) => json!({"error": e.to_string()}),
            })
            .collect();
        let got = Value::Array(got);
        let file = golden.join(format!("{stem}.expected.json"));
        seen += 1;
        if bless {
            std::fs::create_dir_all(&golden).unwrap();
            let mut text = serde_json::to_string_pretty(&got).unwrap();
            text.push('\n');
            std::fs::write(&file, text).unwrap();
            continue;
        }
        let want: Value = match std::fs::read(&file) {
            Ok(b) => serde_json::from_slice(&b).unwrap(),
            Err(e) => {
                failures.push(format!("{stem}: cannot read {}: {e}", file.display()));
                continue;
            }
        };
        if want != got {
            failures.push(format!(
                "{stem}: mismatch\n--- expected\n{}\n--- got\n{}",
                serde_json::to_string_pretty(&want).unwrap(),
                serde_json::to_string_pretty(&got).unwrap()
            ));
        }
    }
    assert!(seen > 40, "only {seen} corpus files");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn mutated_corpus_bytes_never_panic() {
    let dir = corpus_dir();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"{}[]\":,0123456789aeflnrstu\\ -";
    for file in corpus::nonempty_files(&dir) {
        let bytes = std::fs::read(file).unwrap();
        let mut records = if serde_json::from_slice::<Value>(&bytes).is_ok() {
            split(&bytes)
        } else {
            Vec::new()
        };
        records.push(bytes);
        for rec in records {
            let _ = normalize(&rec);
            for _ in 0..150 {
                let mut m = rec.clone();
                for _ in 0..(1 + next() % 3) {
                    if m.is_empty() {
                        break;
                    }
                    let i = (next() as usize) % m.len();
                    match next() % 4 {
                        0 => m[i] = alphabet[(next() as usize) % alphabet.len()],
                        1 => {
                            m.remove(i);
                        }
                        2 => m.insert(i, alphabet[(next() as usize) % alphabet.len()]),
                        _ => m.truncate(i),
                    }
                }
                let _ = normalize(&m);
            }
        }
    }
}
