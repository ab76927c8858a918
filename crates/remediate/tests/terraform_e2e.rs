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
//! One root and one apply serve all phases: each real plan costs ~10 s.
//!
//! Needs terraform, the provider mirror and moto_server; fails naming what is missing
//! unless `DRIFTREACTOR_SKIP_TERRAFORM=1` / `DRIFTREACTOR_SKIP_MOTO=1`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use driftreactor_decide::{Action as Decided, Policy, PolicyConfig, Verdict};
use driftreactor_notify::fake::FakeGitHub;
use driftreactor_notify::{GitHub, GitHubConfig, Redactor, TransitionKind};
use driftreactor_pipeline::Pipeline;
use driftreactor_remediate::{RemediationConfig, Remediator, Workspace};
use driftreactor_testkit::moto::MotoServer;
use driftreactor_testkit::terraform::{Terraform, temp_dir};
use driftreactor_tfgraph::GraphBuilder;
use serde_json::{Value, json};

const REGION: &str = "us-east-1";
const ACCOUNT: &str = "123456789012";
/// The bucket of the root.
const BUCKET: &str = "driftreactor-e2e-logs";
/// An AMI moto ships by default.
const AMI: &str = "ami-03cf127a";

fn root(endpoint: &str) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    aws = {{ source = "hashicorp/aws" }}
  }}
}}

{provider}
resource "aws_vpc" "main" {{
  cidr_block = "10.0.0.0/16"
}}

resource "aws_subnet" "main" {{
  vpc_id     = aws_vpc.main.id
  cidr_block = "10.0.1.0/24"
}}

resource "aws_security_group" "web" {{
  name        = "web"
  description = "web"
  vpc_id      = aws_vpc.main.id
  ingress {{
    from_port   = 80
    to_port     = 80
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }}
  egress {{
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }}
}}

resource "aws_security_group" "admin" {{
  name        = "admin"
  description = "admin"
  vpc_id      = aws_vpc.main.id
  ingress {{
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }}
}}

resource "aws_instance" "app" {{
  ami                    = "{AMI}"
  instance_type          = "t3.micro"
  subnet_id              = aws_subnet.main.id
  vpc_security_group_ids = [aws_security_group.web.id]
}}

resource "aws_s3_bucket" "logs" {{
  bucket = "{BUCKET}"
}}

output "web_id" {{
  value = aws_security_group.web.id
}}

output "admin_id" {{
  value = aws_security_group.admin.id
}}
"#,
        provider = Terraform::moto_provider_block(endpoint, REGION)
    )
}

/// A minimal AWS API client for moto: any credentials work, moto routes by the
/// credential scope's service name.
struct Aws {
    http: reqwest::Client,
    endpoint: String,
}

impl Aws {
    fn auth(service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
        )
    }

    async fn query(&self, service: &str, params: &[(&str, &str)]) -> String {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("Authorization", Self::auth(service))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(params))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{service} {params:?}: {status} {text}");
        text
    }

    async fn json(&self, service: &str, version: &str, target: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("Authorization", Self::auth(service))
            .header("Content-Type", format!("application/x-amz-json-{version}"))
            .header("X-Amz-Target", target)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{target}: {status} {text}");
        serde_json::from_str(&text).unwrap()
    }

    async fn open_port(&self, group_id: &str, port: &str) {
        self.query(
            "ec2",
            &[
                ("Action", "AuthorizeSecurityGroupIngress"),
                ("Version", "2016-11-15"),
                ("GroupId", group_id),
                ("IpPermissions.1.IpProtocol", "tcp"),
                ("IpPermissions.1.FromPort", port),
                ("IpPermissions.1.ToPort", port),
                ("IpPermissions.1.IpRanges.1.CidrIp", "0.0.0.0/0"),
            ],
        )
        .await;
    }

    async fn group_xml(&self, group_id: &str) -> String {
        self.query(
            "ec2",
            &[
                ("Action", "DescribeSecurityGroups"),
                ("Version", "2016-11-15"),
                ("GroupId.1", group_id),
            ],
        )
        .await
    }

    /// Ingress `fromPort`s of a group (the `ipPermissions` element; egress is
    /// `ipPermissionsEgress`).
    async fn ingress_ports(&self, group_id: &str) -> Vec<u16> {
        let xml = self.group_xml(group_id).await;
        let ingress = xml
            .split("<ipPermissions>")
            .nth(1)
            .and_then(|s| s.split("</ipPermissions>").next())
            .unwrap_or_default()
            .to_owned();
        let mut ports: Vec<u16> = ingress
            .split("<fromPort>")
            .skip(1)
            .filter_map(|s| s.split('<').next()?.parse().ok())
            .collect();
        ports.sort_unstable();
        ports
    }

    async fn delete_bucket(&self, bucket: &str) {
        let resp = self
            .http
            .delete(format!("{}/{bucket}", self.endpoint))
            .header("Authorization", Self::auth("s3"))
            .send()
            .await
            .unwrap();
        assert!(
            resp.status().is_success(),
            "DeleteBucket: {}",
            resp.status()
        );
    }

    async fn bucket_exists(&self, bucket: &str) -> bool {
        let resp = self
            .http
            .head(format!("{}/{bucket}", self.endpoint))
            .header("Authorization", Self::auth("s3"))
            .send()
            .await
            .unwrap();
        resp.status().is_success()
    }

    /// An SQS queue targeted by an EventBridge rule for CloudTrail API calls; returns
    /// the queue URL.
    async fn wire_eventbridge(&self) -> String {
        let q = self
            .json(
                "sqs",
                "1.0",
                "AmazonSQS.CreateQueue",
                json!({"QueueName": "driftreactor-e2e"}),
            )
            .await;
        let url = q["QueueUrl"].as_str().unwrap().to_owned();
        self.json(
            "events",
            "1.1",
            "AWSEvents.PutRule",
            json!({"Name": "driftreactor", "EventPattern": json!({"detail-type": ["AWS API Call via CloudTrail"]}).to_string()}),
        )
        .await;
        self.json(
            "events",
            "1.1",
            "AWSEvents.PutTargets",
            json!({"Rule": "driftreactor", "Targets": [{"Id": "q", "Arn": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:driftreactor-e2e")}]}),
        )
        .await;
        url
    }

    async fn put_cloudtrail(&self, record: &Value) {
        let r = self
            .json(
                "events",
                "1.1",
                "AWSEvents.PutEvents",
                json!({"Entries": [{"Source": "aws.ec2", "DetailType": "AWS API Call via CloudTrail", "Detail": record.to_string()}]}),
            )
            .await;
        assert_eq!(r["FailedEntryCount"], 0, "{r}");
    }

    async fn receive_one(&self, queue_url: &str) -> Vec<u8> {
        for _ in 0..20 {
            let r = self
                .json(
                    "sqs",
                    "1.0",
                    "AmazonSQS.ReceiveMessage",
                    json!({"QueueUrl": queue_url, "MaxNumberOfMessages": 1, "WaitTimeSeconds": 1}),
                )
                .await;
            if let Some(m) = r["Messages"].as_array().and_then(|a| a.first()) {
                self.json(
                    "sqs",
                    "1.0",
                    "AmazonSQS.DeleteMessage",
                    json!({"QueueUrl": queue_url, "ReceiptHandle": m["ReceiptHandle"]}),
                )
                .await;
                return m["Body"].as_str().unwrap().as_bytes().to_vec();
            }
        }
        panic!("no message arrived on {queue_url}");
    }
}

fn form(params: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The CloudTrail record of opening `port` on `group_id` from the console.
fn cloudtrail(group_id: &str, port: u16, event_id: &str) -> Value {
    json!({
        "eventVersion": "1.10",
        "userIdentity": {"type": "IAMUser", "principalId": "AIDAEXAMPLE", "arn": format!("arn:aws:iam::{ACCOUNT}:user/oncall"),
                         "accountId": ACCOUNT, "userName": "oncall", "sessionContext": {"attributes": {"mfaAuthenticated": "true"}}},
        "eventTime": Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        "eventSource": "ec2.amazonaws.com",
        "eventName": "AuthorizeSecurityGroupIngress",
        "awsRegion": REGION,
        "sourceIPAddress": "198.51.100.23",
        "userAgent": "AWS Internal",
        "requestParameters": {"groupId": group_id, "ipPermissions": {"items": [{"ipProtocol": "tcp", "fromPort": port, "toPort": port,
                              "groups": {}, "ipRanges": {"items": [{"cidrIp": "0.0.0.0/0"}]}, "ipv6Ranges": {}, "prefixListIds": {}}]}},
        "responseElements": {"_return": true},
        "requestID": "req-1",
        "eventID": event_id,
        "readOnly": false,
        "eventType": "AwsApiCall",
        "managementEvent": true,
        "recipientAccountId": ACCOUNT,
        "eventCategory": "Management",
        "sessionCredentialFromConsole": "true"
    })
}

/// The CloudTrail record of deleting `bucket` from the console.
fn cloudtrail_delete_bucket(bucket: &str, event_id: &str) -> Value {
    let mut r = cloudtrail("unused", 0, event_id);
    r["eventSource"] = json!("s3.amazonaws.com");
    r["eventName"] = json!("DeleteBucket");
    r["requestParameters"] =
        json!({"bucketName": bucket, "Host": format!("{bucket}.s3.amazonaws.com")});
    r["resources"] = json!([{"type": "AWS::S3::Bucket", "ARN": format!("arn:aws:s3:::{bucket}")}]);
    r
}

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
    std::fs::write(dir.join("main.tf"), root(&endpoint)).unwrap();

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

    let aws = Aws {
        http: reqwest::Client::new(),
        endpoint: endpoint.clone(),
    };
    assert_eq!(aws.ingress_ports(&web).await, [80]);
    let queue = aws.wire_eventbridge().await;

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
            &evaluated.routed.dependents,
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
            &evaluated.routed.dependents,
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
            &evaluated.routed.dependents,
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
            &evaluated.routed.dependents,
        )
        .await
        .unwrap();
    // Let at least one plan hit the lock, then end the concurrent run.
    tokio::time::sleep(Duration::from_secs(6)).await;
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
    let key = driftreactor_remediate::WorkKey::new("prod", "aws_security_group.web");
    let attempts = remediator.store().attempts_since(&key, since);
    assert!(
        attempts >= 2,
        "expected a retry after the lock, got {attempts} attempt(s)"
    );
    assert_eq!(aws.ingress_ports(&web).await, [80]);

    remediator.shutdown().await;
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
}
