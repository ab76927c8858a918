//! `driftreactor setup aws` against moto's server: creates the rule, queue and DLQ;
//! running it twice changes nothing; `--dry-run` prints the pattern and policies as
//! JSON; `--state` narrows the rule to the sources the states use.
//!
//! Needs `moto_server` (`pip install 'moto[server]'`); skipped only with
//! `DRIFTREACTOR_SKIP_MOTO=1`.

use std::process::Output;

mod common;

use driftreactor_testkit::moto::MotoServer;
use serde_json::Value;

fn driftreactor(args: &[&str]) -> Output {
    common::driftreactor_for_moto().args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn setup_aws_creates_the_wiring_and_a_second_run_changes_nothing() {
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let args = [
        "setup",
        "aws",
        "--queue-name",
        "drift-cli",
        "--endpoint-url",
        &endpoint,
        "--source",
        "aws.ec2",
    ];

    let first = stdout(&driftreactor(&args));
    for created in [
        "created   dead-letter queue drift-cli-dlq",
        "created   queue drift-cli (redrive to drift-cli-dlq)",
        "created   rule drift-cli-cloudtrail on bus default",
        "created   queue policy of drift-cli",
        "created   target driftreactor-sqs of rule drift-cli-cloudtrail",
    ] {
        assert!(first.contains(created), "missing `{created}` in:\n{first}");
    }
    assert!(first.contains("queue_url = \"http"), "{first}");

    let second = stdout(&driftreactor(&args));
    assert!(
        !second.contains("created") && !second.contains("updated"),
        "{second}"
    );
    assert!(second.contains("no changes"), "{second}");
}

#[test]
fn setup_aws_dry_run_prints_the_pattern_and_policies_as_json() {
    let state = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        state.path(),
        serde_json::json!({
            "version": 4,
            "serial": 1,
            "lineage": "3f1c2a9e-0000-4000-8000-00000000a115",
            "resources": [
                {"mode": "managed", "type": "aws_security_group", "name": "web", "instances": []},
                {"mode": "managed", "type": "aws_s3_bucket", "name": "logs", "instances": []},
                {"mode": "data", "type": "aws_iam_policy_document", "name": "p", "instances": []},
            ],
        })
        .to_string(),
    )
    .unwrap();
    let out = stdout(&driftreactor(&[
        "setup",
        "aws",
        "--queue-name",
        "drift",
        "--dry-run",
        "--region",
        "eu-west-1",
        "--state",
        state.path().to_str().unwrap(),
    ]));
    let plan: Value = serde_json::from_str(&out).unwrap();
    let pattern = &plan["rule"]["event_pattern"];
    assert_eq!(
        pattern["detail-type"],
        serde_json::json!(["AWS API Call via CloudTrail"])
    );
    assert_eq!(
        pattern["detail"]["errorCode"],
        serde_json::json!([{"exists": false}])
    );
    assert_eq!(pattern["source"], serde_json::json!(["aws.ec2", "aws.s3"]));
    assert_eq!(
        plan["queue_policy"]["Statement"][0]["Action"],
        "sqs:SendMessage"
    );
    assert_eq!(
        plan["redrive_policy"]["deadLetterTargetArn"],
        "arn:aws:sqs:eu-west-1:<account-id>:drift-dlq"
    );
}

/// A state with IAM resources set up outside us-east-1 used to get a rule that never
/// sees IAM events (EventBridge receives global services' events in us-east-1 only),
/// silently; setup now says so and what to do. In us-east-1 it says nothing.
#[test]
fn setup_aws_warns_when_the_region_cannot_see_global_service_events() {
    let state = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        state.path(),
        serde_json::json!({
            "version": 4,
            "serial": 1,
            "lineage": "3f1c2a9e-0000-4000-8000-00000000a115",
            "resources": [
                {"mode": "managed", "type": "aws_security_group", "name": "web", "instances": []},
                {"mode": "managed", "type": "aws_iam_role", "name": "app", "instances": []},
            ],
        })
        .to_string(),
    )
    .unwrap();
    let run = |region: &str| {
        driftreactor(&[
            "setup",
            "aws",
            "--queue-name",
            "drift",
            "--dry-run",
            "--region",
            region,
            "--state",
            state.path().to_str().unwrap(),
        ])
    };
    let out = run("eu-west-1");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("global services (aws.iam)")
            && stderr.contains("never sees them")
            && stderr.contains("--region us-east-1"),
        "{stderr}"
    );
    let out = run("us-east-1");
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("global services"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
