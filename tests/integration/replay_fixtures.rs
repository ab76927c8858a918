//! The README's demo: the bundled AWS scenario replayed with the demo config.

use crate::util::{driftreactor, line, replay_json, resources};

fn aws_demo() -> Vec<serde_json::Value> {
    let run = replay_json(&[
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events",
    ]);
    assert_eq!(
        run.code, 1,
        "the demo holds two rejected files, so the exit status is 1"
    );
    run.lines()
}

fn has(line: &serde_json::Value, address: &str, kind: &str) -> bool {
    resources(line)
        .iter()
        .any(|(ws, a, k)| ws == "aws-prod" && a == address && k == kind)
}

#[test]
fn console_ssh_opening_is_drift_on_the_group_and_its_rule_resource() {
    let lines = aws_demo();
    let l = line(&lines, "01_sg_open_ssh_console.json");
    assert_eq!(l["verdict"], "drift");
    assert_eq!(l["action"], "revert");
    assert_eq!(l["via"], "console");
    assert_eq!(l["principal"], "arn:aws:iam::111122223333:user/alice");
    assert_eq!(l["operation"], "AuthorizeSecurityGroupIngress");
    assert!(has(l, "aws_security_group.web", "primary"), "{l}");
    assert!(
        has(l, "aws_security_group_rule.web_https", "related"),
        "{l}"
    );
    let deps: Vec<&str> = l["dependents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["address"].as_str().unwrap())
        .collect();
    assert!(deps.contains(&"aws_instance.app[\"blue\"]"), "{deps:?}");
    assert!(
        deps.contains(&"module.database.aws_db_instance.main"),
        "{deps:?}"
    );
}

#[test]
fn bucket_policy_change_matches_bucket_and_its_sub_resources() {
    let lines = aws_demo();
    let l = line(&lines, "02_s3_bucket_policy_console.json");
    assert_eq!(l["verdict"], "drift");
    assert_eq!(l["action"], "pull_request");
    // Issue 11, item 6: `PutBucketPolicy` changes the `aws_s3_bucket_policy`'s
    // arguments, so the policy is primary and the bucket (merely named) related.
    assert!(
        has(l, "module.storage.aws_s3_bucket.artifacts", "related"),
        "{l}"
    );
    assert!(
        has(
            l,
            "module.storage.aws_s3_bucket_policy.artifacts",
            "primary"
        ),
        "{l}"
    );
    assert!(
        has(
            l,
            "module.storage.aws_s3_bucket_public_access_block.artifacts",
            "related"
        ),
        "{l}"
    );
}

#[test]
fn rds_identifier_finds_the_instance_whose_id_is_the_resource_id() {
    let lines = aws_demo();
    let l = line(&lines, "03_rds_modify_cli.json");
    assert_eq!(l["verdict"], "drift");
    assert_eq!(l["via"], "cli");
    assert!(
        has(l, "module.database.aws_db_instance.main", "primary"),
        "{l}"
    );
    assert!(
        !l.to_string().contains("s3cr3t"),
        "a state secret leaked into the report"
    );
}

#[test]
fn iam_event_from_us_east_1_matches_role_of_a_eu_west_1_state() {
    let lines = aws_demo();
    let l = line(&lines, "04_iam_attach_role_policy_us_east_1.json");
    assert_eq!(l["verdict"], "drift");
    assert!(has(l, "aws_iam_role.app", "primary"), "{l}");
    assert!(
        has(
            l,
            "aws_iam_role_policy_attachment.app[\"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore\"]",
            "related"
        ),
        "{l}"
    );
}

#[test]
fn lambda_event_name_suffix_is_stripped_and_routed() {
    let lines = aws_demo();
    let l = line(&lines, "05_lambda_update_config.json");
    assert_eq!(l["operation"], "UpdateFunctionConfiguration");
    assert_eq!(l["verdict"], "drift");
    assert!(has(l, "aws_lambda_function.ingest", "primary"), "{l}");
}

#[test]
fn unmanaged_creates_are_reported_with_notify() {
    let lines = aws_demo();
    for f in [
        "06_run_unmanaged_instance.json",
        "07_create_unmanaged_bucket.json",
    ] {
        let l = line(&lines, f);
        assert_eq!(l["verdict"], "unmanaged", "{l}");
        assert_eq!(l["action"], "notify", "{l}");
        assert!(l["resources"].as_array().unwrap().is_empty(), "{l}");
        assert!(!l["resource_ids"].as_array().unwrap().is_empty(), "{l}");
    }
}

#[test]
fn ignored_events_carry_their_reason() {
    let lines = aws_demo();
    for (f, reason) in [
        ("08_log_file_readonly_and_failed.json#0", "read_only"),
        ("08_log_file_readonly_and_failed.json#1", "failed_call"),
        ("09_terraform_ci_change.json", "iac_principal"),
        ("10_driftreactor_own_revert.json", "own_change"),
        ("11_console_login.json", "not_a_change"),
        ("12_instance_state_change_notification.json", "not_a_change"),
    ] {
        let l = line(&lines, f);
        assert_eq!(l["verdict"], "ignored", "{f}: {l}");
        assert_eq!(l["reason"], reason, "{f}: {l}");
        assert_eq!(l["action"], "none", "{f}: {l}");
    }
}

#[test]
fn json_lines_batches_are_numbered_and_for_each_keys_route() {
    let lines = aws_demo();
    let l = line(&lines, "13_batch_tags_and_kms.jsonl#0");
    assert_eq!(l["verdict"], "drift");
    assert_eq!(l["action"], "notify");
    assert!(has(l, "aws_instance.app[\"green\"]", "primary"), "{l}");
    let l = line(&lines, "13_batch_tags_and_kms.jsonl#1");
    assert_eq!(l["verdict"], "drift");
    assert!(has(l, "aws_kms_key.data", "primary"), "{l}");
}

#[test]
fn bad_input_is_rejected_with_a_reason_and_the_run_goes_on() {
    let lines = aws_demo();
    let l = line(&lines, "14_truncated_rejected.json");
    assert_eq!(l["verdict"], "rejected");
    assert!(
        l["reason"].as_str().unwrap().contains("invalid JSON"),
        "{l}"
    );
    let l = line(&lines, "15_not_an_event_rejected.json");
    assert_eq!(l["verdict"], "rejected");
    assert!(
        l["reason"].as_str().unwrap().contains("none of the keys"),
        "{l}"
    );
    // Every event of the scenario has exactly one line, in input order.
    assert_eq!(lines.len(), 17);
    let inputs: Vec<&str> = lines.iter().map(|l| l["input"].as_str().unwrap()).collect();
    let mut sorted = inputs.clone();
    sorted.sort();
    assert_eq!(inputs, sorted, "lines are not in input order");
}

#[test]
fn report_lines_follow_the_contract_fields() {
    let lines = aws_demo();
    for l in &lines {
        for key in [
            "input",
            "event_id",
            "provider",
            "service",
            "operation",
            "change",
            "principal",
            "via",
            "occurred_at",
            "resource_ids",
            "verdict",
            "reason",
            "resources",
            "dependents",
            "action",
        ] {
            assert!(l.get(key).is_some(), "line lacks `{key}`: {l}");
        }
    }
    let l = line(&lines, "01_sg_open_ssh_console.json");
    assert_eq!(l["provider"], "aws");
    assert_eq!(l["service"], "ec2.amazonaws.com");
    assert_eq!(l["change"], "update");
    assert_eq!(l["occurred_at"], "2026-11-02T09:15:00Z");
    assert_eq!(l["event_id"], "0d6c3c2e-1f7a-4b0e-9a55-3b1f0c1a0001");
}

#[test]
fn table_format_prints_a_summary() {
    let run = driftreactor(&[
        "replay",
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.contains("VERDICT"), "{}", run.stdout);
    assert!(
        run.stdout.contains("17 events:") && run.stdout.contains("2 rejected"),
        "{}",
        run.stdout
    );
}

#[test]
fn clean_input_exits_zero() {
    let run = replay_json(&[
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.lines().len(), 1);
}

#[test]
fn a_missing_state_is_a_clear_error() {
    let run = driftreactor(&[
        "replay",
        "--state",
        "no/such.tfstate",
        "fixtures/aws/events",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("no/such.tfstate"), "{}", run.stderr);
}

#[test]
fn a_file_that_is_not_a_state_names_the_file() {
    let run = driftreactor(&[
        "replay",
        "--state",
        "fixtures/aws/events/01_sg_open_ssh_console.json",
        "fixtures/aws/events",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("01_sg_open_ssh_console.json")
            && run.stderr.contains("not a Terraform state"),
        "{}",
        run.stderr
    );
}

/// The README's main command, exactly as written there.
#[test]
fn readme_demo_replays_all_three_clouds() {
    let readme = std::fs::read_to_string(crate::util::repo().join("README.md")).unwrap();
    let cmd = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release -p driftreactor-cli -- replay"))
        .expect("README names the demo command");
    let args: Vec<&str> = cmd
        .split_whitespace()
        .skip_while(|a| *a != "--")
        .skip(1)
        .collect();
    let run = driftreactor(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout
            // gcp/03 (allUsers made objectViewer of the bucket) is `unmanaged` since
            // IAM deltas are attributed per binding (issue 11 item 5): no state
            // manages that binding.
            .contains("42 events: 16 drift, 5 unmanaged, 17 ignored, 4 rejected"),
        "{}",
        run.stdout
    );
    let json = replay_json(&args[1..]);
    let lines = json.lines();
    for provider in ["aws", "azure", "gcp"] {
        assert!(
            lines
                .iter()
                .any(|l| l["provider"] == provider && l["verdict"] == "drift"),
            "no {provider} drift in the demo"
        );
    }
    // A completed GCP operation logged twice is drift once.
    let l = line(&lines, "02_firewall_opened_console_last.json");
    assert_eq!(
        (l["verdict"].as_str(), l["reason"].as_str()),
        (Some("ignored"), Some("duplicate"))
    );
}

/// Issue 11, coverage as a number: the table ends with the coverage line, and
/// `--stats` prints it to stderr with any format.
#[test]
fn replay_stats_prints_the_coverage_of_mutating_events() {
    let args = [
        "replay",
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events",
    ];
    let run = driftreactor(&args);
    let coverage = run
        .stdout
        .lines()
        .find(|l| l.starts_with("coverage: "))
        .unwrap_or_else(|| panic!("no coverage line in\n{}", run.stdout));
    assert!(
        coverage.contains("% with an extracted id")
            && coverage.contains("% attributed to a managed resource"),
        "{coverage}"
    );
    let mut json = args.to_vec();
    json.extend(["--format", "json", "--stats"]);
    let run = driftreactor(&json);
    assert!(run.stderr.contains(coverage), "{}", run.stderr);
    assert!(!run.stdout.contains("coverage: "), "{}", run.stdout);
}
