//! `driftreactor graph dependents|dependencies|find` (issue 15, "A queryable graph"):
//! the real binary on the demo states and config of `fixtures/`, no server.

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
        .arg("graph")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("one JSON document: {e}: {}", stdout(out)))
}

#[test]
fn dependents_of_the_web_security_group_from_a_state_file_as_a_table() {
    let state = fixture("aws/state/prod.tfstate");
    let out = run(&["dependents", "--state", &state, "aws_security_group.web"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("DEPTH"), "{text}");
    assert!(
        text.contains(r#"aws_security_group.web > aws_instance.app["blue"]"#),
        "{text}"
    );
    assert!(
        text.contains("module.database.aws_db_instance.main"),
        "{text}"
    );
    assert!(text.contains("4 resource(s)"), "{text}");
}

#[test]
fn dependencies_from_the_config_as_one_json_document_with_depth() {
    let config = fixture("driftreactor.toml");
    let args = |depth: &str| {
        run(&[
            "dependencies",
            "--config",
            &config,
            "--workspace",
            "aws-prod",
            "--format",
            "json",
            "--depth",
            depth,
            r#"aws_instance.app["blue"]"#,
        ])
    };
    let out = args("1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["workspace"], "aws-prod");
    assert_eq!(doc["address"], r#"aws_instance.app["blue"]"#);
    assert_eq!(doc["depth"], 1);
    let deps = doc["dependencies"].as_array().unwrap();
    assert!(deps.iter().all(|d| d["depth"] == 1), "{doc}");
    assert!(
        deps.iter().any(|d| d["address"] == "aws_security_group.web"
            && d["path"]
                == serde_json::json!([r#"aws_instance.app["blue"]"#, "aws_security_group.web"])),
        "{doc}"
    );
    assert!(
        !deps.iter().any(|d| d["address"] == "aws_iam_role.app"),
        "{doc}"
    );

    let out = args("2");
    let doc = json(&out);
    let role = doc["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["address"] == "aws_iam_role.app")
        .cloned()
        .unwrap_or_else(|| panic!("the role at depth 2: {doc}"));
    assert_eq!(
        role["path"],
        serde_json::json!([
            r#"aws_instance.app["blue"]"#,
            "aws_iam_instance_profile.app",
            "aws_iam_role.app"
        ])
    );
}

#[test]
fn find_maps_a_security_group_id_across_the_config_workspaces() {
    let config = fixture("driftreactor.toml");
    let out = run(&[
        "find",
        "--config",
        &config,
        "--format",
        "json",
        "arn:aws:ec2:eu-west-1:111122223333:security-group/sg-0123456789abcdef0",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json(&out);
    assert!(
        doc["resources"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(
                {"workspace": "aws-prod", "address": "aws_security_group.web", "match": "primary"}
            )),
        "{doc}"
    );
    // Nothing known: an empty answer and exit status 1.
    let out = run(&["find", "--config", &config, "arn:aws:s3:::no-such-bucket"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("0 resource(s)"));
}

#[test]
fn an_unknown_address_or_missing_workspace_is_named_with_exit_status_2() {
    let state = fixture("aws/state/prod.tfstate");
    let out = run(&["dependents", "--state", &state, "aws_instance.nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(r#"unknown address "aws_instance.nope" in workspace "prod""#),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());

    let config = fixture("driftreactor.toml");
    let out = run(&["dependents", "--config", &config, "aws_security_group.web"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--workspace"), "{}", stderr(&out));

    let out = run(&["dependents", "aws_security_group.web"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no state given"), "{}", stderr(&out));
}
