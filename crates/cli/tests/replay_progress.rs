//! Issue 16, "Very large states": a long replay shows progress on stderr when stderr is
//! a terminal (files and events done, events/s), never in the report and never when
//! stderr is a pipe or a file. The terminal is a real pseudo-terminal from util-linux
//! `script`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

const INPUTS: &str = "fixtures/aws/events fixtures/azure/events fixtures/gcp/events";

#[test]
fn replay_progress_goes_to_a_terminal_stderr_only() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.jsonl");
    let transcript = dir.path().join("tty.log");
    let bin = env!("CARGO_BIN_EXE_driftreactor");
    let cmd = format!(
        "{bin} replay --config fixtures/driftreactor.toml --format json {INPUTS} > {}",
        report.display()
    );
    // stdout goes to the file, stderr to the pseudo-terminal `script` records.
    let status = Command::new("script")
        .args(["-qec", &cmd])
        .arg(&transcript)
        .current_dir(repo())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("util-linux `script` is needed for a pseudo-terminal: {e}"));
    assert!(status.code().is_some(), "script ran");
    let tty = String::from_utf8_lossy(&std::fs::read(&transcript).unwrap()).into_owned();
    assert!(
        tty.contains("replay: ") && tty.contains("events/s") && tty.contains(" files, "),
        "progress on the terminal: {tty}"
    );
    let lines = std::fs::read_to_string(&report).unwrap();
    assert!(lines.lines().count() >= 40, "the whole report: {lines}");
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["verdict"].is_string());
    }
    assert!(!lines.contains("events/s"));

    // A pipe: no progress at all.
    let out = Command::new(bin)
        .args([
            "replay",
            "--config",
            "fixtures/driftreactor.toml",
            "--format",
            "json",
        ])
        .args(INPUTS.split(' '))
        .current_dir(repo())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("events/s"),
        "no progress into a pipe: {stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        lines,
        "the same report"
    );
}
