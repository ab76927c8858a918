//! Regression tests, each named after the bug it covers.

use crate::util::replay_json;

/// An empty event file must be one `rejected` line, not a crash or silence.
#[test]
fn empty_event_file_is_rejected_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("empty.json");
    std::fs::write(&f, "").unwrap();
    let run = replay_json(&[
        "--config",
        "fixtures/driftreactor.toml",
        f.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1);
    let lines = run.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["verdict"], "rejected");
    assert!(
        lines[0]["reason"].as_str().unwrap().contains("empty"),
        "{}",
        lines[0]
    );
}
