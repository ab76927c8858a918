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

/// A policy attachment (no ARN, so its identity names no account) in one account's
/// state was a `related` match of a same-named role changed in another account: the
/// event was reported as drift of that state. Attachments now take the account of
/// their provider configuration, and the router's account guard refuses them.
#[test]
fn same_role_name_in_another_account_is_not_drift_of_its_attachments() {
    let state = crate::util::corpus().join("tfstate/aws_prod_10_modules_for_each.tfstate.json");
    let dir = tempfile::tempdir().unwrap();
    let event = |account: &str| {
        let f = dir.path().join(format!("attach-{account}.json"));
        let record = serde_json::json!({
            "eventVersion": "1.09", "eventID": format!("attach-{account}"),
            "eventName": "AttachRolePolicy", "eventSource": "iam.amazonaws.com",
            "awsRegion": "us-east-1", "eventTime": "2026-01-01T00:00:00Z",
            "recipientAccountId": account,
            "userIdentity": {"type": "IAMUser", "arn": format!("arn:aws:iam::{account}:user/alice")},
            "userAgent": "console.amazonaws.com",
            "requestParameters": {"roleName": "ecsInstanceRole",
                                  "policyArn": "arn:aws:iam::aws:policy/ReadOnlyAccess"},
            "responseElements": null
        });
        std::fs::write(&f, serde_json::to_vec(&record).unwrap()).unwrap();
        f
    };
    let other = event("999999999999");
    let own = event("111122223339");
    let run = replay_json(&[
        "--state",
        state.to_str().unwrap(),
        other.to_str().unwrap(),
        own.to_str().unwrap(),
    ]);
    let lines = run.lines();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert_eq!(lines[0]["verdict"], "unmanaged", "{}", lines[0]);
    assert_eq!(lines[0]["resources"], serde_json::json!([]), "{}", lines[0]);
    assert_eq!(lines[1]["verdict"], "drift", "{}", lines[1]);
    let matched: Vec<(&str, &str)> = lines[1]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["address"].as_str().unwrap(), r["match"].as_str().unwrap()))
        .collect();
    assert!(
        matched.contains(&("module.ec2.aws_iam_role.ecs_instance_role", "primary")),
        "{matched:?}"
    );
    assert!(
        matched.contains(&(
            "module.ec2.aws_iam_role_policy_attachment.ecs_instance_policy",
            "related"
        )),
        "{matched:?}"
    );
}
