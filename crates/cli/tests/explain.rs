//! `driftreactor explain` (issue 15, "A queryable graph and journal"): the real binary
//! on the demo config and fixtures of `fixtures/`: the report line plus why, as text
//! and JSON Lines, folders read as `replay` reads them, secrets redacted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(rel: &str) -> String {
    repo().join("fixtures").join(rel).display().to_string()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .arg("explain")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("JSON line: {e}: {l}")))
        .collect()
}

#[test]
fn explains_a_console_change_as_text_and_json_with_the_deciding_rule() {
    let config = fixture("driftreactor.toml");
    let event = fixture("aws/events/01_sg_open_ssh_console.json");
    let out = run(&["--config", &config, &event]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(text.contains("drift / revert"), "{text}");
    assert!(
        text.contains(
            "lookup aws:ec2:sg-0123456789abcdef0 in primary index: aws-prod:aws_security_group.web"
        ),
        "{text}"
    );
    assert!(
        text.contains("policy[0] (type = \"aws_security_group*\") says revert"),
        "{text}"
    );

    let out = run(&["--config", &config, "--format", "json", &event]);
    assert!(out.status.success());
    let all = lines(&out);
    assert_eq!(all.len(), 1);
    let e = &all[0];
    assert_eq!(e["line"]["verdict"], "drift");
    assert_eq!(e["decided_by"]["step"], "drift");
    let web = e["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["address"] == "aws_security_group.web")
        .expect("the security group is a target");
    assert_eq!(web["rule"]["index"], 0);
    assert_eq!(web["rule_action"], "revert");
    assert_eq!(web["action"], "revert");
}

#[test]
fn a_folder_is_explained_event_by_event_and_rejected_input_exits_1() {
    let config = fixture("driftreactor.toml");
    let events = fixture("aws/events");
    let out = run(&["--config", &config, "--format", "json", &events]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the folder holds rejected fixtures"
    );
    let all = lines(&out);
    // As many explanations as replay has report lines for the same folder.
    let replay = Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(["replay", "--config", &config, "--format", "json", &events])
        .output()
        .unwrap();
    let report: Vec<&str> = std::str::from_utf8(&replay.stdout)
        .unwrap()
        .lines()
        .collect();
    assert_eq!(all.len(), report.len());
    for (e, line) in all.iter().zip(&report) {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(e["line"], line, "explain's line is replay's");
    }
    let iac = all
        .iter()
        .find(|e| e["decided_by"]["step"] == "iac_principal")
        .expect("the terraform-ci change");
    assert!(
        iac["decided_by"]["detail"]
            .as_str()
            .unwrap()
            .contains("arn:aws:iam::*:role/terraform-ci")
    );
    assert!(all.iter().any(|e| e["rejected"].is_string()));
}

#[test]
fn a_state_secret_carried_by_the_event_never_reaches_the_explanation() {
    const SECRET: &str = "Zq9-very-secret-value";
    let dir = tempfile::tempdir().unwrap();
    let mut state: Value = serde_json::from_slice(
        &std::fs::read(repo().join("fixtures/aws/state/prod.tfstate")).unwrap(),
    )
    .unwrap();
    let web = state["resources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["type"] == "aws_security_group" && r["name"] == "web")
        .unwrap();
    let inst = &mut web["instances"][0];
    inst["attributes"]["description"] = SECRET.into();
    inst["sensitive_attributes"] =
        serde_json::json!([[{"type": "get_attr", "value": "description"}]]);
    let state_path = dir.path().join("prod.tfstate");
    std::fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    let event =
        std::fs::read_to_string(repo().join("fixtures/aws/events/01_sg_open_ssh_console.json"))
            .unwrap()
            .replace("user/alice", &format!("user/{SECRET}"));
    let event_path = dir.path().join("event.json");
    std::fs::write(&event_path, event).unwrap();
    for format in ["text", "json"] {
        let out = run(&[
            "--state",
            state_path.to_str().unwrap(),
            "--format",
            format,
            event_path.to_str().unwrap(),
        ]);
        assert!(out.status.success());
        let text = stdout(&out);
        assert!(text.contains("aws_security_group.web"), "{text}");
        assert!(
            !text.contains(SECRET),
            "{format}: the secret leaked: {text}"
        );
    }
}
