//! `driftreactor replay --remediate` drives the real remediator from the CLI: a fake
//! `terraform` (a script that records its arguments and prints `show -json` plan
//! output) stands in for the IaC tool so the test is fast; the real Terraform loop
//! against moto lives in `crates/remediate/tests/terraform_e2e.rs`.

use std::os::unix::fs::PermissionsExt;

use crate::util::{driftreactor, repo};

const FAKE_TERRAFORM: &str = r#"#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$1" in
  init) exit 0 ;;
  plan) for a in "$@"; do case "$a" in -out=*) : > "${a#-out=}" ;; esac; done; exit 2 ;;
  show) cat "$FAKE_PLAN"; exit 0 ;;
  apply) exit 0 ;;
esac
exit 1
"#;

#[test]
fn replay_remediate_reverts_a_console_change_with_a_targeted_guarded_apply() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("infra");
    std::fs::create_dir_all(root.join(".terraform")).unwrap();
    let tool = dir.path().join("terraform");
    std::fs::write(&tool, FAKE_TERRAFORM).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"format_version":"1.2","terraform_version":"1.11.4","resource_changes":[
            {"address":"aws_security_group.web","mode":"managed","type":"aws_security_group","name":"web",
             "change":{"actions":["update"],"before":{"ingress":[]},"after":{"ingress":[]}}},
            {"address":"module.network.aws_vpc.this","mode":"managed","type":"aws_vpc","name":"this",
             "change":{"actions":["no-op"],"before":{},"after":{}}}]}"#,
    )
    .unwrap();
    let log = dir.path().join("calls.log");
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[workspaces]]
name = "aws-prod"
state = "{state}"
dir = "{root}"
tool = "terraform"
tool_path = "{tool}"
env = {{ FAKE_LOG = "{log}", FAKE_PLAN = "{plan}" }}

[principals]
reactor = ["arn:aws:iam::*:role/driftreactor"]

[[policy]]
type = "aws_security_group*"
action = "revert"

[remediation]
settle_secs = 0
"#,
            state = repo().join("fixtures/aws/state/prod.tfstate").display(),
            root = root.display(),
            tool = tool.display(),
            log = log.display(),
            plan = plan.display(),
        ),
    )
    .unwrap();
    let run = driftreactor(&[
        "replay",
        "--format",
        "json",
        "--remediate",
        "--config",
        config.to_str().unwrap(),
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("reverted"), "{}", run.stderr);
    let calls = std::fs::read_to_string(&log).unwrap();
    let plan_call = calls
        .lines()
        .find(|l| l.starts_with("plan"))
        .expect("a plan ran");
    for flag in [
        "-input=false",
        "-detailed-exitcode",
        "-target=aws_security_group.web",
    ] {
        assert!(plan_call.contains(flag), "{plan_call}");
    }
    assert!(calls.lines().any(|l| l.starts_with("apply")), "{calls}");
    // The JSON report on stdout is unchanged by remediation.
    assert_eq!(run.stdout.lines().count(), 1);
}
