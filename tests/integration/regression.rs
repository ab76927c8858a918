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

/// A missing event file among several used to abort the run with exit 2 after part of
/// the report was printed; it is a rejected line and the run goes on.
#[test]
fn missing_event_file_is_a_rejected_line_not_an_abort() {
    let run = replay_json(&[
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events/01_sg_open_ssh_console.json",
        "no/such/event.json",
        "fixtures/aws/events/03_rds_modify_cli.json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines = run.lines();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["input"], "no/such/event.json");
    assert_eq!(lines[1]["verdict"], "rejected");
    assert!(
        lines[1]["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2]["verdict"], "drift");
    assert!(
        run.stderr.contains("some input was rejected"),
        "{}",
        run.stderr
    );
}

/// A state file given where events go (a second path after one `--state`) used to be
/// rejected as "none of the keys"; the reason now says what it is.
#[test]
fn a_state_given_as_an_event_says_to_use_state() {
    let run = replay_json(&[
        "--state",
        "fixtures/aws/state/prod.tfstate",
        "fixtures/gcp/state/shop.tfstate",
    ]);
    assert_eq!(run.code, 1);
    let lines = run.lines();
    assert!(
        lines[0]["reason"].as_str().unwrap().contains("--state"),
        "{}",
        lines[0]
    );
}
