//! Helpers: run the binary, find the repo and the corpus, parse report lines.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The shared corpus: `DRIFTREACTOR_CORPUS`, else `../shared/corpus` next to the repo.
pub fn corpus() -> PathBuf {
    let path = std::env::var_os("DRIFTREACTOR_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/corpus"));
    assert!(
        path.join("aws").is_dir(),
        "the shared corpus is missing at {}: set DRIFTREACTOR_CORPUS to the folder holding aws/, azure/, gcp/, tfstate/",
        path.display()
    );
    path
}

/// The result of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The JSON Lines report, parsed.
    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad report line {l:?}: {e}"))
            })
            .collect()
    }
}

/// Runs `driftreactor` with `args` in the repo root.
pub fn driftreactor(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("failed to start the driftreactor binary");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `replay --format json` and asserts it did not crash (exit 0 or 1).
pub fn replay_json(args: &[&str]) -> Run {
    let mut all = vec!["replay", "--format", "json"];
    all.extend_from_slice(args);
    let run = driftreactor(&all);
    assert!(
        run.code == 0 || run.code == 1,
        "replay {args:?} exited {}: {}",
        run.code,
        run.stderr
    );
    run
}

/// The line whose `input` ends with `suffix`.
pub fn line<'a>(lines: &'a [Value], suffix: &str) -> &'a Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter(|l| l["input"].as_str().is_some_and(|i| i.ends_with(suffix)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one line for {suffix}, got {found:?}"
    );
    found[0]
}

/// `(workspace, address, match)` of a line's resources.
pub fn resources(line: &Value) -> Vec<(String, String, String)> {
    line["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["workspace"].as_str().unwrap().to_owned(),
                r["address"].as_str().unwrap().to_owned(),
                r["match"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
