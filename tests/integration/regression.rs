//! Regression tests, each named after the bug it covers.

use crate::util::{replay_json, resources};

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
    let matched = resources(&lines[1]);
    let has = |address: &str, kind: &str| {
        matched
            .iter()
            .any(|(_, a, k)| a.as_str() == address && k.as_str() == kind)
    };
    assert!(
        has("module.ec2.aws_iam_role.ecs_instance_role", "primary"),
        "{matched:?}"
    );
    assert!(
        has(
            "module.ec2.aws_iam_role_policy_attachment.ecs_instance_policy",
            "related"
        ),
        "{matched:?}"
    );
}

/// The same Lambda function name deployed by two regional states: an
/// `UpdateFunctionConfiguration` in us-east-1 was drift of both, because the plain key
/// `aws:lambda:function:api` (names are unique per account and region only) matched
/// the eu-west-1 function too. The region guard now refuses the other region's
/// function; a global resource (an IAM role) still matches an event from any region.
#[test]
fn same_function_name_in_another_region_is_not_drift_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = |region: &str| {
        let f = dir.path().join(format!("{region}.tfstate"));
        let s = serde_json::json!({
            "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": region,
            "outputs": {},
            "resources": [
                {"mode": "managed", "type": "aws_lambda_function", "name": "api",
                 "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
                 "instances": [{"schema_version": 0, "attributes": {
                     "function_name": "api", "id": "api",
                     "arn": format!("arn:aws:lambda:{region}:111122223333:function:api")}}]},
                {"mode": "managed", "type": "aws_iam_role", "name": "api",
                 "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
                 "instances": [{"schema_version": 0, "attributes": {
                     "name": format!("api-{region}"), "id": format!("api-{region}"),
                     "arn": format!("arn:aws:iam::111122223333:role/api-{region}")}}]}
            ]
        });
        std::fs::write(&f, serde_json::to_vec(&s).unwrap()).unwrap();
        f
    };
    let (eu, us) = (state("eu-west-1"), state("us-east-1"));
    let event = |name: &str, region: &str, source: &str, req: serde_json::Value| {
        let f = dir.path().join(format!("{name}.json"));
        let record = serde_json::json!({
            "eventVersion": "1.09", "eventID": name, "eventName": name,
            "eventSource": source, "awsRegion": region,
            "eventTime": "2026-01-01T00:00:00Z", "recipientAccountId": "111122223333",
            "userIdentity": {"type": "IAMUser", "arn": "arn:aws:iam::111122223333:user/alice"},
            "userAgent": "console.amazonaws.com",
            "requestParameters": req, "responseElements": null
        });
        std::fs::write(&f, serde_json::to_vec(&record).unwrap()).unwrap();
        f
    };
    let lambda = event(
        "UpdateFunctionConfiguration20150331v2",
        "us-east-1",
        "lambda.amazonaws.com",
        serde_json::json!({"functionName": "api", "timeout": 30}),
    );
    let iam = event(
        "PutRolePolicy",
        "us-east-1",
        "iam.amazonaws.com",
        serde_json::json!({"roleName": "api-eu-west-1", "policyName": "x"}),
    );
    let run = replay_json(&[
        "--state",
        eu.to_str().unwrap(),
        "--state",
        us.to_str().unwrap(),
        lambda.to_str().unwrap(),
        iam.to_str().unwrap(),
    ]);
    let lines = run.lines();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert_eq!(lines[0]["verdict"], "drift", "{}", lines[0]);
    assert_eq!(
        resources(&lines[0]),
        [(
            "us-east-1".to_owned(),
            "aws_lambda_function.api".to_owned(),
            "primary".to_owned()
        )]
    );
    // IAM is global: the eu-west-1 state's role matches an event from us-east-1.
    assert_eq!(lines[1]["verdict"], "drift", "{}", lines[1]);
    assert_eq!(
        resources(&lines[1]),
        [(
            "eu-west-1".to_owned(),
            "aws_iam_role.api".to_owned(),
            "primary".to_owned()
        )]
    );
}

/// A `[[policy]]` rule whose `workspace` named no configured workspace (a typo) was
/// accepted and silently never applied; it is now a config error naming the file, the
/// field and the known workspace names, before any report line.
#[test]
fn a_policy_naming_an_unknown_workspace_is_a_config_error() {
    let repo = crate::util::repo();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        format!(
            "[[workspaces]]\nname = \"aws-prod\"\nstate = {:?}\n\
             [[policy]]\ntype = \"aws_instance\"\naction = \"notify\"\n\
             [[policy]]\nworkspace = \"aws-prd\"\ntype = \"aws_security_group*\"\naction = \"ignore\"\n",
            repo.join("fixtures/aws/state/prod.tfstate")
                .display()
                .to_string()
        ),
    )
    .unwrap();
    let run = crate::util::driftreactor(&[
        "replay",
        "--format",
        "json",
        "--config",
        config.to_str().unwrap(),
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    for part in [
        config.to_str().unwrap(),
        "policy[1].workspace",
        "`aws-prd` matches no configured workspace",
        "known workspaces: aws-prod",
    ] {
        assert!(
            run.stderr.contains(part),
            "missing {part:?} in {}",
            run.stderr
        );
    }
}

/// With `--state`, each state file is a workspace named after the file, and a policy
/// may name it; a name that none of the config's or the `--state` workspaces has is
/// refused, listing both.
#[test]
fn a_policy_may_name_a_workspace_given_with_state() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[policy]]\nworkspace = \"prod\"\ntype = \"aws_security_group*\"\naction = \"notify\"\n",
    )
    .unwrap();
    let run = replay_json(&[
        "--state",
        "fixtures/aws/state/prod.tfstate",
        "--config",
        policy.to_str().unwrap(),
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.lines();
    assert_eq!(lines[0]["verdict"], "drift");
    assert_eq!(lines[0]["action"], "notify", "the rule for `prod` applies");

    std::fs::write(
        &policy,
        "[[workspaces]]\nname = \"gcp-shop\"\nstate = \"../shop.tfstate\"\n\
         [[policy]]\nworkspace = \"aws-prod\"\naction = \"notify\"\n",
    )
    .unwrap();
    let run = crate::util::driftreactor(&[
        "replay",
        "--state",
        "fixtures/aws/state/prod.tfstate",
        "--config",
        policy.to_str().unwrap(),
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("policy[0].workspace")
            && run.stderr.contains("known workspaces: gcp-shop, prod"),
        "{}",
        run.stderr
    );
}

/// `replay --remediate` with a `revert` policy for a workspace without `dir` said only
/// "No [github] configured; cannot open a pull request", never that nothing could be
/// reverted. It now says why the revert cannot run and what happens instead.
#[test]
fn remediate_without_a_dir_says_the_revert_cannot_run() {
    let run = crate::util::driftreactor(&[
        "replay",
        "--remediate",
        "--config",
        "fixtures/driftreactor.toml",
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("Cannot revert: the workspace has no `dir`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the drift is only reported"),
        "{}",
        run.stderr
    );
}

/// A missing state file's error named the path only; it now names the workspace too,
/// with the path resolved against the config file's folder.
#[test]
fn a_missing_state_file_names_its_workspace_and_resolved_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("driftreactor.toml");
    std::fs::write(
        &config,
        "[[workspaces]]\nname = \"prod\"\nstate = \"nope/prod.tfstate\"\n",
    )
    .unwrap();
    let run = crate::util::driftreactor(&[
        "replay",
        "--config",
        config.to_str().unwrap(),
        "fixtures/aws/events/01_sg_open_ssh_console.json",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    // The state is read through its state source (docs/serve.md, "State sources"):
    // the workspace, then the resolved location, then the reason.
    let expected = format!(
        "workspaces[0].state: workspace prod: {}: No such file",
        dir.path().join("nope/prod.tfstate").display()
    );
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
}
