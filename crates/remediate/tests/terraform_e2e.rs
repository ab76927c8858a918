//! The real loop, end to end: terraform 1.x with the `hashicorp/aws` provider from the
//! filesystem mirror, against moto's server.
//!
//! A small root (VPC, subnet, two security groups, an instance, an S3 bucket) is
//! applied to moto. Then, for each of two security groups, a port is opened out of
//! band through the EC2 API, the matching CloudTrail record is put on EventBridge,
//! received from the SQS queue the rule targets, normalized, routed against the state
//! and decided, and handed to the remediator:
//!
//! * `aws_security_group.web` (policy `revert`): targeted plan, guard passes, apply,
//!   and moto's group is back to the code's rules;
//! * `aws_security_group.admin` (policy `pull_request`): targeted plan, no apply, one
//!   PR with the plan attached, and the rule is still open in moto.
//!
//! Then two cases the real tool produces itself:
//!
//! * the bucket is deleted out of band: the targeted plan re-creates it (a create
//!   inside the target passes the guard);
//! * a concurrent run (`terraform console`) holds the state lock: the plan fails on
//!   the lock, is retried with backoff, and applies once the lock is free.
//!
//! One root and one apply serve all phases: each real plan costs ~10 s. The root and the
//! moto client are shared with the binary test (`driftreactor_testkit::aws_e2e`).
//!
//! Needs terraform, the provider mirror and moto_server; fails naming what is missing
//! unless `DRIFTREACTOR_SKIP_TERRAFORM=1` / `DRIFTREACTOR_SKIP_MOTO=1`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use driftreactor_decide::{Action as Decided, Policy, PolicyConfig, Verdict};
use driftreactor_notify::fake::FakeGitHub;
use driftreactor_notify::{GitHub, GitHubConfig, Redactor, TransitionKind};
use driftreactor_pipeline::Pipeline;
use driftreactor_remediate::{RemediationConfig, Remediator, Workspace};
use driftreactor_testkit::aws_e2e::{
    BUCKET, MotoApi, cloudtrail_delete_bucket, cloudtrail_open_port as cloudtrail, terraform_root,
};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use driftreactor_tfgraph::GraphBuilder;

fn output(tf: &Terraform, dir: &Path, name: &str) -> String {
    let out = tf.run_ok(dir, &["output", "-raw", name]);
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_terraform_against_moto_reverts_opens_a_pr_recreates_and_waits_for_the_lock() {
    let Some(tf) = Terraform::find_or_skip() else {
        return;
    };
    let Some(moto) = MotoServer::start_or_skip() else {
        return;
    };
    let endpoint = moto.endpoint();
    let dir = temp_dir("driftreactor-e2e").unwrap();
    std::fs::write(dir.join("main.tf"), terraform_root(&endpoint)).unwrap();

    // The estate as the code says (init ≈ 3 s, apply ≈ 30 s).
    let tf = Arc::new(tf);
    let (tf2, dir2) = (tf.clone(), dir.clone());
    tokio::task::spawn_blocking(move || {
        tf2.run_ok(&dir2, &["init", "-input=false", "-no-color"]);
        tf2.run_ok(
            &dir2,
            &["apply", "-input=false", "-no-color", "-auto-approve"],
        );
    })
    .await
    .unwrap();
    let web = output(&tf, &dir, "web_id");
    let admin = output(&tf, &dir, "admin_id");

    let aws = MotoApi::new(&endpoint);
    assert_eq!(aws.ingress_ports(&web).await, [80]);
    let queue = aws.wire_eventbridge("driftreactor-e2e").await;

    // The state graph, the policy, and secrets to redact, as serve / replay build them.
    let state_path = dir.join("terraform.tfstate");
    let mut builder = GraphBuilder::new(driftreactor_pipeline::identities());
    builder.add_state_file("prod", &state_path).unwrap();
    let secrets = driftreactor_tfgraph::sensitive_values(
        "terraform.tfstate",
        &std::fs::read(&state_path).unwrap(),
    )
    .unwrap();
    let policy: PolicyConfig = toml::from_str(
        r#"
        [principals]
        reactor = ["arn:aws:iam::*:role/driftreactor"]
        [[policy]]
        address = "aws_security_group.admin"
        action = "pull_request"
        [[policy]]
        type = "aws_security_group"
        action = "revert"
        [[policy]]
        type = "aws_s3_bucket"
        action = "revert"
        "#,
    )
    .unwrap();
    let pipeline = Pipeline::new(Arc::new(builder.build()), Policy::compile(&policy).unwrap());

    let gh = FakeGitHub::start().await;
    let redactor = Redactor::new(secrets);
    let github = GitHub::new(
        &GitHubConfig {
            repo: Some("acme/infra".into()),
            api_url: gh.url().into(),
            ..GitHubConfig::default()
        },
        "ghp_e2e".into(),
        redactor.clone(),
    )
    .unwrap();
    let remediator = Remediator::builder(RemediationConfig {
        settle_secs: 0,
        recheck_secs: 0,
        lock_timeout_secs: 1,
        ..RemediationConfig::default()
    })
    .workspaces([Workspace {
        name: "prod".into(),
        dir: dir.clone(),
        program: tf.binary.clone(),
        env: tf.env().into_iter().collect(),
        git: None,
    }])
    .github(Some(github))
    .redactor(redactor)
    .spawn();
    let mut transitions = remediator.subscribe();

    // 1. Someone opens port 22 on `web` to the world; policy: revert.
    aws.open_port(&web, "22").await;
    assert_eq!(aws.ingress_ports(&web).await, [22, 80]);
    aws.put_cloudtrail(&cloudtrail(&web, 22, "e2e-web-22"))
        .await;
    let body = aws.receive_one(&queue).await;
    let event = driftreactor_aws::normalize(&body).unwrap();
    let evaluated = pipeline.evaluate(event);
    assert_eq!(
        evaluated.decision.verdict,
        Verdict::Drift,
        "{:?}",
        evaluated.routed
    );
    assert_eq!(evaluated.decision.action, Decided::Revert);
    assert_eq!(
        &*evaluated.decision.targets[0].address,
        "aws_security_group.web"
    );
    assert!(
        evaluated
            .routed
            .dependents
            .iter()
            .any(|d| &*d.address == "aws_instance.app"),
        "{:?}",
        evaluated.routed.dependents
    );
    remediator
        .submit(
            &evaluated.event,
            &evaluated.decision,
            &evaluated.routed.dependent_keys(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(300), remediator.run_until_idle())
        .await
        .expect("remediation finished");
    let kinds: Vec<TransitionKind> = std::iter::from_fn(|| transitions.try_recv().ok())
        .map(|t| t.kind)
        .collect();
    assert!(
        matches!(
            kinds.as_slice(),
            [TransitionKind::NewDrift { .. }, TransitionKind::Reverted]
        ),
        "{kinds:?}"
    );
    assert_eq!(
        aws.ingress_ports(&web).await,
        [80],
        "moto's group is back to the code's rules"
    );

    // 2. Someone opens port 22 on `admin`; policy: pull_request. No apply, one PR.
    aws.open_port(&admin, "22").await;
    aws.put_cloudtrail(&cloudtrail(&admin, 22, "e2e-admin-22"))
        .await;
    let body = aws.receive_one(&queue).await;
    let evaluated = pipeline.evaluate(driftreactor_aws::normalize(&body).unwrap());
    assert_eq!(
        evaluated.decision.action,
        Decided::PullRequest,
        "{:?}",
        evaluated.decision
    );
    remediator
        .submit(
            &evaluated.event,
            &evaluated.decision,
            &evaluated.routed.dependent_keys(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(300), remediator.run_until_idle())
        .await
        .expect("remediation finished");
    let kinds: Vec<TransitionKind> = std::iter::from_fn(|| transitions.try_recv().ok())
        .map(|t| t.kind)
        .collect();
    assert!(
        matches!(
            kinds.as_slice(),
            [
                TransitionKind::NewDrift { .. },
                TransitionKind::PullRequestOpened { .. }
            ]
        ),
        "{kinds:?}"
    );
    assert_eq!(aws.ingress_ports(&admin).await, [22, 443], "not applied");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].head, "driftreactor/prod/aws_security_group-admin");
    assert!(
        pulls[0].body.contains("`aws_security_group.admin`: update"),
        "{}",
        pulls[0].body
    );
    assert!(
        pulls[0]
            .body
            .contains("arn:aws:iam::123456789012:user/oncall"),
        "{}",
        pulls[0].body
    );
    assert!(pulls[0].body.contains("198.51.100.23"), "{}", pulls[0].body);

    // 3. Someone deletes the bucket out of band: the targeted plan re-creates it (a
    //    create inside the target passes the guard), and moto has it again.
    aws.delete_bucket(BUCKET).await;
    assert!(!aws.bucket_exists(BUCKET).await);
    aws.put_cloudtrail(&cloudtrail_delete_bucket(BUCKET, "e2e-bucket-delete"))
        .await;
    let body = aws.receive_one(&queue).await;
    let evaluated = pipeline.evaluate(driftreactor_aws::normalize(&body).unwrap());
    assert_eq!(
        evaluated.decision.action,
        Decided::Revert,
        "{:?}",
        evaluated.decision
    );
    assert_eq!(
        &*evaluated.decision.targets[0].address,
        "aws_s3_bucket.logs"
    );
    remediator
        .submit(
            &evaluated.event,
            &evaluated.decision,
            &evaluated.routed.dependent_keys(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(300), remediator.run_until_idle())
        .await
        .expect("remediation finished");
    let kinds: Vec<TransitionKind> = std::iter::from_fn(|| transitions.try_recv().ok())
        .map(|t| t.kind)
        .collect();
    assert!(
        matches!(
            kinds.as_slice(),
            [TransitionKind::NewDrift { .. }, TransitionKind::Reverted]
        ),
        "{kinds:?}"
    );
    assert!(aws.bucket_exists(BUCKET).await, "re-created");

    // 4. A concurrent run holds the state lock (`terraform console` keeps it while it
    //    runs): our plan fails on the lock, retries with backoff, and applies once the
    //    other run ends.
    let mut holder = tf.command(&dir);
    holder
        .arg("console")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let mut holder = holder.spawn().unwrap();
    let lock_info = dir.join(".terraform.tfstate.lock.info");
    for _ in 0..100 {
        if lock_info.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        lock_info.exists(),
        "terraform console did not take the state lock"
    );
    aws.open_port(&web, "22").await;
    aws.put_cloudtrail(&cloudtrail(&web, 22, "e2e-web-22-again"))
        .await;
    let body = aws.receive_one(&queue).await;
    let evaluated = pipeline.evaluate(driftreactor_aws::normalize(&body).unwrap());
    let since = Utc::now();
    remediator
        .submit(
            &evaluated.event,
            &evaluated.decision,
            &evaluated.routed.dependent_keys(),
        )
        .await
        .unwrap();
    // Wait until a plan hit the lock: a second attempt has started, so the first
    // one failed (the lock is still held). Then end the concurrent run.
    let key = driftreactor_remediate::WorkKey::new("prod", "aws_security_group.web");
    let retried = tokio::time::timeout(Duration::from_secs(120), async {
        while remediator
            .store()
            .attempts_since(&key, since)
            .await
            .unwrap()
            < 2
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        retried.is_ok(),
        "no retry within 120 s while the state lock was held"
    );
    drop(holder.stdin.take());
    let _ = tokio::task::spawn_blocking(move || holder.wait()).await;
    tokio::time::timeout(Duration::from_secs(300), remediator.run_until_idle())
        .await
        .expect("remediation finished");
    let kinds: Vec<TransitionKind> = std::iter::from_fn(|| transitions.try_recv().ok())
        .map(|t| t.kind)
        .collect();
    assert!(
        matches!(
            kinds.as_slice(),
            [TransitionKind::NewDrift { .. }, TransitionKind::Reverted]
        ),
        "{kinds:?}"
    );
    let attempts = remediator
        .store()
        .attempts_since(&key, since)
        .await
        .unwrap();
    assert!(
        attempts >= 2,
        "expected a retry after the lock, got {attempts} attempt(s)"
    );
    assert_eq!(aws.ingress_ports(&web).await, [80]);

    remediator.shutdown().await;
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
}
