//! `driftreactor validate` and the config strictness every command shares (issue 12,
//! items 18 and 19): the real binary, real config files, the bundled states.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A config in a fresh folder, with the demo's AWS state as workspace `prod`.
fn config(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("fixtures/aws/state/prod.tfstate"),
        dir.path().join("prod.tfstate"),
    )
    .unwrap();
    let path = dir.path().join("driftreactor.toml");
    std::fs::write(
        &path,
        format!("[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\n{extra}"),
    )
    .unwrap();
    (dir, path)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_driftreactor"))
        .args(args)
        .env("DRIFTREACTOR_VALIDATE_SECRET", "s3cret-value")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn validate(path: &Path) -> Output {
    run(&["validate", "--config", path.to_str().unwrap()])
}

fn replay(path: &Path) -> Output {
    let events = repo().join("fixtures/aws/events");
    run(&[
        "replay",
        "--config",
        path.to_str().unwrap(),
        "--format",
        "json",
        events.to_str().unwrap(),
    ])
}

/// Exit 2 and stderr naming the file, the field and the reason.
fn refused(out: &Output, path: &Path, field: &str, reason: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains(field), "no `{field}` in: {stderr}");
    assert!(stderr.contains(reason), "no `{reason}` in: {stderr}");
}

#[test]
fn validate_prints_the_workspaces_sources_policy_and_remediation_of_a_valid_config() {
    let (dir, path) = config(
        "[[policy]]\ntype = \"aws_security_group\"\naction = \"revert\"\n\n\
         [[sources]]\ntype = \"azure_event_grid_push\"\nsecret_env = \"DRIFTREACTOR_VALIDATE_SECRET\"\n\n\
         [[sources]]\ntype = \"aws_sqs\"\nname = \"trail\"\nqueue_url = \"http://127.0.0.1:9/q\"\n",
    );
    let out = validate(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid"), "{stdout}");
    assert!(stdout.contains("workspaces: 1"), "{stdout}");
    assert!(stdout.contains("  prod: "), "{stdout}");
    assert!(stdout.contains(" instances, serial "), "{stdout}");
    assert!(stdout.contains("sources: 2"), "{stdout}");
    assert!(
        stdout.contains("azure_event_grid_push (azure_event_grid_push, push)"),
        "{stdout}"
    );
    assert!(stdout.contains("trail (aws_sqs, pull)"), "{stdout}");
    assert!(stdout.contains("policy rules: 1"), "{stdout}");
    assert!(stdout.contains("remediation: off"), "{stdout}");
    // Nothing of the secret is printed.
    assert!(!stdout.contains("s3cret-value"), "{stdout}");
    drop(dir);
}

#[test]
fn validate_refuses_an_invalid_config_with_exit_2_naming_file_field_and_reason() {
    let (_dir, path) = config("[server]\nlisten = \"nowhere\"\n");
    refused(&validate(&path), &path, "server", "listen");
}

#[test]
fn config_strictness_github_and_slack_typos_are_refused_while_remediation_is_off() {
    let (_dir, path) = config("[github]\nrepoo = \"acme/infra\"\n");
    refused(&validate(&path), &path, "github", "repoo");
    refused(&replay(&path), &path, "github", "repoo");
    let (_dir, path) = config("[slack]\nwebhook = \"x\"\n");
    refused(&replay(&path), &path, "slack", "webhook");
}

#[test]
fn config_strictness_replay_checks_server_journal_and_sources() {
    let (_dir, path) = config("[server]\nlisten_addr = \"127.0.0.1:1\"\n");
    refused(&replay(&path), &path, "server", "listen_addr");
    let (_dir, path) = config("[journal]\nretain = 3\n");
    refused(&replay(&path), &path, "journal", "retain");
    let (_dir, path) = config("[[sources]]\ntype = \"aws_sqs\"\nqueue = \"q\"\n");
    refused(&replay(&path), &path, "sources[0]", "queue");
    let (_dir, path) = config("[[sources]]\ntype = \"kafka\"\n");
    refused(&replay(&path), &path, "sources[0].type", "unknown");
}

#[test]
fn config_strictness_an_unknown_tool_and_a_missing_dir_are_refused() {
    let (_dir, path) = config("");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("[[workspaces]]\n", "[[workspaces]]\ntool = \"pulumi\"\n"),
    )
    .unwrap();
    refused(&validate(&path), &path, "tool", "pulumi");
    let (_dir, path) = config("");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "[[workspaces]]\n",
            "[[workspaces]]\ndir = \"infra/nowhere\"\n",
        ),
    )
    .unwrap();
    refused(
        &validate(&path),
        &path,
        "workspaces[0].dir",
        "does not exist",
    );
    refused(&replay(&path), &path, "workspaces[0].dir", "does not exist");
}

#[test]
fn config_strictness_a_backstop_without_a_root_or_with_a_bad_interval_is_refused() {
    let (_dir, path) = config("");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "[[workspaces]]\n",
            "[[workspaces]]\nbackstop_interval = \"6h\"\n",
        ),
    )
    .unwrap();
    refused(
        &validate(&path),
        &path,
        "workspaces[0].backstop_interval",
        "set `dir` or `git`",
    );
    std::fs::write(
        &path,
        text.replace(
            "[[workspaces]]\n",
            "[[workspaces]]\nbackstop_interval = \"every night\"\n",
        ),
    )
    .unwrap();
    refused(&validate(&path), &path, "backstop_interval", "every night");
}

#[test]
fn config_strictness_zero_queue_capacity_max_in_flight_and_max_batch_are_refused() {
    for (section, field) in [
        ("server", "queue_capacity"),
        ("server", "max_in_flight"),
        ("server", "max_connections"),
        ("server", "header_read_timeout_secs"),
        ("server", "body_read_timeout_secs"),
        ("server", "metrics_max_operations"),
        ("journal", "max_batch"),
        ("journal", "queue_capacity"),
    ] {
        let (_dir, path) = config(&format!("[{section}]\n{field} = 0\n"));
        refused(
            &validate(&path),
            &path,
            &format!("{section}.{field}"),
            "at least 1",
        );
    }
}

/// `[server] state_load_threads`: 0 (one thread) and a few are accepted; more than
/// `MAX_STATE_LOAD_THREADS` is refused naming the field and why.
#[test]
fn config_strictness_state_load_threads_beyond_the_cap_are_refused() {
    for ok in ["0", "2"] {
        let (_dir, path) = config(&format!("[server]\nstate_load_threads = {ok}\n"));
        let out = validate(&path);
        assert!(
            out.status.success(),
            "{ok}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (_dir, path) = config("[server]\nstate_load_threads = 65\n");
    refused(
        &validate(&path),
        &path,
        "server.state_load_threads",
        "65 threads is more than 64",
    );
    let (_dir, path) = config("[server]\nstate_load_threads = -1\n");
    refused(&validate(&path), &path, "server", "state_load_threads");
}

#[test]
fn config_strictness_a_state_read_error_names_the_config_file_and_the_field() {
    let (dir, path) = config("");
    std::fs::write(dir.path().join("prod.tfstate"), "{ not json").unwrap();
    refused(
        &validate(&path),
        &path,
        "workspaces[0].state",
        "prod.tfstate",
    );
    refused(&replay(&path), &path, "workspaces[0].state", "prod.tfstate");
}

/// Found by trying it: a bad enum value or an unknown section printed a multi-line
/// TOML report with a caret snippet; a wrong type two lines.
#[test]
fn config_errors_are_one_line_naming_the_position_or_the_field() {
    let (_dir, path) = config("");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("[[workspaces]]\n", "[[workspaces]]\ntool = \"pulumi\"\n"),
    )
    .unwrap();
    let out = validate(&path);
    refused(&out, &path, "line 2, column 8", "unknown variant `pulumi`");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );
    let (_dir, path) = config("[journal]\nmax_batch = \"big\"\n");
    let out = validate(&path);
    refused(&out, &path, "journal", "`max_batch`");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );
}

/// Found by trying it: `nonsense` was "the document is null", `this is { not json`
/// "a boolean".
#[test]
fn a_state_that_is_not_json_is_invalid_json_not_a_boolean_or_null() {
    for text in ["nonsense", "this is { not json", "fals"] {
        let (dir, path) = config("");
        std::fs::write(dir.path().join("prod.tfstate"), text).unwrap();
        let out = validate(&path);
        refused(
            &out,
            &path,
            "workspaces[0].state",
            "invalid JSON at line 1, column 1",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("boolean") && !stderr.contains("is null"),
            "{stderr}"
        );
    }
}

/// Trial finding 6: `validate` printed "legacy: 1 instances".
#[test]
fn validate_says_one_instance_in_the_singular() {
    let (dir, path) = config("[[workspaces]]\nname = \"legacy\"\nstate = \"legacy.tfstate\"\n");
    std::fs::write(
        dir.path().join("legacy.tfstate"),
        r#"{"version": 4, "terraform_version": "1.9.0", "serial": 1, "lineage": "l", "outputs": {}, "resources": [
            {"mode": "managed", "type": "aws_s3_bucket", "name": "b",
             "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
             "instances": [{"schema_version": 0, "attributes": {"id": "b", "arn": "arn:aws:s3:::b"}}]}]}"#,
    )
    .unwrap();
    let out = validate(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("  legacy: 1 instance, serial 1"),
        "{stdout}"
    );
    assert!(stdout.contains(" instances, serial "), "{stdout}");
}
